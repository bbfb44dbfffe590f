//! `toolgate sandbox check`, and `[sandbox]`: how approved commands (and upstream servers) are
//! confined, resolved once by [`Settings`] into a [`Confinement`].
//!
//! ```toml
//! [sandbox]
//! mode = "enforce"                      # or "dangerous-unconfined": no sandbox at all
//! deny = ["/srv/secrets", "~/.config/rclone"]
//! allow = ["~/.npmrc"]                  # a default entry the operator lifts
//! read = ["/tmp/toolchains"]            # readable besides the system, even in a denied place
//! write = ["~/.cache/sccache"]          # writable besides the workspace and TMPDIR
//! dangerous_unconfined_network = false  # true: every command reaches any address
//! dangerous_allow_unix_sockets = false  # true: any unix socket (a docker daemon's too)
//! resolve = { "mirror.internal" = ["203.0.113.7"] }   # the proxy's pinned names
//!
//! [sandbox.limits]
//! file_size_bytes = 4294967296
//! address_space_bytes = 17179869184
//! open_files = 4096
//! processes = 4096
//! pids_max = 4096                       # only in a call's own cgroup
//! memory_max_bytes = 8589934592         # only in a call's own cgroup
//! ```
//!
//! Denied by default: toolgate's state directory (console token, grants), its configuration
//! directory, the configuration and policy files in use, the audit log and its journal
//! files, the usual credential stores under `$HOME`, and the shared scratch places (`/tmp`,
//! `/var/tmp`, `/dev/shm`, `/run/user`) apart from each call's own temporary directory.

use std::path::Path;

use toolgate_sandbox::{Sandbox, SandboxError};
use toolgate_tools::Confinement;

use crate::settings::{DEFAULT_FILE_SIZE_BYTES, DEFAULT_PIDS_MAX, Mode, Settings};
use crate::terminal::outln;

/// `toolgate sandbox check`: what this machine supports, what the configuration asks for,
/// and whether a confined child really runs. Exit 0 when commands can run as configured, 1
/// when they would be refused.
pub fn check(config_path: Option<&Path>, json: bool) -> anyhow::Result<u8> {
    let settings = Settings::load(config_path)?;
    let confinement = &settings.sandbox.confinement;
    let support = toolgate_sandbox::probe();
    let cgroup = toolgate_exec::cgroup_tier();
    let verdict = self_test(confinement);
    let runs = verdict.is_ok();
    let gaps = match confinement.sandbox().map(Sandbox::check) {
        Some(Ok(abi)) => toolgate_sandbox::gaps(
            network_mode(&settings),
            confinement.unix_sockets(),
            abi,
            support.mount_namespaces.possible(),
        ),
        _ => Vec::new(),
    };
    let limits = &settings.sandbox.limits;
    if json {
        let value = serde_json::json!({
            "machine": {
                "landlock_abi": support.landlock_abi,
                "seccomp": support.seccomp,
                "user_namespaces": support.user_namespaces,
                "mount_namespaces": support.mount_namespaces.possible(),
                "cgroup": cgroup.tier.as_str(),
            },
            "mode": match settings.sandbox.mode {
                Mode::DangerousUnconfined => "dangerous-unconfined",
                Mode::Enforce => "enforce",
            },
            "tier": confinement.describe(),
            "denied": confinement.denied().entries(),
            "network": network_words(&settings),
            "limits": {
                "file_size_bytes": limits.file_size_bytes.unwrap_or(DEFAULT_FILE_SIZE_BYTES),
                "address_space_bytes": limits.address_space_bytes,
                "open_files": limits.open_files,
                "processes": limits.processes,
                "pids_max": limits.pids_max.unwrap_or(DEFAULT_PIDS_MAX),
                "memory_max_bytes": limits.memory_max_bytes,
            },
            "gaps": gaps,
            "commands": match &verdict {
                Ok(words) => serde_json::json!({"run": true, "how": words}),
                Err(refused) => serde_json::json!({"run": false, "why": refused.to_string()}),
            },
            "upstreams": crate::upstream::sandboxes_json(&settings),
        });
        crate::terminal::write_out(&crate::terminal::json(&value)?, true);
        return Ok(if runs { 0 } else { 1 });
    }
    let abi = support
        .landlock_abi
        .map_or_else(|| "not available".to_owned(), |abi| format!("abi {abi}"));
    outln!("machine:");
    outln!("  landlock: {abi}");
    outln!(
        "  seccomp: {}",
        if support.seccomp {
            "available"
        } else {
            "not available"
        }
    );
    outln!(
        "  user namespaces: {} (not used)",
        if support.user_namespaces {
            "possible"
        } else {
            "not possible"
        }
    );
    outln!(
        "  mount namespaces: {}",
        if support.mount_namespaces.possible() {
            "possible: the workspace's `.git/hooks` and `.git/config` are bound read-only"
        } else {
            "not possible: `.git/hooks` and `.git/config` stay writable"
        }
    );
    outln!("  cgroup: {} ({})", cgroup.tier.as_str(), cgroup.reason);
    outln!("configuration: {}", settings.display_path());
    outln!("  sandbox: {}", confinement.describe());
    outln!("  network: {}", network_words(&settings));
    outln!("  denied to read and write:");
    for entry in confinement.denied().entries() {
        outln!("    {}", entry.display());
    }
    for gap in &gaps {
        outln!("  gap: {gap}");
    }
    match verdict {
        Ok(words) => outln!("commands: run {words}"),
        Err(refused) => outln!("commands: refused: {refused}"),
    }
    crate::upstream::print_sandboxes(&settings);
    Ok(if runs { 0 } else { 1 })
}

fn network_mode(settings: &Settings) -> toolgate_sandbox::NetworkMode {
    if settings.sandbox.dangerous_unconfined_network {
        toolgate_sandbox::NetworkMode::DangerousUnconfined
    } else {
        toolgate_sandbox::NetworkMode::None
    }
}

fn network_words(settings: &Settings) -> &'static str {
    if settings.sandbox.dangerous_unconfined_network {
        "UNCONFINED for every command (`dangerous_unconfined_network`)"
    } else {
        "none, unless a call asks for hosts: then only those, through toolgate's proxy"
    }
}

/// Why commands are refused, as the self-test found.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("sandbox_unavailable: {0}")]
    Unavailable(SandboxError),
    #[error("no temporary directory: {0}")]
    NoTemporaryDirectory(std::io::Error),
    #[error("{code}: {source}", code = .source.code())]
    Unprepared { source: SandboxError },
    #[error("a confined child failed: {0}")]
    Failed(std::process::ExitStatus),
    #[error("a confined child could not start: {0}")]
    NotStarted(std::io::Error),
}

/// Runs `/bin/sh -c 'exit 0'` confined, as a command would be: `Ok` says how it ran, `Err`
/// why commands are refused.
fn self_test(confinement: &Confinement) -> Result<String, Refused> {
    let Some(sandbox) = confinement.sandbox() else {
        return Ok("unconfined (`dangerous-unconfined`)".to_owned());
    };
    let abi = sandbox.check().map_err(Refused::Unavailable)?;
    let temp = tempfile::tempdir().map_err(Refused::NoTemporaryDirectory)?;
    let mut spec = toolgate_sandbox::SandboxSpec::new(temp.path(), temp.path());
    spec.denied = confinement.denied().clone();
    let prepared = sandbox
        .prepare(&spec)
        .map_err(|source| Refused::Unprepared { source })?;
    let mut command = std::process::Command::new("/bin/sh");
    command
        .args(["-c", "exit 0"])
        .current_dir(temp.path())
        .stdin(std::process::Stdio::null());
    prepared.confine(&mut command);
    match command.status() {
        Ok(status) if status.success() => Ok(format!(
            "confined: {} (landlock abi {abi}); a confined child ran",
            prepared.enforced().tier
        )),
        Ok(status) => Err(Refused::Failed(status)),
        Err(e) => Err(Refused::NotStarted(e)),
    }
}
