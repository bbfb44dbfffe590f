//! The approval console of `toolgate serve`: started on a free loopback port, its address and
//! a single-use login link printed once to standard error. The session token the link is
//! exchanged for is never printed: agent clients keep toolgate's standard error in log files,
//! which a model can read back (issue 36). The token is written only to a file the user alone
//! can read, `console-PORT.token`, beside `console-PORT.json`, which names the server's
//! workspace; both are removed when the server stops. Standing workspace grants are kept in
//! the same state directory, one file per workspace.
//!
//! `toolgate console --workspace DIR` ([`open`]) finds the running server whose workspace is
//! DIR's real path through those files, presents the token to that console's own API
//! (`POST /api/login-links`, as a logged-in page does) and prints only the fresh single-use
//! link it gets back. The state directory is on the deny list of everything toolgate confines,
//! so only the user's own commands, not a confined tool or command, can do this.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use toolgate_console::{
    BrokerOptions, Console, ConsoleBroker, ConsoleOptions, Decision, ProjectStatus, ProjectTrust,
    ProjectView, RecentOutcomes, TrustRefusal, grants_ledger,
};
use toolgate_core::{ApprovalBroker, GrantLedger, WorkspaceId};
use toolgate_mcp::{Answer, ApprovalDesk, Arrivals, NotTaken};
use toolgate_workspace::Workspace;

use crate::cli::ConsoleArgs;

use crate::gate::Gate;
use crate::terminal::{errln, outln};

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
    // Held for their drop, which removes the files; then the server stops.
    _token_file: TokenFile,
    _server_file: TokenFile,
    _console: Console,
}

impl RunningConsole {
    /// `config` is the `--config` the server was started with: the console reads the
    /// project's configuration as the server did, afresh each time it is shown.
    pub fn start(
        gate: &Gate,
        workspace: &Workspace,
        config: Option<&std::path::Path>,
    ) -> anyhow::Result<RunningConsole> {
        let dir = state_dir(gate, "the console")?;
        let root = workspace.root().display().to_string();
        let options = BrokerOptions {
            timeout: gate.settings.approval.timeout,
            standing_ttl: gate.grant_times.standing,
            workspace_root: root,
            grants_file: Some(dir.join(grants_file_name(workspace))),
            descriptor_flags: crate::upstream::pinned_flags(gate),
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
                project: Some(Arc::new(ProjectDesk {
                    config: config.map(std::path::absolute).transpose()?,
                    root: workspace.root().to_path_buf(),
                    state: dir.clone(),
                })),
            },
        )
        .context("cannot start the approval console (use --no-console to run without one)")?;
        let token_path = dir.join(format!("console-{}.token", console.port()));
        let token_file = TokenFile::write(&token_path, console.token())?;
        let record = ServerRecord {
            port: console.port(),
            workspace: workspace.root().to_path_buf(),
            pid: std::process::id(),
        };
        let server_file = TokenFile::write(
            &dir.join(format!("console-{}.json", console.port())),
            &serde_json::to_string(&record).context("cannot describe the console")?,
        )?;
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
            _server_file: server_file,
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

    fn arrivals(&self) -> Arrivals {
        self.0.arrivals()
    }

    fn answer(&self, call_id: &str, answer: Answer) -> Result<(), NotTaken> {
        let decision = match answer {
            Answer::AllowOnce => Decision::AllowOnce,
            Answer::Reject { reason } => Decision::Reject { reason },
        };
        Ok(self.0.decide_for_call(call_id, decision)?)
    }
}

/// The workspace's `.toolgate/` configuration, read as `toolgate check` reads it each time
/// the console shows it, and trusted on a person's decision there (recorded as by `console`).
/// What is trusted applies when `toolgate serve` starts again: the running server's settings
/// were read when it started and stay as they are.
#[derive(Debug)]
struct ProjectDesk {
    config: Option<PathBuf>,
    root: PathBuf,
    state: PathBuf,
}

impl ProjectDesk {
    /// The view, and the closure it shows when there is one to trust.
    fn read(&self) -> (ProjectView, Option<crate::trust::Closure>) {
        let workspace = self.root.display().to_string();
        let project = match crate::Settings::load_for(self.config.as_deref(), &self.root) {
            Ok(settings) => settings.project,
            Err(e) => {
                let mut view = ProjectView::bare(ProjectStatus::Error, workspace);
                view.error = Some(e.to_string());
                return (view, None);
            }
        };
        let Some(project) = project else {
            return (ProjectView::bare(ProjectStatus::None, workspace), None);
        };
        let view = crate::trust::view(&project);
        (view, Some(project.closure))
    }
}

impl ProjectTrust for ProjectDesk {
    fn view(&self) -> ProjectView {
        self.read().0
    }

    fn trust(&self, digest: &str) -> Result<ProjectView, TrustRefusal> {
        let (view, closure) = self.read();
        // The closure trusted is the one just read, whose digest is the one the person was
        // shown: a file changed after this read makes the record's digest differ from the
        // files', and the configuration pending again.
        let Some(closure) = closure.filter(|closure| closure.digest() == digest) else {
            return Err(TrustRefusal::NotAsShown(Box::new(view)));
        };
        crate::trust::trust(&self.state, &self.root, &closure, "console")
            .map_err(|e| TrustRefusal::Failed(format!("{e:#}")))?;
        Ok(self.view())
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

/// What a running server leaves in `console-PORT.json` of the state directory, for
/// `toolgate console` to find it by workspace.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ServerRecord {
    port: u16,
    /// The workspace's canonical root.
    workspace: PathBuf,
    pid: u32,
}

/// The exit code when no running server with a console serves the workspace, or the link
/// could not be opened.
const EXIT_NOT_FOUND: u8 = 1;

/// The most of a console's answer read; a login link's is a few hundred bytes, the page a
/// few thousand.
const MAX_ANSWER_BYTES: u64 = 1 << 20;

/// `toolgate console`: prints a fresh single-use login link to the console of the running
/// server for `args.workspace`, and opens it with `--open`.
pub fn open(args: &ConsoleArgs) -> anyhow::Result<u8> {
    let workspace = std::fs::canonicalize(&args.workspace)
        .with_context(|| format!("workspace `{}`", args.workspace.display()))?;
    let dir = crate::settings::StateDir::from_environment()
        .dir
        .context("cannot find toolgate's state directory: set XDG_STATE_HOME or HOME")?;
    let mut servers = servers_of(&dir, &workspace);
    // The newest server first: an older record may be one a killed server left.
    servers.sort_by_key(|server| std::cmp::Reverse(server.1));
    let mut failures = Vec::new();
    let mut link = None;
    for (record, _) in &servers {
        // A record a killed server left names a port another process may hold now: its token
        // is dead, but the link that process would give back is not the console's.
        if !std::path::Path::new("/proc")
            .join(record.pid.to_string())
            .exists()
        {
            failures.push(format!(
                "port {}: its server (process {}) has stopped",
                record.port, record.pid
            ));
            continue;
        }
        match mint_link(&dir, record.port) {
            Ok(minted) => {
                link = Some(minted);
                break;
            }
            Err(e) => failures.push(format!("port {}: {e:#}", record.port)),
        }
    }
    let Some(link) = link else {
        errln!(
            "toolgate: no running `toolgate serve` with an approval console for workspace `{}`; start one with `toolgate serve --workspace {}`",
            workspace.display(),
            args.workspace.display()
        );
        for failure in failures {
            errln!("toolgate: a server recorded for it cannot be reached: {failure}");
        }
        return Ok(EXIT_NOT_FOUND);
    };
    outln!("{link}");
    errln!("toolgate: this login link works once, for a few minutes");
    if args.open
        && let Err(e) = open_with_desktop(&link)
    {
        errln!("toolgate: cannot open the link: {e:#}; open the link above yourself");
        return Ok(EXIT_NOT_FOUND);
    }
    Ok(0)
}

/// The servers recorded in `dir` for `workspace`, with when each record was written. A record
/// that cannot be read or parsed is skipped: it names no server this command could use.
fn servers_of(
    dir: &std::path::Path,
    workspace: &std::path::Path,
) -> Vec<(ServerRecord, std::time::SystemTime)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with("console-") && name.ends_with(".json")
        })
        .filter_map(|entry| {
            let text = std::fs::read_to_string(entry.path()).ok()?;
            let record: ServerRecord = serde_json::from_str(text.trim()).ok()?;
            let name = format!("console-{}.json", record.port);
            let written = entry.metadata().ok()?.modified().ok()?;
            (entry.file_name() == name.as_str() && record.workspace == workspace)
                .then_some((record, written))
        })
        .collect()
}

/// A fresh login link from the console on `port`, asked for with the token in `dir`'s
/// `console-PORT.token` as a logged-in page asks: the page for its CSRF value, then
/// `POST /api/login-links`. Only a link of that console's own form is accepted.
fn mint_link(dir: &std::path::Path, port: u16) -> anyhow::Result<String> {
    let token_path = dir.join(format!("console-{port}.token"));
    let token = std::fs::read_to_string(&token_path)
        .with_context(|| format!("cannot read `{}`", token_path.display()))?;
    let cookie = format!("toolgate_console_{port}={}", token.trim());
    let (status, page) = console_request(port, "GET", "/", &[("cookie", &cookie)])?;
    anyhow::ensure!(status == 200, "the console answered {status} for its page");
    let csrf = page
        .split_once("name=\"toolgate-csrf\" content=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(csrf, _)| csrf.to_owned())
        .context("the console's page carries no CSRF value")?;
    let (status, body) = console_request(
        port,
        "POST",
        "/api/login-links",
        &[("cookie", &cookie), (toolgate_console::CSRF_HEADER, &csrf)],
    )?;
    anyhow::ensure!(
        status == 200,
        "the console answered {status} for a login link"
    );
    let answer: serde_json::Value = serde_json::from_str(body.trim())
        .context("the console's answer for a login link is not JSON")?;
    let url = answer
        .get("url")
        .and_then(serde_json::Value::as_str)
        .context("the console's answer holds no login link")?;
    let code = url
        .strip_prefix(&format!("http://127.0.0.1:{port}/login?code="))
        .context("the console's login link is not one of its own")?;
    anyhow::ensure!(
        !code.is_empty() && code.bytes().all(|b| b.is_ascii_hexdigit()),
        "the console's login link holds no login code"
    );
    Ok(url.to_owned())
}

/// One request to the console on `port` (loopback), without a body: its status and body.
fn console_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> anyhow::Result<(u16, String)> {
    use std::io::Read as _;
    let timeout = std::time::Duration::from_secs(10);
    let address = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
    let mut stream = std::net::TcpStream::connect_timeout(&address, timeout)
        .with_context(|| format!("cannot connect to 127.0.0.1:{port}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("content-length: 0\r\n\r\n");
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.take(MAX_ANSWER_BYTES).read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .context("the console's answer is not HTTP")?;
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .context("the console's answer is not HTTP")?;
    // The console answers with a length, not in chunks; a chunked answer is refused.
    anyhow::ensure!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "the console's answer is chunked"
    );
    Ok((status, body.to_owned()))
}

/// Opens `link` with `xdg-open`, found on `PATH`.
fn open_with_desktop(link: &str) -> anyhow::Result<()> {
    let opener = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("xdg-open"))
        .find(|candidate| candidate.is_file())
        .context("no `xdg-open` on PATH to open it with")?;
    let status = std::process::Command::new(&opener)
        .arg(link)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("cannot run `{}`", opener.display()))?;
    anyhow::ensure!(status.success(), "`{}` failed ({status})", opener.display());
    Ok(())
}
