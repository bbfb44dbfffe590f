//! toolgate as the subreaper of everything its commands leave behind, and the register that
//! says whose each adopted process is.
//!
//! A process whose parent dies is normally adopted by init, out of toolgate's sight: that is
//! how `setsid`, a double fork or `daemon(3)` leave a command's tree. With
//! `PR_SET_CHILD_SUBREAPER` ([`become_subreaper`]) such an orphan is adopted by toolgate
//! instead, so every process a command starts stays a descendant of toolgate for as long as
//! it lives.
//!
//! Whose is an adopted process? A call ([`crate::tree`]) claims what it can prove is its own:
//! children of processes it has seen, members of its group, of sessions or groups one of its
//! processes created. What re-parented to toolgate before any of that was seen (a double fork
//! quicker than one look at `/proc`) is *unplaced*. toolgate starts only three kinds of
//! children itself — command leaders, upstream servers and the watchdog — and registers each
//! ([`own_child`]) as soon as it is spawned, each the leader of a new group in toolgate's
//! session. So an adopted process that is neither registered nor claimed came from some call's
//! tree, or from an upstream's; it is given to every running call whose leader started before
//! it, and killed when the first of them ends. That fails closed: a daemon that an upstream
//! server leaves behind while a call runs may be killed with the call, and a call running
//! beside another may be handed the other's orphan (and say so in its unknowns), but a
//! command's survivor is never left alone for want of proof. Its shape says how soon (see
//! [`unplaced`]): one in a session of its own is an orphan at once; one shaped like toolgate's
//! own children is one too, unless toolgate is spawning a child at that moment: then it may be
//! that child, not yet registered, and it waits until the spawn is over (or [`UNPLACED_GRACE`]
//! has passed). A tree that hops to a new process and group every few milliseconds is thus
//! taken at the first look, not left to outrun a grace that each new process would renew.
//!
//! Adopted processes must be reaped, or their zombies would fill the process table. They are
//! reaped one by one (`waitid` on the pid of a zombie this module has placed), never with
//! `waitpid(-1)`, which would steal the status of a child that a `std::process::Child`
//! elsewhere in toolgate is waiting for.
//!
//! A server's tree ([`crate::ServerTree`]) is a call too, open for as long as it serves; while
//! it serves it leaves an orphan to any command that started before the orphan did (the
//! command claims it and kills it with its call), and takes it only once it is being ended.
//! An orphan one call takes without proof may be another's: that other's end finds it still
//! alive ([`held_elsewhere`]) and says so rather than report its tree gone.
//!
//! A host that embeds this crate and spawns children of its own while commands run must spawn
//! them with [`crate::spawn_group_leader`], or hold [`spawning`] from before the spawn until
//! it has registered the child with [`own_child`]; otherwise they count as a command's. Its
//! plain children (in its own group) are left alone unless it declares it has none
//! ([`no_unregistered_children`]), as toolgate does.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, WaitId, WaitIdOptions, getpid, set_child_subreaper, waitid};

use crate::procs::{ProcessId, Stat};

/// How long an adopted process shaped like toolgate's own children may wait, while toolgate
/// is spawning, before it is taken for an orphan anyway. Children toolgate spawns are
/// registered microseconds after `fork`.
pub(crate) const UNPLACED_GRACE: Duration = Duration::from_millis(100);

/// How long a registered child is remembered after a look at `/proc` no longer shows it. A
/// look is taken before the register is consulted, so a child spawned between the two is
/// registered but not yet in the table: it must not be forgotten for that.
const OWN_KEPT: Duration = Duration::from_secs(10);

/// One running call, as the register knows it.
pub(crate) type CallId = u64;

#[derive(Debug, Default)]
struct Register {
    /// Children toolgate spawned itself, whose holders reap them, and when each was registered.
    own: BTreeMap<ProcessId, Instant>,
    /// Processes a running call has claimed.
    claimed: BTreeMap<ProcessId, CallId>,
    /// Running calls and the start of their leaders.
    calls: BTreeMap<CallId, ProcessId>,
    /// The calls that are servers still serving ([`crate::ServerTree`]): an orphan that a
    /// command running beside one may have left is that command's to claim, not theirs.
    serving: BTreeSet<CallId>,
    /// Orphans a call claimed without proof, and what it claimed as descending from one, with
    /// the call and the start of that orphan: each may have come from the tree of another call
    /// whose leader started no later, which did not end it.
    guessed: BTreeMap<ProcessId, (CallId, u64)>,
    /// Adopted processes nobody has placed yet, and when each was first seen.
    unplaced: BTreeMap<ProcessId, Instant>,
    /// Spawns under way: each from before its `fork` until its child is registered.
    spawning: usize,
    next_call: CallId,
}

static REGISTER: Mutex<Register> = Mutex::new(Register {
    own: BTreeMap::new(),
    claimed: BTreeMap::new(),
    calls: BTreeMap::new(),
    serving: BTreeSet::new(),
    guessed: BTreeMap::new(),
    unplaced: BTreeMap::new(),
    spawning: 0,
    next_call: 0,
});

fn register() -> MutexGuard<'static, Register> {
    REGISTER.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes this process the subreaper of its descendants, once. Every command is run only once
/// this has succeeded: without it, the tree of a command could not be followed.
pub fn become_subreaper() -> io::Result<()> {
    static DONE: OnceLock<Result<(), i32>> = OnceLock::new();
    let done = DONE
        .get_or_init(|| set_child_subreaper(Some(getpid())).map_err(|errno| errno.raw_os_error()));
    done.map_err(io::Error::from_raw_os_error)
}

static STRICT: AtomicBool = AtomicBool::new(false);

/// Declares that this process spawns no child it does not register with [`own_child`] (as
/// toolgate does), so that an adopted process hiding in this process's own group is taken
/// for an orphan too. Without it, such a process is taken for the host's own plain child.
pub fn no_unregistered_children() {
    STRICT.store(true, Ordering::Relaxed);
}

/// Registers `pid`, a child this process has just spawned and will reap itself, so that it
/// is never taken for an adopted orphan. Entries lapse once the process is gone.
pub fn own_child(pid: u32) {
    let Some(id) = i32::try_from(pid).ok().and_then(ProcessId::of) else {
        return;
    };
    register().own.insert(id, Instant::now());
}

/// A spawn under way, from before its `fork` until its child is registered with
/// [`own_child`]: while one is held, an adopted process shaped like toolgate's own children
/// may be that child, and is not yet taken for an orphan. Register the child, then drop this.
#[derive(Debug)]
#[must_use = "a spawn is under way only while this is held"]
pub struct Spawning(());

/// Declares a spawn under way until the returned value is dropped (see [`Spawning`]).
pub fn spawning() -> Spawning {
    register().spawning += 1;
    Spawning(())
}

impl Drop for Spawning {
    fn drop(&mut self) {
        let mut register = register();
        register.spawning = register.spawning.saturating_sub(1);
    }
}

/// This process, whose children the adopted orphans become.
pub(crate) fn me() -> i32 {
    getpid().as_raw_pid()
}

/// Starts a call whose leader is `leader` (already registered as toolgate's own child).
pub(crate) fn open_call(leader: ProcessId) -> CallId {
    let mut register = register();
    let call = register.next_call;
    register.next_call = call.wrapping_add(1);
    register.calls.insert(call, leader);
    call
}

/// Marks `call` as a server's that is still serving (`true`) or being ended (`false`).
/// While it serves, it claims an orphan nothing proves its own only where no command call
/// (one that is not a serving server's) started before the orphan: such an orphan may be that
/// command's, which claims it and ends it with its call. Once it is being ended, it claims
/// every orphan as a command's call does.
pub(crate) fn serving(call: CallId, serving: bool) {
    let mut register = register();
    if serving {
        register.serving.insert(call);
    } else {
        register.serving.remove(&call);
    }
}

/// Ends `call`: whatever it claimed is released (it is dead, or named in the call's unknowns).
pub(crate) fn close_call(call: CallId) {
    let mut register = register();
    register.calls.remove(&call);
    register.serving.remove(&call);
    register.guessed.retain(|_, (owner, _)| *owner != call);
    register.claimed.retain(|_, owner| *owner != call);
}

/// Records that `call` claims `process`. Returns false if another call already has it.
pub(crate) fn claim(call: CallId, process: ProcessId) -> bool {
    let mut register = register();
    register.unplaced.remove(&process);
    match register.claimed.get(&process) {
        Some(owner) => *owner == call,
        None => {
            register.claimed.insert(process, call);
            true
        }
    }
}

/// Records that `call` claims `orphan`, an adopted process that nothing proves its own (see
/// [`unplaced`]). Returns false if another call already has it.
pub(crate) fn claim_orphan(call: CallId, orphan: ProcessId) -> bool {
    let claimed = claim(call, orphan);
    if claimed {
        register().guessed.insert(orphan, (call, orphan.start));
    }
    claimed
}

/// Marks what `call` has just claimed as descending from its tree (`grown`, found in
/// `table`) as guessed too where its parent, session or group is a guessed process's.
pub(crate) fn inherit_guess(call: CallId, grown: &[ProcessId], table: &[Stat]) {
    let mut register = register();
    if grown.is_empty() || !register.guessed.values().any(|(owner, _)| *owner == call) {
        return;
    }
    for stat in table.iter().filter(|s| grown.contains(&s.id())) {
        let root = register
            .guessed
            .iter()
            .find(|(guessed, (owner, _))| {
                *owner == call
                    && guessed.start <= stat.start
                    && [stat.ppid, stat.sid, stat.pgid].contains(&guessed.pid)
            })
            .map(|(_, (_, root))| *root);
        if let Some(root) = root {
            register.guessed.insert(stat.id(), (call, root));
        }
    }
}

/// The live processes of `table` that may be `call`'s but that another call holds without
/// proof: an orphan it guessed that started no earlier than `call`'s leader, or what descends
/// from one. Ending `call` did not end them; the call that holds them ends them when it ends.
pub(crate) fn held_elsewhere(call: CallId, table: &[Stat]) -> Vec<&Stat> {
    let register = register();
    let Some(leader) = register.calls.get(&call) else {
        return Vec::new();
    };
    table
        .iter()
        .filter(|s| s.is_live())
        .filter(|s| {
            register
                .guessed
                .get(&s.id())
                .is_some_and(|(owner, root)| *owner != call && *root >= leader.start)
        })
        .collect()
}

/// What [`unplaced`] found for one call.
#[derive(Debug, Default)]
pub(crate) struct Unplaced {
    /// Adopted processes registered by nobody, started after the call's leader: the call's
    /// to kill.
    pub(crate) orphans: Vec<ProcessId>,
    /// Candidates that look as toolgate's own children look and are still within their
    /// grace: they may yet be registered.
    pub(crate) pending: Vec<ProcessId>,
    /// An adopted process that may be the call's has just died: something is forking and
    /// exiting, and a look a moment later may find what it left.
    pub(crate) stirring: bool,
}

/// The adopted processes in `table` that no call has claimed and toolgate did not spawn, as
/// far as they may be `call`'s.
///
/// The shape of an adopted process says how sure that is. toolgate spawns every child as the
/// leader of a new group in its own session; a host embedding this crate may also spawn plain
/// children, in its own group. So an adopted process
///
/// - in a session other than this process's (someone called `setsid`), or in a group it does
///   not lead that is not this process's group, is an orphan at once;
/// - leading a group in this process's session may be a child just spawned and not yet
///   registered, if a spawn is under way ([`spawning`]): then it is pending until the spawn
///   is over or [`UNPLACED_GRACE`] has passed; with no spawn under way, it is an orphan at
///   once (every spawn that began before `table` was read has registered its child by now);
/// - in this process's own group and session is a host's plain child, unless the host said
///   it has none ([`no_unregistered_children`]); then it is placed like the previous one.
pub(crate) fn unplaced(call: CallId, table: &[Stat], now: Instant) -> Unplaced {
    let mut register = register();
    let spawning = register.spawning > 0;
    sort_adopted(&mut register, call, table, now, spawning)
}

/// [`unplaced`], with the register in hand and whether a spawn is under way.
fn sort_adopted(
    register: &mut Register,
    call: CallId,
    table: &[Stat],
    now: Instant,
    spawning: bool,
) -> Unplaced {
    let me = me();
    let (my_session, my_group) = table
        .iter()
        .find(|s| s.pid == me)
        .map_or((None, None), |s| (Some(s.sid), Some(s.pgid)));
    let strict = STRICT.load(Ordering::Relaxed);
    let Register {
        own,
        claimed,
        calls,
        serving,
        unplaced,
        ..
    } = register;
    let seen: BTreeSet<ProcessId> = table.iter().map(Stat::id).collect();
    // Forget what is gone; a pid that comes back is a new process with its own grace.
    own.retain(|id, at| seen.contains(id) || now.saturating_duration_since(*at) < OWN_KEPT);
    unplaced.retain(|id, _| seen.contains(id));
    let mut found = Unplaced::default();
    let Some(leader) = calls.get(&call) else {
        return found;
    };
    // A serving server yields to every command that started before the orphan did.
    let yields = serving.contains(&call);
    let commands: Vec<u64> = calls
        .iter()
        .filter(|(other, _)| yields && !serving.contains(other))
        .map(|(_, leader)| leader.start)
        .collect();
    for stat in table.iter().filter(|s| s.ppid == me) {
        let id = stat.id();
        if own.contains_key(&id) || claimed.contains_key(&id) {
            continue;
        }
        let in_my_session = Some(stat.sid) == my_session;
        let in_my_group = Some(stat.pgid) == my_group;
        // A host's plain child is the host's to reap: it is not even remembered.
        if in_my_session && in_my_group && !strict {
            continue;
        }
        let since = *unplaced.entry(id).or_insert(now);
        // A process that started before the leader cannot descend from it.
        if id.start < leader.start {
            continue;
        }
        // A zombie can do nothing more, and is only reaped (see `reap_adopted`).
        if !stat.is_live() {
            found.stirring |= since == now;
            continue;
        }
        let leads_group = stat.pgid == stat.pid;
        let waited = now.saturating_duration_since(since) >= UNPLACED_GRACE;
        if commands.iter().any(|start| *start <= id.start) {
            continue;
        }
        if !in_my_session || !(leads_group || in_my_group) || !spawning || waited {
            found.orphans.push(id);
        } else {
            found.pending.push(id);
        }
    }
    found
}

/// Reaps the zombies in `table` that are toolgate's by adoption: claimed by a call, or
/// unplaced past the grace while no spawn is under way. Never one that toolgate spawned
/// itself, whose holder reaps it.
pub(crate) fn reap_adopted(table: &[Stat], now: Instant) {
    let me = me();
    let zombies: Vec<ProcessId> = {
        let register = register();
        table
            .iter()
            .filter(|s| s.ppid == me && !s.is_live())
            .map(Stat::id)
            .filter(|id| !register.own.contains_key(id))
            .filter(|id| {
                register.claimed.contains_key(id)
                    || (register.spawning == 0
                        && register.unplaced.get(id).is_some_and(|since| {
                            now.saturating_duration_since(*since) >= UNPLACED_GRACE
                        }))
            })
            .collect()
    };
    for zombie in zombies {
        // A zombie child keeps its number until its parent — this process — reaps it, so the
        // pid checked above still names it.
        if let Some(pid) = Pid::from_raw(zombie.pid) {
            let _ = waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adopted_process_is_placed_by_its_shape() {
        let me = me();
        let mine = crate::procs::read(me).unwrap();
        // A leader that started at boot: everything adopted since may be its. The sorting is
        // done on a register of the test's own: other tests in this binary look at the real
        // process table through the shared one, which forgets what their table lacks.
        let leader = ProcessId {
            pid: 999_990,
            start: 0,
        };
        let call = open_call(leader);
        let own_register = || {
            let mut register = Register::default();
            register.calls.insert(call, leader);
            register
        };
        let adopted = |pid: i32, pgid: i32, sid: i32, state: char| Stat {
            pid,
            comm: "probe".to_owned(),
            state,
            ppid: me,
            pgid,
            sid,
            start: 10,
        };
        let table = vec![
            mine.clone(),
            adopted(999_991, 999_991, 999_991, 'S'),
            adopted(999_992, 999_992, mine.sid, 'S'),
            adopted(999_993, mine.pgid, mine.sid, 'S'),
            adopted(999_994, 999_990, mine.sid, 'S'),
            adopted(999_995, 999_995, 999_995, 'Z'),
        ];
        let pids = |ids: &[ProcessId]| ids.iter().map(|id| id.pid).collect::<Vec<_>>();
        let now = Instant::now();
        let mut kept = own_register();
        let found = sort_adopted(&mut kept, call, &table, now, true);
        // A session of its own, or a group it does not lead: an orphan at once. Leading a
        // group in this session while a spawn is under way: maybe the child being spawned,
        // pending. A plain child of the host: not even remembered. A zombie: only a sign
        // that something is exiting.
        assert_eq!(pids(&found.orphans), [999_991, 999_994]);
        assert_eq!(pids(&found.pending), [999_992]);
        assert!(found.stirring);
        // The grace is not renewed: the same process, a moment past it, is an orphan even
        // while spawns go on.
        let later = sort_adopted(&mut kept, call, &table, now + UNPLACED_GRACE, true);
        assert_eq!(pids(&later.orphans), [999_991, 999_992, 999_994]);
        assert!(later.pending.is_empty() && !later.stirring);
        // With no spawn under way, every child toolgate spawned is registered: the same
        // shape is an orphan at the first look. A tree hopping to a new pid and group every
        // moment cannot hide behind a grace each new process would renew.
        let hop = vec![mine.clone(), adopted(999_996, 999_996, mine.sid, 'S')];
        let at_once = sort_adopted(&mut own_register(), call, &hop, now, false);
        assert_eq!(pids(&at_once.orphans), [999_996]);
        assert!(at_once.pending.is_empty());
        assert!(claim(call, later.orphans[0]));
        assert!(
            !claim(call.wrapping_add(1), later.orphans[0]),
            "claimed once"
        );
        close_call(call);
        assert!(!register().claimed.values().any(|owner| *owner == call));
    }

    #[test]
    fn a_serving_server_leaves_to_a_command_what_the_command_may_have_left() {
        let me = me();
        let mine = crate::procs::read(me).unwrap();
        let (server, command): (CallId, CallId) = (7, 8);
        let mut register = Register::default();
        register.calls.insert(
            server,
            ProcessId {
                pid: 999_970,
                start: 5,
            },
        );
        register.calls.insert(
            command,
            ProcessId {
                pid: 999_971,
                start: 20,
            },
        );
        register.serving.insert(server);
        let orphan = |pid: i32, start: u64| Stat {
            pid,
            comm: "probe".to_owned(),
            state: 'S',
            ppid: me,
            pgid: pid,
            sid: pid,
            start,
        };
        // One adopted before the command started, one after.
        let table = vec![mine, orphan(999_972, 10), orphan(999_973, 30)];
        let pids = |found: Unplaced| found.orphans.iter().map(|id| id.pid).collect::<Vec<_>>();
        let now = Instant::now();
        let serving = sort_adopted(&mut register, server, &table, now, false);
        assert_eq!(
            pids(serving),
            [999_972],
            "the later one may be the command's"
        );
        let commanding = sort_adopted(&mut register, command, &table, now, false);
        assert_eq!(pids(commanding), [999_973]);
        // Being ended, the server takes every orphan, as a command's call does.
        register.serving.remove(&server);
        let ending = sort_adopted(&mut register, server, &table, now, false);
        assert_eq!(pids(ending), [999_972, 999_973]);
    }

    #[test]
    fn what_descends_from_a_guessed_orphan_is_held_from_every_call_it_may_be() {
        let call = |pid: i32, start: u64| open_call(ProcessId { pid, start });
        let (holder, earlier, later) = (call(999_980, 1), call(999_981, 10), call(999_984, 25));
        let stat = |pid: i32, ppid: i32, start: u64| Stat {
            pid,
            comm: "probe".to_owned(),
            state: 'S',
            ppid,
            pgid: pid,
            sid: pid,
            start,
        };
        let orphan = stat(999_982, me(), 20);
        let child = stat(999_983, orphan.pid, 30);
        let table = vec![orphan.clone(), child.clone()];
        assert!(claim_orphan(holder, orphan.id()));
        assert!(claim(holder, child.id()));
        inherit_guess(holder, &[child.id()], &table);
        let held = |call| {
            held_elsewhere(call, &table)
                .iter()
                .map(|s| s.pid)
                .collect::<Vec<_>>()
        };
        assert_eq!(held(earlier), [orphan.pid, child.pid]);
        assert!(held(holder).is_empty(), "the holder ends them itself");
        assert!(held(later).is_empty(), "started before its leader: not its");
        close_call(holder);
        assert!(held(earlier).is_empty(), "released with the holder");
        close_call(earlier);
        close_call(later);
    }

    #[test]
    fn a_registered_child_outlives_a_look_taken_before_its_spawn() {
        // A look at `/proc`, then a spawn that registers its child, then the register
        // consulted with the older look: the child is not in it, and must stay registered.
        let table = vec![crate::procs::read(me()).unwrap()];
        let call: CallId = 0;
        let mut register = Register::default();
        register.calls.insert(call, ProcessId { pid: 1, start: 0 });
        let child = ProcessId {
            pid: 999_980,
            start: 20,
        };
        let now = Instant::now();
        register.own.insert(child, now);
        sort_adopted(&mut register, call, &table, now, false);
        assert!(register.own.contains_key(&child));
        // Long gone, it is forgotten.
        sort_adopted(&mut register, call, &table, now + OWN_KEPT, false);
        assert!(!register.own.contains_key(&child));
    }
}
