//! The sandbox of approved commands, through the real binary: escapes refused with nothing
//! changed, ordinary builds and test runs still working, a machine without Landlock refused,
//! and a fork loop ended by its timeout.
//!
//! Every command runs through `toolgate serve --http`, called by the Python MCP SDK as a model
//! would, allowed once through the console's HTTP API as a person's browser would.
//!
//! # `tests/corpus/sandbox_escapes.jsonl`
//!
//! Lines starting with `//` are comments; every other line is one JSON object:
//!
//! - `name`: what the probe tries, in a few words;
//! - `python`: Python 3 source, run confined as `python3 -c SOURCE` in a directory of its own
//!   inside the workspace (the current directory), after its placeholders are filled;
//! - `network` (optional): the call's `network` argument (its hosts may hold placeholders
//!   too); without it the command has no network at all;
//! - `upstream`: whether the probe also makes sense run by a confined upstream MCP server's
//!   process rather than a command: `false` for probes that rely on the command's workspace or
//!   on a call's `network` argument;
//! - `reason` (optional): the code the proxy's report must name among the call's refused
//!   requests (`network.refused[].reason`);
//! - `tier` (optional): `mount-namespace` for a probe only that tier closes (changing the mode
//!   or times of a file the command's user owns outside the workspace, which Landlock does not
//!   govern). On a machine without the tier the row is not run — it would change the very
//!   files whose unchanged state is checked — and the outcome must name the gap instead.
//!
//! A probe prints `REFUSED <why>` when the attempt failed with the sandbox's kind of error
//! (`PermissionError`, `EPERM`, `EACCES`, Landlock's `EXDEV` for a link across rights, a 403
//! from the proxy with `x-toolgate-refused`, a tunnel closed before anything was relayed) and
//! `ESCAPED <what>` when it succeeded; anything else fails the row too. The placeholders:
//!
//! | placeholder      | what the runner puts there                                           |
//! |------------------|----------------------------------------------------------------------|
//! | `{ws}`           | the workspace                                                        |
//! | `{outside}`      | a directory beside it: `canary.txt`, `id-setuid`, `docker.sock`      |
//! | `{home}`         | the `HOME` toolgate runs with, its credential stores full of canaries |
//! | `{state}`        | toolgate's state directory (`$XDG_STATE_HOME/toolgate`)              |
//! | `{token_file}`   | the console's token file                                             |
//! | `{grants_file}`  | the standing grants file (one grant made before the probes run)      |
//! | `{audit}`        | the audit log (configured outside the state directory)               |
//! | `{config}`       | the configuration file in use                                        |
//! | `{console_port}` | the approval console's TCP port on 127.0.0.1                         |
//! | `{listener_port}`| a TCP listener on 127.0.0.1 that must see no connection              |
//! | `{udp_port}`     | a UDP socket on 127.0.0.1 that must receive nothing                  |
//! | `{unix_socket}`  | a pathname Unix socket listening in `{outside}` (a Docker daemon's)  |
//! | `{abstract}`     | the name of an abstract Unix socket listening (without the NUL)      |
//! | `{toolgate_pid}` | the pid of the toolgate process the probe runs under                 |
//! | `{other_pid}`    | another process of the same user, a secret in its environment        |
//!
//! `id-setuid` is a copy of `/usr/bin/id` owned by uid 65534 with the setuid bit.
//! The configuration pins `local.test` to 127.0.0.1 and `tunnel.test` to 203.0.113.5 (a
//! documentation address the proxy only dials after a valid ClientHello, which no row sends).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::ffi::OsString;
use std::fs;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use clients::{mount_tier, repo_read, root, system_program};
use served::Served;
use support::{clients, fixture, home, procs, served};

/// What every confined outcome's tier starts with (a tier may add to it).
const TIER: &str = "landlock+seccomp";

/// Whether `sandbox` (an outcome's `sandbox` field) names a confined tier.
fn confined(sandbox: &Value) -> bool {
    sandbox["tier"]
        .as_str()
        .is_some_and(|t| t.starts_with(TIER))
}

/// A directory for one test under `CARGO_TARGET_TMPDIR`: not below `/tmp`, so that what the
/// sandbox refuses there it refuses for the deny list's sake, not because `/tmp` is denied.
fn base() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sandbox-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// The environment toolgate runs with: a fake `HOME`, and the toolchain homes that would
/// otherwise be looked up beneath it.
fn environment(home: &Path) -> Vec<(&'static str, OsString)> {
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap());
    let mut env = vec![("HOME", home.as_os_str().to_owned())];
    for (name, default) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
        let value = std::env::var_os(name).unwrap_or_else(|| real_home.join(default).into());
        env.push((name, value));
    }
    env
}

/// Allows `count` calls of `tool`, one after another, as they come up in the console.
fn allow_each(served: &Served, tool: &str, count: usize, choice: &str) {
    served.decide_each(count, Duration::from_secs(240), |request, _| {
        assert_eq!(request["tool"], tool, "{request}");
        if tool.starts_with("run_") {
            // What the person approves names the sandbox and the network, and shows both.
            let resources = request["resources"].as_array().unwrap();
            let named = |prefix: &str| {
                resources
                    .iter()
                    .any(|r| r.as_str().unwrap().starts_with(prefix))
            };
            assert!(
                named(&format!("sandbox:{TIER}")) && named("network:"),
                "{request}"
            );
            let preview = request["preview"].as_str().unwrap();
            assert!(
                preview.contains("\nsandbox: ") && preview.contains("\nnetwork: "),
                "{request}"
            );
        }
        json!({ "decision": choice }).to_string()
    });
}

/// Runs `calls` (tool name, arguments) in one MCP session, allowing each once; their results.
fn run_allowed(served: &Served, calls: &[(&str, Value)]) -> Vec<Value> {
    let steps: Vec<Value> = calls
        .iter()
        .map(|(tool, arguments)| json!({"op": "call", "tool": tool, "arguments": arguments}))
        .collect();
    let client = served.client(json!(steps));
    for (tool, _) in calls {
        allow_each(served, tool, 1, "allow_once");
    }
    client.steps()
}

/// Every path below `dir` with its kind, mode, owner, and a file's time and contents (or a
/// link's target).
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    fixture::tree(dir, &|path, metadata| {
        let mode = metadata.permissions().mode();
        let owner = std::os::unix::fs::MetadataExt::uid(metadata);
        let kind = metadata.file_type();
        if kind.is_symlink() {
            format!("link {}", fs::read_link(path).unwrap().display())
        } else if kind.is_dir() {
            format!("dir {mode:o} {owner}")
        } else if kind.is_file() {
            let mtime = metadata.modified().unwrap();
            format!(
                "file {mode:o} {owner} {mtime:?} {:?}",
                fs::read(path).unwrap()
            )
        } else {
            format!("other {mode:o} {owner}")
        }
    })
}

/// Local listeners a probe may aim at, each counting what reached it.
struct Listeners {
    tcp_port: u16,
    udp_port: u16,
    unix_path: PathBuf,
    abstract_name: String,
    /// Connections accepted and datagrams received, by listener.
    seen: Arc<[AtomicUsize; 4]>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Listeners {
    fn start(outside: &Path) -> Listeners {
        let seen: Arc<[AtomicUsize; 4]> = Arc::new(Default::default());
        let stop = Arc::new(AtomicBool::new(false));
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp_port = tcp.local_addr().unwrap().port();
        tcp.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp_port = udp.local_addr().unwrap().port();
        udp.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let unix_path = outside.join("docker.sock");
        let unix = UnixListener::bind(&unix_path).unwrap();
        unix.set_nonblocking(true).unwrap();
        let abstract_name = format!("toolgate-sandbox-test-{}", std::process::id());
        let abstract_listener =
            UnixListener::bind_addr(&SocketAddr::from_abstract_name(&abstract_name).unwrap())
                .unwrap();
        abstract_listener.set_nonblocking(true).unwrap();

        let mut threads = Vec::new();
        let (s, st) = (Arc::clone(&seen), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                if tcp.accept().is_ok() {
                    s[0].fetch_add(1, Ordering::SeqCst);
                }
                if unix.accept().is_ok() {
                    s[2].fetch_add(1, Ordering::SeqCst);
                }
                if abstract_listener.accept().is_ok() {
                    s[3].fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }));
        let (s, st) = (Arc::clone(&seen), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !st.load(Ordering::Relaxed) {
                if udp.recv_from(&mut buf).is_ok() {
                    s[1].fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
        Listeners {
            tcp_port,
            udp_port,
            unix_path,
            abstract_name,
            seen,
            stop,
            threads,
        }
    }

    /// What reached each listener, by name.
    fn reached(&self) -> Vec<(&'static str, usize)> {
        [
            "tcp listener",
            "udp listener",
            "unix socket",
            "abstract socket",
        ]
        .into_iter()
        .zip(self.seen.iter().map(|n| n.load(Ordering::SeqCst)))
        .collect()
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One row of the escape table, placeholders not yet filled.
struct Probe {
    name: String,
    python: String,
    network: Option<Vec<String>>,
    reason: Option<String>,
    /// Closed only by the mount-namespace tier.
    needs_mounts: bool,
}

fn probes() -> Vec<Probe> {
    let text = fs::read_to_string(root().join("tests/corpus/sandbox_escapes.jsonl")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("//"))
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert!(row["upstream"].is_boolean(), "no `upstream` in {line}");
            Probe {
                name: row["name"].as_str().unwrap().to_owned(),
                python: row["python"].as_str().unwrap().to_owned(),
                network: row.get("network").map(|hosts| {
                    hosts
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|h| h.as_str().unwrap().to_owned())
                        .collect()
                }),
                reason: row.get("reason").map(|r| r.as_str().unwrap().to_owned()),
                needs_mounts: match row.get("tier") {
                    None => false,
                    Some(tier) => {
                        assert_eq!(tier, "mount-namespace", "{line}");
                        true
                    }
                },
            }
        })
        .collect()
}

/// `text` with every `{name}` of `values` replaced.
fn fill(text: &str, values: &[(&str, String)]) -> String {
    let mut out = text.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    // A `{name}` left over is a placeholder this runner does not know.
    let left = out.split('{').skip(1).find_map(|rest| {
        let name = rest.split('}').next()?;
        (rest.contains('}') && !name.is_empty())
            .then_some(name)
            .filter(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
    });
    assert!(left.is_none(), "unknown placeholder {left:?} in {out}");
    out
}

/// A home directory whose every credential store holds a canary.
fn fake_home(home: &Path) {
    fixture::credential_stores(home, "canary");
    fs::write(home.join(".profile"), "# readable, not a credential\n").unwrap();
}

#[test]
fn every_escape_in_the_table_is_refused_and_changes_nothing() {
    let base = base();
    let dir = base.path().canonicalize().unwrap();
    let (ws, outside, home, state) = (
        dir.join("ws"),
        dir.join("outside"),
        dir.join("home"),
        dir.join("state"),
    );
    for d in [&ws, &outside, &home, &state, &dir.join("audit")] {
        fs::create_dir_all(d).unwrap();
    }
    fake_home(&home);
    fs::write(outside.join("canary.txt"), "outside the workspace\n").unwrap();
    let setuid = outside.join("id-setuid");
    fs::copy("/usr/bin/id", &setuid).unwrap();
    std::os::unix::fs::chown(&setuid, Some(65534), Some(65534)).unwrap();
    fs::set_permissions(&setuid, fs::Permissions::from_mode(0o4755)).unwrap();
    let listeners = Listeners::start(&outside);
    // Another process of the same user, with a secret in its environment.
    let other = procs::canary_process();

    let audit = dir.join("audit/audit.db");
    let config = format!(
        "[audit]\npath = \"{}\"\n\n[sandbox]\nresolve = {{ \"local.test\" = [\"127.0.0.1\"], \"tunnel.test\" = [\"203.0.113.5\"] }}\n{}",
        audit.display(),
        repo_read()
    );
    let mut served = Served::start_with_env(&ws, &config, &state, &environment(&home));
    let toolgate_pid = served.child.id();

    // A standing grant, so that the grants file exists for the probes to aim at.
    let client = served.client(json!([{"op": "call", "tool": "write_file",
        "arguments": {"path": "granted.txt", "content": "granted\n"}}]));
    allow_each(&served, "write_file", 1, "allow_workspace");
    assert_eq!(client.steps()[0]["isError"], false);
    let grants_file = fs::read_dir(state.join("toolgate"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("grants-")
        })
        .expect("a grants file");
    assert!(audit.exists(), "the audit log is where it was configured");

    let values = vec![
        ("ws", ws.display().to_string()),
        ("outside", outside.display().to_string()),
        ("home", home.display().to_string()),
        ("state", state.join("toolgate").display().to_string()),
        ("token_file", served.token_file.display().to_string()),
        ("grants_file", grants_file.display().to_string()),
        ("audit", audit.display().to_string()),
        ("config", state.join("toolgate.toml").display().to_string()),
        ("console_port", served.port.to_string()),
        ("listener_port", listeners.tcp_port.to_string()),
        ("udp_port", listeners.udp_port.to_string()),
        ("unix_socket", listeners.unix_path.display().to_string()),
        ("abstract", listeners.abstract_name.clone()),
        ("toolgate_pid", toolgate_pid.to_string()),
        ("other_pid", other.0.id().to_string()),
    ];
    let protected = [&outside, &home];
    let before: Vec<_> = protected.iter().map(|d| snapshot(d)).collect();
    let token_before = fs::read(&served.token_file).unwrap();
    let grants_before = fs::read(&grants_file).unwrap();

    let rows = probes();
    assert!(rows.len() >= 30, "only {} probes", rows.len());
    let mounts = mount_tier();
    let (rows, unclosed): (Vec<Probe>, Vec<Probe>) = rows
        .into_iter()
        .partition(|row| mounts || !row.needs_mounts);
    let python = system_program("python3");
    let calls: Vec<(&str, Value)> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let cwd = format!("probe-{i}");
            fs::create_dir(ws.join(&cwd)).unwrap();
            let mut arguments = json!({
                "argv": [python, "-c", fill(&row.python, &values)],
                "cwd": cwd,
                "timeout_ms": 30_000,
            });
            if let Some(hosts) = &row.network {
                let hosts: Vec<String> = hosts.iter().map(|h| fill(h, &values)).collect();
                arguments["network"] = json!(hosts);
            }
            ("run_command", arguments)
        })
        .collect();
    let results = run_allowed(&served, &calls);
    assert_eq!(results.len(), rows.len());
    if !unclosed.is_empty() {
        // Not run here; every outcome says what stays open instead.
        let gaps = results[0]["structured"]["sandbox"]["gaps"].to_string();
        assert!(gaps.contains("chmod or utime"), "{gaps}");
    }

    let mut failures = Vec::new();
    for (row, result) in rows.iter().zip(&results) {
        let output = &result["structured"];
        let stdout = output["stdout"].as_str().unwrap_or_default();
        let verdict = stdout.lines().next().unwrap_or_default();
        println!(
            "{}: {}",
            row.name,
            verdict.chars().take(200).collect::<String>()
        );
        if result["isError"] != false || output["exit_code"] != 0 || !verdict.starts_with("REFUSED")
        {
            failures.push(format!(
                "{}: {}\n  stderr: {}",
                row.name,
                if stdout.is_empty() {
                    result["text"].to_string()
                } else {
                    stdout.trim().to_owned()
                },
                output["stderr"].as_str().unwrap_or_default().trim()
            ));
            continue;
        }
        if !confined(&output["sandbox"]) {
            failures.push(format!("{}: sandbox {}", row.name, output["sandbox"]));
        }
        let let_through = &output["network"]["allowed"];
        if let_through.as_array().is_some_and(|a| !a.is_empty()) {
            failures.push(format!("{}: the proxy let through {let_through}", row.name));
        }
        if let Some(reason) = &row.reason {
            let refused = &output["network"]["refused"];
            let named = refused
                .as_array()
                .is_some_and(|list| list.iter().any(|r| r["reason"] == reason.as_str()));
            if !named {
                failures.push(format!(
                    "{}: the proxy's report does not name `{reason}`: {}",
                    row.name, output["network"]
                ));
            }
        }
    }

    // Nothing changed, nothing reached, toolgate alive and answering.
    let after: Vec<_> = protected.iter().map(|d| snapshot(d)).collect();
    for ((dir, before), after) in protected.iter().zip(&before).zip(&after) {
        if before != after {
            let changed: Vec<_> = after.iter().filter(|e| !before.contains(e)).collect();
            let gone: Vec<_> = before.iter().filter(|e| !after.contains(e)).collect();
            failures.push(format!(
                "{} changed: now {changed:?}, gone {gone:?}",
                dir.display()
            ));
        }
    }
    let marker = format!("/tmp/toolgate-sandbox-marker-{toolgate_pid}");
    if Path::new(&marker).exists() {
        let _ = fs::remove_file(&marker);
        failures.push(format!("{marker} was written"));
    }
    if fs::read(&served.token_file).unwrap() != token_before {
        failures.push("the token file changed".into());
    }
    if fs::read(&grants_file).unwrap() != grants_before {
        failures.push("the grants file changed".into());
    }
    std::thread::sleep(Duration::from_millis(200));
    for (listener, count) in listeners.reached() {
        if count > 0 {
            failures.push(format!("the {listener} was reached {count} times"));
        }
    }
    assert!(
        served.child.try_wait().unwrap().is_none(),
        "toolgate is gone"
    );
    assert!(procs::running(toolgate_pid), "toolgate is stopped");
    served.get_json("/api/pending");
    let after_all = run_allowed(&served, &[("run_command", json!({"argv": ["true"]}))]);
    assert_eq!(
        after_all[0]["structured"]["exit_code"], 0,
        "{}",
        after_all[0]
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Copies the fixture project `tests/sandbox/NAME` into `ws`.
fn copy_fixture(name: &str, ws: &Path) {
    fn copy(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    copy(&root().join("tests/sandbox").join(name), ws);
}

/// A test's directory (kept while the returned guard lives), its canonical path, and in it a
/// workspace, a fake home whose every credential store holds a canary, and a state directory.
fn ws_and_fake_home() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf, PathBuf) {
    let base = base();
    let dir = base.path().canonicalize().unwrap();
    let (ws, home, state) = (dir.join("ws"), dir.join("home"), dir.join("state"));
    for d in [&ws, &home, &state] {
        fs::create_dir_all(d).unwrap();
    }
    fake_home(&home);
    (base, dir, ws, home, state)
}

/// A server on a fresh workspace holding fixture `name`, with a fake `HOME`.
fn served_on(name: &str) -> (tempfile::TempDir, PathBuf, Served) {
    let (base, _, ws, home, state) = ws_and_fake_home();
    copy_fixture(name, &ws);
    let config = format!("[sandbox]\n{}", repo_read());
    let served = Served::start_with_env(&ws, &config, &state, &environment(&home));
    (base, ws, served)
}

/// A completed, confined command's output that exited 0 and printed `expected`.
fn assert_ran(result: &Value, expected: &str) {
    let output = &result["structured"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(output["exit_code"], 0, "{result}");
    assert!(confined(&output["sandbox"]), "{result}");
    let printed = format!(
        "{}{}",
        output["stdout"].as_str().unwrap(),
        output["stderr"].as_str().unwrap()
    );
    assert!(printed.contains(expected), "no `{expected}` in {result}");
}

#[test]
fn a_cargo_build_offline_runs_confined_and_its_binary_runs() {
    let (_base, ws, served) = served_on("tiny-crate");
    let results = run_allowed(
        &served,
        &[
            (
                "run_command",
                json!({"argv": ["cargo", "build", "--offline"], "timeout_ms": 240_000}),
            ),
            ("run_command", json!({"argv": ["target/debug/tiny"]})),
        ],
    );
    assert_ran(&results[0], "Finished");
    assert_ran(&results[1], "tiny built and ran confined: 42");
    assert!(ws.join("target/debug/tiny").is_file());
}

#[test]
fn an_npm_package_test_script_runs_confined() {
    let (_base, _ws, served) = served_on("tiny-npm");
    let results = run_allowed(&served, &[("run_script", json!({"script": "test"}))]);
    let result = &results[0];
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        result.to_string().contains("tiny npm tests passed"),
        "{result}"
    );
    assert!(
        result.to_string().contains(TIER),
        "the outcome names its tier: {result}"
    );
}

#[test]
fn a_pytest_run_passes_confined() {
    let (_base, _ws, served) = served_on("tiny-pytest");
    let python = clients::test_dep("venv/bin/python3");
    let results = run_allowed(
        &served,
        &[(
            "run_command",
            json!({"argv": [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], "timeout_ms": 120_000}),
        )],
    );
    assert_ran(&results[0], "2 passed");
}

/// `toolgate` under strace, with every `landlock_create_ruleset` failing as on a kernel
/// without Landlock.
fn without_landlock(dir: &Path) -> Command {
    let mut command = clients::without_landlock();
    command
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdin(Stdio::null());
    command
}

#[test]
fn a_machine_without_landlock_refuses_commands_before_approval() {
    let base = base();
    let dir = base.path().canonicalize().unwrap();
    let ws = dir.join("ws");
    fs::create_dir_all(&ws).unwrap();
    let touch = r#"{"argv":["touch","marker"]}"#;
    let call = |command: &mut Command, config: Option<&Path>| {
        command
            .args(["call", "--json", "--workspace"])
            .arg(&ws)
            .args(["--tool", "run_command", "--args", touch]);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        command.output().unwrap()
    };

    let output = call(&mut without_landlock(&dir), None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stdout}{stderr}");
    let outcome: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: stdout {stdout:?}, stderr {stderr:?}"));
    assert_eq!(outcome["status"], "rejected", "{outcome}");
    assert_eq!(
        outcome["rejection"]["code"], "sandbox_unavailable",
        "{outcome}"
    );
    assert_eq!(outcome["rejection"]["stage"], "validate", "{outcome}");
    assert!(!ws.join("marker").exists());

    let check = without_landlock(&dir)
        .args(["sandbox", "check"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{said}");
    assert!(said.contains("landlock: not available"), "{said}");
    assert!(
        said.contains("commands: refused: sandbox_unavailable"),
        "{said}"
    );
    let json = without_landlock(&dir)
        .args(["sandbox", "check", "--json"])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["machine"]["landlock_abi"], Value::Null, "{report}");
    assert_eq!(report["commands"]["run"], false, "{report}");

    // The same machine, checked without strace: what refused was the missing Landlock.
    let unhindered = home::toolgate()
        .args(["sandbox", "check"])
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .output()
        .unwrap();
    assert_eq!(
        unhindered.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&unhindered.stdout)
    );

    // The operator's `dangerous-unconfined`: not refused for the sandbox, so it reaches the
    // person's approval (which `toolgate call` asks nobody for).
    let config = dir.join("unconfined.toml");
    fs::write(&config, "[sandbox]\nmode = \"dangerous-unconfined\"\n").unwrap();
    let output = call(&mut without_landlock(&dir), Some(&config));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{stdout}");
    let outcome: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(outcome["rejection"]["stage"], "approve", "{outcome}");
    assert_eq!(
        outcome["rejection"]["code"], "approval_required",
        "{outcome}"
    );
    assert!(
        outcome["evidence"]["resources"]
            .as_array()
            .unwrap()
            .contains(&json!("sandbox:none")),
        "{outcome}"
    );
    assert!(!ws.join("marker").exists());
}

/// The processes whose working directory is `dir`.
fn working_in(dir: &Path) -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
        .filter(|&pid| procs::running(pid))
        .collect()
}

#[test]
fn a_fork_loop_under_a_timeout_ends_and_leaves_nobody() {
    let base = base();
    let dir = base.path().canonicalize().unwrap();
    let (ws, state) = (dir.join("ws"), dir.join("state"));
    fs::create_dir_all(&ws).unwrap();
    fs::create_dir_all(&state).unwrap();
    let served = Served::start_at(&ws, "", &state);

    let client = served.client(json!([{"op": "call", "tool": "run_command", "arguments": {
        "argv": ["sh", "-c", "while :; do sleep 30 & done"], "timeout_ms": 2000}}]));
    allow_each(&served, "run_command", 1, "allow_once");
    let allowed = Instant::now();
    let result = client.steps().remove(0);
    let took = allowed.elapsed();
    let left = working_in(&ws);
    for pid in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(left.is_empty(), "survivors: {left:?}");
    // About 6 s here: the 2 s timeout, then the loop's thousands of processes ended.
    assert!(took < Duration::from_secs(20), "the call took {took:?}");
    assert!(result.to_string().contains("killed on timeout"), "{result}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(working_in(&ws).is_empty(), "late survivors");

    let client = served.client(json!([{"op": "call", "tool": "run_command",
        "arguments": {"argv": ["true"]}}]));
    allow_each(&served, "run_command", 1, "allow_once");
    let allowed = Instant::now();
    let result = client.steps().remove(0);
    assert!(
        allowed.elapsed() < Duration::from_secs(5),
        "`true` took {:?} after the fork loop",
        allowed.elapsed()
    );
    assert_eq!(result["structured"]["exit_code"], 0, "{result}");
}

/// The credential stores where the XDG variables put them, apart from the home directory,
/// and the newer stores under it (issue 36): an approved command reads none of them, while
/// an ordinary file beside them stays readable. Before the deny list was kept as data, only
/// `~/.config/gh` was denied of these, and every row here was read.
#[test]
fn credential_stores_in_xdg_directories_and_agent_tokens_are_unreadable_to_an_approved_command() {
    let (_base, dir, ws, home, state) = ws_and_fake_home();
    let stores = [
        "xdg-config/gh/hosts.yml",
        "home/.config/git/credentials",
        "xdg-config/git/credentials",
        "home/.claude/.credentials.json",
        "home/.claude.json",
        "home/.codex/auth.json",
        "xdg-config/containers/auth.json",
        "xdg-data/keyrings/login.keyring",
        "xdg-cache/huggingface/token",
    ];
    for store in stores {
        let path = dir.join(store);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "canary credential\n").unwrap();
    }
    let ordinary = dir.join("xdg-config/editor/settings.json");
    fs::create_dir_all(ordinary.parent().unwrap()).unwrap();
    fs::write(&ordinary, "{\"theme\": \"plain\"}\n").unwrap();

    let mut env = environment(&home);
    for (name, sub) in [
        ("XDG_CONFIG_HOME", "xdg-config"),
        ("XDG_DATA_HOME", "xdg-data"),
        ("XDG_CACHE_HOME", "xdg-cache"),
    ] {
        env.push((name, dir.join(sub).into_os_string()));
    }
    let stores: Vec<PathBuf> = stores.iter().map(|s| dir.join(s)).collect();
    read_by_an_approved_command(&ws, &state, &env, &stores, &[ordinary], "{\"theme\"");
}

/// The credential stores that their own environment variable moves elsewhere than their
/// default place (`GNUPGHOME`, `DOCKER_CONFIG`, `KUBECONFIG`'s list, …): an approved command
/// reads none of them where the variable put them, while an ordinary file beside one stays
/// readable. Before toolgate read those variables, every row here was read.
#[test]
fn credential_stores_their_own_variables_move_are_unreadable_to_an_approved_command() {
    let (_base, dir, ws, home, state) = ws_and_fake_home();
    let moved = dir.join("elsewhere");
    let stores = [
        ("GNUPGHOME", "gnupg", "gnupg/private-keys-v1.d/key.key"),
        ("DOCKER_CONFIG", "docker", "docker/config.json"),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            "aws-credentials",
            "aws-credentials",
        ),
        ("AWS_CONFIG_FILE", "aws-config", "aws-config"),
        ("AZURE_CONFIG_DIR", "azure", "azure/msal_token_cache.json"),
        ("CLOUDSDK_CONFIG", "gcloud", "gcloud/credentials.db"),
        ("NPM_CONFIG_USERCONFIG", "npmrc", "npmrc"),
        ("CARGO_HOME", "cargo", "cargo/credentials.toml"),
        ("GH_CONFIG_DIR", "gh", "gh/hosts.yml"),
        ("PASSWORD_STORE_DIR", "pass", "pass/bank.gpg"),
        ("KUBECONFIG", "kube/a.yaml", "kube/a.yaml"),
        ("KUBECONFIG", "kube/b.yaml", "kube/b.yaml"),
    ];
    for (_, _, file) in stores {
        let path = moved.join(file);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "canary credential\n").unwrap();
    }
    // Beside a moved store, what is not a credential stays readable.
    let ordinary = [
        moved.join("docker/features.json"),
        moved.join("cargo/config.toml"),
    ];
    for path in &ordinary {
        fs::write(path, "{\"plain\": true}\n").unwrap();
    }

    let mut env = environment(&home);
    env.retain(|(name, _)| *name != "CARGO_HOME");
    for (name, place, _) in stores {
        if name == "KUBECONFIG" {
            continue;
        }
        env.push((name, moved.join(place).into_os_string()));
    }
    let kubeconfig = format!(
        "{}:relative/ignored:{}",
        moved.join("kube/a.yaml").display(),
        moved.join("kube/b.yaml").display()
    );
    env.push(("KUBECONFIG", kubeconfig.into()));
    let stores: Vec<PathBuf> = stores.iter().map(|(_, _, file)| moved.join(file)).collect();
    read_by_an_approved_command(&ws, &state, &env, &stores, &ordinary, "{\"plain\"");
}

/// Reads each of `stores` and `ordinary` with an approved, confined `python3` command of a
/// server on `ws` with `env` and the repository readable: every store must be refused, and
/// each ordinary file read (its text starting with `text`).
fn read_by_an_approved_command(
    ws: &Path,
    state: &Path,
    env: &[(&str, OsString)],
    stores: &[PathBuf],
    ordinary: &[PathBuf],
    text: &str,
) {
    let config = format!("[sandbox]\n{}", repo_read());
    let served = Served::start_with_env(ws, &config, state, env);
    let python = system_program("python3");
    let reader = "import sys\n\
        try:\n    print('ESCAPED', open(sys.argv[1]).read().strip())\n\
        except PermissionError as e:\n    print('REFUSED', e)\n";
    let paths: Vec<&PathBuf> = stores.iter().chain(ordinary).collect();
    let calls: Vec<(&str, Value)> = paths
        .iter()
        .map(|path| {
            (
                "run_command",
                json!({"argv": [python, "-c", reader, path.display().to_string()]}),
            )
        })
        .collect();
    let results = run_allowed(&served, &calls);
    let mut failures = Vec::new();
    for (path, result) in paths.iter().zip(&results) {
        let output = &result["structured"];
        let verdict = output["stdout"].as_str().unwrap_or_default().trim();
        let want = if ordinary.contains(*path) {
            format!("ESCAPED {text}")
        } else {
            "REFUSED".to_owned()
        };
        if result["isError"] != false
            || !confined(&output["sandbox"])
            || !verdict.starts_with(&want)
        {
            failures.push(format!("{}: {result}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
