//! A command's process tree: every process the command started, wherever it went.
//!
//! A process group is not a tree: `setsid`, `setpgid` and a double fork leave it. So while a
//! command runs, its tree is followed in `/proc`, from the leader down, by rules that each
//! prove descent (see [`Members::grow`]):
//!
//! - a child of a process of the tree (its parent is, right now, a process seen in the tree);
//! - a member of the leader's process group, for as long as the group is the leader's;
//! - a member of a session or group that a process of the tree created (`setsid` makes the
//!   caller's pid the session's number; it stays reserved while the session has members);
//! - an orphan adopted by toolgate that nothing else accounts for ([`crate::household`]).
//!
//! Nothing started before the leader is ever a member. Every process found is remembered as
//! a [`ProcessId`] (pid and start time), reported to the [`TreeObserver`], and signalled
//! only through a pidfd checked against that start time, so a reused pid is never hit.
//!
//! Ending a tree stops it first: `SIGSTOP` to every member, looking again until a look finds
//! nothing new and everything stopped — a stopped process cannot fork — and only then
//! `SIGKILL`. A tree killed in one pass could fork away between the look and the signal.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use crate::household::{self, CallId};
use crate::procs::{self, ProcessId, Stat};

/// Told of every process toolgate sees in a command's tree, so that something outside
/// toolgate — the watchdog — can end the tree should toolgate itself be killed.
pub trait TreeObserver: Send + Sync + std::fmt::Debug {
    /// Command `call` started; `leader` is its first process, whose pid is also its group.
    /// An error ends the command at once: a command nobody could end after toolgate died
    /// does not run.
    fn started(&self, call: u64, leader: ProcessId) -> std::io::Result<()>;
    /// `process` belongs to `call`'s tree.
    fn saw(&self, call: u64, process: ProcessId);
    /// `call` is over: its tree is dead, or what survived is named in its unknowns.
    fn ended(&self, call: u64);
    /// `call`'s leader was moved into the call cgroup at `directory` (see
    /// [`crate::cgroup_tier`]), which `cgroup.kill` ends at once. Optional: the processes
    /// told of by [`TreeObserver::saw`] are enough to end the tree.
    fn cgroup(&self, call: u64, directory: &std::path::Path) {
        let _ = (call, directory);
    }
}

static OBSERVER: Mutex<Option<Arc<dyn TreeObserver>>> = Mutex::new(None);

/// Makes `observer` the observer of every command run from now on whose [`CommandSpec`]
/// names none. A host sets it once, before any command runs; the tools that build the
/// specs need not know it exists.
///
/// [`CommandSpec`]: crate::CommandSpec
pub fn observe_every_command(observer: Arc<dyn TreeObserver>) {
    *OBSERVER.lock().unwrap_or_else(PoisonError::into_inner) = Some(observer);
}

pub(crate) fn default_observer() -> Option<Arc<dyn TreeObserver>> {
    OBSERVER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// The processes known to belong to one tree, grown from a leader.
#[derive(Debug, Clone)]
pub(crate) struct Members {
    pub(crate) leader: ProcessId,
    /// Every process ever seen in the tree, dead ones too: their pids name the sessions and
    /// groups they created.
    pub(crate) known: BTreeSet<ProcessId>,
}

impl Members {
    pub(crate) fn new(leader: ProcessId) -> Members {
        Members {
            leader,
            known: BTreeSet::from([leader]),
        }
    }

    fn knows_pid(&self, pid: i32) -> Option<ProcessId> {
        self.known
            .range(
                ProcessId { pid, start: 0 }..=ProcessId {
                    pid,
                    start: u64::MAX,
                },
            )
            .next_back()
            .copied()
    }

    /// Whether the leader's group number still means the leader's group: the leader is not
    /// reaped yet, or a member of the tree is still in it. Otherwise the number may have been
    /// given to someone else's group.
    fn group_held(&self, table: &[Stat]) -> bool {
        table.iter().any(|s| {
            s.id() == self.leader
                || (s.pgid == self.leader.pid && s.is_live() && self.known.contains(&s.id()))
        })
    }

    /// Adds every process of `table` that descends from the tree, until nothing more is
    /// added; `accept` may refuse one (another tree has it). Returns what was added.
    pub(crate) fn grow(
        &mut self,
        table: &[Stat],
        mut accept: impl FnMut(ProcessId) -> bool,
    ) -> Vec<ProcessId> {
        let me = household::me();
        let by_pid: std::collections::BTreeMap<i32, ProcessId> =
            table.iter().map(|s| (s.pid, s.id())).collect();
        let current = |pid: i32| by_pid.get(&pid).copied();
        let mut added = Vec::new();
        loop {
            let held = self.group_held(table);
            let mut grew = false;
            for stat in table {
                let id = stat.id();
                if id.pid == me || id.start < self.leader.start || self.known.contains(&id) {
                    continue;
                }
                let child = self
                    .knows_pid(stat.ppid)
                    .is_some_and(|parent| current(stat.ppid) == Some(parent));
                let in_group = held && stat.pgid == self.leader.pid;
                let created_by = |number: i32| {
                    number != self.leader.pid
                        && self.knows_pid(number).is_some_and(|m| m.start <= id.start)
                };
                if (child || in_group || created_by(stat.sid) || created_by(stat.pgid))
                    && accept(id)
                {
                    self.known.insert(id);
                    added.push(id);
                    grew = true;
                }
            }
            if !grew {
                return added;
            }
        }
    }

    /// The processes of the tree in `table` that can still act (not zombies).
    pub(crate) fn live<'t>(&self, table: &'t [Stat]) -> Vec<&'t Stat> {
        let held = self.group_held(table);
        table
            .iter()
            .filter(|s| s.is_live())
            .filter(|s| self.known.contains(&s.id()) || (held && s.pgid == self.leader.pid))
            .collect()
    }

    /// Sends `signal` to every live process of the tree, and to the leader's group while it
    /// is the leader's (which reaches members not looked at yet).
    pub(crate) fn signal(&self, table: &[Stat], signal: Signal) {
        if self.group_held(table)
            && let Some(group) = Pid::from_raw(self.leader.pid).filter(|_| self.leader.pid > 1)
        {
            let _ = kill_process_group(group, signal);
        }
        for stat in self.live(table) {
            stat.id().signal(signal);
        }
    }
}

/// Stops every live process of the trees, looking again until nothing new appears and every
/// one is stopped, then kills them all. `grow` adds to a tree what a look found, and says
/// whether to keep looking even so (something may yet join the tree). Gives up stopping at
/// `deadline`, and kills what it has.
pub(crate) fn stop_then_kill(
    trees: &mut [Members],
    deadline: Instant,
    look: impl Fn() -> std::io::Result<Vec<Stat>>,
    mut grow: impl FnMut(&mut Members, &[Stat]) -> bool,
) {
    let mut stopped: BTreeSet<ProcessId> = BTreeSet::new();
    let mut table = Vec::new();
    while let Ok(fresh_table) = look() {
        table = fresh_table;
        let mut fresh = false;
        let mut settled = true;
        for tree in trees.iter_mut() {
            settled &= !grow(tree, &table);
            for stat in tree.live(&table) {
                if stopped.insert(stat.id()) {
                    stat.id().signal(Signal::STOP);
                    fresh = true;
                }
                // `t` is stopped by a tracer; both are stopped for our purpose.
                settled &= matches!(stat.state, 'T' | 't');
            }
            if tree.group_held(&table)
                && let Some(group) = Pid::from_raw(tree.leader.pid).filter(|_| tree.leader.pid > 1)
            {
                let _ = kill_process_group(group, Signal::STOP);
            }
        }
        if (!fresh && settled) || Instant::now() >= deadline {
            break;
        }
        if !fresh {
            // A stop is delivered when the process next runs; give it that moment.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    for tree in trees.iter() {
        tree.signal(&table, Signal::KILL);
    }
}

/// The tree of one running command, claimed in the register and reported to its observer.
#[derive(Debug)]
pub(crate) struct Tree {
    call: CallId,
    members: Members,
    observer: Option<Arc<dyn TreeObserver>>,
    /// An adopted process that may be this tree's is still within its grace.
    pending: bool,
    /// Whether this tree's stop found processes other than the leader alive: in its group
    /// only (false) or also outside it (true).
    pub(crate) left: Option<bool>,
}

impl Tree {
    /// The tree of `leader`; an error is the observer's, and the caller kills the leader.
    pub(crate) fn new(
        leader: ProcessId,
        observer: Option<Arc<dyn TreeObserver>>,
    ) -> std::io::Result<Tree> {
        let call = household::open_call(leader);
        let tree = Tree {
            call,
            members: Members::new(leader),
            observer,
            pending: false,
            left: None,
        };
        if let Some(observer) = &tree.observer {
            // Dropping the tree on error closes the call in the register and for the observer.
            observer.started(call, leader)?;
        }
        Ok(tree)
    }

    /// Tells the observer that the leader is in the call cgroup at `directory`.
    pub(crate) fn entered_cgroup(&self, directory: &std::path::Path) {
        if let Some(observer) = &self.observer {
            observer.cgroup(self.call, directory);
        }
    }

    /// Looks at `table` and adds to the tree what descends from it, orphans included.
    pub(crate) fn update(&mut self, table: &[Stat], now: Instant) {
        let (pending, stirring) = adopt(
            self.call,
            &mut self.members,
            self.observer.as_deref(),
            table,
            now,
        );
        self.pending = stirring || !pending.is_empty();
        household::reap_adopted(table, now);
    }

    /// Marks the tree as a server's still serving, or being ended (see
    /// [`household::serving`]).
    pub(crate) fn serving(&self, serving: bool) {
        household::serving(self.call, serving);
    }

    /// How many processes were ever seen in the tree.
    pub(crate) fn known_count(&self) -> usize {
        self.members.known.len()
    }

    /// Whether `process` was ever seen in the tree.
    pub(crate) fn knows(&self, process: ProcessId) -> bool {
        self.members.known.contains(&process)
    }

    /// Live processes of the tree other than the leader, as of `table`.
    pub(crate) fn others<'t>(&self, table: &'t [Stat]) -> Vec<&'t Stat> {
        let leader = self.members.leader;
        self.members
            .live(table)
            .into_iter()
            .filter(|s| s.id() != leader)
            .collect()
    }

    /// The live processes that may be this tree's but that another tree holds without proof
    /// (see [`household::held_elsewhere`]).
    pub(crate) fn held_elsewhere<'t>(&self, table: &'t [Stat]) -> Vec<&'t Stat> {
        household::held_elsewhere(self.call, table)
    }

    /// Whether some live process of the tree, other than the leader, is outside its group.
    pub(crate) fn detached(&self, table: &[Stat]) -> bool {
        self.others(table)
            .iter()
            .any(|s| s.pgid != self.members.leader.pid)
    }

    /// Whether the tree has processes other than the leader, or may have (an orphan within
    /// its grace).
    pub(crate) fn busy(&self, table: &[Stat]) -> bool {
        self.pending || !self.others(table).is_empty()
    }

    pub(crate) fn signal(&self, table: &[Stat], signal: Signal) {
        self.members.signal(table, signal);
    }

    /// Stops the whole tree, then kills it (see [`stop_then_kill`]). An adopted process that
    /// may still turn out to be toolgate's own child is stopped too while its grace runs —
    /// with whatever it forked meanwhile — and continued if it does.
    pub(crate) fn stop_then_kill(&mut self, deadline: Instant) {
        let call = self.call;
        let observer = self.observer.clone();
        let leader = self.members.leader;
        let mut held: BTreeSet<ProcessId> = BTreeSet::new();
        let mut left: Option<bool> = self.left;
        let mut trees = [self.members.clone()];
        let look = || procs::family(household::me());
        stop_then_kill(&mut trees, deadline, look, |members, table| {
            let now = Instant::now();
            let (pending, stirring) = adopt(call, members, observer.as_deref(), table, now);
            // A tree that forks and exits leaves zombies, each a slower look than the last:
            // reaped as they are placed, so that the looks keep pace with the forks.
            household::reap_adopted(table, now);
            for stat in members.live(table) {
                if stat.id() != leader {
                    left = Some(left.unwrap_or(false) || stat.pgid != leader.pid);
                }
            }
            let mut waiting = stirring || !pending.is_empty();
            for id in pending {
                if held.insert(id) {
                    id.signal(Signal::STOP);
                }
            }
            // What a held process forked before its stop took hold is held with it.
            loop {
                let mut grew = false;
                for stat in table.iter().filter(|s| s.is_live()) {
                    let id = stat.id();
                    let parent = table.iter().find(|p| p.pid == stat.ppid).map(Stat::id);
                    if parent.is_some_and(|p| held.contains(&p))
                        && !members.known.contains(&id)
                        && held.insert(id)
                    {
                        id.signal(Signal::STOP);
                        grew = true;
                        waiting = true;
                    }
                }
                if !grew {
                    break;
                }
            }
            held.retain(|id| !members.known.contains(id));
            waiting
        });
        let [members] = trees;
        for id in held {
            if !members.known.contains(&id) {
                id.signal(Signal::CONT);
            }
        }
        self.members = members;
        self.left = left;
        self.pending = false;
    }
}

/// Claims for `call` the orphans the register gives it and whatever descends from its tree;
/// tells `observer`. Returns the candidates still within their grace, and whether an adopted
/// process just died.
fn adopt(
    call: CallId,
    members: &mut Members,
    observer: Option<&dyn TreeObserver>,
    table: &[Stat],
    now: Instant,
) -> (Vec<ProcessId>, bool) {
    let unplaced = household::unplaced(call, table, now);
    let mut added = Vec::new();
    for orphan in unplaced.orphans {
        if household::claim_orphan(call, orphan) && members.known.insert(orphan) {
            added.push(orphan);
        }
    }
    let grown = members.grow(table, |id| household::claim(call, id));
    household::inherit_guess(call, &grown, table);
    added.extend(grown);
    if let Some(observer) = observer {
        for id in added {
            observer.saw(call, id);
        }
    }
    (unplaced.pending, unplaced.stirring)
}

impl Drop for Tree {
    fn drop(&mut self) {
        household::close_call(self.call);
        if let Some(observer) = &self.observer {
            observer.ended(self.call);
        }
    }
}
