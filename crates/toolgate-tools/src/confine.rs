//! How `run_command` and `run_script` confine what a person approved: the operator's
//! [`Confinement`] (this machine's sandbox, the deny list, limits, network settings), the
//! network a call asks for (its `network` argument), and, for one call, a [`Confined`] run:
//! a private temporary directory, toolgate's proxy when the call asked for hosts, and the
//! prepared sandbox.
//!
//! Stage 3 refuses a call this machine cannot confine (`sandbox_unavailable`) unless the
//! operator turned the sandbox off with a setting named `dangerous`; stage 4 binds the network
//! and the sandbox into the approval (`network:…` and `sandbox:…` resources) and shows them;
//! stage 7 prepares the sandbox and refuses to run when that fails. The result says what was
//! enforced, what was not, and what the proxy let through.
//!
//! ```
//! use toolgate_tools::Confinement;
//!
//! let confinement = Confinement::detect();
//! // On a kernel with Landlock ABI 6 or newer and seccomp, commands run confined.
//! println!("{}", confinement.describe());
//! ```

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::{
    FieldError, NETWORK_NONE, NETWORK_UNCONFINED, RejectCode, Resource, ToolError, ToolErrorCode,
    ToolOutput,
};
use toolgate_exec::{CgroupLimits, CommandSpec, PreExec};
use toolgate_proxy::{HostPattern, PinnedResolver, Proxy, ProxyReport, ProxySpec};
use toolgate_sandbox::{
    DenyList, Limits, NetworkMode, Sandbox, SandboxError, SandboxSpec, UnixSockets,
};

/// Most host patterns one call may ask for.
pub const MAX_NETWORK_HOSTS: usize = 32;

/// The `network` argument's schema, shared by `run_command` and `run_script`.
pub(crate) fn network_schema() -> Value {
    json!({
        "type": "array",
        "maxItems": MAX_NETWORK_HOSTS,
        "uniqueItems": true,
        "items": {"type": "string", "minLength": 1, "maxLength": 260},
        "description": "Hosts the command needs to reach, such as [\"crates.io\", \"*.crates.io\"] or [\"registry.npmjs.org\"] (ports 80 and 443 unless one is given, `host:port`). Default: none — the command has no network at all. When given, the command reaches exactly these hosts through toolgate's HTTP(S) proxy (HTTP_PROXY/HTTPS_PROXY are set); local and private addresses are refused whatever the name."
    })
}

/// The operator's settings for confining commands, and this machine's sandbox.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// `None`: the operator's `dangerous-unconfined` setting; commands run unconfined.
    sandbox: Option<Sandbox>,
    denied: DenyList,
    readable: Vec<PathBuf>,
    writable: Vec<PathBuf>,
    limits: Limits,
    cgroup: CgroupLimits,
    unconfined_network: bool,
    unix_sockets: UnixSockets,
    pins: Arc<PinnedResolver>,
}

impl Confinement {
    /// Commands confined by `sandbox`, with the default deny list: `toolgate_dirs`
    /// (toolgate's state and configuration), the usual credential stores under `home`, and
    /// the shared scratch places.
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
        Confinement::with(Some(sandbox), denied)
    }

    /// The settings of a confinement before the operator changes any.
    fn with(sandbox: Option<Sandbox>, denied: DenyList) -> Self {
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
        }
    }

    /// This machine's sandbox, probed now, with the default deny list for `$HOME`.
    pub fn detect() -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Confinement::new(Sandbox::detect(), home.as_deref(), &[])
    }

    /// Commands run with all of the user's authority: only the operator's
    /// `[sandbox] mode = "dangerous-unconfined"` leads here.
    pub fn dangerous_unconfined() -> Self {
        Confinement::with(None, DenyList::default())
    }

    /// Denies `path` too.
    pub fn deny(&mut self, path: &Path) {
        self.denied.add(path);
    }

    /// Stops denying `path`, one of the default entries; returns whether it was listed.
    pub fn allow(&mut self, path: &Path) -> bool {
        self.denied.remove(path)
    }

    /// Lets commands read `path` too, even inside a denied place (a toolchain kept under
    /// `/tmp`, say); a denied path inside it stays denied.
    pub fn readable(&mut self, path: PathBuf) {
        self.readable.push(path);
    }

    /// The paths readable besides the system.
    pub fn read_paths(&self) -> &[PathBuf] {
        &self.readable
    }

    /// Lets commands write `path` too.
    pub fn writable(&mut self, path: PathBuf) {
        self.writable.push(path);
    }

    /// The rlimits set in each command.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The limits of each call's own cgroup, where there is one.
    pub fn set_cgroup_limits(&mut self, limits: CgroupLimits) {
        self.cgroup = limits;
    }

    /// Lets every command reach the network unfiltered: the operator's
    /// `dangerous_unconfined_network` setting.
    pub fn dangerous_unconfined_network(&mut self) {
        self.unconfined_network = true;
    }

    /// Lets commands make any Unix socket, and so connect to every pathname socket they can
    /// name (a Docker daemon's among them, below Landlock ABI 9): the operator's
    /// `dangerous_allow_unix_sockets` setting.
    pub fn dangerous_allow_unix_sockets(&mut self) {
        self.unix_sockets = UnixSockets::Allowed;
    }

    /// Which Unix sockets commands may make.
    pub fn unix_sockets(&self) -> UnixSockets {
        self.unix_sockets
    }

    /// Makes the proxy resolve `host` to `addresses`, as the operator pinned it (the
    /// addresses are still checked: a pin to a local address is refused like any other).
    pub fn pin(&mut self, host: &str, addresses: Vec<IpAddr>) {
        Arc::make_mut(&mut self.pins).pin(host, addresses);
    }

    /// The sandbox, unless the operator turned it off.
    pub fn sandbox(&self) -> Option<&Sandbox> {
        self.sandbox.as_ref()
    }

    /// The paths commands may not read or write.
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

    /// Stage 3: why this machine cannot confine a command, if it cannot, and what is wrong
    /// with its `network` and `may_change` arguments.
    pub(crate) fn check(&self, network: &[String], may_change: &[String]) -> Vec<FieldError> {
        let mut errors = crate::later::check(may_change);
        if let Some(Err(SandboxError::Unavailable { missing })) =
            self.sandbox.as_ref().map(Sandbox::check)
        {
            errors.push(
                FieldError::new(
                    "",
                    RejectCode::SandboxUnavailable,
                    format!("this machine cannot confine commands: {missing}"),
                )
                .with_hint(Some(UNAVAILABLE_HINT.to_owned())),
            );
        }
        for (i, host) in network.iter().enumerate() {
            if let Err(e) = HostPattern::parse(host) {
                errors.push(FieldError::new(
                    format!("/network/{i}"),
                    RejectCode::ConstraintViolation,
                    format!("`{host}` is not a host the proxy can allow: {e}"),
                ));
            }
        }
        errors
    }

    /// Stage 4: what the call asks of the network and the sandbox it gets, as resources bound
    /// into the approval, and the lines a person sees.
    pub(crate) fn classify(&self, network: &[String]) -> (Vec<Resource>, String) {
        let hosts = hosts(network);
        let mut resources: Vec<Resource> = Vec::new();
        let mut preview = String::new();
        if self.unconfined_network {
            resources.push(Resource::Network(NETWORK_UNCONFINED.to_owned()));
        }
        if hosts.is_empty() {
            if !self.unconfined_network {
                resources.push(Resource::Network(NETWORK_NONE.to_owned()));
            }
        } else {
            resources.extend(hosts.iter().map(|h| Resource::Network(h.to_string())));
        }
        let shown: Vec<String> = hosts.iter().map(ToString::to_string).collect();
        if self.unconfined_network {
            preview.push_str(
                "\nnetwork: UNCONFINED — the operator's `dangerous_unconfined_network` setting \
                 lets the command reach any address",
            );
        } else if shown.is_empty() {
            preview.push_str("\nnetwork: none");
            preview.push_str("\nenvironment added: TMPDIR (the call's own temporary directory)");
        } else {
            preview.push_str(
                "\nenvironment added: TMPDIR (the call's own temporary directory), HTTP_PROXY, \
                 HTTPS_PROXY, http_proxy, https_proxy (toolgate's proxy)",
            );
            let _ = write!(
                preview,
                "\nnetwork: only through toolgate's proxy, to {} (names resolved by toolgate; \
                 local, private and metadata addresses refused)",
                shown.join(", ")
            );
        }
        match &self.sandbox {
            None => {
                resources.push(Resource::Sandbox("none".to_owned()));
                preview.push_str(
                    "\nsandbox: NONE — the operator's `dangerous-unconfined` setting; the \
                     command runs with all of the user's authority",
                );
            }
            Some(sandbox) => {
                let abi = sandbox.check().unwrap_or(0);
                let mounts = sandbox.support().mount_namespaces.possible();
                let (tier, git) = if mounts {
                    (
                        "landlock+seccomp+mount-namespace",
                        " (the files that run later read-only but those named above)",
                    )
                } else {
                    ("landlock+seccomp", "")
                };
                resources.push(Resource::Sandbox(format!("{tier}:abi{abi}")));
                let _ = write!(
                    preview,
                    "\nsandbox: {tier} (landlock abi {abi}): writes only the workspace{git} and \
                     a private TMPDIR; toolgate's state, the credential stores and the shared \
                     temporary directories unreadable"
                );
                let network = self.network_mode(&hosts, 0);
                let gaps = toolgate_sandbox::gaps(network, self.unix_sockets, abi, mounts);
                for gap in gaps.into_iter().chain(self.cgroup_gap()) {
                    let _ = write!(preview, "\nsandbox gap: {gap}");
                }
            }
        }
        (resources, preview)
    }

    fn cgroup_gap(&self) -> Option<String> {
        cgroup_gap(self.cgroup)
    }

    fn network_mode(&self, hosts: &[HostPattern], port: u16) -> NetworkMode {
        if self.unconfined_network {
            NetworkMode::DangerousUnconfined
        } else if hosts.is_empty() {
            NetworkMode::None
        } else {
            NetworkMode::Proxy { port }
        }
    }

    /// Stage 7: everything one call's commands run in, made now, and the snapshot of the
    /// files that run later they are compared with when they have ended.
    pub(crate) fn start(
        &self,
        workspace: &Path,
        network: &[String],
        may_change: &[String],
    ) -> Result<Confined, ToolError> {
        let later = crate::later::take(workspace, may_change)?;
        let failed = |code: ToolErrorCode, e: &dyn std::fmt::Display| {
            ToolError::new(
                code,
                format!("the command's sandbox could not be made, so nothing ran: {e}"),
            )
        };
        let temp = tempfile::Builder::new()
            .prefix("toolgate-call-")
            .tempdir()
            .map_err(|e| failed(ToolErrorCode::SandboxFailed, &e))?;
        let hosts = hosts(network);
        let proxy = if hosts.is_empty() || self.unconfined_network {
            None
        } else {
            let spec = ProxySpec::new(hosts.clone()).resolver(self.pins.clone());
            Some(Proxy::start(spec).map_err(|e| failed(ToolErrorCode::SandboxFailed, &e))?)
        };
        let network = self.network_mode(&hosts, proxy.as_ref().map_or(0, Proxy::port));
        let prepared = match &self.sandbox {
            None => None,
            Some(sandbox) => {
                let mut spec = SandboxSpec::new(workspace, temp.path());
                spec.writable.extend(self.writable.iter().cloned());
                spec.readable.extend(self.readable.iter().cloned());
                // What other programs run later is not the command's to change: bound
                // read-only where a mount namespace can be made, compared afterwards always.
                spec.read_only = later.read_only_paths(crate::later::MAX_READ_ONLY_MOUNTS);
                spec.pinned = later.pinned_paths(crate::later::MAX_READ_ONLY_MOUNTS);
                spec.denied = self.denied.clone();
                spec.network = network;
                spec.unix_sockets = self.unix_sockets;
                spec.limits = self.limits;
                let prepared = sandbox
                    .prepare(&spec)
                    .map_err(|e| failed(sandbox_error_code(&e), &e))?;
                Some(prepared)
            }
        };
        let mut env = vec![("TMPDIR".to_owned(), temp.path().display().to_string())];
        if let Some(proxy) = &proxy {
            env.extend(proxy.env());
        }
        Ok(Confined {
            later,
            temp,
            proxy,
            prepared,
            network,
            hosts,
            env,
            cgroup: self.cgroup,
        })
    }
}

const UNAVAILABLE_HINT: &str = "commands run only confined; the operator can run toolgate on a \
kernel with Landlock (ABI 6 or newer) and seccomp, or set `[sandbox] mode = \
\"dangerous-unconfined\"` to run them with all of the user's authority";

/// The gap when cgroup limits are asked for and calls get no cgroup to hold them.
fn cgroup_gap(limits: CgroupLimits) -> Option<String> {
    let tier = toolgate_exec::cgroup_tier();
    (limits != CgroupLimits::default() && tier.directory.is_none()).then(|| {
        format!(
            "no cgroup of its own, so no pids.max or memory.max: {}",
            tier.reason
        )
    })
}

/// The `network` argument as given.
/// The `network` argument, parsed (stage 3 refused what does not parse).
fn hosts(network: &[String]) -> Vec<HostPattern> {
    network
        .iter()
        .filter_map(|h| HostPattern::parse(h).ok())
        .collect()
}

/// One call's confinement: its temporary directory, its proxy and its prepared sandbox,
/// ended (the directory removed, the proxy stopped) by [`Confined::finish`] or when dropped.
#[derive(Debug)]
pub(crate) struct Confined {
    later: toolgate_workspace::snapshot::Guarded,
    temp: tempfile::TempDir,
    proxy: Option<Proxy>,
    prepared: Option<toolgate_sandbox::Prepared>,
    network: NetworkMode,
    hosts: Vec<HostPattern>,
    env: Vec<(String, String)>,
    cgroup: CgroupLimits,
}

impl Confined {
    /// `spec`, confined: the sandbox, `TMPDIR`, the proxy's variables, the cgroup limits.
    pub(crate) fn apply(&self, mut spec: CommandSpec) -> CommandSpec {
        for (name, value) in &self.env {
            spec.env.retain(|(k, _)| k != name);
            spec.env.push((name.clone(), value.clone()));
        }
        if let Some(prepared) = &self.prepared {
            let prepared = prepared.clone();
            spec = spec.pre_exec(PreExec::new(move |command| prepared.confine(command)));
        }
        spec.cgroup_limits(self.cgroup)
    }

    /// Ends the call's confinement, once its processes have ended, and adds what it was to a
    /// successful `output` (its `sandbox` and `network` fields). A change to a file that runs
    /// later which the call did not name is put back and fails the call, whatever the
    /// command's own result.
    pub(crate) fn attach(
        self,
        output: Result<ToolOutput, ToolError>,
    ) -> Result<ToolOutput, ToolError> {
        let later = crate::later::check_after(&self.later);
        let (sandbox, network) = self.finish();
        later?;
        let mut output = output?;
        if let Some(object) = output.value.as_object_mut() {
            object.insert("sandbox".to_owned(), sandbox);
            object.insert("network".to_owned(), network);
        }
        Ok(output)
    }

    /// Ends the call's confinement and says what it was: `sandbox` (the tier, what was
    /// enforced, what was not) and `network` (the mode and, through the proxy, the bytes and
    /// requests allowed and refused).
    pub(crate) fn finish(self) -> (Value, Value) {
        let sandbox = match &self.prepared {
            None => json!({
                "tier": "none",
                "enforced": [],
                "gaps": ["no sandbox: the operator's `dangerous-unconfined` setting; the command ran with all of the user's authority"],
            }),
            Some(prepared) => {
                let enforced = prepared.enforced();
                let mut gaps = enforced.gaps.clone();
                gaps.extend(cgroup_gap(self.cgroup));
                json!({
                    "tier": enforced.tier.to_string(),
                    "landlock_abi": enforced.landlock_abi,
                    "enforced": enforced.enforced,
                    "gaps": gaps,
                })
            }
        };
        let hosts: Vec<String> = self.hosts.iter().map(ToString::to_string).collect();
        let network = match (self.network, self.proxy) {
            (NetworkMode::DangerousUnconfined, _) => json!({"mode": "unconfined"}),
            (_, Some(proxy)) => report(hosts, &proxy.stop()),
            (_, None) => json!({"mode": "none"}),
        };
        let _ = self.temp.close();
        (sandbox, network)
    }
}

/// Whether `resource` is one [`bind`] adds.
pub(crate) fn is_confinement_resource(resource: &Resource) -> bool {
    matches!(resource, Resource::Network(_) | Resource::Sandbox(_))
}

/// Adds what `confinement` says of the call's network and sandbox to its stage-4
/// classification: resources bound into the approval, lines of its preview.
pub(crate) fn bind(
    confinement: &Confinement,
    network: &[String],
    may_change: &[String],
    classification: &mut toolgate_core::Classification,
) {
    let (resources, lines) = confinement.classify(network);
    classification.resources.extend(resources);
    let preview = classification.preview.get_or_insert_with(String::new);
    preview.push_str(&crate::later::preview(may_change));
    preview.push_str(&lines);
}

fn report(hosts: Vec<String>, report: &ProxyReport) -> Value {
    json!({
        "mode": "proxy",
        "hosts": hosts,
        "bytes_up": report.bytes_up,
        "bytes_down": report.bytes_down,
        "allowed": report.allowed.iter().map(|a| json!({"method": a.method, "target": a.target})).collect::<Vec<_>>(),
        "refused": report.refused.iter().map(|r| json!({"method": r.method, "target": r.target, "reason": r.reason.code()})).collect::<Vec<_>>(),
        "omitted": report.omitted,
    })
}

/// The tool error's code for a sandbox that could not be made, as the sandbox spells it.
pub(crate) fn sandbox_error_code(error: &SandboxError) -> ToolErrorCode {
    match error {
        SandboxError::Unavailable { .. } => ToolErrorCode::SandboxUnavailable,
        SandboxError::Path { .. } => ToolErrorCode::SandboxInvalidPath,
        SandboxError::PathFd(_) | SandboxError::Landlock(_) | SandboxError::Seccomp(_) => {
            ToolErrorCode::SandboxFailed
        }
    }
}
