//! One builder of a confined child, for every program toolgate starts on someone's behalf: the
//! commands of an approved `run_command` or `run_script` call, an upstream server's process,
//! and later a hook.
//!
//! A [`Confinement`] is the operator's part (this machine's sandbox, the deny list, what every
//! child may also read and write, limits, Unix sockets, the proxies' pinned names); a [`Child`]
//! is the child's own (its temporary directory's name, what it may write and read, the hosts it
//! may reach, the files that run later in what it may write, taken before it starts).
//! [`Confinement::start`] makes what the child runs in — a private temporary directory
//! (`TMPDIR`), a proxy of its own when it may reach hosts (`HTTP_PROXY` and its siblings), the
//! prepared sandbox — as a [`Confined`], which puts it on the command that spawns the child and
//! ends it (the proxy stopped, the directory removed) once the child is gone.
//!
//! ```
//! use toolgate_confine::{Child, Confinement};
//!
//! let confinement = Confinement::detect(None);
//! let workspace = tempfile::tempdir().unwrap();
//! let child = Child::new("toolgate-example-").writable(workspace.path().to_path_buf());
//! // On a kernel with Landlock ABI 6 or newer and seccomp, this prepares the sandbox too.
//! if let Ok(confined) = confinement.start(child) {
//!     assert!(confined.env().iter().any(|(name, _)| name == "TMPDIR"));
//!     confined.stop();
//! }
//! ```

use std::ffi::OsString;
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use toolgate_exec::{CgroupLimits, CommandSpec, PreExec};
use toolgate_proxy::{HostPattern, PinnedResolver, Proxy, ProxyError, ProxyReport, ProxySpec};
use toolgate_sandbox::{
    DenyList, Limits, NetworkMode, Prepared, Sandbox, SandboxError, SandboxSpec, UnixSockets,
};
use toolgate_workspace::snapshot::Guarded;

/// Most hosts one child may reach through its proxy.
pub const MAX_NETWORK_HOSTS: usize = 32;

/// Most paths of one snapshot of the files that run later bound read-only (or pinned) for a
/// child; the rest are guarded by the comparison alone.
pub const MAX_READ_ONLY_MOUNTS: usize = 64;

/// Why what a child runs in could not be made; nothing was started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    TempDir(std::io::Error),
    #[error("{0}")]
    Proxy(ProxyError),
    #[error("{0}")]
    Sandbox(SandboxError),
}

impl StartError {
    /// The error's code, as the sandbox spells its own: `sandbox_unavailable`,
    /// `sandbox_invalid_path`, `sandbox_failed`.
    pub fn code(&self) -> &'static str {
        match self {
            StartError::Sandbox(e) => e.code(),
            StartError::TempDir(_) | StartError::Proxy(_) => "sandbox_failed",
        }
    }
}

/// The operator's settings for confining children, and this machine's sandbox. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// `None`: the operator's `dangerous-unconfined` setting; children run unconfined.
    sandbox: Option<Sandbox>,
    denied: DenyList,
    readable: Vec<PathBuf>,
    writable: Vec<PathBuf>,
    limits: Limits,
    cgroup: CgroupLimits,
    unconfined_network: bool,
    unix_sockets: UnixSockets,
    pins: Arc<PinnedResolver>,
    /// The variables commands start from: the user's environment as toolgate read it once,
    /// scrubbed. Empty unless given ([`Confinement::set_environment`]).
    environment: Environment,
}

/// Variables and their values, shown by name only: a value may be a secret of anyone's, and
/// settings are printed in errors and logs.
#[derive(Clone)]
struct Environment(Arc<[(String, String)]>);

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(name, _)| name))
            .finish()
    }
}

impl Confinement {
    /// Children confined by `sandbox`, with the default deny list: `toolgate_dirs` (toolgate's
    /// state and configuration), the usual credential stores under `home`, and the shared
    /// scratch places.
    pub fn new(sandbox: Sandbox, home: Option<&Path>, toolgate_dirs: &[PathBuf]) -> Self {
        let denied = match home {
            Some(home) => DenyList::defaults(home, toolgate_dirs),
            None => {
                let mut list = DenyList::scratch_only();
                for dir in toolgate_dirs {
                    list.add(dir);
                }
                list
            }
        };
        Confinement::with_deny_list(Some(sandbox), denied)
    }

    /// Children confined by `sandbox` (`None`: not at all), denied `denied`, with nothing else
    /// changed by the operator.
    pub fn with_deny_list(sandbox: Option<Sandbox>, denied: DenyList) -> Self {
        Confinement {
            sandbox,
            denied,
            readable: Vec::new(),
            writable: Vec::new(),
            limits: Limits::default(),
            cgroup: CgroupLimits::default(),
            unconfined_network: false,
            unix_sockets: UnixSockets::PairsOnly,
            pins: Arc::default(),
            environment: Environment(Arc::new([])),
        }
    }

    /// This machine's sandbox, probed now, with the default deny list for the user's `home`
    /// (given by the caller: this crate does not read the environment), and no environment
    /// for commands until one is set.
    pub fn detect(home: Option<&Path>) -> Self {
        Confinement::new(Sandbox::detect(), home, &[])
    }

    /// Children run with all of the user's authority: only the operator's
    /// `[sandbox] mode = "dangerous-unconfined"` leads here.
    pub fn dangerous_unconfined() -> Self {
        Confinement::with_deny_list(None, DenyList::default())
    }

    /// Denies `path` too.
    pub fn deny(&mut self, path: &Path) {
        self.denied.add(path);
    }

    /// Stops denying `path`, one of the default entries; returns whether it was listed.
    pub fn allow(&mut self, path: &Path) -> bool {
        self.denied.remove(path)
    }

    /// Lets children read `path` too, even inside a denied place (a toolchain kept under
    /// `/tmp`, say); a denied path inside it stays denied.
    pub fn readable(&mut self, path: PathBuf) {
        self.readable.push(path);
    }

    /// The paths readable besides the system.
    pub fn read_paths(&self) -> &[PathBuf] {
        &self.readable
    }

    /// Lets children write `path` too.
    pub fn writable(&mut self, path: PathBuf) {
        self.writable.push(path);
    }

    /// The rlimits set in each child.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The limits of each call's own cgroup, where there is one.
    pub fn set_cgroup_limits(&mut self, limits: CgroupLimits) {
        self.cgroup = limits;
    }

    /// The limits of each call's own cgroup.
    pub fn cgroup_limits(&self) -> CgroupLimits {
        self.cgroup
    }

    /// Lets every child reach the network unfiltered: the operator's
    /// `dangerous_unconfined_network` setting.
    pub fn dangerous_unconfined_network(&mut self) {
        self.unconfined_network = true;
    }

    /// Whether children reach the network unfiltered.
    pub fn unconfined_network(&self) -> bool {
        self.unconfined_network
    }

    /// Lets children make any Unix socket, and so connect to every pathname socket they can
    /// name (a Docker daemon's among them, below Landlock ABI 9): the operator's
    /// `dangerous_allow_unix_sockets` setting.
    pub fn dangerous_allow_unix_sockets(&mut self) {
        self.unix_sockets = UnixSockets::Allowed;
    }

    /// Which Unix sockets children may make.
    pub fn set_unix_sockets(&mut self, unix_sockets: UnixSockets) {
        self.unix_sockets = unix_sockets;
    }

    /// Which Unix sockets children may make.
    pub fn unix_sockets(&self) -> UnixSockets {
        self.unix_sockets
    }

    /// Makes a child's proxy resolve `host` to `addresses`, as the operator pinned it (the
    /// addresses are still checked: a pin to a local address is refused like any other).
    pub fn pin(&mut self, host: &str, addresses: Vec<IpAddr>) {
        Arc::make_mut(&mut self.pins).pin(host, addresses);
    }

    /// Commands start from the variables of `ambient` (the user's environment as
    /// `std::env::vars_os` gives it, which the caller reads once) that
    /// [`toolgate_exec::scrub_env`] lets pass.
    pub fn set_environment(&mut self, ambient: impl IntoIterator<Item = (OsString, OsString)>) {
        self.environment =
            Environment(toolgate_exec::scrub_env(toolgate_exec::utf8_env(ambient)).into());
    }

    /// The variables commands start from, sorted by name.
    pub fn environment(&self) -> &[(String, String)] {
        &self.environment.0
    }

    /// The sandbox, unless the operator turned it off.
    pub fn sandbox(&self) -> Option<&Sandbox> {
        self.sandbox.as_ref()
    }

    /// The paths children may neither read nor write.
    pub fn denied(&self) -> &DenyList {
        &self.denied
    }

    /// The tier commands get, in a few words: `landlock+seccomp (landlock abi 7)`, or why
    /// there is none.
    pub fn describe(&self) -> String {
        match &self.sandbox {
            None => "none: the operator's `dangerous-unconfined` setting; commands run with \
                     all of the user's authority"
                .to_owned(),
            Some(sandbox) => match sandbox.check() {
                Ok(abi) if sandbox.support().mount_namespaces.possible() => {
                    format!("landlock+seccomp+mount-namespace (landlock abi {abi})")
                }
                Ok(abi) => format!("landlock+seccomp (landlock abi {abi})"),
                Err(e) => format!("unavailable ({e}): commands are refused"),
            },
        }
    }

    /// What a child with `hosts` may do on the network, its proxy on `port`.
    pub fn network_mode(&self, hosts: &[HostPattern], port: u16) -> NetworkMode {
        if self.unconfined_network {
            NetworkMode::DangerousUnconfined
        } else if hosts.is_empty() {
            NetworkMode::None
        } else {
            NetworkMode::Proxy { port }
        }
    }

    /// Makes everything `child` runs in: its temporary directory, its proxy (when it may reach
    /// hosts and the network is not unconfined) and, unless the operator turned the sandbox
    /// off, its prepared sandbox. What was made before a failure is undone.
    pub fn start(&self, child: Child) -> Result<Confined, StartError> {
        // The owner's alone: other users could otherwise read what the child writes there
        // while it runs (tempfile leaves the mode to the umask, 0755 by default).
        let temp = tempfile::Builder::new()
            .prefix(&child.temp_prefix)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(StartError::TempDir)?;
        let proxy = if child.hosts.is_empty() || self.unconfined_network {
            None
        } else {
            let spec = ProxySpec::new(child.hosts.clone()).resolver(self.pins.clone());
            Some(Proxy::start(spec).map_err(StartError::Proxy)?)
        };
        let network = self.network_mode(&child.hosts, proxy.as_ref().map_or(0, Proxy::port));
        let prepared = match &self.sandbox {
            None => None,
            Some(sandbox) => {
                let mut spec = SandboxSpec::new(PathBuf::new(), temp.path());
                spec.writable = child
                    .writable
                    .iter()
                    .chain(&self.writable)
                    .cloned()
                    .collect();
                spec.readable = child
                    .readable
                    .iter()
                    .chain(&self.readable)
                    .cloned()
                    .collect();
                // What other programs run later is not the child's to change: bound read-only
                // where a mount namespace can be made, compared afterwards always.
                for guard in &child.guards {
                    spec.read_only
                        .extend(guard.read_only_paths(MAX_READ_ONLY_MOUNTS));
                    spec.pinned.extend(guard.pinned_paths(MAX_READ_ONLY_MOUNTS));
                }
                spec.denied = self.denied.clone();
                spec.network = network;
                spec.unix_sockets = self.unix_sockets;
                spec.limits = self.limits;
                Some(sandbox.prepare(&spec).map_err(StartError::Sandbox)?)
            }
        };
        let mut env = vec![("TMPDIR".to_owned(), temp.path().display().to_string())];
        if let Some(proxy) = &proxy {
            env.extend(proxy.env());
        }
        Ok(Confined {
            temp: Some(temp),
            proxy,
            prepared,
            network,
            hosts: child.hosts,
            env,
            guards: child.guards,
            cgroup: self.cgroup,
        })
    }
}

/// One child's own part of its confinement, before it starts.
#[derive(Debug)]
pub struct Child {
    temp_prefix: String,
    writable: Vec<PathBuf>,
    readable: Vec<PathBuf>,
    hosts: Vec<HostPattern>,
    guards: Vec<Guarded>,
}

impl Child {
    /// A child that writes only its temporary directory, named `temp_prefix` and a random
    /// part, reads the system but the deny list, and has no network.
    pub fn new(temp_prefix: impl Into<String>) -> Self {
        Child {
            temp_prefix: temp_prefix.into(),
            writable: Vec::new(),
            readable: Vec::new(),
            hosts: Vec::new(),
            guards: Vec::new(),
        }
    }

    /// Lets it write `path` (a command's workspace, an upstream's own `write`).
    #[must_use]
    pub fn writable(mut self, path: PathBuf) -> Self {
        self.writable.push(path);
        self
    }

    /// Lets it read `path`, even inside a denied place (an upstream's working directory).
    #[must_use]
    pub fn readable(mut self, path: PathBuf) -> Self {
        self.readable.push(path);
        self
    }

    /// Lets it reach `hosts`, through a proxy of its own.
    #[must_use]
    pub fn hosts(mut self, hosts: Vec<HostPattern>) -> Self {
        self.hosts = hosts;
        self
    }

    /// The files that run later in a path it may write, taken stock of before it starts:
    /// bound read-only for it where a mount namespace can be made, and kept to compare with.
    #[must_use]
    pub fn guard(mut self, guard: Guarded) -> Self {
        self.guards.push(guard);
        self
    }
}

/// What one child runs in, for as long as it runs: [`Confined::stop`] (or dropping it) removes
/// the temporary directory and stops the proxy, so it is ended only once the child is gone.
/// The default is the confinement of nothing: no directory, no proxy, no sandbox.
#[derive(Debug, Default)]
pub struct Confined {
    temp: Option<tempfile::TempDir>,
    proxy: Option<Proxy>,
    prepared: Option<Prepared>,
    network: NetworkMode,
    hosts: Vec<HostPattern>,
    env: Vec<(String, String)>,
    guards: Vec<Guarded>,
    cgroup: CgroupLimits,
}

impl Confined {
    /// `TMPDIR` and the proxy's variables.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// The prepared sandbox; `None` where the operator turned it off.
    pub fn prepared(&self) -> Option<&Prepared> {
        self.prepared.as_ref()
    }

    /// What the child may do on the network.
    pub fn network(&self) -> NetworkMode {
        self.network
    }

    /// The hosts it may reach through its proxy.
    pub fn hosts(&self) -> &[HostPattern] {
        &self.hosts
    }

    /// The snapshots of the files that run later it was started with.
    pub fn guards(&self) -> &[Guarded] {
        &self.guards
    }

    /// The sandbox's step, to run between fork and exec.
    fn pre_exec(&self) -> Option<PreExec> {
        let prepared = self.prepared.clone()?;
        Some(PreExec::new(move |command| prepared.confine(command)))
    }

    /// `spec`, confined: the sandbox, `TMPDIR` and the proxy's variables in place of any of
    /// the same name, the cgroup limits.
    pub fn apply_spec(&self, mut spec: CommandSpec) -> CommandSpec {
        for (name, value) in &self.env {
            spec.env.retain(|(k, _)| k != name);
            spec.env.push((name.clone(), value.clone()));
        }
        if let Some(step) = self.pre_exec() {
            spec = spec.pre_exec(step);
        }
        spec.cgroup_limits(self.cgroup)
    }

    /// Confines `command`, spawned directly: the sandbox between fork and exec, `TMPDIR` and
    /// the proxy's variables in its environment.
    pub fn apply(&self, command: &mut Command) {
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(step) = self.pre_exec() {
            step.install(command);
        }
    }

    /// Puts back what the child changed among the files that run later since the last look,
    /// and says what that was; the state now is what the next look compares with.
    pub fn undo_later_changes(&mut self) -> Option<String> {
        let mut said = Vec::new();
        for guard in &mut self.guards {
            match guard.check() {
                // As it was: the snapshot stands.
                Ok(None) => continue,
                Ok(Some(undone)) => said.push(undone.to_string()),
                Err(e) => said.push(format!("cannot compare or put back: {e}")),
            }
            // What could not be put back (a large file) is not reported again at every
            // answer. What cannot be renewed is compared with the older state next time,
            // which guards more, never less.
            let _ = guard.renew();
        }
        (!said.is_empty()).then(|| said.join("; "))
    }

    /// Ends the confinement of a child that is gone, once what it changed among the files
    /// that run later is put back: said by nobody, since nobody waits for an answer now.
    pub fn end(mut self) {
        let _ = self.undo_later_changes();
        self.stop();
    }

    /// Ends the confinement of a child that is gone, without another look at the files that
    /// run later: the proxy stopped, with what it let through, and the directory removed.
    pub fn stop(mut self) -> Option<ProxyReport> {
        let report = self.proxy.take().map(Proxy::stop);
        if let Some(temp) = self.temp.take() {
            let _ = temp.close();
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings holding a confinement are printed in errors and logs: the variables commands
    /// start from show there by name, never by value.
    #[test]
    fn the_environment_shows_by_name_only() {
        let mut confinement = Confinement::dangerous_unconfined();
        confinement.set_environment([
            ("PATH".into(), "/opt/path-value-0451/bin".into()),
            ("LANG".into(), "lang-value-0451".into()),
        ]);
        assert_eq!(confinement.environment().len(), 2, "both kept");
        let shown = format!("{confinement:?}");
        assert!(
            shown.contains("\"PATH\"") && shown.contains("\"LANG\""),
            "{shown}"
        );
        assert!(!shown.contains("value-0451"), "{shown}");
    }

    #[test]
    fn a_childs_temporary_directory_is_its_tmpdir_until_it_stops() {
        let confined = Confinement::dangerous_unconfined()
            .start(Child::new("toolgate-confine-test-"))
            .unwrap();
        let [(name, temp)] = confined.env() else {
            panic!("{:?}", confined.env());
        };
        assert_eq!(name, "TMPDIR");
        let temp = PathBuf::from(temp);
        assert!(temp.is_dir());
        let mode = std::fs::metadata(&temp).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        assert!(confined.prepared().is_none());
        assert_eq!(confined.network(), NetworkMode::None);
        let spec = confined.apply_spec(CommandSpec::new("/bin/true", "/").env(vec![
            ("TMPDIR".to_owned(), "/tmp".to_owned()),
            ("LANG".to_owned(), "C".to_owned()),
        ]));
        assert_eq!(
            spec.env,
            [
                ("LANG".to_owned(), "C".to_owned()),
                ("TMPDIR".to_owned(), temp.display().to_string())
            ]
        );
        assert!(confined.stop().is_none());
        assert!(!temp.exists());
    }
}
