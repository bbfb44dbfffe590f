//! What a confined child may reach: the paths it may write, the paths it may not read, its
//! network and its limits, as plain data the caller fills in.
//!
//! ```
//! use std::path::Path;
//! use toolgate_sandbox::{DenyList, NetworkMode, SandboxSpec};
//!
//! let mut spec = SandboxSpec::new("/work/project", "/tmp/toolgate-call-1");
//! spec.denied = DenyList::defaults(Path::new("/home/ada"), &["/home/ada/.local/state/toolgate"]);
//! spec.denied.remove(Path::new("/home/ada/.npmrc"));
//! spec.network = NetworkMode::Proxy { port: 3128 };
//! assert!(spec.denied.entries().iter().any(|p| p.ends_with(".ssh")));
//! ```

use std::path::{Path, PathBuf};

use crate::stores::{self, UserDirs};

/// The confinement one call asks for.
///
/// Reading is the whole system minus [`SandboxSpec::denied`], plus [`SandboxSpec::readable`];
/// writing is [`SandboxSpec::writable`] and the call's own temporary directory only (a denied
/// path inside a readable or writable one stays denied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    /// The paths the child may write (and read): the workspace of a command, and whatever the
    /// operator configured.
    pub writable: Vec<PathBuf>,
    /// Paths the child may read even where they lie inside a denied one (an upstream server's
    /// working directory under `/tmp`, say).
    pub readable: Vec<PathBuf>,
    /// The call's private temporary directory (what `TMPDIR` names), readable and writable even
    /// though the shared scratch places around it are denied.
    pub temp_dir: PathBuf,
    /// Paths inside writable ones made read-only for the child where a mount namespace can
    /// be made (the extra tier; see `Support::mount_namespaces`), and left writable, as a gap
    /// the report names, where it cannot.
    pub read_only: Vec<PathBuf>,
    /// Directories inside writable ones bound onto themselves, still writable, where a mount
    /// namespace can be made: a mount point cannot be renamed, replaced or removed (`EBUSY`),
    /// so a workspace's `.git` stays the directory it is while what is inside it changes.
    pub pinned: Vec<PathBuf>,
    /// Paths the child may neither read nor write.
    pub denied: DenyList,
    /// What the child may do on the network.
    pub network: NetworkMode,
    /// Which Unix sockets the child may make.
    pub unix_sockets: UnixSockets,
    /// Resource limits set in the child before it executes.
    pub limits: Limits,
}

impl SandboxSpec {
    /// A spec with the given workspace (writable) and temporary directory, no network, the
    /// default limits, and a deny list of only the shared scratch places (callers add the home
    /// and state entries with [`DenyList::defaults`]).
    pub fn new(workspace: impl Into<PathBuf>, temp_dir: impl Into<PathBuf>) -> Self {
        SandboxSpec {
            writable: vec![workspace.into()],
            readable: Vec::new(),
            temp_dir: temp_dir.into(),
            read_only: Vec::new(),
            pinned: Vec::new(),
            denied: DenyList::scratch_only(),
            network: NetworkMode::None,
            unix_sockets: UnixSockets::PairsOnly,
            limits: Limits::default(),
        }
    }
}

/// What a confined child may do on the network; nothing unless said otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NetworkMode {
    /// No sockets but Unix ones; no TCP bind or connect at all.
    #[default]
    None,
    /// TCP connect only to `port` (where toolgate's proxy listens on 127.0.0.1); no bind, and
    /// no socket of an IP family but a TCP stream. Landlock names ports, not hosts, so the
    /// same port on another address is reachable too; the report says so.
    Proxy {
        /// The proxy's port.
        port: u16,
    },
    /// The network is not confined at all; only an operator setting named `dangerous` leads
    /// here.
    DangerousUnconfined,
}

/// Which Unix sockets a confined child may make.
///
/// Below Landlock ABI 9 nothing stops a process from connecting to a pathname Unix socket it
/// can name (a Docker daemon's, an ssh agent's, a session bus): Landlock checks opening files,
/// and connecting is not opening. So by default the child cannot make a socket it could
/// connect with at all: `socket(AF_UNIX, …)` is refused, and `socketpair` only makes
/// connected stream or seqpacket pairs (a datagram pair could still be aimed at a path with
/// `sendto`). Programs that only talk to their own children through pairs keep working.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnixSockets {
    /// Connected pairs only (the default).
    #[default]
    PairsOnly,
    /// Any Unix socket: the child can then reach every pathname socket it can name, which
    /// the report names as a gap below Landlock ABI 9.
    Allowed,
}

/// Resource limits for the child. `RLIMIT_CORE` is always 0 (a core dump of a confined
/// program could land secrets it read in the workspace); the others apply where set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_FSIZE`: the largest file the child may write, in bytes.
    pub file_size: Option<u64>,
    /// `RLIMIT_AS`: the child's address space, in bytes.
    pub address_space: Option<u64>,
    /// `RLIMIT_NPROC`: processes of the child's user (root is exempt, by the kernel).
    pub processes: Option<u64>,
    /// `RLIMIT_NOFILE`: open descriptors per process.
    pub open_files: Option<u64>,
}

/// The paths a confined child may not read. An entry ending in `*` names every entry of its
/// directory whose name starts with what comes before the `*` (as in `~/.cargo/credentials*`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DenyList {
    entries: Vec<PathBuf>,
}

/// The shared scratch places other programs leave sockets and files in; the call's own
/// temporary directory is granted back explicitly.
const SCRATCH: [&str; 4] = ["/tmp", "/var/tmp", "/dev/shm", "/run/user"];

impl DenyList {
    /// Only the shared scratch places.
    pub fn scratch_only() -> Self {
        DenyList {
            entries: SCRATCH.iter().map(PathBuf::from).collect(),
        }
    }

    /// The default deny list: toolgate's own state and configuration directories (given by
    /// the caller, who knows where they are), the credential stores under `home` (and under
    /// `~/.config`, `~/.local/share` and `~/.cache`), and the shared scratch places.
    pub fn defaults(home: &Path, toolgate_dirs: &[impl AsRef<Path>]) -> Self {
        DenyList::for_user(&UserDirs::new(home), toolgate_dirs)
    }

    /// [`DenyList::defaults`] with the credential stores under every directory of `dirs`:
    /// the XDG base directories where they are set elsewhere than their defaults too.
    pub fn for_user(dirs: &UserDirs, toolgate_dirs: &[impl AsRef<Path>]) -> Self {
        let mut list = DenyList::scratch_only();
        for dir in toolgate_dirs {
            list.add(dir.as_ref());
        }
        for store in stores::defaults(dirs) {
            list.add(&store);
        }
        list
    }

    /// The credential stores of the common developer tools (the compiled-in
    /// `credential_stores.txt`), resolved under the directories of `dirs`, each entry under
    /// every place its base may be.
    pub fn credential_stores(dirs: &UserDirs) -> Vec<PathBuf> {
        stores::defaults(dirs)
    }

    /// Denies `path` too.
    pub fn add(&mut self, path: &Path) {
        if !self.entries.iter().any(|p| p == path) {
            self.entries.push(path.to_path_buf());
        }
    }

    /// Stops denying `path`; returns whether it was listed.
    pub fn remove(&mut self, path: &Path) -> bool {
        let before = self.entries.len();
        self.entries.retain(|p| p != path);
        self.entries.len() != before
    }

    /// The entries, as given.
    pub fn entries(&self) -> &[PathBuf] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_name_the_credential_stores_and_the_state_dir() {
        let list = DenyList::defaults(Path::new("/home/ada"), &["/var/lib/toolgate"]);
        for want in [
            "/home/ada/.ssh",
            "/home/ada/.config/gh",
            "/home/ada/.config/git/credentials",
            "/home/ada/.claude/.credentials.json",
            "/home/ada/.codex/auth.json",
            "/home/ada/.cargo/credentials*",
            "/var/lib/toolgate",
            "/tmp",
            "/run/user",
        ] {
            assert!(
                list.entries().iter().any(|p| p == Path::new(want)),
                "{want}"
            );
        }
    }

    #[test]
    fn the_operator_can_remove_an_entry() {
        let mut list = DenyList::defaults(Path::new("/h"), &[] as &[&str]);
        assert!(list.remove(Path::new("/h/.npmrc")));
        assert!(!list.remove(Path::new("/h/.npmrc")));
        // An entry of the data, in the place an XDG directory puts it, is lifted the same way.
        let mut dirs = UserDirs::new("/h");
        dirs.config_home = Some("/x".into());
        let mut xdg = DenyList::for_user(&dirs, &[] as &[&str]);
        assert!(xdg.remove(Path::new("/x/gh")));
        assert!(
            xdg.entries()
                .iter()
                .any(|p| p == Path::new("/h/.config/gh"))
        );
        list.add(Path::new("/srv/secret"));
        list.add(Path::new("/srv/secret"));
        assert_eq!(
            list.entries()
                .iter()
                .filter(|p| p.as_path() == Path::new("/srv/secret"))
                .count(),
            1
        );
    }
}
