//! Upstream servers run confined, in the same sandbox as approved commands.
//!
//! An upstream started as a child process is a program toolgate runs for as long as it
//! serves, reading whatever its tools are asked to read; it gets no more of the machine than
//! the operator gave it:
//!
//! ```toml
//! [[upstream]]
//! name = "fs"
//! command = ["node", "server-filesystem/dist/index.js", "/srv/docs"]
//! [upstream.sandbox]
//! read = ["/srv/docs"]          # readable besides the system, even inside a denied place
//! write = ["/srv/docs/out"]     # writable besides its private temporary directory
//! network = ["api.example.com"] # hosts reached through toolgate's proxy; default none
//! ```
//!
//! Without `[upstream.sandbox]` an upstream reads the system minus the deny list commands get
//! (toolgate's own files, the credential stores, the shared scratch places) plus its working
//! directory, writes only a private temporary directory (`TMPDIR`, removed when the process
//! ends), and has no network at all. Paths in the section are absolute, `~/…` for the home
//! directory, or relative to the configuration file's directory, as `cwd` is. With `network`
//! hosts, a proxy of its own serves the process while it lives (`HTTP_PROXY`/`HTTPS_PROXY`
//! name it) and the sandbox lets it connect to that port only.
//!
//! A launcher that keeps a cache in the home directory (`npx` in `~/.npm`, `uv` in
//! `~/.cache/uv`) needs it granted (`write = ["~/.npm"]`), or the program installed beforehand
//! and started directly. The temporary directory is removed by toolgate when the process
//! ends; a toolgate that is killed leaves it behind.
//!
//! The operator-wide part, [`UpstreamConfinement`], is filled in by whoever builds the specs
//! (toolgate's `[sandbox]` section: the deny list, limits, pins, `dangerous-unconfined`). A
//! machine that cannot confine does not start the process (`sandbox_unavailable`); it is
//! never started less confined.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toolgate_confine::{Child, Confinement, MAX_NETWORK_HOSTS};
use toolgate_proxy::HostPattern;
use toolgate_sandbox::{DenyList, Limits, Sandbox, SandboxError, UnixSockets};
use toolgate_workspace::snapshot::Guarded;

/// Takes the snapshot of the files that run later in a path an upstream may write, but the
/// paths given (`toolgate_tools::guard_files_that_run_later`): which files those are, the
/// table's and what a repository's git configuration there names, is the caller's knowledge.
pub type GuardFn = fn(&Path, Vec<String>) -> Result<Guarded, String>;

/// What one upstream process runs in, for as long as it runs: dropping it removes the
/// temporary directory and stops the proxy, so it is ended only once the process is gone.
pub(crate) use toolgate_confine::Confined;

use crate::UpstreamError;
use crate::connection::Fault;

/// `[upstream.sandbox]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// Paths readable besides the system, even where they lie inside a denied place.
    #[serde(default)]
    pub read: Vec<String>,
    /// Paths writable besides the private temporary directory.
    #[serde(default)]
    pub write: Vec<String>,
    /// Hosts reachable through toolgate's proxy.
    #[serde(default)]
    pub network: Vec<String>,
}

/// One upstream's own part of its sandbox, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamSandbox {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// Empty: no network at all.
    pub network: Vec<HostPattern>,
}

impl SandboxSection {
    /// Checks the section of upstream `upstream`: paths resolved against `base` (the
    /// configuration file's directory) or `home`, hosts parsed.
    pub(crate) fn check(
        &self,
        upstream: &str,
        base: &Path,
        home: Option<&str>,
    ) -> Result<UpstreamSandbox, UpstreamError> {
        let error = |message: String| {
            UpstreamError::Config(format!(
                "upstream `{upstream}`: [upstream.sandbox] {message}"
            ))
        };
        let path = |key: &str, text: &str| -> Result<PathBuf, UpstreamError> {
            if text.is_empty() {
                return Err(error(format!("{key}: an empty path")));
            }
            if let Some(rest) = text.strip_prefix("~/") {
                return home.map(|h| Path::new(h).join(rest)).ok_or_else(|| {
                    error(format!(
                        "{key} `{text}` names the home directory, and HOME is not set"
                    ))
                });
            }
            if text.starts_with('~') {
                return Err(error(format!(
                    "{key} `{text}`: only `~/` (the home directory) is understood"
                )));
            }
            Ok(base.join(text))
        };
        let read = self
            .read
            .iter()
            .map(|t| path("read", t))
            .collect::<Result<Vec<_>, _>>()?;
        let write = self
            .write
            .iter()
            .map(|t| path("write", t))
            .collect::<Result<Vec<_>, _>>()?;
        if self.network.len() > MAX_NETWORK_HOSTS {
            return Err(error(format!(
                "network names {} hosts; at most {MAX_NETWORK_HOSTS}",
                self.network.len()
            )));
        }
        let mut network = Vec::new();
        for host in &self.network {
            let pattern = HostPattern::parse(host).map_err(|e| {
                error(format!(
                    "network `{host}` is not a host the proxy can allow: {e}"
                ))
            })?;
            if !network.contains(&pattern) {
                network.push(pattern);
            }
        }
        Ok(UpstreamSandbox {
            read,
            write,
            network,
        })
    }
}

/// How toolgate confines every upstream process it starts: this machine's sandbox and the
/// operator's settings, built as commands' are ([`toolgate_confine`]). Cheap to clone.
#[derive(Debug, Clone)]
pub struct UpstreamConfinement {
    /// The sandbox, the deny list, what every upstream may read, limits, Unix sockets, pins;
    /// never what commands may write nor their unconfined network.
    base: Confinement,
    /// How to find the files that another program runs later in a path an upstream may
    /// write: set by whoever knows them (toolgate's binary, from `toolgate-tools`).
    later: Option<GuardFn>,
}

impl UpstreamConfinement {
    /// Upstreams confined by `sandbox`, denied `denied` (the same list commands get).
    pub fn new(sandbox: Sandbox, denied: DenyList) -> Self {
        UpstreamConfinement {
            base: Confinement::with_deny_list(Some(sandbox), denied),
            later: None,
        }
    }

    /// This machine's sandbox, probed now, with the default deny list for `home` (and none of
    /// toolgate's own files, which only the caller knows): what a spec gets until its caller
    /// says otherwise.
    pub fn detect(home: Option<&Path>) -> Self {
        let denied = match home {
            Some(home) => DenyList::defaults(home, &[] as &[&Path]),
            None => DenyList::scratch_only(),
        };
        UpstreamConfinement::new(Sandbox::detect(), denied)
    }

    /// Upstreams run with all of the user's authority: only the operator's
    /// `[sandbox] mode = "dangerous-unconfined"` leads here.
    pub fn dangerous_unconfined() -> Self {
        // No probe of a sandbox that will not be used.
        UpstreamConfinement {
            base: Confinement::with_deny_list(None, DenyList::scratch_only()),
            later: None,
        }
    }

    /// Guards the files that another program runs later in every path an upstream may write
    /// (`guard` takes stock of them): where a mount namespace can be made, the existing ones are
    /// read-only for it and git directories cannot be moved; always, what it changed there is
    /// put back, and reported, whenever it answers a call and when it stops.
    pub fn guard_files_that_run_later(&mut self, guard: GuardFn) {
        self.later = Some(guard);
    }

    /// Lets every upstream read `path` too, even inside a denied place.
    pub fn add_readable(&mut self, path: PathBuf) {
        self.base.readable(path);
    }

    /// The rlimits set in each upstream process.
    pub fn set_limits(&mut self, limits: Limits) {
        self.base.set_limits(limits);
    }

    /// Which Unix sockets upstream processes may make.
    pub fn set_unix_sockets(&mut self, unix_sockets: UnixSockets) {
        self.base.set_unix_sockets(unix_sockets);
    }

    /// Makes an upstream's proxy resolve `host` to `addresses` (still checked like any
    /// other address).
    pub fn pin(&mut self, host: &str, addresses: Vec<IpAddr>) {
        self.base.pin(host, addresses);
    }

    /// The sandbox, unless the operator turned it off.
    pub fn sandbox(&self) -> Option<&Sandbox> {
        self.base.sandbox()
    }

    /// The paths upstream processes may neither read nor write.
    pub fn denied(&self) -> &DenyList {
        self.base.denied()
    }

    /// Makes everything one process of upstream `name` runs in: its temporary directory, its
    /// proxy and its prepared sandbox. `cwd` is where it will run.
    pub(crate) fn start(
        &self,
        name: &str,
        own: &UpstreamSandbox,
        cwd: &Path,
    ) -> Result<Confined, Fault> {
        let Some(sandbox) = self.base.sandbox() else {
            return Ok(Confined::default());
        };
        let refused = |code: &str, e: &dyn std::fmt::Display| {
            Fault::Unavailable(format!(
                "upstream `{name}` was not started: {code}: its sandbox could not be made: {e}"
            ))
        };
        // Said before anything is made: this machine's shortcoming, named as such.
        if let Err(e @ SandboxError::Unavailable { .. }) = sandbox.check() {
            return Err(Fault::SandboxUnavailable(format!(
                "upstream `{name}` was not started: sandbox_unavailable: this machine cannot \
                 confine it ({e}); upstream processes run only confined, unless the operator \
                 sets `[sandbox] mode = \"dangerous-unconfined\"`"
            )));
        }
        let mut child = Child::new(format!("toolgate-upstream-{name}-")).hosts(own.network.clone());
        for path in &own.write {
            child = child.writable(path.clone());
        }
        for path in own.read.iter().chain([&cwd.to_path_buf()]) {
            child = child.readable(path.clone());
        }
        if let Some(take) = self.later {
            for path in own.write.iter().filter(|p| p.is_dir()) {
                let guard = take(path, Vec::new()).map_err(|e| {
                    refused(
                        "sandbox_failed",
                        &format!(
                            "the files that run later in `{}` could not be taken stock of: {e}",
                            path.display()
                        ),
                    )
                })?;
                child = child.guard(guard);
            }
        }
        self.base.start(child).map_err(|e| refused(e.code(), &e))
    }
    /// What an upstream with `own` and working directory `cwd` is confined to, in words for
    /// the operator (`toolgate sandbox check`): one line each.
    pub fn describe(&self, own: &UpstreamSandbox, cwd: &Path) -> Vec<String> {
        let shown = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| format!("`{}`", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some(sandbox) = self.base.sandbox() else {
            return vec![
                "sandbox: NONE — the operator's `dangerous-unconfined` setting; the upstream \
                 runs with all of the user's authority"
                    .to_owned(),
            ];
        };
        let abi = match sandbox.check() {
            Ok(abi) => abi,
            Err(e) => return vec![format!("sandbox_unavailable: not started ({e})")],
        };
        let mut lines = vec![format!("sandbox: landlock+seccomp (landlock abi {abi})")];
        let mut read = vec![cwd.to_path_buf()];
        read.extend(own.read.iter().cloned());
        lines.push(format!(
            "read: the system but the deny list, and {}",
            shown(&read)
        ));
        let mut write = String::from("write: its private TMPDIR");
        if !own.write.is_empty() {
            let _ = write!(write, ", {}", shown(&own.write));
        }
        lines.push(write);
        if own.network.is_empty() {
            lines.push("network: none".to_owned());
        } else {
            let hosts: Vec<String> = own.network.iter().map(ToString::to_string).collect();
            lines.push(format!(
                "network: only through toolgate's proxy, to {}",
                hosts.join(", ")
            ));
        }
        // The gaps every sandbox has are listed once, with `[sandbox]`; these are the
        // upstream's own.
        if !own.network.is_empty() {
            lines.push(
                "gap: landlock names ports, not hosts: its proxy's tcp port is reachable on any \
                 address, not only on 127.0.0.1"
                    .to_owned(),
            );
        }
        if self.base.unix_sockets() == UnixSockets::Allowed && abi < 9 {
            lines.push(
                "gap: pathname unix sockets outside the sandbox are reachable \
                 (`dangerous_allow_unix_sockets`)"
                    .to_owned(),
            );
        }
        lines
    }
}
