//! A cgroup of its own for each call, where toolgate's own cgroup v2 is delegated to it.
//!
//! The subreaper path ([`crate::household`], [`crate::tree`]) is the guarantee that nothing a
//! command starts outlives its call, and it must hold alone: most hosts give toolgate no
//! cgroup to manage. Where one is given — a systemd unit with `Delegate=yes`, which puts
//! toolgate in a cgroup of its own, hands the directory to it and marks it delegated — each
//! call also gets a child cgroup, `OWN/toolgate-call-<toolgate pid>-<n>`, that the command's
//! leader is moved into right after it is spawned, and that is ended with `cgroup.kill` (one
//! write, the kernel kills every process in it, however quickly it forks) and removed when the
//! call ends.
//!
//! It is a second net, not the first. The leader enters the cgroup only once it has been
//! spawned: it is already running its program by then (this crate has no unsafe code, so no
//! `pre_exec` or `clone3` into the cgroup), and a process it forked before the move stays in
//! toolgate's own cgroup; a process running as toolgate's user may also move itself back out.
//! The tree followed in `/proc` covers both.
//!
//! toolgate writes to no cgroup but its own directory and the children it creates there.
//! [`cgroup_tier`] probes once whether that directory is delegated: toolgate's cgroup (the
//! `0::PATH` line of `/proc/self/cgroup`) is not the root, which is the system's; it is
//! reachable through a `cgroup2` mount of `/proc/self/mountinfo`; systemd marked it delegated
//! (the `trusted.delegate` or `user.delegate` attribute is `1`) or, for a toolgate that is not
//! root, handed it over by ownership (what systemd before version 251 did); toolgate may write
//! there; `cgroup.kill` exists (Linux 5.14 or later); and `cgroup.subtree_control` is empty (a
//! cgroup that holds processes cannot hand controllers down, and `cgroup.kill` needs none).
//! Anything else: no cgroups, the subreaper alone.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::fs::Access;

/// How long a killed call cgroup may take to empty, and then to be removed.
const EMPTY_BOUND: Duration = Duration::from_secs(1);

/// How deep the cgroups a command made inside its own are removed.
const NESTED_DEPTH: usize = 16;

/// The prefix of every call cgroup, so that the watchdog touches nothing else.
pub(crate) const CALL_PREFIX: &str = "toolgate-call-";

/// What ends a command's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// The tree followed in `/proc` as toolgate's subreaper, stopped and killed.
    Subreaper,
    /// The same, and a call cgroup ended with `cgroup.kill`.
    SubreaperAndCgroup,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Subreaper => "subreaper",
            Tier::SubreaperAndCgroup => "subreaper and cgroup",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the probe found, once per process.
#[derive(Debug, Clone)]
pub struct CgroupProbe {
    /// The tier every call gets (a call whose cgroup cannot be made falls back, and says so).
    pub tier: Tier,
    /// toolgate's own cgroup directory, when it is delegated.
    pub directory: Option<PathBuf>,
    /// Why, in words.
    pub reason: String,
}

/// The tier this process ends command trees with, probed on first use (see the module
/// documentation), so that a host can say which one it has.
pub fn cgroup_tier() -> &'static CgroupProbe {
    static PROBE: OnceLock<CgroupProbe> = OnceLock::new();
    PROBE.get_or_init(probe)
}

fn probe() -> CgroupProbe {
    let found = (|| {
        let cgroup = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read `/proc/self/cgroup`: {e}"))?;
        let own = own_cgroup(&cgroup)
            .ok_or("`/proc/self/cgroup` names no cgroup v2 path toolgate can use")?;
        if own == "/" {
            return Err("toolgate's cgroup is the root cgroup, which is the system's".to_owned());
        }
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read `/proc/self/mountinfo`: {e}"))?;
        let directory = directory(own, &cgroup2_mounts(&mountinfo))
            .ok_or_else(|| format!("no cgroup2 mount shows toolgate's cgroup `{own}`"))?;
        delegated(&directory)?;
        Ok(directory)
    })();
    match found {
        Ok(directory) => CgroupProbe {
            tier: Tier::SubreaperAndCgroup,
            reason: format!(
                "toolgate's cgroup `{}` is delegated to it: each call gets a child cgroup",
                directory.display()
            ),
            directory: Some(directory),
        },
        Err(reason) => CgroupProbe {
            tier: Tier::Subreaper,
            directory: None,
            reason,
        },
    }
}

/// The path of the cgroup v2 line (`0::PATH`) of a `/proc/<pid>/cgroup` text, if it is one
/// this module can join to a mount point: absolute, with no `.` or `..` (a cgroup outside the
/// reader's cgroup namespace shows as `/..`), not a removed cgroup.
pub(crate) fn own_cgroup(text: &str) -> Option<&str> {
    let path = text.lines().find_map(|line| line.strip_prefix("0::"))?;
    // Segment by segment: `Path::components` would drop a `.` silently.
    let clean = path == "/"
        || (path.starts_with('/')
            && !path.ends_with(" (deleted)")
            && path
                .split('/')
                .skip(1)
                .all(|segment| !matches!(segment, "" | "." | "..")));
    clean.then_some(path)
}

/// A `cgroup2` mount: the cgroup it shows at its mount point, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    pub(crate) root: String,
    pub(crate) point: PathBuf,
}

/// The `cgroup2` mounts of a `/proc/<pid>/mountinfo` text, in its order. Each line is
/// `ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER`, with spaces,
/// tabs, newlines and backslashes in paths written as octal escapes.
pub(crate) fn cgroup2_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            if after.split(' ').next()? != "cgroup2" {
                return None;
            }
            let mut fields = before.split(' ').skip(3);
            let root = unescape(fields.next()?)?;
            let point = unescape(fields.next()?)?;
            (root.starts_with('/') && point.starts_with('/')).then(|| Mount {
                root,
                point: PathBuf::from(point),
            })
        })
        .collect()
}

/// Undoes mountinfo's `\ooo` escapes; `None` for a malformed one.
fn unescape(field: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(field.len());
    let mut rest = field.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'\\' {
            let digits = tail.get(..3)?;
            let text = std::str::from_utf8(digits).ok()?;
            bytes.push(u8::from_str_radix(text, 8).ok()?);
            rest = tail.get(3..)?;
        } else {
            bytes.push(first);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// Where cgroup `own` is in the file system: below the first mount that shows it or one of
/// its ancestors.
pub(crate) fn directory(own: &str, mounts: &[Mount]) -> Option<PathBuf> {
    let own = Path::new(own);
    mounts.iter().find_map(|mount| {
        let rest = own.strip_prefix(&mount.root).ok()?;
        // Joining an empty path would add a trailing slash.
        Some(if rest.as_os_str().is_empty() {
            mount.point.clone()
        } else {
            mount.point.join(rest)
        })
    })
}

/// Whether `directory`, toolgate's own cgroup, is delegated to it; why not otherwise.
fn delegated(directory: &Path) -> Result<(), String> {
    let shown = directory.display();
    let meta = fs::metadata(directory).map_err(|e| format!("cannot look at `{shown}`: {e}"))?;
    let marked = ["trusted.delegate", "user.delegate"].iter().any(|name| {
        let mut value = [0u8; 8];
        rustix::fs::getxattr(directory, *name, &mut value[..])
            .is_ok_and(|n| value.get(..n) == Some(b"1".as_slice()))
    });
    let euid = rustix::process::geteuid();
    let handed_over = !euid.is_root() && meta.uid() == euid.as_raw();
    if !(marked || handed_over) {
        return Err(format!(
            "toolgate's cgroup `{shown}` is not delegated to it (no `Delegate=yes`)"
        ));
    }
    rustix::fs::access(directory, Access::WRITE_OK | Access::EXEC_OK)
        .and_then(|()| rustix::fs::access(directory.join("cgroup.procs"), Access::WRITE_OK))
        .map_err(|e| format!("toolgate may not write to its cgroup `{shown}`: {e}"))?;
    if !directory.join("cgroup.kill").exists() {
        return Err(format!(
            "`{shown}` has no `cgroup.kill` (Linux 5.14 or later has it)"
        ));
    }
    let control = fs::read_to_string(directory.join("cgroup.subtree_control"))
        .map_err(|e| format!("cannot read `{shown}/cgroup.subtree_control`: {e}"))?;
    if !control.trim().is_empty() {
        return Err(format!(
            "`{shown}` hands controllers down (`{}`), so it holds no processes of its own",
            control.trim()
        ));
    }
    Ok(())
}

/// One call's cgroup, ended and removed when dropped.
#[derive(Debug)]
pub(crate) struct CallCgroup {
    directory: PathBuf,
    removed: bool,
}

impl CallCgroup {
    /// A new, empty call cgroup under toolgate's own; `Ok(None)` where there is no cgroup
    /// tier, `Err` (in words) where there is one and the cgroup could not be made.
    pub(crate) fn create() -> Result<Option<CallCgroup>, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let Some(own) = &cgroup_tier().directory else {
            return Ok(None);
        };
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let directory = own.join(format!("{CALL_PREFIX}{}-{n}", crate::household::me()));
        match fs::create_dir(&directory) {
            Ok(()) => Ok(Some(CallCgroup {
                directory,
                removed: false,
            })),
            Err(e) => Err(format!("cannot create `{}`: {e}", directory.display())),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.directory
    }

    /// Writes the limits asked for; returns, in words, each that could not be set (the
    /// controller not enabled for toolgate's cgroup, most often).
    pub(crate) fn limit(&self, limits: crate::CgroupLimits) -> Vec<String> {
        [
            ("pids.max", limits.pids_max),
            ("memory.max", limits.memory_max),
        ]
        .into_iter()
        .filter_map(|(file, value)| {
            let value = value?;
            let path = self.directory.join(file);
            write_existing(&path, &value.to_string()).err().map(|e| {
                format!(
                    "`{file}` of the call's cgroup was not set to {value} ({e}): the rlimits \
                         alone applied"
                )
            })
        })
        .collect()
    }

    /// Moves process `pid` (the leader, not reaped yet, so the number is still its) in.
    pub(crate) fn enter(&self, pid: u32) -> io::Result<()> {
        write_existing(&self.directory.join("cgroup.procs"), &pid.to_string())
    }

    /// Kills everything in the cgroup, waits (bounded) until it is empty and removes it, with
    /// whatever cgroups the command made inside it. Says whether `cgroup.kill` was written,
    /// and what was left.
    pub(crate) fn end(&mut self) -> (bool, Result<(), String>) {
        if self.removed {
            return (true, Ok(()));
        }
        // Tried once: a cgroup that would not go is named, not retried at every drop.
        self.removed = true;
        match kill(&self.directory) {
            Ok(()) => (true, remove(&self.directory)),
            Err(reason) => (false, Err(reason)),
        }
    }
}

impl Drop for CallCgroup {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// Writes `text` to a file that must exist (cgroup files are never created).
fn write_existing(path: &Path, text: &str) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// Ends the cgroup at `directory` (see [`CallCgroup::end`]); also the watchdog's way.
pub(crate) fn kill_and_remove(directory: &Path) -> Result<(), String> {
    kill(directory)?;
    remove(directory)
}

/// Writes `1` to the cgroup's `cgroup.kill`: the kernel kills every process in it and below.
fn kill(directory: &Path) -> Result<(), String> {
    write_existing(&directory.join("cgroup.kill"), "1")
        .map_err(|e| format!("cannot write `{}/cgroup.kill`: {e}", directory.display()))
}

/// Waits (bounded) until the killed cgroup is empty, then removes it.
fn remove(directory: &Path) -> Result<(), String> {
    let shown = directory.display();
    let until = Instant::now() + EMPTY_BOUND;
    if !emptied(directory, until) {
        return Err(format!(
            "`{shown}` still held processes {} ms after `cgroup.kill`",
            EMPTY_BOUND.as_millis()
        ));
    }
    loop {
        match remove_tree(directory, NESTED_DEPTH) {
            Ok(()) => return Ok(()),
            // Emptied, but the kernel may still be releasing the last of it.
            Err(e)
                if Instant::now() < until
                    && e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()) =>
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(format!("cannot remove `{shown}`: {e}")),
        }
    }
}

/// Whether the cgroup at `directory` is empty by `until`, woken by the kernel's notice on its
/// `cgroup.events` (which `populated` changing sends, to `poll` as `POLLPRI`) rather than by
/// looking on a timer. The notice is counted per open file and taken by each read, so one that
/// comes between the read and the wait ends the wait at once.
fn emptied(directory: &Path, until: Instant) -> bool {
    use std::io::{Read as _, Seek as _};
    let Ok(mut events) = fs::File::open(directory.join("cgroup.events")) else {
        return is_empty(directory);
    };
    let mut text = String::new();
    loop {
        text.clear();
        let read = events
            .rewind()
            .and_then(|()| events.read_to_string(&mut text));
        if read.is_err() {
            return is_empty(directory);
        }
        if text.lines().any(|line| line.trim() == "populated 0") {
            return true;
        }
        let Some(left) = until.checked_duration_since(Instant::now()) else {
            return false;
        };
        let timeout = rustix::event::Timespec::try_from(left).unwrap_or(rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        });
        let mut fds = [rustix::event::PollFd::new(
            &events,
            rustix::event::PollFlags::PRI | rustix::event::PollFlags::ERR,
        )];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return is_empty(directory),
        }
    }
}

/// Whether no live process is left in the cgroup or below it (zombies do not count).
fn is_empty(directory: &Path) -> bool {
    match fs::read_to_string(directory.join("cgroup.events")) {
        Ok(events) => events.lines().any(|line| line.trim() == "populated 0"),
        Err(_) => fs::read_to_string(directory.join("cgroup.procs"))
            .is_ok_and(|procs| procs.trim().is_empty()),
    }
}

/// Removes the empty cgroup at `directory` and the cgroups below it, deepest first.
fn remove_tree(directory: &Path, depth: usize) -> io::Result<()> {
    if depth > 0 {
        for entry in fs::read_dir(directory)? {
            let entry = entry?;
            // In a cgroup directory, the directories are cgroups and the rest their files.
            if entry.file_type()?.is_dir() {
                remove_tree(&entry.path(), depth - 1)?;
            }
        }
    }
    fs::remove_dir(directory)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup_v2_line_is_read_and_odd_paths_are_refused() {
        for (text, expected) in [
            ("0::/\n", Some("/")),
            (
                "12:pids:/a\n1:name=systemd:/user.slice\n0::/user.slice/toolgate.service\n",
                Some("/user.slice/toolgate.service"),
            ),
            ("0::/with space/x\n", Some("/with space/x")),
            ("4:memory:/x\n", None),
            ("", None),
            ("0::\n", None),
            ("0::relative\n", None),
            ("0::/../outside\n", None),
            ("0::/a/./b\n", None),
            ("0::/a//b\n", None),
            ("0::/a/\n", None),
            ("0::/gone (deleted)\n", None),
            ("10:0::/x\n", None),
        ] {
            assert_eq!(own_cgroup(text), expected, "{text:?}");
        }
    }

    #[test]
    fn cgroup2_mounts_are_found_in_mountinfo() {
        let mount = |root: &str, point: &str| Mount {
            root: root.to_owned(),
            point: PathBuf::from(point),
        };
        for (text, expected) in [
            // A hybrid layout: v1 hierarchies, and cgroup2 beside them.
            (
                "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                 32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                 41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
                vec![mount("/", "/sys/fs/cgroup/unified")],
            ),
            // The unified layout, with optional fields before the separator.
            (
                "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n",
                vec![mount("/", "/sys/fs/cgroup")],
            ),
            // A container's view of part of the hierarchy, at a path with a space.
            (
                "50 40 0:30 /machine.slice/c1 /mnt/my\\040cg rw - cgroup2 none rw\n",
                vec![mount("/machine.slice/c1", "/mnt/my cg")],
            ),
            ("41 31 0:38 / /x rw - cgroup cgroup rw\n", vec![]),
            ("41 31 0:38 / /bad\\04 rw - cgroup2 cgroup2 rw\n", vec![]),
            ("garbage\n", vec![]),
            ("", vec![]),
        ] {
            assert_eq!(cgroup2_mounts(text), expected, "{text:?}");
        }
    }

    #[test]
    fn the_own_cgroup_is_found_below_the_mount_that_shows_it() {
        let mounts = [
            Mount {
                root: "/machine.slice/c1".to_owned(),
                point: PathBuf::from("/inner"),
            },
            Mount {
                root: "/".to_owned(),
                point: PathBuf::from("/sys/fs/cgroup/unified"),
            },
        ];
        for (own, expected) in [
            ("/machine.slice/c1/app", "/inner/app"),
            ("/machine.slice/c1", "/inner"),
            // `c10` is not below `c1`.
            (
                "/machine.slice/c10",
                "/sys/fs/cgroup/unified/machine.slice/c10",
            ),
            (
                "/system.slice/toolgate.service",
                "/sys/fs/cgroup/unified/system.slice/toolgate.service",
            ),
        ] {
            assert_eq!(
                directory(own, &mounts),
                Some(PathBuf::from(expected)),
                "{own}"
            );
        }
        assert_eq!(directory("/a", &mounts[..1]), None);
        assert_eq!(directory("/a", &[]), None);
    }

    #[test]
    fn tiers_read_as_words() {
        assert_eq!(Tier::Subreaper.to_string(), "subreaper");
        assert_eq!(Tier::SubreaperAndCgroup.to_string(), "subreaper and cgroup");
    }
}
