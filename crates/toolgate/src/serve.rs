//! `toolgate serve`: the configured pipeline behind an MCP server, on stdio or HTTP.
//!
//! Calls that need a person's consent wait in the approval console (see [`crate::console`]);
//! with `--no-console` they come back to the model as `approval_required`. Over HTTP every
//! request needs a bearer token from `[[serve.token]]`; with none configured, a fresh token is
//! generated, so the server never runs open by accident, and kept in a user-only file of the
//! state directory whose path is printed: the token itself is not, since a server's standard
//! error often ends up in a log a model can read (issue 36).
//!
//! Whatever toolgate starts — upstream servers, the commands of `run_command` and
//! `run_script` — is also known to one watchdog process ([`watchdog`]), which ends it should
//! toolgate be killed outright.

use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use toolgate_core::{ApprovalBroker, HeadlessBroker};
use toolgate_exec::{ProcessId, TreeObserver, Watchdog};
use toolgate_mcp::{Elicitation, HttpOptions, Principal, Server};

use crate::audit::Appending;
use crate::cli::ServeArgs;
use crate::console::{RunningConsole, TokenFile, state_dir};
use crate::gate::{Gate, open_workspace};
use crate::settings::Settings;
use crate::terminal::errln;

/// The smallest message limit; above it, room for the largest argument text twice over, so
/// that an oversized argument is refused by stage 1 (`too_large`, as a tool error) rather than
/// by the transport.
const MIN_MESSAGE_BYTES: usize = 4 << 20;

/// How long, past the approval timeout, a call that asked a 2026-07-28 client by form waits
/// for the client to come back for its result.
const ELICITATION_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// toolgate's watchdog, shared by the upstreams and the commands, started the first time
/// one of them needs it: toolgate itself, run as `toolgate upstream-watchdog` (see
/// [`toolgate_exec::watchdog`]).
pub(crate) fn watchdog() -> anyhow::Result<Arc<Watchdog>> {
    static WATCHDOG: Mutex<Option<Arc<Watchdog>>> = Mutex::new(None);
    let mut slot = WATCHDOG.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(watchdog) = slot.as_ref() {
        return Ok(Arc::clone(watchdog));
    }
    let exe = std::env::current_exe().context("cannot find toolgate's own executable")?;
    let mut command = std::process::Command::new(exe);
    command.arg("upstream-watchdog");
    let watchdog = Arc::new(Watchdog::start(command).context("cannot start the watchdog")?);
    *slot = Some(Arc::clone(&watchdog));
    Ok(watchdog)
}

/// From now on, every command toolgate runs is told to the watchdog process by process, and
/// a command it cannot be told of does not run. toolgate spawns no child it does not
/// register, so any unregistered process it adopts is taken for a command's.
pub(crate) fn watch_commands() {
    toolgate_exec::no_unregistered_children();
    toolgate_exec::observe_every_command(Arc::new(CommandWatch));
}

/// Forwards a command's tree to the watchdog, starting it for the first command.
#[derive(Debug)]
struct CommandWatch;

impl TreeObserver for CommandWatch {
    fn started(&self, call: u64, leader: ProcessId) -> std::io::Result<()> {
        watchdog()
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?
            .started(call, leader)
    }

    fn saw(&self, call: u64, process: ProcessId) {
        // `started` has started it; a watchdog that stopped since says so itself.
        if let Ok(watchdog) = watchdog() {
            watchdog.saw(call, process);
        }
    }

    fn ended(&self, call: u64) {
        if let Ok(watchdog) = watchdog() {
            watchdog.ended(call);
        }
    }

    fn cgroup(&self, call: u64, directory: &std::path::Path) {
        if let Ok(watchdog) = watchdog() {
            watchdog.cgroup(call, directory);
        }
    }
}

pub fn serve(args: &ServeArgs) -> anyhow::Result<u8> {
    watch_commands();
    let workspace = open_workspace(&args.workspace)?;
    let settings = Arc::new(Settings::load_for(
        args.config.config.as_deref(),
        workspace.root(),
    )?);
    if let Some(project) = settings.project.as_ref().filter(|p| !p.pending.is_empty()) {
        errln!(
            "toolgate: the workspace's `.toolgate/` configuration is {}: {} setting(s) that would widen have no effect (`toolgate check` lists them; `toolgate trust` or the console trusts them)",
            project.trust.status().as_str(),
            project.pending.len()
        );
    }
    let gate = Gate::configured(settings, Arc::clone(&workspace))?;
    // Checked before any upstream is started.
    check_profile(&gate, &args.profile, "--profile")?;
    let gate = gate.start()?;
    let mut gate = gate.with_audit_log(Appending::Lasting)?;
    let max_message_bytes = gate
        .settings
        .bounds
        .max_argument_bytes
        .saturating_mul(2)
        .saturating_add(64 << 10)
        .max(MIN_MESSAGE_BYTES);
    let console = if args.no_console {
        None
    } else {
        Some(RunningConsole::start(
            &gate,
            &workspace,
            args.config.config.as_deref(),
        )?)
    };
    let broker: Arc<dyn ApprovalBroker> = match &console {
        Some(console) => console.attach(&mut gate),
        None => Arc::new(HeadlessBroker),
    };
    let pipeline = gate.pipeline(&workspace, Arc::clone(&broker));
    let mut server = Server::new(pipeline, "toolgate", env!("CARGO_PKG_VERSION"));
    let elicitation = gate.settings.elicitation_profiles();
    match &console {
        Some(console) if !elicitation.is_empty() => {
            server = server.with_elicitation(Elicitation {
                desk: console.desk(),
                profiles: elicitation,
                hold: gate.settings.approval.timeout + ELICITATION_GRACE,
            });
        }
        None if !elicitation.is_empty() => errln!(
            "toolgate: [approval] elicitation is not used with --no-console: the console keeps the requests a client's form answers"
        ),
        _ => {}
    }
    let server = Arc::new(server);
    let gate = Arc::new(gate);
    follow_upstreams(&gate, &server, broker);
    let Some(addr) = args.http else {
        let principal = Principal::new(&args.actor, &args.profile);
        toolgate_mcp::run_stdio(server, principal, max_message_bytes)?;
        return Ok(0);
    };
    let mut options = HttpOptions::new(gate.settings.token_table()?);
    options.max_message_bytes = max_message_bytes;
    options.allowed_hosts = gate.settings.serve.allowed_hosts.clone();
    options.sessions = gate.settings.serve.sessions;
    options.release_memory = Some(toolgate_sandbox::release_free_memory);
    let listener = toolgate_mcp::bind(
        addr,
        args.dangerous_bind_any || gate.settings.serve.dangerous_bind_any,
    )?;
    // Held while the server runs; dropping it removes the file.
    let mut _generated_token_file = None;
    if args.dangerous_no_auth {
        options.dangerous_anonymous = Some(Principal::new("anonymous", &args.profile));
    } else if options.tokens.is_empty() {
        let token = toolgate_mcp::generate_token()
            .map_err(|e| anyhow::anyhow!("cannot generate a token: {e}"))?;
        options
            .tokens
            .insert(&token, Principal::new(&args.actor, &args.profile))
            .map_err(|e| anyhow::anyhow!("generated token: {e}"))?;
        let dir = state_dir(
            &gate,
            "this run's generated token (or configure [[serve.token]])",
        )?;
        let port = listener.local_addr()?.port();
        let file = TokenFile::write(&dir.join(format!("mcp-{port}.token")), &token)?;
        errln!(
            "toolgate: no [[serve.token]] is configured; this run's token (actor `{}`, profile `{}`) is in {}, readable by you only\ntoolgate: send it as `Authorization: Bearer <token>`",
            args.actor,
            args.profile,
            file.path().display()
        );
        _generated_token_file = Some(file);
    }
    errln!(
        "toolgate: serving MCP at http://{}/mcp",
        listener.local_addr()?
    );
    toolgate_mcp::run_http(server, listener, options)?;
    Ok(0)
}

/// Rebuilds the pipeline whenever an upstream's tool list changes, so that sessions are told
/// (`list_changed`) and a changed tool is quarantined at once. If the rebuild fails, the last
/// pipeline stays in force.
fn follow_upstreams(gate: &Arc<Gate>, server: &Arc<Server>, broker: Arc<dyn ApprovalBroker>) {
    let Some(upstreams) = &gate.upstreams else {
        return;
    };
    // Weak references: the gate owns the upstreams, which own this callback.
    let weak_gate = Arc::downgrade(gate);
    let weak_server = Arc::downgrade(server);
    // Each upstream calls back on its own thread. Without this, a rebuild from an older list
    // could finish after one from a newer list and put the older pipeline back in force.
    let rebuilding = std::sync::Mutex::new(());
    let rebuild = Arc::new(move || {
        let (Some(gate), Some(server)) = (weak_gate.upgrade(), weak_server.upgrade()) else {
            return;
        };
        let _serialised = rebuilding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match gate.current_pipeline(Arc::clone(&broker)) {
            Ok(pipeline) => server.replace_pipeline(pipeline),
            Err(e) => errln!(
                "toolgate: an upstream's tools changed, but the registry cannot be rebuilt; the last one stays in force: {e}"
            ),
        }
    });
    upstreams.on_change(rebuild.clone());
    // A change between the first listing and now would otherwise go unnoticed.
    rebuild();
}

fn check_profile(gate: &Gate, profile: &str, what: &str) -> anyhow::Result<()> {
    let profiles = gate.registry.profiles();
    if profiles.contains(profile) {
        return Ok(());
    }
    let known: Vec<&str> = profiles.into_iter().collect();
    Err(anyhow::anyhow!(
        "{what}: unknown profile `{profile}`; profiles: {}",
        known.join(", ")
    ))
    .context("cannot serve")
}
