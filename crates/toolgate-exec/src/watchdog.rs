//! The watchdog: a small process that outlives toolgate to kill what toolgate started.
//!
//! Each command's tree and each upstream server's are followed as they run (see [`crate::run`]
//! and [`crate::ServerTree`]); toolgate ends both itself. A toolgate killed outright
//! (SIGKILL, a crash, the out-of-memory killer) cannot, and an approved command — or a daemon
//! it left — would live on unwatched. So toolgate starts a watchdog ([`Watchdog::start`]; in
//! toolgate, the binary itself run as `toolgate upstream-watchdog`) in a process group of its
//! own, out of reach of a terminal's Ctrl-C, and tells it on a pipe, one line each:
//!
//! - `+PGID` / `-PGID`: a process group started / killed;
//! - `c CALL PID START`: command (or server) `CALL` started, its leader `PID` (also its
//!   group) with start time `START` (field 22 of `/proc/PID/stat`);
//! - `p CALL PID START`: a process seen in `CALL`'s tree;
//! - `g CALL PATH`: `CALL`'s leader is in the call cgroup at `PATH` (only where toolgate's
//!   cgroup is delegated to it; the rest of the line is the path);
//! - `e CALL`: `CALL` is over.
//!
//! When the pipe closes, however toolgate ended, the watchdog ([`run_watchdog`]) kills every
//! group still listed, ends with `cgroup.kill` and removes the call cgroup of every command
//! still listed (only a directory named as toolgate names call cgroups), and stops and then
//! kills the tree of every command still listed: the
//! processes it was told of (only if each is still the process with that start time), their
//! descendants, their group and the sessions and groups they created, looked up again until
//! nothing new appears, so that nothing forks away between the look and the kill.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use crate::cgroup::CALL_PREFIX;
use crate::household::own_child;
use crate::procs::ProcessId;
use crate::tree::{Members, TreeObserver, stop_then_kill};

/// How long the watchdog keeps stopping the trees before it kills what it has.
const STOP_BOUND: Duration = Duration::from_secs(1);

/// toolgate's end of a running watchdog.
#[derive(Debug)]
pub struct Watchdog {
    input: Mutex<Option<ChildStdin>>,
    child: Mutex<Child>,
}

impl Watchdog {
    /// Starts `command` (which must run [`run_watchdog`] on its standard input) as the
    /// watchdog, in a process group of its own.
    pub fn start(mut command: Command) -> std::io::Result<Watchdog> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let mut child = crate::spawn_group_leader(&mut command)?;
        let input = child.stdin.take();
        Ok(Watchdog {
            input: Mutex::new(input),
            child: Mutex::new(child),
        })
    }

    /// Asks the watchdog to kill `group` if toolgate ends without doing so. The group's
    /// leader is toolgate's own child, never an orphan of a command.
    pub fn watch(&self, group: Pid) {
        if let Ok(pid) = u32::try_from(group.as_raw_pid()) {
            own_child(pid);
        }
        // A failure is reported by `tell`; toolgate still kills its upstreams itself.
        let _ = self.tell(&format!("+{}\n", group.as_raw_nonzero()));
    }

    /// Tells the watchdog that `group` was killed, so that a later group given the same
    /// number is left alone.
    pub fn release(&self, group: Pid) {
        let _ = self.tell(&format!("-{}\n", group.as_raw_nonzero()));
    }

    fn tell(&self, line: &str) -> std::io::Result<()> {
        let mut input = self.input.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(pipe) = input.as_mut() else {
            return Err(std::io::Error::other("the watchdog has stopped"));
        };
        match pipe.write_all(line.as_bytes()) {
            Ok(()) => Ok(()),
            Err(e) => {
                eprintln!(
                    "toolgate: the watchdog has stopped; what toolgate started outlives a toolgate that is killed"
                );
                *input = None;
                Err(e)
            }
        }
    }
}

impl TreeObserver for Watchdog {
    fn started(&self, call: u64, leader: ProcessId) -> std::io::Result<()> {
        self.tell(&format!("c {call} {} {}\n", leader.pid, leader.start))
    }

    fn saw(&self, call: u64, process: ProcessId) {
        let _ = self.tell(&format!("p {call} {} {}\n", process.pid, process.start));
    }

    fn ended(&self, call: u64) {
        let _ = self.tell(&format!("e {call}\n"));
    }

    fn cgroup(&self, call: u64, directory: &std::path::Path) {
        // A path that is not one line cannot be told; the processes are told all the same.
        if let Some(path) = directory.to_str().filter(|p| !p.contains('\n')) {
            let _ = self.tell(&format!("g {call} {path}\n"));
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Closing its input makes the watchdog kill what is still listed, and exit.
        drop(
            self.input
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let _ = self
            .child
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .wait();
    }
}

/// One line of the protocol.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Watch(i32),
    Release(i32),
    Started(u64, ProcessId),
    Saw(u64, ProcessId),
    Cgroup(u64, PathBuf),
    Ended(u64),
}

fn parse(line: &str) -> Option<Line> {
    // Pid 1 and below are never ours (and 0 or -1 would mean "everything" to kill(2)).
    let pid = |text: &str| text.parse::<i32>().ok().filter(|n| *n > 1);
    match line.split_at_checked(1)? {
        ("+", number) => return pid(number).map(Line::Watch),
        ("-", number) => return pid(number).map(Line::Release),
        _ => {}
    }
    if let Some(rest) = line.strip_prefix("g ") {
        let (call, path) = rest.split_once(' ')?;
        let path = PathBuf::from(path);
        // Only a call cgroup, by its name, is ever killed and removed.
        let named = path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with(CALL_PREFIX));
        return (path.is_absolute() && named).then_some(Line::Cgroup(call.parse().ok()?, path));
    }
    let mut words = line.split(' ');
    let kind = words.next()?;
    let call = words.next()?.parse().ok()?;
    let mut process = || -> Option<ProcessId> {
        Some(ProcessId {
            pid: pid(words.next()?)?,
            start: words.next()?.parse().ok()?,
        })
    };
    let parsed = match kind {
        "c" => Line::Started(call, process()?),
        "p" => Line::Saw(call, process()?),
        "e" => Line::Ended(call),
        _ => return None,
    };
    words.next().is_none().then_some(parsed)
}

/// The watchdog's side: reads lines until its input ends, then kills every group and every
/// command's tree still listed. Returns how many groups and trees it ended. A line it cannot
/// read is ignored: toolgate writes every line whole.
pub fn run_watchdog(input: impl BufRead) -> usize {
    let mut groups = BTreeSet::new();
    let mut calls: BTreeMap<u64, Members> = BTreeMap::new();
    let mut cgroups: BTreeMap<u64, PathBuf> = BTreeMap::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        match parse(&line) {
            Some(Line::Watch(group)) => {
                groups.insert(group);
            }
            Some(Line::Release(group)) => {
                groups.remove(&group);
            }
            Some(Line::Started(call, leader)) => {
                calls.insert(call, Members::new(leader));
            }
            Some(Line::Saw(call, process)) => {
                if let Some(members) = calls.get_mut(&call) {
                    members.known.insert(process);
                }
            }
            Some(Line::Cgroup(call, path)) if calls.contains_key(&call) => {
                cgroups.insert(call, path);
            }
            Some(Line::Ended(call)) => {
                calls.remove(&call);
                cgroups.remove(&call);
            }
            // A cgroup for a call not listed (or no longer) is not toolgate's to end.
            Some(Line::Cgroup(..)) | None => {}
        }
    }
    // One write each kills what is in a call cgroup; the trees are then ended as if there
    // were none, for what was forked before the leader moved in or moved itself out.
    for path in cgroups.values() {
        if let Err(reason) = crate::cgroup::kill_and_remove(path) {
            eprintln!("toolgate watchdog: {reason}");
        }
    }
    let mut trees: Vec<Members> = calls.into_values().collect();
    let ended = trees.len();
    if !trees.is_empty() {
        // toolgate is gone, and what it adopted went to init: the whole table is looked at.
        let look = crate::procs::snapshot;
        stop_then_kill(
            &mut trees,
            Instant::now() + STOP_BOUND,
            look,
            |members, table| {
                members.grow(table, |_| true);
                false
            },
        );
    }
    ended
        + groups
            .into_iter()
            .filter_map(Pid::from_raw)
            .filter(|group| kill_process_group(*group, Signal::KILL).is_ok())
            .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper() -> (Child, Pid) {
        let mut command = Command::new("sleep");
        command.arg("60");
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command.spawn().unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
        (child, pid)
    }

    #[test]
    fn lines_parse_strictly() {
        let id = |pid, start| ProcessId { pid, start };
        for (text, expected) in [
            ("+12", Some(Line::Watch(12))),
            ("-12", Some(Line::Release(12))),
            ("+1", None),
            ("+-1", None),
            ("c 3 100 4242", Some(Line::Started(3, id(100, 4242)))),
            ("p 3 101 4243", Some(Line::Saw(3, id(101, 4243)))),
            ("e 3", Some(Line::Ended(3))),
            (
                "g 3 /sys/fs/cgroup/a b/toolgate-call-7-0",
                Some(Line::Cgroup(
                    3,
                    "/sys/fs/cgroup/a b/toolgate-call-7-0".into(),
                )),
            ),
            ("g 3 /sys/fs/cgroup/user.slice", None),
            ("g 3 toolgate-call-7-0", None),
            ("g x /a/toolgate-call-7-0", None),
            ("p 3 1 4243", None),
            ("p 3 101", None),
            ("p 3 101 4243 extra", None),
            ("x 3", None),
            ("", None),
        ] {
            assert_eq!(parse(text), expected, "{text:?}");
        }
    }

    #[test]
    fn groups_still_listed_when_the_input_ends_are_killed() {
        let (mut kept, kept_group) = sleeper();
        let (mut released, released_group) = sleeper();
        let input = format!(
            "+{kept}\n+{released}\n-{released}\nnonsense\n+1\n+0\n+-1\n+{kept}",
            kept = kept_group.as_raw_nonzero(),
            released = released_group.as_raw_nonzero()
        );
        assert_eq!(run_watchdog(input.as_bytes()), 1);
        let status = kept.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert!(
            released.try_wait().unwrap().is_none(),
            "released: left alone"
        );
        released.kill().unwrap();
        released.wait().unwrap();
    }

    #[test]
    fn a_call_still_listed_is_killed_and_an_ended_one_or_a_reused_pid_is_not() {
        let (mut listed, listed_group) = sleeper();
        let (mut ended, ended_group) = sleeper();
        let (mut reused, reused_group) = sleeper();
        let id = |pid: Pid| ProcessId::of(pid.as_raw_pid()).unwrap();
        let (listed_id, ended_id, reused_id) =
            (id(listed_group), id(ended_group), id(reused_group));
        let input = format!(
            "c 1 {} {}\nc 2 {} {}\ne 2\nc 3 {} {}\n",
            listed_id.pid,
            listed_id.start,
            ended_id.pid,
            ended_id.start,
            reused_id.pid,
            // The same number, another start: some other process that took the pid.
            reused_id.start + 1
        );
        run_watchdog(input.as_bytes());
        let status = listed.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        for child in [&mut ended, &mut reused] {
            assert!(child.try_wait().unwrap().is_none(), "left alone");
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}
