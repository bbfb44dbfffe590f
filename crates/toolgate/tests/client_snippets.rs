//! The client set-up of docs/clients.md, run as written: the snippets are read from the page
//! itself, so the page and this test cannot drift apart. Claude Code (pinned in
//! `tests/deps/package.json`) runs its `claude mcp add` lines, then connects to every entry and
//! offers the model toolgate's tools; the Codex blocks are one file that declares each server
//! once and holds no token, and Codex CLI (pinned there too) runs them against a scripted
//! Responses API and calls toolgate through each.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use support::claude::{ScriptedModel, claude_bin, offered};
use support::clients::{root, test_dep, toolgate_bin};
use support::fixture::Fixture;
use support::home;

/// A token for the HTTP entry, long enough for toolgate.
const TOKEN: &str = "docs-clients-token-0123456789abcdef0123456789";

/// The page's section under `## {heading}`.
fn section(heading: &str) -> String {
    let page = fs::read_to_string(root().join("docs/clients.md")).unwrap();
    let start = page
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("docs/clients.md has no `## {heading}`"));
    let rest = &page[start + heading.len() + 5..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_owned()
}

/// The code blocks fenced as `lang` in `text`.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let fence = format!("```{lang}\n");
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(&fence) {
        let body = &rest[at + fence.len()..];
        let end = body.find("```").unwrap();
        found.push(body[..end].to_owned());
        rest = &body[end..];
    }
    found
}

/// The commands of a shell block: comments dropped, continued lines joined.
fn commands(block: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        let line = line.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                commands.push(std::mem::take(&mut current));
            }
        }
    }
    commands
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Where every process of the test lives: a home, XDG directories, and a toolgate
/// configuration whose `[[serve.token]]` names the variable the HTTP snippet reads.
struct Place {
    dir: tempfile::TempDir,
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["home/.claude", "state", "config/toolgate"] {
            fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        fs::write(
            dir.path().join("config/toolgate/toolgate.toml"),
            "[[serve.token]]\nenv = \"TOOLGATE_TOKEN_ALICE\"\nactor = \"alice\"\n\
             profile = \"default\"\n",
        )
        .unwrap();
        Place { dir }
    }

    fn home(&self) -> std::path::PathBuf {
        self.dir.path().join("home")
    }

    /// `program` with only this place's environment, toolgate and claude on `PATH`.
    fn command(&self, program: &Path) -> Command {
        let toolgate_dir = Path::new(toolgate_bin()).parent().unwrap().to_owned();
        let claude_dir = claude_bin().parent().unwrap().to_owned();
        let mut command = Command::new(program);
        command
            .env_clear()
            .env(
                "PATH",
                format!(
                    "{}:{}:/usr/local/bin:/usr/bin:/bin",
                    toolgate_dir.display(),
                    claude_dir.display()
                ),
            )
            .envs(home::vars(&self.home()))
            .env("CLAUDE_CONFIG_DIR", self.home().join(".claude"))
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("TMPDIR", self.dir.path())
            .env("TOOLGATE_TOKEN_ALICE", TOKEN)
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        command
    }
}

/// `toolgate serve --http` at `port`, as the page's "Two ways to serve" starts it.
struct HttpServer(Child);

impl HttpServer {
    fn start(place: &Place, ws: &Path, port: u16) -> HttpServer {
        let child = place
            .command(Path::new(toolgate_bin()))
            .args(["serve", "--no-console", "--workspace"])
            .arg(ws)
            .args(["--http", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "toolgate serve --http did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer(child)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn claude_code_accepts_each_snippet_and_lists_toolgate_s_tools() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let place = Place::new();
    let port = free_port();
    let _server = HttpServer::start(&place, &ws, port);

    let section = section("Claude Code");
    let adds: Vec<String> = blocks(&section, "sh")
        .iter()
        .flat_map(|block| commands(block))
        .filter(|command| command.starts_with("claude mcp add"))
        .collect();
    assert_eq!(adds.len(), 3, "{adds:?}");
    for add in &adds {
        // The page's HTTP server listens on 8787; this one on a port of its own.
        let add = add.replace("127.0.0.1:8787", &format!("127.0.0.1:{port}"));
        let output = place
            .command(Path::new("/bin/sh"))
            .arg("-c")
            .arg(&add)
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{add}\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // The token is in no file the snippets wrote: only the variable's name is.
    let user_config = place.home().join(".claude/.claude.json");
    for file in [ws.join(".mcp.json"), user_config.clone()] {
        let text = fs::read_to_string(&file).unwrap();
        assert!(!text.contains(TOKEN), "{} holds the token", file.display());
    }
    // What a person does when `claude` first starts in the project: trust it and approve the
    // servers of its .mcp.json.
    let project: Value =
        serde_json::from_str(&fs::read_to_string(ws.join(".mcp.json")).unwrap()).unwrap();
    let approved: Vec<&String> = project["mcpServers"].as_object().unwrap().keys().collect();
    let mut config: Value =
        serde_json::from_str(&fs::read_to_string(&user_config).unwrap()).unwrap();
    let key = ws.display().to_string();
    config["projects"][&key]["hasTrustDialogAccepted"] = json!(true);
    config["projects"][&key]["enabledMcpjsonServers"] = json!(approved);
    fs::write(&user_config, config.to_string()).unwrap();

    let names = ["toolgate", "toolgate-readonly", "toolgate-http"];
    let listed = place
        .command(&claude_bin())
        .args(["mcp", "list"])
        .current_dir(&ws)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    for name in names {
        assert!(
            listed
                .lines()
                .any(|l| l.starts_with(&format!("{name}: ")) && l.contains("Connected")),
            "`{name}` is not connected:\n{listed}"
        );
    }

    // The model is offered each entry's tools: every tool of the default profile, and only
    // the inspecting ones through the read-only entry.
    let model = ScriptedModel::start(place.dir.path(), &json!({"turns": [{"text": "Done."}]}));
    let output = place
        .command(&claude_bin())
        .current_dir(&ws)
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", model.port),
        )
        .env("ANTHROPIC_API_KEY", "test")
        .args(["-p", "List the toolgate tools.", "--tools", ""])
        .arg("--no-session-persistence")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let conversation = model.conversation();
    let first = conversation.first().expect("no request offered tools");
    let tools: BTreeSet<String> = offered(first).into_iter().collect();
    for (name, tool, shown) in [
        ("toolgate", "read_file", true),
        ("toolgate", "run_command", true),
        ("toolgate-readonly", "read_file", true),
        ("toolgate-readonly", "write_file", false),
        ("toolgate-http", "read_file", true),
        ("toolgate-http", "edit_file", true),
    ] {
        assert_eq!(
            tools.contains(&format!("mcp__{name}__{tool}")),
            shown,
            "{name} {tool} in {tools:?}"
        );
    }
}

/// The Codex blocks pasted one after another into one `config.toml`: valid TOML (a table
/// declared twice is not), each server once, every entry starts toolgate or names its URL, and
/// a token only by the name of its variable.
#[test]
fn codex_blocks_make_one_file_with_a_name_per_server_and_no_token() {
    let text = blocks(&section("Codex CLI"), "toml").join("\n");
    let file: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let servers = file["mcp_servers"].as_table().unwrap();
    let names: Vec<&String> = servers.keys().collect();
    assert_eq!(
        names,
        ["toolgate", "toolgate-configured", "toolgate-http"],
        "{text}"
    );
    for (name, server) in servers {
        let server = server.as_table().unwrap();
        assert!(
            server.get("command").and_then(|c| c.as_str()) == Some("toolgate")
                || server.contains_key("url"),
            "{name}"
        );
        for secret in ["bearer_token", "http_headers"] {
            assert!(!server.contains_key(secret), "{name} writes `{secret}`");
        }
    }
    assert_eq!(
        servers["toolgate-http"]["bearer_token_env_var"].as_str(),
        Some("TOOLGATE_TOKEN_ALICE")
    );
}

/// The version `tests/deps/package.json` pins.
const CODEX_VERSION: &str = "0.171.0";

/// The `codex` binary `scripts/test-deps` installed, checked to be the pinned build.
fn codex_bin() -> std::path::PathBuf {
    let bin = test_dep("node/node_modules/.bin/codex");
    let output = Command::new(&bin)
        .arg("--version")
        .env_clear()
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && version.trim() == format!("codex-cli {CODEX_VERSION}"),
        "`{} --version` is not Codex CLI {CODEX_VERSION}: {version} {}\nrun scripts/test-deps",
        bin.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    bin
}

/// The Codex blocks pasted as written into one `config.toml` (the page's paths and port made
/// this test's), beside a model provider that is the scripted Responses API: Codex accepts the
/// file with `--strict-config`, offers the model each entry's tools under the entry's name, and
/// a call through each entry reaches toolgate and comes back with the file.
#[test]
fn codex_accepts_the_blocks_and_calls_toolgate_through_each_entry() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    fs::write(ws.join("codex.txt"), "read through codex\n").unwrap();
    let place = Place::new();
    let port = free_port();
    let _server = HttpServer::start(&place, &ws, port);

    let names = ["toolgate", "toolgate-configured", "toolgate-http"];
    // Codex offers each server's tools as one namespace, its name with `-` made `_`.
    let namespace_of = |name: &str| format!("mcp__{}", name.replace('-', "_"));
    let turns: Vec<Value> = names
        .iter()
        .map(|name| {
            json!({"function_call": {
                "namespace": namespace_of(name),
                "name": "read_file",
                "arguments": {"path": "codex.txt"},
            }})
        })
        .chain([json!({"text": "Done."})])
        .collect();
    // The Responses API's stand-in.
    let model = ScriptedModel::serving(
        "tests/clients/scripted_responses.py",
        place.dir.path(),
        &json!({ "turns": turns }),
    );

    let blocks = blocks(&section("Codex CLI"), "toml")
        .join("\n")
        .replace("/abs/path/to/project", &ws.display().to_string())
        .replace(
            "/abs/path/to/toolgate.toml",
            &place
                .dir
                .path()
                .join("config/toolgate/toolgate.toml")
                .display()
                .to_string(),
        )
        .replace(
            "/abs/path/to/state",
            &place.dir.path().join("state").display().to_string(),
        )
        .replace("127.0.0.1:8787", &format!("127.0.0.1:{port}"));
    let provider = format!(
        "model = \"gpt-scripted-1\"\nmodel_provider = \"scripted\"\n\n\
         [model_providers.scripted]\nname = \"scripted\"\n\
         base_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\n\n",
        model.port
    );
    let codex_home = place.home().join(".codex");
    fs::create_dir_all(&codex_home).unwrap();
    fs::write(codex_home.join("config.toml"), provider + &blocks).unwrap();

    let output = place
        .command(&codex_bin())
        .current_dir(&ws)
        .env("CODEX_HOME", &codex_home)
        .args(["exec", "--skip-git-repo-check", "--strict-config"])
        .arg("Read codex.txt through each toolgate entry.")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    let requests: Vec<Value> = model
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "POST" && r["path"] == "/v1/responses")
        .map(|r| r["body"].clone())
        .collect();
    let first = requests.first().expect("codex sent the model nothing");
    for name in names {
        let namespace = first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|tool| tool["name"] == namespace_of(name))
            .unwrap_or_else(|| {
                let offered: Vec<&Value> = first["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|tool| &tool["name"])
                    .collect();
                panic!("`{name}` is not offered: {offered:?}")
            });
        let tools: BTreeSet<&str> = namespace["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap())
            .collect();
        for tool in ["read_file", "write_file", "run_command"] {
            assert!(tools.contains(tool), "{name} lacks {tool}: {tools:?}");
        }
    }
    // Each call's output, as Codex gave it back to the model: the file, read by toolgate.
    let last = requests.last().unwrap();
    let outputs: Vec<&str> = last["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| item["output"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(outputs.len(), names.len(), "{outputs:?}");
    for (name, output) in names.iter().zip(&outputs) {
        assert!(
            output.contains("read through codex"),
            "the call through `{name}` did not read the file: {output}"
        );
    }
}
