//! A repository's own configuration (`.toolgate/`) through the real binary: every row of
//! `tests/corpus/malicious_repos.jsonl` is a hostile repository, one per published attack
//! class, made in a fresh workspace with a home of its own, set up as its row says (trusted at
//! a terminal, then changed, moved, cloned...), and probed with `check`, `explain`, `call`,
//! `tools list` and `serve` over MCP. Each must leave no canary file and no process of the
//! row's marker, answer no call more permissively than the same user configuration over a
//! workspace without the repository's files, list no tool the plain workspace does not, and
//! either refuse to start with an error naming the file or list the item as pending or
//! ignored. And the paths that must keep working: a narrowing configuration applies untrusted;
//! trust given at a terminal makes what was pending apply; a changed byte makes it pending
//! again; `--revoke` and `--list`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use support::{clients, home};

/// The files of every workspace, the plain one and the hostile ones alike: what the probes
/// read and write.
const FIXTURE: &[(&str, &str)] = &[
    ("a.txt", "alpha\n"),
    (".env", "API_KEY=canary-secret-value\n"),
    ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n"),
];

/// The calls every row is probed with, besides its own: a plain read, a secret read, a write,
/// a write to a file that runs later, a command, and the same from a model in the read-only
/// profile.
fn default_probes() -> Vec<Value> {
    vec![
        json!({"tool": "read_file", "args": {"path": "a.txt"}}),
        json!({"tool": "read_file", "args": {"path": ".env"}}),
        json!({"tool": "write_file", "args": {"path": "b.txt", "content": "x"}}),
        json!({"tool": "write_file", "args": {"path": ".mcp.json", "content": "{}"}}),
        json!({"tool": "run_command", "args": {"argv": ["true"]}}),
        json!({"tool": "run_command", "args": {"argv": ["true"]}, "surface": "chat", "profile": "readonly"}),
        json!({"tool": "list_dir", "args": {"path": "."}, "surface": "chat", "profile": "readonly"}),
    ]
}

/// How permissive an answer is: refused, asks a person, runs unattended.
fn rank_of_explain(reports: &Value) -> u8 {
    let decisions: Vec<&str> = reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["decision"].as_str().unwrap())
        .collect();
    if decisions.contains(&"reject") {
        0
    } else if decisions.contains(&"ask") {
        1
    } else {
        2
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// How many processes hold `marker` in their command line.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            found.push(cmdline);
        }
    }
    found
}

/// The longest one run of toolgate may take.
const PATIENCE: Duration = Duration::from_secs(30);

/// `child`'s output once it ends, or once it is killed after [`PATIENCE`] (with exit code
/// `None`).
fn within_patience(mut child: std::process::Child) -> Output {
    let stdout = clients::collected(child.stdout.take().unwrap());
    let stderr = clients::collected(child.stderr.take().unwrap());
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The readers finish once the pipes close.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline
        && (Arc::strong_count(&stdout) > 1 || Arc::strong_count(&stderr) > 1)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let taken = |text: &Arc<std::sync::Mutex<String>>| text.lock().unwrap().clone().into_bytes();
    Output {
        status,
        stdout: taken(&stdout),
        stderr: taken(&stderr),
    }
}

fn shell_quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// One hostile repository being probed: its directory (the home of every process it starts),
/// the workspace probed, the plain workspace compared against.
struct Scene {
    dir: PathBuf,
    ws: PathBuf,
    base: PathBuf,
    marker: String,
    listener: TcpListener,
    /// Everything every toolgate run printed, searched for what only a started program says.
    printed: String,
}

impl Scene {
    fn new() -> Scene {
        let dir = home::fresh();
        let marker = format!(
            "tgmark{}x{}",
            std::process::id(),
            dir.file_name().unwrap().to_string_lossy().replace('-', "")
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        for sub in ["canaries", "outside", ".config/toolgate"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::fs::write(dir.join("outside/secret.txt"), "outside-secret-value\n").unwrap();
        let scene = Scene {
            ws: dir.join("ws"),
            base: dir.join("base"),
            dir,
            marker,
            listener,
            printed: String::new(),
        };
        for root in [&scene.ws, &scene.base] {
            for (path, content) in FIXTURE {
                let path = root.join(path);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, content).unwrap();
            }
        }
        scene
    }

    /// `text` with the row's placeholders filled in.
    fn fill(&self, text: &str) -> String {
        // `{toolgate}` is the binary, for a command of the row, which runs with the environment
        // (the home) that `home::toolgate_at` gave the toolgate running it.
        text.replace("{toolgate}", clients::toolgate_bin())
            .replace(
                "{canary}",
                &self.dir.join("canaries/hit").display().to_string(),
            )
            .replace(
                "{canaries}",
                &self.dir.join("canaries").display().to_string(),
            )
            .replace("{marker}", &self.marker)
            .replace("{ws}", &self.dir.join("ws").display().to_string())
            .replace("{outside}", &self.dir.join("outside").display().to_string())
            .replace("{home}", &self.dir.display().to_string())
            .replace(
                "{listener}",
                &self.listener.local_addr().unwrap().to_string(),
            )
    }

    /// Makes `files` (path → text, or a special entry) beneath `root`.
    fn make(&self, root: &Path, files: &serde_json::Map<String, Value>) {
        for (path, spec) in files {
            let path = root.join(self.fill(path));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            if path.symlink_metadata().is_ok() && !path.is_dir() {
                std::fs::remove_file(&path).unwrap();
            }
            match spec {
                Value::String(text) => std::fs::write(&path, self.fill(text)).unwrap(),
                Value::Object(special) => {
                    if let Some(target) = special.get("link") {
                        std::os::unix::fs::symlink(self.fill(target.as_str().unwrap()), &path)
                            .unwrap();
                    } else if special.contains_key("fifo") {
                        let status = Command::new("mkfifo").arg(&path).status().unwrap();
                        assert!(status.success());
                    } else if let Some(hex) = special.get("hex") {
                        let hex = hex.as_str().unwrap();
                        let bytes: Vec<u8> = (0..hex.len())
                            .step_by(2)
                            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                            .collect();
                        std::fs::write(&path, bytes).unwrap();
                    } else if let Some(unit) = special.get("repeat") {
                        let times = special["times"].as_u64().unwrap() as usize;
                        std::fs::write(&path, unit.as_str().unwrap().repeat(times)).unwrap();
                    } else if let Some(count) = special.get("count") {
                        std::fs::remove_file(&path).ok();
                        std::fs::create_dir_all(&path).unwrap();
                        for i in 0..count.as_u64().unwrap() {
                            std::fs::write(path.join(format!("{i}.txt")), "x\n").unwrap();
                        }
                    } else if let Some(text) = special.get("text") {
                        std::fs::write(&path, self.fill(text.as_str().unwrap())).unwrap();
                        let mode = u32::from_str_radix(special["mode"].as_str().unwrap(), 8);
                        std::fs::set_permissions(
                            &path,
                            std::fs::Permissions::from_mode(mode.unwrap()),
                        )
                        .unwrap();
                    } else {
                        panic!("unknown special file {special:?}");
                    }
                }
                other => panic!("unknown file entry {other}"),
            }
        }
    }

    fn toolgate(&self) -> Command {
        let mut command = home::toolgate_at(&self.dir);
        command.stdin(Stdio::null());
        command
    }

    /// Runs `command` to its end, or kills it after [`PATIENCE`]: a hostile row may make a
    /// run wait (a reader of a FIFO, a client of a server that never answers).
    fn run(&mut self, command: &mut Command) -> Output {
        let output = within_patience(
            command
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        self.printed.push_str(&text(&output));
        output
    }

    /// `toolgate ARGS` on a pseudo-terminal (util-linux `script`), `answer` typed at it.
    fn at_terminal(&mut self, args: &[String], answer: &str) -> (i32, String) {
        let command = std::iter::once(clients::toolgate_bin().to_owned())
            .chain(args.iter().cloned())
            .map(|w| shell_quoted(&w))
            .collect::<Vec<_>>()
            .join(" ");
        let output = home::isolated_at(Command::new("script"), &self.dir)
            .args(["-qec", &command, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                child.stdin.take().unwrap().write_all(answer.as_bytes())?;
                Ok(within_patience(child))
            })
            .expect("util-linux `script` runs");
        let shown = text(&output);
        self.printed.push_str(&shown);
        (output.status.code().unwrap_or(-1), shown)
    }

    /// `toolgate trust` of the workspace, as a person types `trust` at a terminal.
    fn trust(&mut self) -> String {
        let ws = self.ws.display().to_string();
        let (code, shown) =
            self.at_terminal(&["trust".into(), "--workspace".into(), ws], "trust\n");
        assert_eq!(code, 0, "{shown}");
        assert!(shown.contains("trusted: "), "{shown}");
        shown
    }

    fn setup(&mut self, step: &Value) {
        let step = step.as_object().unwrap();
        if step.contains_key("trust") {
            self.trust();
        }
        if let Some(files) = step.get("files") {
            let ws = self.ws.clone();
            self.make(&ws, files.as_object().unwrap());
        }
        if let Some(path) = step.get("remove") {
            let path = self.ws.join(path.as_str().unwrap());
            if path.is_dir() && !path.is_symlink() {
                std::fs::remove_dir_all(path).unwrap();
            } else {
                std::fs::remove_file(path).unwrap();
            }
        }
        if let Some(to) = step.get("move_workspace") {
            let to = self.dir.join(to.as_str().unwrap());
            std::fs::rename(&self.ws, &to).unwrap();
            self.ws = to;
        }
        if let Some(to) = step.get("copy_workspace") {
            let to = self.dir.join(to.as_str().unwrap());
            let status = Command::new("cp")
                .arg("-a")
                .arg(&self.ws)
                .arg(&to)
                .status()
                .unwrap();
            assert!(status.success());
            self.ws = to;
        }
        if step.contains_key("recreate_workspace") {
            let aside = self.dir.join("aside");
            let status = Command::new("cp")
                .arg("-a")
                .arg(&self.ws)
                .arg(&aside)
                .status()
                .unwrap();
            assert!(status.success());
            std::fs::remove_dir_all(&self.ws).unwrap();
            std::fs::rename(&aside, &self.ws).unwrap();
        }
        if let Some(args) = step.get("git") {
            let args: Vec<String> = args
                .as_array()
                .unwrap()
                .iter()
                .map(|a| self.fill(a.as_str().unwrap()))
                .collect();
            let output = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(["-c", "init.defaultBranch=main"])
                .args(&args)
                .current_dir(&self.ws)
                .env("HOME", &self.dir)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(output.status.success(), "git {args:?}: {output:?}");
        }
        if let Some(at) = step.get("link_workspace") {
            // The path the person trusted, now a link to another directory.
            let at = self.dir.join(at.as_str().unwrap());
            std::os::unix::fs::symlink(&self.ws, &at).unwrap();
            self.ws = at;
        }
        if let Some(to) = step.get("workspace") {
            self.ws = self.dir.join(to.as_str().unwrap());
        }
    }

    /// `toolgate explain --json` of `probe` over `ws`: how permissive its answer is.
    fn explain(&mut self, ws: &Path, probe: &Value) -> (u8, String) {
        let output = self.run(self.toolgate().args(probe_args("explain", ws, probe)));
        let shown = text(&output);
        match serde_json::from_slice::<Value>(&output.stdout) {
            Ok(reports) if reports.is_array() => (rank_of_explain(&reports), shown),
            _ => (0, shown),
        }
    }

    /// The visible tools of `profile` listed in `ws`: (name, effect, description) each.
    fn listed(&mut self, ws: &Path, profile: &str) -> Option<BTreeSet<(String, String, String)>> {
        let output = self.run(
            self.toolgate()
                .args(["tools", "list", "--json", "--profile", profile])
                .current_dir(ws),
        );
        let listing: Value = serde_json::from_slice(&output.stdout).ok()?;
        Some(
            listing["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    (
                        t["name"].as_str().unwrap().to_owned(),
                        t["effect"].to_string(),
                        t["description"].to_string(),
                    )
                })
                .collect(),
        )
    }

    /// `toolgate serve` over stdio, driven as an MCP client would: initialize, list the tools,
    /// read `a.txt`. The tools listed, and the processes of the marker while it served.
    fn serve(&mut self) -> (Option<Vec<String>>, Vec<String>, String) {
        let mut child = self
            .toolgate()
            .args(["serve", "--no-console", "--workspace"])
            .arg(&self.ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = clients::collected(child.stderr.take().unwrap());
        let answers = clients::lines_of(child.stdout.take().unwrap(), |line| {
            serde_json::from_str::<Value>(&line).unwrap_or(Value::Null)
        });
        let mut stdin = child.stdin.take().unwrap();
        let requests = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "project-corpus", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}),
        ];
        for request in requests {
            // A server that refused to start has closed its input.
            let _ = writeln!(stdin, "{request}");
        }
        let mut tools = None;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut done = false;
        while !done && Instant::now() < deadline {
            match answers.recv_timeout(Duration::from_millis(200)) {
                Ok(answer) => {
                    if answer["id"] == 2 {
                        tools = Some(clients::names(&answer["result"]));
                    }
                    if answer["id"] == 3 {
                        self.printed.push_str(&answer.to_string());
                        done = true;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if child.try_wait().unwrap().is_some() {
                        break;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        // An upstream started at the session's start has had its time to begin.
        std::thread::sleep(Duration::from_millis(300));
        let running = processes_with(&self.marker);
        drop(stdin);
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let status = child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let stderr = stderr.lock().unwrap().clone();
        self.printed.push_str(&stderr);
        (
            tools,
            running,
            format!("exit {:?}: {stderr}", status.code()),
        )
    }

    /// What may be left of anything the repository names: canary files, its processes, a
    /// connection to the row's listener, a word only a program it names prints.
    fn traces(&self) -> Vec<String> {
        let mut traces: Vec<String> = std::fs::read_dir(self.dir.join("canaries"))
            .unwrap()
            .map(|e| format!("canary file {}", e.unwrap().path().display()))
            .collect();
        traces.extend(
            processes_with(&self.marker)
                .into_iter()
                .map(|p| format!("process {p}")),
        );
        if self.listener.accept().is_ok() {
            traces.push("a connection to the row's listener".to_owned());
        }
        if self.printed.contains(&format!("{}:ran", self.marker)) {
            traces.push("output of a program the repository names".to_owned());
        }
        traces
    }
}

fn probe_args(command: &str, ws: &Path, probe: &Value) -> Vec<String> {
    let mut args = vec![
        command.to_owned(),
        "--json".to_owned(),
        "--workspace".to_owned(),
        ws.display().to_string(),
        "--tool".to_owned(),
        probe["tool"].as_str().unwrap().to_owned(),
        "--args".to_owned(),
        probe["args"].to_string(),
    ];
    for key in ["surface", "profile"] {
        if let Some(value) = probe[key].as_str() {
            args.push(format!("--{key}"));
            args.push(value.to_owned());
        }
    }
    args
}

/// What the plain workspace answered each probe, by the user's files and the probe: the same
/// for every row with the same user configuration.
static PLAIN: std::sync::Mutex<BTreeMap<String, (u8, String)>> =
    std::sync::Mutex::new(BTreeMap::new());

/// What the plain workspace lists in `profile`, with the user's files of `plain_key`.
fn plain_listing(
    scene: &mut Scene,
    plain_key: &str,
    profile: &str,
) -> BTreeSet<(String, String, String)> {
    let key = format!("{plain_key}|tools list {profile}");
    if let Some((_, listed)) = PLAIN.lock().unwrap().get(&key) {
        return serde_json::from_str(listed).unwrap();
    }
    let base = scene.base.clone();
    let listed = scene.listed(&base, profile).unwrap();
    let text = serde_json::to_string(&listed).unwrap();
    PLAIN.lock().unwrap().insert(key, (0, text));
    listed
}

fn corpus() -> Vec<Value> {
    let text = std::fs::read_to_string(clients::root().join("tests/corpus/malicious_repos.jsonl"))
        .unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("//"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Runs one row; its failures, in words.
fn run_row(row: &Value) -> Vec<String> {
    let mut scene = Scene::new();
    let mut failures = Vec::new();
    if let Some(user) = row["user"].as_str() {
        std::fs::write(
            scene.dir.join(".config/toolgate/toolgate.toml"),
            scene.fill(user),
        )
        .unwrap();
    }
    if let Some(files) = row["home_files"].as_object() {
        let dir = scene.dir.clone();
        scene.make(&dir, files);
    }
    let ws = scene.ws.clone();
    scene.make(&ws, row["files"].as_object().unwrap());
    for step in row["setup"].as_array().into_iter().flatten() {
        scene.setup(step);
    }
    let expect = &row["expect"];
    // What the plain workspace answers depends only on the user's files.
    let plain_key = format!("{}|{}", row["user"], row["home_files"]);
    let ws = scene.ws.clone();
    let check = scene.run(scene.toolgate().args(["check", "--workspace"]).arg(&ws));
    let shown = text(&check);
    if let Some(refusal) = expect["refused"].as_str() {
        // Refused to start, with an error naming the file, by every command that loads it.
        if check.status.code() != Some(3) || !shown.contains(refusal) {
            failures.push(format!(
                "check should refuse naming `{refusal}`: {:?} {shown}",
                check.status.code()
            ));
        }
        let probe = json!({"tool": "read_file", "args": {"path": "a.txt"}});
        let explain = scene.run(scene.toolgate().args(probe_args("explain", &ws, &probe)));
        if explain.status.code() != Some(3) || !text(&explain).contains(refusal) {
            failures.push(format!("explain should refuse: {}", text(&explain)));
        }
        let (tools, _, said) = scene.serve();
        if tools.is_some() || !said.contains(refusal) {
            failures.push(format!("serve should refuse to start: {said}"));
        }
    } else {
        if check.status.code() != Some(0) {
            failures.push(format!("check should accept: {shown}"));
        }
        let state = expect["state"].as_str().unwrap_or("untrusted");
        let stated = match state {
            "none" => !shown.contains("project configuration:"),
            state => shown.contains(&format!("/.toolgate ({state}; ")),
        };
        if !stated {
            failures.push(format!("check should say `{state}`: {shown}"));
        }
        for (key, prefix) in [
            ("pending", "  pending until trusted: "),
            ("ignored", "  ignored: "),
            ("applies", "  applies: "),
        ] {
            for needle in expect[key].as_array().into_iter().flatten() {
                let needle = scene.fill(needle.as_str().unwrap());
                if !shown
                    .lines()
                    .any(|l| l.starts_with(prefix) && l.contains(&needle))
                {
                    failures.push(format!("check should list {prefix:?}{needle:?}: {shown}"));
                }
            }
        }
        // No call is answered more permissively than over the plain workspace.
        let probes = default_probes()
            .into_iter()
            .chain(row["probes"].as_array().cloned().unwrap_or_default());
        for probe in probes {
            let probe: Value = serde_json::from_str(&scene.fill(&probe.to_string())).unwrap();
            let base = scene.base.clone();
            let key = format!("{plain_key}|{probe}");
            let known = PLAIN.lock().unwrap().get(&key).cloned();
            let (plain, plain_said) = known.unwrap_or_else(|| {
                let answer = scene.explain(&base, &probe);
                PLAIN.lock().unwrap().insert(key, answer.clone());
                answer
            });
            let (hostile, hostile_said) = scene.explain(&ws, &probe);
            if hostile > plain {
                failures.push(format!(
                    "{probe}: widened from {plain} to {hostile}\nplain: {plain_said}\nhostile: {hostile_said}"
                ));
            }
            let call = scene.run(scene.toolgate().args(probe_args("call", &ws, &probe)));
            let ran = matches!(call.status.code(), Some(0 | 1));
            if let Some(lacks) = probe["lacks"].as_str()
                && text(&call).contains(lacks)
            {
                failures.push(format!("{probe}: the call's output holds `{lacks}`"));
            }
            if ran && plain < 2 {
                failures.push(format!(
                    "{probe}: ran unattended, which the plain workspace does not allow: {}",
                    text(&call)
                ));
            }
        }
        // No tool listed that the plain workspace does not list, as it lists it.
        for profile in ["default", "readonly"] {
            let plain = plain_listing(&mut scene, &plain_key, profile);
            match scene.listed(&ws, profile) {
                Some(hostile) => {
                    for extra in hostile.difference(&plain) {
                        failures.push(format!("tools list --profile {profile}: {extra:?}"));
                    }
                }
                None => failures.push(format!("tools list --profile {profile} failed")),
            }
        }
        for run in row["run"].as_array().into_iter().flatten() {
            // A command a person approves at the terminal, confined as the user's
            // configuration alone says.
            let mut args = json!({"argv": run["argv"]});
            if let Some(stdin) = run.get("stdin") {
                args["stdin"] = stdin.clone();
            }
            let args: Value = serde_json::from_str(&scene.fill(&args.to_string())).unwrap();
            let (code, said) = scene.at_terminal(
                &[
                    "call".into(),
                    "--ask".into(),
                    "--workspace".into(),
                    ws.display().to_string(),
                    "--tool".into(),
                    "run_command".into(),
                    "--args".into(),
                    args.to_string(),
                ],
                "y\n",
            );
            // Approved and run (completed, or ran and failed): a command refused before it
            // ran would show nothing of what it reaches, whatever the configuration allowed.
            if !matches!(code, 0 | 1) {
                failures.push(format!("the approved command did not run ({code}): {said}"));
            }
            if let Some(lacks) = run["lacks"].as_str()
                && said.contains(lacks)
            {
                failures.push(format!("an approved command got `{lacks}`: {said}"));
            }
        }
        let (tools, running, said) = scene.serve();
        match tools {
            None => failures.push(format!("serve should start: {said}")),
            Some(tools) => {
                let plain: BTreeSet<String> = plain_listing(&mut scene, &plain_key, "default")
                    .into_iter()
                    .map(|(name, _, _)| name)
                    .collect();
                for tool in tools.iter().filter(|t| !plain.contains(*t)) {
                    failures.push(format!("serve lists `{tool}`"));
                }
            }
        }
        for process in running {
            failures.push(format!("while serving: process {process}"));
        }
    }
    failures.extend(scene.traces());
    failures
}

#[test]
fn no_malicious_repository_starts_anything_or_widens_a_decision() {
    let rows = corpus();
    assert!(rows.len() >= 30, "{} rows", rows.len());
    let classes: BTreeSet<&str> = rows.iter().map(|r| r["class"].as_str().unwrap()).collect();
    assert_eq!(classes.len(), rows.len(), "one row per attack class");
    for row in &rows {
        assert!(
            row["source"].as_str().is_some_and(|s| !s.is_empty()),
            "{row}"
        );
    }
    let only = std::env::var("PROJECT_CORPUS_ROW").ok();
    let rows: Vec<&Value> = rows
        .iter()
        .filter(|r| {
            only.as_deref()
                .is_none_or(|o| r["class"].as_str().unwrap().contains(o))
        })
        .collect();
    // Two rows at a time: each starts a few dozen short toolgate processes.
    let failures: BTreeMap<String, Vec<String>> = std::thread::scope(|scope| {
        let chunks: Vec<Vec<&Value>> = rows
            .chunks(rows.len().div_ceil(2).max(1))
            .map(<[_]>::to_vec)
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|row| (row["class"].as_str().unwrap().to_owned(), run_row(row)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .filter(|(_, f)| !f.is_empty())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{}",
        failures
            .iter()
            .map(|(class, f)| format!("== {class}\n{}", f.join("\n")))
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

/// A scene of the paths that must keep working, with `files` in its workspace.
fn good(files: Value) -> Scene {
    let scene = Scene::new();
    scene.make(&scene.ws, files.as_object().unwrap());
    scene
}

/// `toolgate explain --json` of `tool` with `args` over the scene's workspace: how permissive,
/// and what it said.
fn explained(scene: &mut Scene, tool: &str, args: Value) -> (u8, String) {
    let ws = scene.ws.clone();
    scene.explain(&ws, &json!({"tool": tool, "args": args}))
}

fn checked(scene: &mut Scene) -> String {
    let ws = scene.ws.clone();
    let output = scene.run(scene.toolgate().args(["check", "--workspace"]).arg(&ws));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    text(&output)
}

#[test]
fn a_narrowing_project_applies_untrusted() {
    let mut scene = good(json!({
        ".toolgate/toolgate.toml": "[[tool]]\nname = \"git_diff\"\nenabled = false\n",
        ".toolgate/team.cedar": "@id(\"team-no-listing\")\n@reason(\"the team lists no directories\")\nforbid (principal, action, resource) when { resource.name == \"list_dir\" };\n",
    }));
    let shown = checked(&mut scene);
    assert!(shown.contains("/.toolgate (untrusted; "), "{shown}");
    assert!(
        shown.contains("  applies: .toolgate/toolgate.toml:2: [[tool]] `git_diff`: turned off"),
        "{shown}"
    );
    let (rank, said) = explained(&mut scene, "list_dir", json!({"path": "."}));
    assert_eq!(rank, 0, "{said}");
    assert!(said.contains("team-no-listing"), "{said}");
    let ws = scene.ws.clone();
    let names: Vec<String> = scene
        .listed(&ws, "default")
        .unwrap()
        .into_iter()
        .map(|(name, _, _)| name)
        .collect();
    assert!(!names.contains(&"git_diff".to_owned()), "{names:?}");
    assert!(names.contains(&"read_file".to_owned()), "{names:?}");
    assert!(scene.traces().is_empty());
}

#[test]
fn trust_makes_what_was_pending_apply_until_a_byte_changes() {
    let hook = "#!/bin/sh\ncat > /dev/null\necho '{\"decision\": \"deny\", \"reason\": \"the team hook refuses\"}'\n";
    let mut scene = good(json!({
        ".toolgate/toolgate.toml": "[[hook]]\nname = \"team\"\nevent = \"pre_call\"\ncommand = [\"/bin/sh\", \"{ws}/.toolgate/hook.sh\"]\ntools = [\"read_file\"]\n",
        ".toolgate/hook.sh": {"text": hook, "mode": "755"},
        ".toolgate/team.cedar": "permit (principal, action == Action::\"call_unattended\", resource) when { resource.effect == \"local_write\" };\n",
    }));
    let write = json!({"path": "b.txt", "content": "x"});
    let read = json!({"path": "a.txt"});
    // Untrusted: the permit and the hook wait.
    let shown = checked(&mut scene);
    assert!(
        shown.contains(&scene.fill(
            "pending until trusted: .toolgate/toolgate.toml:2: [[hook]] `team` would run `/bin/sh {ws}/.toolgate/hook.sh`"
        )),
        "{shown}"
    );
    assert!(shown.contains("pending until trusted: .toolgate/team.cedar:1: a policy is not loaded: a `permit` can widen"), "{shown}");
    assert_eq!(explained(&mut scene, "write_file", write.clone()).0, 1);
    assert_eq!(explained(&mut scene, "read_file", read.clone()).0, 2);
    // Anything but `trust` typed at the terminal trusts nothing; nor does a pipe.
    let ws = scene.ws.display().to_string();
    let (code, said) =
        scene.at_terminal(&["trust".into(), "--workspace".into(), ws.clone()], "yes\n");
    assert_eq!(code, 2, "{said}");
    let output = scene.run(scene.toolgate().args(["trust", "--workspace", &ws]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("trust is given by a person at a terminal"));
    assert!(checked(&mut scene).contains("(untrusted; "));
    // Trusted at the terminal: the permit and the hook apply.
    let said = scene.trust();
    assert!(said.contains("[[hook]] `team` would run"), "{said}");
    let shown = checked(&mut scene);
    assert!(shown.contains("/.toolgate (trusted; "), "{shown}");
    assert!(!shown.contains("pending until trusted"), "{shown}");
    assert_eq!(explained(&mut scene, "write_file", write.clone()).0, 2);
    let call = scene.run(scene.toolgate().args(probe_args(
        "call",
        &scene.ws.clone(),
        &json!({"tool": "read_file", "args": read}),
    )));
    assert_eq!(call.status.code(), Some(2), "{}", text(&call));
    assert!(
        text(&call).contains("the team hook refuses"),
        "{}",
        text(&call)
    );
    let listed = scene.run(scene.toolgate().args(["trust", "--list"]));
    assert!(
        text(&listed).contains(&format!("{ws}  (as trusted; trusted at ")),
        "{}",
        text(&listed)
    );
    // One byte of the hook changed: everything it trusted waits again, and what changed is
    // shown.
    std::fs::write(
        scene.ws.join(".toolgate/hook.sh"),
        hook.replace("refuses", "refusez"),
    )
    .unwrap();
    let shown = checked(&mut scene);
    assert!(shown.contains("(changed since trusted; "), "{shown}");
    assert!(
        shown.contains("pending until trusted: .toolgate/team.cedar:1"),
        "{shown}"
    );
    assert!(
        shown.contains("+echo '{\"decision\": \"deny\", \"reason\": \"the team hook refusez\"}'"),
        "{shown}"
    );
    assert_eq!(explained(&mut scene, "write_file", write.clone()).0, 1);
    let listed = scene.run(scene.toolgate().args(["trust", "--list"]));
    assert!(
        text(&listed).contains("changed since trusted: pending"),
        "{}",
        text(&listed)
    );
    // Trusted again, then revoked: pending again, and the list is empty.
    scene.trust();
    assert_eq!(explained(&mut scene, "write_file", write.clone()).0, 2);
    let revoked = scene.run(
        scene
            .toolgate()
            .args(["trust", "--revoke", "--workspace", &ws]),
    );
    assert!(
        text(&revoked).contains("trust revoked"),
        "{}",
        text(&revoked)
    );
    assert!(checked(&mut scene).contains("(untrusted; "));
    assert_eq!(explained(&mut scene, "write_file", write).0, 1);
    let listed = scene.run(scene.toolgate().args(["trust", "--list"]));
    assert!(
        text(&listed).contains("no workspace's configuration is trusted"),
        "{}",
        text(&listed)
    );
}

/// A trusted project's upstream script in the workspace, rewritten while toolgate serves (as
/// an approved command could), is not run by the restart after the upstream exits: the file
/// is not as the person trusted it, and the start stops there.
#[test]
fn a_trusted_upstream_script_rewritten_while_serving_is_not_restarted() {
    let mut scene = Scene::new();
    let ws = scene.ws.clone();
    let files = json!({
        ".toolgate/toolgate.toml": "[[upstream]]\nname = \"team\"\ncommand = [\"/bin/sh\", \"server.sh\"]\ncwd = \".\"\nstartup_timeout_ms = 1000\n",
        "server.sh": "exit 1\n",
    });
    scene.make(&ws, files.as_object().unwrap());
    scene.trust();
    let mut serve = scene
        .toolgate()
        .args(["serve", "--no-console", "--workspace"])
        .arg(&ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Started once and exited; restarted every 250 ms, doubling.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(serve.try_wait().unwrap().is_none(), "toolgate serves");
    let rewritten = json!({"server.sh": "exec /bin/sh -c 'sleep 30; true' {marker}\n"});
    scene.make(&ws, rewritten.as_object().unwrap());
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut ran = Vec::new();
    while Instant::now() < deadline && ran.is_empty() {
        std::thread::sleep(Duration::from_millis(100));
        ran = processes_with(&scene.marker);
    }
    drop(serve.stdin.take());
    let _ = serve.wait();
    assert_eq!(ran, Vec::<String>::new(), "the rewritten script ran");
}
