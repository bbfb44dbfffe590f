//! The process table as `/proc` shows it: one line of `/proc/<pid>/stat` per process.
//!
//! A pid alone does not name a process: once a process is reaped its number can be given to a
//! new one. So every process toolgate remembers is a [`ProcessId`], the pid and the start time
//! of `/proc/<pid>/stat` (field 22, clock ticks since boot), and nothing is signalled or reaped
//! before the pair has been checked through a pidfd, which names one process for good.

use std::io;
use std::os::fd::OwnedFd;

use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

/// One process, named so that a reused pid is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcessId {
    pub pid: i32,
    /// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks since boot.
    pub start: u64,
}

impl ProcessId {
    /// The process now holding `pid`, if any.
    pub fn of(pid: i32) -> Option<ProcessId> {
        read(pid).map(|stat| stat.id())
    }

    /// Opens a pidfd for this very process: `None` if it is gone, or if its pid now belongs
    /// to another one. The start time is read after the pidfd is open, so the pidfd cannot
    /// name a process that took the number after the check.
    pub(crate) fn open(self) -> Option<OwnedFd> {
        if self.pid <= 1 {
            return None;
        }
        let fd = pidfd_open(Pid::from_raw(self.pid)?, PidfdFlags::empty()).ok()?;
        (read(self.pid)?.start == self.start).then_some(fd)
    }

    /// Sends `signal` to this process if it is still the one that was seen. Whether it was sent.
    pub fn signal(self, signal: Signal) -> bool {
        self.open()
            .is_some_and(|fd| pidfd_send_signal(&fd, signal).is_ok())
    }
}

/// What toolgate reads of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) pid: i32,
    pub(crate) comm: String,
    pub(crate) state: char,
    pub(crate) ppid: i32,
    pub(crate) pgid: i32,
    pub(crate) sid: i32,
    pub(crate) start: u64,
}

impl Stat {
    pub(crate) fn id(&self) -> ProcessId {
        ProcessId {
            pid: self.pid,
            start: self.start,
        }
    }

    /// Still able to act: not a zombie, not dead.
    pub(crate) fn is_live(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// The process holding `pid` now.
pub(crate) fn read(pid: i32) -> Option<Stat> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse(&line)
}

/// Every process `/proc` lists. A process that exits while the table is read is simply
/// missing from it. An error means `/proc` itself cannot be read.
pub(crate) fn snapshot() -> io::Result<Vec<Stat>> {
    let mut table = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(stat) = read(pid) {
            table.push(stat);
        }
    }
    Ok(table)
}

/// `root` and every process descending from it, found through the `children` files of
/// `/proc/<pid>/task/<tid>/`: a walk as long as the tree, not as long as the process table,
/// so a process that lives a few milliseconds is still seen. With a subreaper for `root`,
/// that is every process it started, wherever they went. Falls back to the whole table where
/// the kernel has no `children` files.
pub(crate) fn family(root: i32) -> io::Result<Vec<Stat>> {
    let Some(first) = children(root) else {
        return snapshot();
    };
    let mut table: Vec<Stat> = read(root).into_iter().collect();
    let mut seen = std::collections::BTreeSet::from([root]);
    let mut queue: std::collections::VecDeque<i32> = first.into();
    while let Some(pid) = queue.pop_front() {
        if !seen.insert(pid) {
            continue;
        }
        let Some(stat) = read(pid) else { continue };
        table.push(stat);
        queue.extend(children(pid).unwrap_or_default());
    }
    Ok(table)
}

/// The children of every thread of `pid`; `None` if the kernel does not list them.
fn children(pid: i32) -> Option<Vec<i32>> {
    let mut found = Vec::new();
    let mut any = false;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(task) = task else { continue };
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(text) => {
                any = true;
                found.extend(
                    text.split_ascii_whitespace()
                        .filter_map(|n| n.parse::<i32>().ok()),
                );
            }
            // The thread ended meanwhile.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(_) => return None,
        }
    }
    // A process has at least one thread; no readable `children` file at all means none exist.
    any.then_some(found)
}

/// A `/proc/<pid>/stat` line. The command name is in parentheses and may itself hold spaces
/// and parentheses, so fields are counted from the last `)`.
pub(crate) fn parse(line: &str) -> Option<Stat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let pid = line.get(..open)?.trim().parse().ok()?;
    let comm = line.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = line.get(close + 1..)?.split_ascii_whitespace().collect();
    // Fields 3 (state) to 22 (starttime) of proc(5), counted from 0 after the name.
    let number = |index: usize| fields.get(index)?.parse::<i64>().ok();
    Some(Stat {
        pid,
        comm,
        state: fields.first()?.chars().next()?,
        ppid: i32::try_from(number(1)?).ok()?,
        pgid: i32::try_from(number(2)?).ok()?,
        sid: i32::try_from(number(3)?).ok()?,
        start: u64::try_from(number(19)?).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_past_odd_command_names() {
        let line = "123 (a) b) (c) Z 1 99 98 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0";
        let stat = parse(line).unwrap();
        assert_eq!(stat.pid, 123);
        assert_eq!(stat.comm, "a) b) (c");
        assert_eq!(stat.state, 'Z');
        assert_eq!(
            (stat.ppid, stat.pgid, stat.sid, stat.start),
            (1, 99, 98, 4242)
        );
        assert!(!stat.is_live());
        assert_eq!(parse("garbage"), None);
        assert_eq!(parse("12 (x) S 1 2"), None);
    }

    #[test]
    fn the_family_of_this_process_holds_its_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = rustix::process::getpid().as_raw_pid();
        let family = family(me).unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        assert!(
            family.iter().any(|s| s.pid == pid && s.ppid == me),
            "{family:?}"
        );
        assert!(family.iter().any(|s| s.pid == me));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn this_process_is_in_the_table_under_its_own_start_time() {
        let me = rustix::process::getpid().as_raw_pid();
        let table = snapshot().unwrap();
        let mine = table.iter().find(|s| s.pid == me).unwrap();
        assert!(mine.is_live());
        assert_eq!(ProcessId::of(me), Some(mine.id()));
        let stale = ProcessId {
            pid: me,
            start: mine.start + 1,
        };
        assert!(
            stale.open().is_none(),
            "a different start time is another process"
        );
        assert!(mine.id().open().is_some());
    }
}
