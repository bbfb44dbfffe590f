//! How `run_command` and `run_script` confine what a person approved: the operator's
//! [`Confinement`] (this machine's sandbox, the deny list, limits, network settings), the
//! network a call asks for (its `network` argument), and, for one call, a [`Confined`] run:
//! a private temporary directory, toolgate's proxy when the call asked for hosts, and the
//! prepared sandbox, built by `toolgate-confine` as upstream servers' processes are.
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
//! let confinement = Confinement::detect(std::env::home_dir().as_deref());
//! // On a kernel with Landlock ABI 6 or newer and seccomp, commands run confined.
//! println!("{}", confinement.describe());
//! ```

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};
use toolgate_confine::{Child, Confined as ConfinedChild, StartError};
use toolgate_core::{
    FieldError, NETWORK_NONE, NETWORK_UNCONFINED, RejectCode, Resource, ToolError, ToolErrorCode,
    ToolOutput,
};
use toolgate_exec::{CgroupLimits, CommandSpec};
use toolgate_proxy::{HostPattern, ProxyReport};
use toolgate_sandbox::{NetworkMode, SandboxError};
use toolgate_workspace::Workspace;

/// The operator's settings for confining commands, and this machine's sandbox: the builder
/// upstream servers' processes are confined by too.
pub use toolgate_confine::Confinement;
pub use toolgate_confine::MAX_NETWORK_HOSTS;

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

/// Stage 3: why this machine cannot confine a command, if it cannot, and what is wrong with
/// its `network` and `may_change` arguments.
pub(crate) fn check(
    confinement: &Confinement,
    workspace: &Workspace,
    network: &[String],
    may_change: &[String],
) -> Vec<FieldError> {
    let mut errors = crate::later::check(workspace, may_change);
    if let Some(Err(SandboxError::Unavailable { missing })) =
        confinement.sandbox().map(toolgate_sandbox::Sandbox::check)
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

/// Stage 4: what the call asks of the network and the sandbox it gets, as resources bound into
/// the approval, and the lines a person sees.
fn classify(confinement: &Confinement, network: &[String]) -> (Vec<Resource>, String) {
    let hosts = hosts(network);
    let unconfined_network = confinement.unconfined_network();
    let mut resources: Vec<Resource> = Vec::new();
    let mut preview = String::new();
    if unconfined_network {
        resources.push(Resource::Network(NETWORK_UNCONFINED.to_owned()));
    }
    if hosts.is_empty() {
        if !unconfined_network {
            resources.push(Resource::Network(NETWORK_NONE.to_owned()));
        }
    } else {
        resources.extend(hosts.iter().map(|h| Resource::Network(h.to_string())));
    }
    let shown: Vec<String> = hosts.iter().map(ToString::to_string).collect();
    if unconfined_network {
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
    match confinement.sandbox() {
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
            let network = confinement.network_mode(&hosts, 0);
            let gaps = toolgate_sandbox::gaps(network, confinement.unix_sockets(), abi, mounts);
            for gap in gaps
                .into_iter()
                .chain(cgroup_gap(confinement.cgroup_limits()))
            {
                let _ = write!(preview, "\nsandbox gap: {gap}");
            }
        }
    }
    (resources, preview)
}

/// Stage 7: everything one call's commands run in, made now, and the snapshot of the files
/// that run later they are compared with when they have ended.
pub(crate) fn start(
    confinement: &Confinement,
    workspace: &Path,
    network: &[String],
    may_change: &[String],
) -> Result<Confined, ToolError> {
    let later = crate::later::take(workspace, may_change)?;
    let child = Child::new("toolgate-call-")
        .writable(workspace.to_path_buf())
        .hosts(hosts(network))
        .guard(later);
    let child = confinement.start(child).map_err(|e| {
        let code = match &e {
            StartError::Sandbox(e) => sandbox_error_code(e),
            StartError::TempDir(_) | StartError::Proxy(_) => ToolErrorCode::SandboxFailed,
        };
        ToolError::new(
            code,
            format!("the command's sandbox could not be made, so nothing ran: {e}"),
        )
    })?;
    Ok(Confined {
        child,
        cgroup: confinement.cgroup_limits(),
    })
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

/// One call's confinement: what its commands run in ([`ConfinedChild`]: its temporary
/// directory, its proxy, its prepared sandbox and the snapshot of the files that run later),
/// ended (the directory removed, the proxy stopped) by [`Confined::finish`] or when dropped.
#[derive(Debug)]
pub(crate) struct Confined {
    child: ConfinedChild,
    cgroup: CgroupLimits,
}

impl Confined {
    /// `spec`, confined: the sandbox, `TMPDIR`, the proxy's variables, the cgroup limits.
    pub(crate) fn apply(&self, spec: CommandSpec) -> CommandSpec {
        self.child.apply_spec(spec)
    }

    /// Ends the call's confinement, once its processes have ended, and adds what it was to a
    /// successful `output` (its `sandbox` and `network` fields). A change to a file that runs
    /// later which the call did not name is put back and fails the call, whatever the
    /// command's own result.
    pub(crate) fn attach(
        self,
        output: Result<ToolOutput, ToolError>,
    ) -> Result<ToolOutput, ToolError> {
        let later = self
            .child
            .guards()
            .iter()
            .try_for_each(crate::later::check_after);
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
        let sandbox = match self.child.prepared() {
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
        let hosts: Vec<String> = self.child.hosts().iter().map(ToString::to_string).collect();
        let mode = self.child.network();
        let network = match (mode, self.child.stop()) {
            (NetworkMode::DangerousUnconfined, _) => json!({"mode": "unconfined"}),
            (_, Some(proxied)) => report(hosts, &proxied),
            (_, None) => json!({"mode": "none"}),
        };
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
    let (resources, lines) = classify(confinement, network);
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
