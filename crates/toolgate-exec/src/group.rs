//! A command's process group: signalling it, and knowing when it is empty.
//!
//! Every process a command starts stays in its group unless it leaves on purpose (`setsid`,
//! `setpgid`), so the group is the command's tree. A group is empty when no process in it is
//! still running; zombies do not count, since an orphan's zombie waits for whoever adopted it
//! (init, or a subreaper that may never reap) and can do nothing more.

use std::io;

use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};

/// A process group, named by its leader's pid.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    pgid: Pid,
}

impl Group {
    pub(crate) fn new(leader: u32) -> Option<Group> {
        let raw = i32::try_from(leader).ok()?;
        // Pid 1 would mean "every process we may signal" to kill(2) once negated; never that.
        if raw <= 1 {
            return None;
        }
        Pid::from_raw(raw).map(|pgid| Group { pgid })
    }

    /// Sends `signal` to every process in the group; an empty group is not an error.
    pub(crate) fn signal(self, signal: Signal) {
        // ESRCH: nothing left to signal. EPERM: a member changed identity (setuid); nothing
        // more can be done from here, and `is_running` keeps reporting it.
        let _ = kill_process_group(self.pgid, signal);
    }

    /// Whether any process of the group is still running (not a zombie). When `/proc` cannot
    /// be read, any member at all counts.
    pub(crate) fn is_running(self) -> bool {
        match test_kill_process_group(self.pgid) {
            Err(rustix::io::Errno::SRCH) => false,
            Err(_) | Ok(()) => running_members(self.pgid.as_raw_pid()).is_none_or(|n| n > 0),
        }
    }
}

/// How many processes in group `pgid` are not zombies, from `/proc/*/stat`.
fn running_members(pgid: i32) -> Option<usize> {
    let mut count = 0;
    for entry in std::fs::read_dir("/proc").ok()? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        // A process that exits while we look is simply not counted.
        let Ok(stat) = read_stat(pid) else { continue };
        if let Some((state, group)) = state_and_group(&stat)
            && group == pgid
            && !matches!(state, 'Z' | 'X' | 'x')
        {
            count += 1;
        }
    }
    Some(count)
}

fn read_stat(pid: &str) -> io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
}

/// The state letter and process group of a `/proc/<pid>/stat` line. The command name is in
/// parentheses and may itself hold spaces and parentheses, so fields are counted from the
/// last `)`.
fn state_and_group(stat: &str) -> Option<(char, i32)> {
    let after = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = after.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_past_odd_command_names() {
        assert_eq!(
            state_and_group("123 (sleep) S 1 123 123 0 -1 4194560"),
            Some(('S', 123))
        );
        assert_eq!(state_and_group("7 (a) b) (c) Z 1 99 99 0"), Some(('Z', 99)));
        assert_eq!(state_and_group("garbage"), None);
    }

    #[test]
    fn the_init_group_is_never_a_group() {
        assert!(Group::new(0).is_none());
        assert!(Group::new(1).is_none());
        assert!(Group::new(u32::MAX).is_none());
        assert!(Group::new(2).is_some());
    }

    #[test]
    fn this_process_group_is_running() {
        let own = rustix::process::getpgrp();
        assert!(running_members(own.as_raw_pid()).unwrap() >= 1);
    }
}
