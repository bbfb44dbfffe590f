//! The approval console of `toolgate serve`: started on a free loopback port, its address and
//! a single-use login link printed once to standard error. The session token the link is
//! exchanged for is never printed: agent clients keep toolgate's standard error in log files,
//! which a model can read back (issue 36). The token is written only to a file the user alone
//! can read (from which a later command can ask the running console for a fresh link), and
//! that file is removed when the server stops. Standing workspace grants are kept in the same
//! state directory, one file per workspace.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use toolgate_console::{
    BrokerOptions, Console, ConsoleBroker, ConsoleOptions, Decision, RecentOutcomes, grants_ledger,
};
use toolgate_core::{ApprovalBroker, GrantLedger, WorkspaceId};
use toolgate_mcp::{Answer, ApprovalDesk};
use toolgate_workspace::Workspace;

use crate::gate::Gate;
use crate::terminal::errln;

/// How many recent outcomes the console lists.
const RECENT_OUTCOMES: usize = 200;

/// A console serving, with the broker, grant ledger and recorder the pipeline must use.
#[derive(Debug)]
pub struct RunningConsole {
    broker: Arc<ConsoleBroker>,
    /// The ledger the console lists and revokes in, and restores the grants file into: the
    /// pipeline's, once attached.
    grants: Arc<GrantLedger>,
    outcomes: Arc<RecentOutcomes>,
    // Held for its drop, which removes the file; then the server stops.
    _token_file: TokenFile,
    _console: Console,
}

impl RunningConsole {
    pub fn start(gate: &Gate, workspace: &Workspace) -> anyhow::Result<RunningConsole> {
        let dir = state_dir(gate, "the console")?;
        let root = workspace.root().display().to_string();
        let options = BrokerOptions {
            timeout: gate.settings.approval.timeout,
            standing_ttl: gate.grant_times.standing,
            workspace_root: root,
            grants_file: Some(dir.join(grants_file_name(workspace))),
        };
        let grants = Arc::new(grants_ledger(&options));
        let broker = Arc::new(ConsoleBroker::new(options, Arc::clone(&grants)));
        // An unreadable grants file restores nothing; the person is asked again.
        if let Err(e) = broker.restore_standing() {
            errln!("toolgate: {e}; no standing grants were restored");
        }
        let outcomes = Arc::new(RecentOutcomes::new(RECENT_OUTCOMES));
        let console = Console::start(
            Arc::clone(&broker),
            Arc::clone(&outcomes),
            ConsoleOptions {
                login_ttl: gate.settings.approval.login_link_ttl,
            },
        )
        .context("cannot start the approval console (use --no-console to run without one)")?;
        let token_path = dir.join(format!("console-{}.token", console.port()));
        let token_file = TokenFile::write(&token_path, console.token())?;
        let link = console
            .login_link()
            .context("cannot make the console's login link")?;
        errln!("toolgate: approval console at {}", console.address());
        errln!(
            "toolgate: open it with this login link, which works once, within {}: {link}",
            spoken(console.login_ttl())
        );
        Ok(RunningConsole {
            broker,
            grants,
            outcomes,
            _token_file: token_file,
            _console: console,
        })
    }

    /// The console's broker as the desk a client's elicitation form answers at.
    pub fn desk(&self) -> Arc<dyn ApprovalDesk> {
        Arc::new(ConsoleDesk(Arc::clone(&self.broker)))
    }

    /// `gate`, asking this console for approvals, granting in the ledger the console lists
    /// and revokes in, and listing outcomes in it, after the recorders it already has.
    pub fn attach(&self, gate: &mut Gate) -> Arc<dyn ApprovalBroker> {
        gate.grants = Arc::clone(&self.grants);
        gate.recorders.push(Arc::clone(&self.outcomes) as _);
        Arc::clone(&self.broker) as _
    }
}

/// A login link's life in words: `5 minutes`, `1 minute`, `90 seconds`.
fn spoken(ttl: std::time::Duration) -> String {
    match ttl.as_secs() {
        60 => "1 minute".to_owned(),
        1 => "1 second".to_owned(),
        secs if secs % 60 == 0 => format!("{} minutes", secs / 60),
        secs => format!("{secs} seconds"),
    }
}

/// Requests waiting in the console, as MCP elicitation finds and answers them.
#[derive(Debug)]
struct ConsoleDesk(Arc<ConsoleBroker>);

impl ApprovalDesk for ConsoleDesk {
    fn question(&self, call_id: &str) -> Option<String> {
        self.0.pending_for_call(call_id)?.as_text()
    }

    fn answer(&self, call_id: &str, answer: Answer) -> Result<(), String> {
        let decision = match answer {
            Answer::AllowOnce => Decision::AllowOnce,
            Answer::Reject { reason } => Decision::Reject { reason },
        };
        self.0
            .decide_for_call(call_id, decision)
            .map_err(|e| e.to_string())
    }
}

/// toolgate's state directory (`$XDG_STATE_HOME/toolgate`, else under `~/.local/state`),
/// created 0700 if need be, for `what` to keep a file in.
pub(crate) fn state_dir(gate: &Gate, what: &str) -> anyhow::Result<PathBuf> {
    let dir = gate.settings.state_dir.dir.clone().with_context(|| {
        format!("cannot find a state directory for {what}: set XDG_STATE_HOME or HOME")
    })?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("cannot create `{}`", dir.display()))?;
    Ok(dir)
}

/// A token kept in a file of the state directory, mode 0600 in a 0700 directory, and removed
/// on drop: the console's in `console-PORT.token`, whose path is not printed either (it is on
/// the deny list of everything toolgate confines, and only the user's own commands need it),
/// and the bearer token `serve --http` generates in `mcp-PORT.token`. Named by port, so two
/// servers never write the same file.
#[derive(Debug)]
pub(crate) struct TokenFile {
    path: PathBuf,
}

impl TokenFile {
    pub(crate) fn write(path: &std::path::Path, token: &str) -> anyhow::Result<TokenFile> {
        let path = path.to_path_buf();
        // A file left by a server that was killed on this port is stale; its token is dead.
        let _ = std::fs::remove_file(&path);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot create `{}`", path.display()))?;
        writeln!(file, "{token}").with_context(|| format!("cannot write `{}`", path.display()))?;
        Ok(TokenFile { path })
    }

    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The file standing grants for `workspace` are kept in, inside the state directory.
fn grants_file_name(workspace: &Workspace) -> String {
    let id = WorkspaceId::new(&workspace.root().to_string_lossy());
    let digest = id.digest().trim_start_matches("sha256:");
    format!("grants-{}.json", digest.get(..16).unwrap_or(digest))
}
