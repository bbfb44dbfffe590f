//! `[sandbox]`: how approved commands (and upstream servers) are confined, resolved once from
//! the configuration into a [`Confinement`], and `toolgate sandbox check`.
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

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;
use toolgate_exec::CgroupLimits;
use toolgate_sandbox::{Limits, Sandbox};
use toolgate_tools::Confinement;

use crate::config::{Config, ConfigError};

/// `[sandbox]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// `enforce` (the default) or `dangerous-unconfined`.
    pub mode: Option<Spanned<Mode>>,
    /// Paths denied besides the defaults: absolute, or `~/` for the home directory.
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    /// Default entries lifted.
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    /// Paths readable besides the system, even inside a denied place.
    #[serde(default)]
    pub read: Vec<Spanned<String>>,
    /// Paths writable besides the workspace and the call's temporary directory.
    #[serde(default)]
    pub write: Vec<Spanned<String>>,
    /// Every command reaches the network unfiltered.
    #[serde(default)]
    pub dangerous_unconfined_network: bool,
    /// Commands may make any Unix socket, and so reach every pathname socket they can name.
    #[serde(default)]
    pub dangerous_allow_unix_sockets: bool,
    /// Names the proxy resolves to these addresses instead of asking the system (the
    /// addresses are checked like any other).
    #[serde(default)]
    pub resolve: BTreeMap<String, Vec<IpAddr>>,
    #[serde(default)]
    pub limits: LimitsSection,
}

/// Whether commands are confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Confined, or refused with `sandbox_unavailable` where this machine cannot.
    #[default]
    Enforce,
    /// Not confined at all.
    DangerousUnconfined,
}

/// `[sandbox.limits]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    pub file_size_bytes: Option<u64>,
    pub address_space_bytes: Option<u64>,
    pub open_files: Option<u64>,
    pub processes: Option<u64>,
    pub pids_max: Option<u64>,
    pub memory_max_bytes: Option<u64>,
}

/// The largest file a command may write unless the operator says otherwise.
pub const DEFAULT_FILE_SIZE_BYTES: u64 = 4 << 30;
/// Processes in a call's own cgroup unless the operator says otherwise.
pub const DEFAULT_PIDS_MAX: u64 = 4096;

impl Config {
    /// The confinement `[sandbox]` asks for, with this machine's sandbox and the default deny
    /// list. A path that is neither absolute nor `~/…`, or an `allow` entry that names no
    /// default entry, is an error at its line.
    pub fn confinement(&self) -> Result<Confinement, ConfigError> {
        self.confinement_on(Sandbox::detect())
    }

    /// As [`Config::confinement`], on a machine that supports what `sandbox` says.
    pub fn confinement_on(&self, sandbox: Sandbox) -> Result<Confinement, ConfigError> {
        let section = &self.file.sandbox;
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut confinement = match section.mode.as_ref().map(|m| *m.get_ref()) {
            Some(Mode::DangerousUnconfined) => Confinement::dangerous_unconfined(),
            _ => Confinement::new(sandbox, home.as_deref(), &self.toolgate_paths()),
        };
        for path in &section.deny {
            confinement.deny(&self.sandbox_path(path, home.as_deref())?);
        }
        for path in &section.allow {
            let resolved = self.sandbox_path(path, home.as_deref())?;
            if !confinement.allow(&resolved) {
                return Err(self.error_at(
                    path.span(),
                    format!(
                        "[sandbox] allow `{}` is not on the deny list; its entries: {}",
                        path.get_ref(),
                        shown(confinement.denied().entries())
                    ),
                ));
            }
        }
        for path in &section.read {
            confinement.readable(self.sandbox_path(path, home.as_deref())?);
        }
        for path in &section.write {
            confinement.writable(self.sandbox_path(path, home.as_deref())?);
        }
        if section.dangerous_unconfined_network {
            confinement.dangerous_unconfined_network();
        }
        if section.dangerous_allow_unix_sockets {
            confinement.dangerous_allow_unix_sockets();
        }
        for (host, addresses) in &section.resolve {
            confinement.pin(host, addresses.clone());
        }
        let limits = &section.limits;
        confinement.set_limits(Limits {
            file_size: Some(limits.file_size_bytes.unwrap_or(DEFAULT_FILE_SIZE_BYTES)),
            address_space: limits.address_space_bytes,
            processes: limits.processes,
            open_files: limits.open_files,
        });
        confinement.set_cgroup_limits(CgroupLimits {
            pids_max: Some(limits.pids_max.unwrap_or(DEFAULT_PIDS_MAX)),
            memory_max: limits.memory_max_bytes,
        });
        Ok(confinement)
    }

    /// toolgate's own files, denied to every command: the state directory, the configuration
    /// directory, the configuration and policy files in use, and the audit log with its
    /// journal files (`audit.db*`).
    pub fn toolgate_paths(&self) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        let state = crate::console::resolved_state_dir();
        paths.extend(state.clone());
        paths.extend(crate::config::user_config_dir());
        paths.extend(self.path.iter().map(|p| absolute(p)));
        paths.extend(self.policy_path().map(|(p, _)| absolute(&p)));
        if let Ok(audit) = self.audit_path()
            && !state.as_ref().is_some_and(|dir| audit.starts_with(dir))
        {
            let audit = absolute(&audit);
            let mut prefix = audit.clone().into_os_string();
            prefix.push("*");
            paths.push(PathBuf::from(prefix));
            paths.push(audit);
        }
        paths
    }

    fn sandbox_path(
        &self,
        path: &Spanned<String>,
        home: Option<&Path>,
    ) -> Result<PathBuf, ConfigError> {
        resolve(path.get_ref(), home).map_err(|message| self.error_at(path.span(), message))
    }
}

/// `text` as a path: absolute, or under `home` for `~/…`.
fn resolve(text: &str, home: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(rest) = text.strip_prefix("~/") {
        return home
            .map(|h| h.join(rest))
            .ok_or_else(|| format!("`{text}` names the home directory, and HOME is not set"));
    }
    let path = PathBuf::from(text);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(format!(
            "sandbox path `{text}` must be absolute or start with `~/`"
        ))
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `toolgate sandbox check`: what this machine supports, what the configuration asks for,
/// and whether a confined child really runs. Exit 0 when commands can run as configured, 1
/// when they would be refused.
pub fn check(config_path: Option<&Path>, json: bool) -> anyhow::Result<u8> {
    let config = Config::load(config_path)?;
    let confinement = config.confinement()?;
    let support = toolgate_sandbox::probe();
    let cgroup = toolgate_exec::cgroup_tier();
    let verdict = self_test(&confinement);
    let runs = verdict.is_ok();
    let gaps = match confinement.sandbox().map(Sandbox::check) {
        Some(Ok(abi)) => toolgate_sandbox::gaps(
            network_mode(&config),
            confinement.unix_sockets(),
            abi,
            support.mount_namespaces,
        ),
        _ => Vec::new(),
    };
    let limits = &config.file.sandbox.limits;
    if json {
        let value = serde_json::json!({
            "machine": {
                "landlock_abi": support.landlock_abi,
                "seccomp": support.seccomp,
                "user_namespaces": support.user_namespaces,
                "mount_namespaces": support.mount_namespaces,
                "cgroup": cgroup.tier.as_str(),
            },
            "mode": match config.file.sandbox.mode.as_ref().map(|m| *m.get_ref()) {
                Some(Mode::DangerousUnconfined) => "dangerous-unconfined",
                _ => "enforce",
            },
            "tier": confinement.describe(),
            "denied": confinement.denied().entries(),
            "network": network_words(&config),
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
                Err(words) => serde_json::json!({"run": false, "why": words}),
            },
            "upstreams": crate::upstream::sandboxes_json(&config)?,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(if runs { 0 } else { 1 });
    }
    let abi = support
        .landlock_abi
        .map_or_else(|| "not available".to_owned(), |abi| format!("abi {abi}"));
    println!("machine:");
    println!("  landlock: {abi}");
    println!(
        "  seccomp: {}",
        if support.seccomp {
            "available"
        } else {
            "not available"
        }
    );
    println!(
        "  user namespaces: {} (not used)",
        if support.user_namespaces {
            "possible"
        } else {
            "not possible"
        }
    );
    println!(
        "  mount namespaces: {}",
        if support.mount_namespaces {
            "possible: the workspace's `.git/hooks` and `.git/config` are bound read-only"
        } else {
            "not possible: `.git/hooks` and `.git/config` stay writable"
        }
    );
    println!("  cgroup: {} ({})", cgroup.tier.as_str(), cgroup.reason);
    println!("configuration: {}", config.display_path());
    println!("  sandbox: {}", confinement.describe());
    println!("  network: {}", network_words(&config));
    println!("  denied to read and write:");
    for entry in confinement.denied().entries() {
        println!("    {}", entry.display());
    }
    for gap in &gaps {
        println!("  gap: {gap}");
    }
    match verdict {
        Ok(words) => println!("commands: run {words}"),
        Err(words) => println!("commands: refused: {words}"),
    }
    crate::upstream::print_sandboxes(&config)?;
    Ok(if runs { 0 } else { 1 })
}

fn network_mode(config: &Config) -> toolgate_sandbox::NetworkMode {
    if config.file.sandbox.dangerous_unconfined_network {
        toolgate_sandbox::NetworkMode::DangerousUnconfined
    } else {
        toolgate_sandbox::NetworkMode::None
    }
}

fn network_words(config: &Config) -> &'static str {
    if config.file.sandbox.dangerous_unconfined_network {
        "UNCONFINED for every command (`dangerous_unconfined_network`)"
    } else {
        "none, unless a call asks for hosts: then only those, through toolgate's proxy"
    }
}

/// Runs `/bin/sh -c 'exit 0'` confined, as a command would be: `Ok` says how it ran, `Err`
/// why commands are refused.
fn self_test(confinement: &Confinement) -> Result<String, String> {
    let Some(sandbox) = confinement.sandbox() else {
        return Ok("unconfined (`dangerous-unconfined`)".to_owned());
    };
    let abi = sandbox
        .check()
        .map_err(|e| format!("sandbox_unavailable: {e}"))?;
    let temp = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let mut spec = toolgate_sandbox::SandboxSpec::new(temp.path(), temp.path());
    spec.denied = confinement.denied().clone();
    let prepared = sandbox
        .prepare(&spec)
        .map_err(|e| format!("{}: {e}", e.code()))?;
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
        Ok(status) => Err(format!("a confined child failed: {status}")),
        Err(e) => Err(format!("a confined child could not start: {e}")),
    }
}
