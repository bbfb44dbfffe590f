//! The watchdog: a small process that outlives the gateway to kill its upstreams.
//!
//! Every upstream runs in a process group of its own, which the gateway kills when it restarts
//! the upstream or shuts down. A gateway killed outright (SIGKILL, a crash, the out-of-memory
//! killer) cannot, and its upstreams — their own children included — would live on. So the
//! gateway starts a watchdog ([`Watchdog::start`]; in toolgate, the binary itself run as
//! `toolgate upstream-watchdog`) in yet another process group, out of reach of a terminal's
//! Ctrl-C, and tells it on a pipe the group of every upstream it starts (`+PGID`) and every
//! group it has killed (`-PGID`). When the pipe closes, however the gateway ended, the watchdog
//! ([`run_watchdog`]) kills every group still listed and exits.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, PoisonError};

use rustix::process::{Pid, Signal, kill_process_group};

/// The gateway's end of a running watchdog.
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
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn()?;
        let input = child.stdin.take();
        Ok(Watchdog {
            input: Mutex::new(input),
            child: Mutex::new(child),
        })
    }

    /// Asks the watchdog to kill `group` if the gateway ends without doing so.
    pub(crate) fn watch(&self, group: Pid) {
        self.tell(&format!("+{}\n", group.as_raw_nonzero()));
    }

    /// Tells the watchdog that `group` was killed, so that a later group given the same
    /// number is left alone.
    pub(crate) fn release(&self, group: Pid) {
        self.tell(&format!("-{}\n", group.as_raw_nonzero()));
    }

    fn tell(&self, line: &str) {
        let mut input = self.input.lock().unwrap_or_else(PoisonError::into_inner);
        let failed = input
            .as_mut()
            .is_some_and(|pipe| pipe.write_all(line.as_bytes()).is_err());
        if failed {
            // The watchdog is gone; the gateway still kills its upstreams itself.
            eprintln!(
                "toolgate: the upstream watchdog has stopped; upstreams outlive a gateway that is killed"
            );
            *input = None;
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

/// The watchdog's side: reads `+PGID` and `-PGID` lines until its input ends, then kills every
/// group still listed. Returns how many it signalled. A line it cannot read is ignored: the
/// gateway writes every line whole.
pub fn run_watchdog(input: impl BufRead) -> usize {
    let mut groups = BTreeSet::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        let (add, number) = match line.split_at_checked(1) {
            Some(("+", number)) => (true, number),
            Some(("-", number)) => (false, number),
            _ => continue,
        };
        // Group 1 and below are never an upstream's (and 0 or -1 would mean "everything").
        let Some(group) = number.parse::<i32>().ok().filter(|n| *n > 1) else {
            continue;
        };
        if add {
            groups.insert(group);
        } else {
            groups.remove(&group);
        }
    }
    groups
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
}
