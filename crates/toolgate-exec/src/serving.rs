//! A child that serves for long — an upstream MCP server — whose whole tree ends with it, as a
//! command's tree ends with its call.
//!
//! A process group is not a tree: what a server starts can leave the group (`setsid`,
//! `setpgid`, a double fork into a new session) and outlive a `SIGKILL` sent to the group,
//! keeping the server's sandbox but watched by nobody. So a [`ServerTree`] is started the way
//! [`crate::run`] starts a command: this process is the subreaper first, so that nothing the
//! server leaves is adopted by init; the leader of a new group, registered as toolgate's own
//! child; moved into a cgroup of its own where toolgate's cgroup is delegated to it
//! ([`crate::cgroup_tier`]); its tree told to the observer (the watchdog).
//!
//! While it serves, a thread of its own looks at the tree (every [`FOLLOW`] while it changes
//! or is given work ([`Busy`]), backing off to [`FOLLOW_QUIET`] while it does not): what it
//! starts is
//! claimed and told to the observer (so the watchdog can end it should toolgate be killed),
//! and the zombies of what it left are reaped (toolgate adopts them as the subreaper). An
//! orphan nothing proves the server's is left to a command running beside it that may have
//! made it (see [`crate::household`]). [`ServerTree::end`] stops that thread and looks for the
//! tree, from the leader down while every parent is still alive to prove descent, stops it
//! until a look finds nothing new, kills it, ends the cgroup with `cgroup.kill`, reaps the
//! leader and looks once more. [`ServerEnd::ended`] is true only when that last look found
//! nothing alive, nor an orphan that may be the server's held without proof by another tree;
//! what kept it from being sure is in [`ServerEnd::unknowns`].

use std::io;
use std::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cgroup::{CallCgroup, Tier};
use crate::household::become_subreaper;
use crate::machine::KILL_BOUND;
use crate::tree::{TreeObserver, default_observer};
use crate::{Running, household, procs, spawn_group_leader};

/// Survivors named one by one; more are counted.
const NAMED: usize = 8;

/// How often a serving server's tree is looked at after it changed: each look reads every
/// process's `stat` in `/proc`, so a quiet tree is looked at less and less often, up to
/// [`FOLLOW_QUIET`], and again every `FOLLOW` from the first look that finds a process new.
pub(crate) const FOLLOW: Duration = Duration::from_millis(100);

/// The longest wait between two looks at a tree in which nothing new appeared.
pub(crate) const FOLLOW_QUIET: Duration = Duration::from_millis(1600);

/// A running server and its tree; ended (killed, with everything it started) by
/// [`ServerTree::end`], or when dropped.
#[derive(Debug)]
pub struct ServerTree {
    running: Arc<Mutex<Running>>,
    /// The leader's pid.
    pid: u32,
    /// The thread that follows the tree while it serves, and the way to tell it.
    follower: Option<(mpsc::Sender<Tell>, JoinHandle<()>)>,
    /// What was known to be missing before it ran (no cgroup of its own, say).
    notes: Vec<String>,
    /// How it ended, once it did: asked again, the same answer.
    end: Option<ServerEnd>,
}

/// What a [`ServerTree`]'s follower is told.
#[derive(Debug)]
enum Tell {
    /// The server was given work: look again within [`FOLLOW`].
    Busy,
    /// The tree is being ended or dropped.
    Stop,
}

/// Tells a [`ServerTree`]'s follower that the server was just given work (a request), on
/// which it may start processes: the next look comes within [`FOLLOW`], however quiet the
/// tree was, so that what the work started is known to the observer (the watchdog) soon
/// rather than after up to [`FOLLOW_QUIET`].
#[derive(Debug, Clone)]
pub struct Busy(mpsc::Sender<Tell>);

impl Busy {
    /// One message on a channel: nothing is looked at here.
    pub fn tell(&self) {
        let _ = self.0.send(Tell::Busy);
    }
}

/// The standard streams of a [`ServerTree`]'s leader, as its command asked for them.
#[derive(Debug)]
pub struct ServerPipes {
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
}

/// How a server's tree ended.
#[derive(Debug, Clone)]
pub struct ServerEnd {
    /// Every process of the tree is known to be gone: the last look found none alive and the
    /// leader was reaped. Otherwise something it started may still run, and `unknowns` says
    /// what.
    pub ended: bool,
    /// What nobody can vouch for, in words (process names are the processes' own: escape them
    /// before they reach a terminal).
    pub unknowns: Vec<String>,
    /// What ended the tree: the subreaper alone, or also a cgroup of its own.
    pub tier: Tier,
}

impl ServerTree {
    /// Spawns `command` (its pipes, environment and confinement set by the caller) as a
    /// server whose tree ends with it. `observer` hears of its tree as a command's observer
    /// does (`None`: the one [`crate::observe_every_command`] set, if any); a tree it cannot
    /// be told of is not started. Fails when this process cannot be the subreaper: without it
    /// the tree could not be followed.
    pub fn spawn(
        command: &mut Command,
        observer: Option<Arc<dyn TreeObserver>>,
    ) -> io::Result<(ServerTree, ServerPipes)> {
        become_subreaper()
            .map_err(|e| io::Error::other(format!("cannot follow the processes it starts: {e}")))?;
        let mut notes = Vec::new();
        // Made before the spawn, so that the leader can be moved in the moment it exists.
        let cgroup = CallCgroup::create().unwrap_or_else(|reason| {
            notes.push(no_cgroup(&reason));
            None
        });
        let mut child = spawn_group_leader(command)?;
        let cgroup = cgroup.and_then(|cgroup| match cgroup.enter(child.id()) {
            Ok(()) => Some(cgroup),
            Err(e) => {
                notes.push(no_cgroup(&format!(
                    "cannot move it into `{}`: {e}",
                    cgroup.path().display()
                )));
                None
            }
        });
        let pipes = ServerPipes {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
        };
        let observer = observer.or_else(default_observer);
        let pid = child.id();
        // On an error the group is killed and the leader reaped.
        let running = Running::new(child, observer, cgroup)?;
        running.tree.serving(true);
        let running = Arc::new(Mutex::new(running));
        let (tell, told) = mpsc::channel();
        let followed = Arc::clone(&running);
        let follower = std::thread::Builder::new()
            .name(format!("follow-{pid}"))
            .spawn(move || follow(&followed, &told));
        // Dropping the tree kills what was started.
        let follower = Some((tell, follower?));
        Ok((
            ServerTree {
                running,
                pid,
                follower,
                notes,
                end: None,
            },
            pipes,
        ))
    }

    /// The handle that tells the follower the server was given work; `None` once ended.
    pub fn busy(&self) -> Option<Busy> {
        self.follower.as_ref().map(|(tell, _)| Busy(tell.clone()))
    }

    /// The leader's pid: its process group too. It stays the leader's until [`ServerTree::end`]
    /// reaps it.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Ends the tree: stopped while every parent still proves descent, then killed, the
    /// cgroup ended, the leader and the adopted zombies reaped, a last look taken. Takes up to
    /// a few seconds for a tree that will not die. Called again, says the same.
    pub fn end(&mut self) -> ServerEnd {
        if let Some(end) = &self.end {
            return end.clone();
        }
        if let Some((tell, thread)) = self.follower.take() {
            let _ = tell.send(Tell::Stop);
            let _ = thread.join();
        }
        let mut unknowns = std::mem::take(&mut self.notes);
        let mut unended = false;
        let mut running = lock(&self.running);
        running.tree.serving(false);
        running.tree.stop_then_kill(Instant::now() + KILL_BOUND / 2);
        // What the look missed but stayed in the cgroup dies with this one write.
        let tier = match running.end_cgroup() {
            None => Tier::Subreaper,
            Some((killed, result)) => {
                if let Err(reason) = result {
                    unended = true;
                    unknowns.push(format!("its cgroup was not cleanly ended: {reason}"));
                }
                if killed {
                    Tier::SubreaperAndCgroup
                } else {
                    Tier::Subreaper
                }
            }
        };
        // Already killed with its tree; this is for a leader the look did not show.
        let _ = running.child.kill();
        let survivors = running.finish();
        for stat in survivors.iter().take(NAMED) {
            unknowns.push(format!(
                "process {} (`{}`) it started was still running after it was killed",
                stat.pid, stat.comm
            ));
        }
        if survivors.len() > NAMED {
            unknowns.push(format!(
                "{} more processes it started were still running after it was killed",
                survivors.len() - NAMED
            ));
        }
        // An orphan that no look proved this tree's may have been taken by another tree
        // running beside it (see `household`): alive, it is not known to be gone.
        match procs::family(household::me()) {
            Ok(table) => {
                let held = running.tree.held_elsewhere(&table);
                for stat in held.iter().take(NAMED) {
                    unended = true;
                    unknowns.push(format!(
                        "process {} (`{}`), which it may have started, was still running, held \
                         by another process tree of toolgate's that ends it when it ends",
                        stat.pid, stat.comm
                    ));
                }
                if held.len() > NAMED {
                    unknowns.push(format!(
                        "{} more processes it may have started were still running, held by \
                         another process tree of toolgate's",
                        held.len() - NAMED
                    ));
                }
            }
            Err(e) => {
                unended = true;
                unknowns.push(format!(
                    "whether another process tree of toolgate's holds a process it started \
                     could not be looked at: {e}"
                ));
            }
        }
        if !running.settled && survivors.is_empty() {
            unknowns.push(
                "the last look for the processes it started could not be taken, or it could \
                 not be reaped"
                    .to_owned(),
            );
        }
        let end = ServerEnd {
            ended: !unended && running.settled,
            unknowns,
            tier,
        };
        self.end = Some(end.clone());
        end
    }
}

impl Drop for ServerTree {
    fn drop(&mut self) {
        // The tree is killed by `Running`'s own drop once the follower has let go of it.
        if let Some((tell, thread)) = self.follower.take() {
            let _ = tell.send(Tell::Stop);
            let _ = thread.join();
        }
    }
}

/// The follower: looks at the tree until told to stop, every [`FOLLOW`] after a look found a
/// process new or the server was given work, twice as long after each that found none, up to
/// [`FOLLOW_QUIET`].
fn follow(running: &Mutex<Running>, told: &mpsc::Receiver<Tell>) {
    let mut every = FOLLOW;
    let mut next = Instant::now() + every;
    loop {
        match told.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => {}
            // Brought nearer, never put off: work given more often than every `FOLLOW`
            // cannot keep the look from being taken.
            Ok(Tell::Busy) => {
                every = FOLLOW;
                next = next.min(Instant::now() + FOLLOW);
                continue;
            }
            Ok(Tell::Stop) | Err(RecvTimeoutError::Disconnected) => return,
        }
        // A look that cannot be taken now may be taken next time; the end looks again.
        let Ok(table) = procs::family(household::me()) else {
            every = FOLLOW;
            next = Instant::now() + every;
            continue;
        };
        let mut running = lock(running);
        let known = running.tree.known_count();
        running.tree.update(&table, Instant::now());
        every = next_look(every, running.tree.known_count() != known);
        next = Instant::now() + every;
    }
}

/// The wait before the next look: [`FOLLOW`] when the last found a process new, else twice
/// the last wait, at most [`FOLLOW_QUIET`].
fn next_look(last: Duration, found_new: bool) -> Duration {
    if found_new {
        FOLLOW
    } else {
        (last * 2).min(FOLLOW_QUIET)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// It ran without a cgroup of its own although toolgate's cgroup is delegated to it.
fn no_cgroup(reason: &str) -> String {
    format!(
        "it ran without a cgroup of its own ({reason}); its tree was followed and ended by the \
         subreaper alone"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quiet tree is looked at twice as late each time, up to the bound; a look that finds
    /// a process new brings the next one back to the shortest wait.
    #[test]
    fn a_quiet_tree_is_looked_at_less_often_until_it_changes() {
        let mut every = FOLLOW;
        let mut waits = Vec::new();
        for _ in 0..6 {
            every = next_look(every, false);
            waits.push(every.as_millis());
        }
        assert_eq!(waits, [200, 400, 800, 1600, 1600, 1600]);
        assert_eq!(next_look(FOLLOW_QUIET, true), FOLLOW);
    }
}
