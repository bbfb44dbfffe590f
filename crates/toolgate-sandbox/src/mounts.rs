//! The mount-namespace tier: paths inside a writable one made read-only for the child alone
//! (a workspace's `.git/hooks` and `.git/config`, which git runs and obeys on the user's next
//! commit). An extra tier where the kernel lets this process make a mount namespace (root, or
//! a kernel and container that allow it), probed once; never required, and reported either
//! way.
//!
//! In the child, before Landlock and seccomp: `unshare(CLONE_NEWNS)`, the whole tree made
//! private (so nothing done here reaches the host), then each path bound onto itself and
//! remounted read-only with the flags its mount already has (a remount that dropped `nosuid`
//! or `nodev` would be refused). The seccomp filter refuses `mount`, `umount2` and `unshare`
//! afterwards, so the child cannot undo it. Landlock's rules name inodes, which a bind mount
//! does not change.
//!
//! ```no_run
//! // `Support::mount_namespaces` says whether this machine can; `SandboxSpec::read_only`
//! // names the paths.
//! println!("{}", toolgate_sandbox::probe().mount_namespaces);
//! ```

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::StatVfsMountFlags;
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::thread::UnshareFlags;

/// The paths to bind read-only, prepared in the parent: C strings and the flags each path's
/// mount already has.
#[derive(Debug, Default)]
pub(crate) struct ReadOnly {
    paths: Vec<(CString, MountFlags)>,
    shown: Vec<PathBuf>,
}

impl ReadOnly {
    /// `paths` that exist, ready for the child; empty when there is nothing to do.
    pub(crate) fn prepare(paths: &[PathBuf]) -> io::Result<ReadOnly> {
        let mut out = ReadOnly::default();
        for path in paths {
            let Ok(real) = path.canonicalize() else {
                // A path that does not exist has nothing to protect; git makes `.git/hooks`
                // only with the repository, which the command could then make writable
                // anyway by writing the workspace.
                continue;
            };
            let flags = existing_flags(&real)?;
            let text = CString::new(real.as_os_str().as_bytes())
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            out.paths.push((text, flags));
            out.shown.push(real);
        }
        Ok(out)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// The paths made read-only, for the report.
    pub(crate) fn shown(&self) -> &[PathBuf] {
        &self.shown
    }

    /// In the child: a mount namespace of its own with each path read-only. System calls
    /// only, on data prepared in the parent.
    pub(crate) fn apply_in_child(&self) -> io::Result<()> {
        if self.paths.is_empty() {
            return Ok(());
        }
        enter_private_mount_namespace()?;
        for (path, flags) in &self.paths {
            rustix::mount::mount_bind(path.as_c_str(), path.as_c_str())?;
            rustix::mount::mount_remount(
                path.as_c_str(),
                MountFlags::BIND | MountFlags::RDONLY | *flags,
                c"",
            )?;
        }
        Ok(())
    }
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

/// Whether this process can give a child a mount namespace with a path bound read-only: tried
/// in a child on a directory of its own, never here.
pub(crate) fn possible() -> bool {
    let Ok(dir) = tempdir() else {
        return false;
    };
    let result = (|| {
        let ro = ReadOnly::prepare(std::slice::from_ref(&dir))?;
        let mut command = std::process::Command::new("/bin/sh");
        command
            // The write in a subshell: a failed redirection of a special builtin would end
            // the shell itself.
            .args([
                "-c",
                "if (true > \"$0/probe\") 2>/dev/null; then exit 1; fi",
            ])
            .arg(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        crate::install(&mut command, move || ro.apply_in_child());
        command.status()
    })();
    let _ = std::fs::remove_dir_all(&dir);
    // The shell succeeds only when the write was refused: the bind was read-only.
    result.is_ok_and(|status| status.success())
}

/// A fresh directory under the system's temporary directory (the crate has no tempfile).
fn tempdir() -> io::Result<PathBuf> {
    let base = std::env::temp_dir();
    for n in 0..100u32 {
        let dir = base.join(format!("toolgate-mount-probe-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from(io::ErrorKind::AlreadyExists))
}
