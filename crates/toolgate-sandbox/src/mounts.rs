//! The mount-namespace tier: the whole system read-only for the child alone, but for its
//! writable paths, and paths inside those made read-only again (a workspace's `.git/hooks`
//! and `.git/config`, which git runs and obeys on the user's next commit). Landlock governs
//! opening files, not changing their metadata, so without this tier a command can still
//! `chmod`, `touch -d` or truncate-by-mode files it does not own the contents of; a read-only
//! mount refuses all of that with `EROFS`. An extra tier where the kernel lets this process
//! make a mount namespace (root, or a kernel and container that allow it), probed once by
//! doing it in a child; never required, and reported either way.
//!
//! In the child, before the capabilities are dropped and before Landlock and seccomp:
//! `unshare(CLONE_NEWNS)`; the whole tree made private (so nothing done here reaches the
//! host); each writable path bound onto itself (recursively), so that it is a mount of its
//! own; every other mount point of the table read in the parent remounted read-only, keeping
//! the flags it has (a remount that dropped `nosuid` or `nodev` would be refused); the
//! read-only paths bound and remounted read-only in turn; and the working directory entered
//! again by its path, so that it is the writable bind rather than the read-only mount it was
//! entered on, checked to be the same directory. The seccomp filter refuses `mount`,
//! `umount2` and `unshare` afterwards, so the child cannot undo any of it. Landlock's rules
//! name inodes, which a bind mount does not change.
//!
//! ```no_run
//! // `Support::mount_namespaces` says whether this machine can.
//! println!("{}", toolgate_sandbox::probe().mount_namespaces.possible());
//! ```

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, StatVfsMountFlags};
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::thread::UnshareFlags;

/// What the child's mount namespace makes read-only, prepared in the parent: C strings and
/// the flags each mount already has.
#[derive(Debug, Default)]
pub(crate) struct ReadOnly {
    /// Bound onto themselves and left writable.
    writable: Vec<CString>,
    /// Every other mount point, remounted read-only.
    mounts: Vec<(CString, MountFlags)>,
    /// Directories inside the writable ones, bound onto themselves and left writable, so that
    /// they cannot be renamed or removed.
    pinned: Vec<CString>,
    /// Paths inside the writable ones, bound and remounted read-only.
    paths: Vec<(CString, MountFlags)>,
    /// Every devpts mount point of the table, each covered by a new, empty devpts instance:
    /// the child reaches no other terminal's `/dev/pts/N`, and `/dev/ptmx` makes its
    /// pseudo-terminals in the instance at `/dev/pts`, which holds only its own.
    devpts: Vec<CString>,
    shown: Vec<PathBuf>,
}

impl ReadOnly {
    /// The system read-only but `writable`, `pinned` (inside those) mount points of their
    /// own, and `read_only` (inside those) read-only again; paths that do not exist are left
    /// out.
    pub(crate) fn prepare(
        writable: &[PathBuf],
        pinned: &[PathBuf],
        read_only: &[PathBuf],
    ) -> io::Result<ReadOnly> {
        let mut out = ReadOnly::default();
        let writable: Vec<PathBuf> = writable
            .iter()
            .map(|p| p.canonicalize())
            .collect::<io::Result<_>>()?;
        for path in &writable {
            out.writable.push(c_path(path)?);
        }
        let table = std::fs::read_to_string("/proc/self/mountinfo")?;
        for line in table.lines() {
            let mut fields = line.split(' ');
            let (Some(point), Some(options)) = (fields.nth(4), fields.next()) else {
                continue;
            };
            let point = PathBuf::from(unescape(point));
            let devpts = line
                .split_once(" - ")
                .is_some_and(|(_, fs)| fs.split(' ').next() == Some("devpts"));
            if devpts {
                let point = c_path(&point)?;
                if !out.devpts.contains(&point) {
                    out.devpts.push(point);
                }
            }
            // Inside a writable path: its bind carries it along, writable.
            if writable.iter().any(|w| point.starts_with(w)) {
                continue;
            }
            out.mounts.push((c_path(&point)?, option_flags(options)));
        }
        for path in pinned {
            // Only a real directory: a link's target is not what the caller named.
            let Ok(meta) = std::fs::symlink_metadata(path) else {
                continue;
            };
            if !meta.is_dir() {
                continue;
            }
            let Ok(real) = path.canonicalize() else {
                continue;
            };
            out.pinned.push(c_path(&real)?);
        }
        for path in read_only {
            // A path that does not exist has nothing to protect (git makes `.git/hooks`
            // with the repository, and a repository made during the call is the call's).
            let Ok(real) = path.canonicalize() else {
                continue;
            };
            let flags = existing_flags(&real)?;
            out.paths.push((c_path(&real)?, flags));
            out.shown.push(real);
        }
        Ok(out)
    }

    /// Whether the child gets a devpts instance of its own at `/dev/pts`, and so
    /// pseudo-terminals it can make and open, while no other terminal's. Landlock ignores
    /// the mount points a path's walk up crosses, so no rule made in the parent reaches into
    /// that instance: the child adds one for its root to the ruleset it enforces (it names
    /// an inode only that child's namespace can reach).
    pub(crate) fn own_terminals(&self) -> bool {
        !self.is_empty() && self.devpts.iter().any(|p| p.as_c_str() == PTS)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.mounts.is_empty() && self.paths.is_empty() && self.pinned.is_empty()
    }

    /// The paths inside the writable ones made read-only, for the report.
    pub(crate) fn shown(&self) -> &[PathBuf] {
        &self.shown
    }

    /// In the child: a mount namespace of its own, read-only as prepared, and a devpts
    /// instance of its own on every devpts mount point. Returns the instance at `/dev/pts`,
    /// opened `O_PATH`, for the Landlock rule that grants it (see [`own_terminals`]). System
    /// calls only, on data prepared in the parent (the working directory's path is read into
    /// the stack).
    ///
    /// [`own_terminals`]: ReadOnly::own_terminals
    pub(crate) fn apply_in_child(&self) -> io::Result<Option<OwnedFd>> {
        if self.is_empty() {
            return Ok(None);
        }
        enter_private_mount_namespace()?;
        for path in &self.writable {
            rustix::mount::mount_bind_recursive(path.as_c_str(), path.as_c_str())?;
        }
        for (point, flags) in &self.mounts {
            match read_only(point, *flags) {
                // A mount that went away since the table was read has nothing to protect.
                Err(rustix::io::Errno::NOENT) | Ok(()) => {}
                Err(e) => return Err(e.into()),
            }
        }
        for path in &self.pinned {
            rustix::mount::mount_bind(path.as_c_str(), path.as_c_str())?;
        }
        for (path, flags) in &self.paths {
            rustix::mount::mount_bind(path.as_c_str(), path.as_c_str())?;
            read_only(path, *flags)?;
        }
        for point in &self.devpts {
            match new_devpts(point) {
                // A mount that went away since the table was read covers no terminal.
                Err(rustix::io::Errno::NOENT) | Ok(()) => {}
                Err(e) => return Err(e.into()),
            }
        }
        enter_cwd_again()?;
        if !self.own_terminals() {
            return Ok(None);
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(Some(rustix::fs::open(PTS, flags, Mode::empty())?))
    }
}

/// Where `/dev/ptmx` makes its pseudo-terminals: the devpts mounted at `pts` beside it.
const PTS: &CStr = c"/dev/pts";

/// A devpts instance of the child's own on `point`, over whatever is mounted there, so that
/// the host's is no longer reached by that path. `ptmxmode` makes its `ptmx` usable where
/// `/dev/ptmx` is a link to `pts/ptmx`, as in many containers.
fn new_devpts(point: &CStr) -> rustix::io::Result<()> {
    rustix::mount::mount(
        c"devpts",
        point,
        c"devpts",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        c"newinstance,ptmxmode=0666,mode=0620",
    )
}

fn read_only(point: &CStr, flags: MountFlags) -> rustix::io::Result<()> {
    rustix::mount::mount_remount(point, MountFlags::BIND | MountFlags::RDONLY | flags, c"")
}

/// The working directory was entered before the namespace existed, on the mount that is now
/// read-only; entering it again by its path lands on the writable bind. It must be the same
/// directory (device and inode), or the child fails.
fn enter_cwd_again() -> io::Result<()> {
    let before = rustix::fs::stat(c".")?;
    let mut buf = [0u8; 4096];
    let len = rustix::fs::readlinkat_raw(rustix::fs::CWD, c"/proc/self/cwd", &mut buf[..4095])?;
    let with_nul = buf
        .get(..=len)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENAMETOOLONG))?;
    let path = CStr::from_bytes_with_nul(with_nul)
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    rustix::process::chdir(path)?;
    let after = rustix::fs::stat(c".")?;
    if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino) {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    Ok(())
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// A mount point as `/proc/self/mountinfo` writes it: space, tab, newline and backslash as
/// three octal digits after a backslash.
fn unescape(field: &str) -> std::ffi::OsString {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| b == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .map(|d| d.iter().fold(0u32, |n, c| n * 8 + u32::from(c - b'0')));
        match octal.and_then(|n| u8::try_from(n).ok()) {
            Some(decoded) => {
                out.push(decoded);
                i += 4;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    std::ffi::OsString::from(std::ffi::OsStr::from_bytes(&out))
}

/// The per-mount flags a read-only remount must keep, from mountinfo's options field.
fn option_flags(options: &str) -> MountFlags {
    options
        .split(',')
        .filter_map(|option| match option {
            "nosuid" => Some(MountFlags::NOSUID),
            "nodev" => Some(MountFlags::NODEV),
            "noexec" => Some(MountFlags::NOEXEC),
            "noatime" => Some(MountFlags::NOATIME),
            "nodiratime" => Some(MountFlags::NODIRATIME),
            "relatime" => Some(MountFlags::RELATIME),
            _ => None,
        })
        .fold(MountFlags::empty(), |all, f| all | f)
}

/// The flags of the mount `path` is on that a read-only remount must keep.
fn existing_flags(path: &Path) -> io::Result<MountFlags> {
    let stat = rustix::fs::statvfs(path)?;
    let mut flags = MountFlags::empty();
    for (have, keep) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
        (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
    ] {
        if stat.f_flag.contains(have) {
            flags |= keep;
        }
    }
    Ok(flags)
}

#[expect(
    unsafe_code,
    reason = "rustix marks unshare unsafe for CLONE_FILES, which is not used here"
)]
fn enter_private_mount_namespace() -> io::Result<()> {
    // SAFETY: `unshare_unsafe` is unsafe only because `CLONE_FILES` can leave a thread with
    // another descriptor table than its siblings'; only `CLONE_NEWNS` is passed, which
    // changes no descriptor, and the child between fork and exec has one thread anyway.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS)? };
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )?;
    Ok(())
}

/// Whether this process can give a child the whole tier: tried in a child, working in a
/// writable directory of its own, which must be writable (by a path relative to its working
/// directory) while a directory beside it is not.
pub(crate) fn possible() -> bool {
    let Ok(base) = tempfile::Builder::new()
        .prefix("toolgate-mount-probe-")
        .tempdir()
    else {
        return false;
    };
    let (inside, beside) = (base.path().join("w"), base.path().join("o"));
    let result = (|| {
        std::fs::create_dir(&inside)?;
        std::fs::create_dir(&beside)?;
        let ro = ReadOnly::prepare(std::slice::from_ref(&inside), &[], &[])?;
        let mut command = std::process::Command::new("/bin/sh");
        command
            // Each write in a subshell: a failed redirection of a special builtin would end
            // the shell itself.
            .args([
                "-c",
                "(true > ok) || exit 1; if (true > \"$0/x\") 2>/dev/null; then exit 1; fi",
            ])
            .arg(&beside)
            .current_dir(&inside)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        crate::install(&mut command, move || ro.apply_in_child().map(drop));
        command.status()
    })();
    drop(base);
    result.is_ok_and(|status| status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_unescaped_and_flags_kept() {
        assert_eq!(
            unescape(r"/mnt/a\040b\134c"),
            std::ffi::OsString::from("/mnt/a b\\c")
        );
        assert_eq!(unescape(r"/plain\0"), std::ffi::OsString::from(r"/plain\0"));
        assert_eq!(
            option_flags("ro,nosuid,nodev,relatime"),
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::RELATIME
        );
    }
}
