//! Upstream MCP servers run in toolgate's sandbox: a real `toolgate serve` starts
//! `tests/upstream/probe_server.py` (the official Python SDK) confined, and the server's `probe`
//! tool runs escape attempts in a process of its own, each printing `REFUSED …` or
//! `ESCAPED …`. Every attempt must be refused and leave nothing changed; a few that must work
//! (its grants, its temporary directory) show that the probes can tell the difference.
//!
//! The probe tool is admitted `read_only`, as the other upstream tests admit theirs, so that
//! calls need no person's approval: what is tested here is the confinement of the upstream's
//! process, which is the same whatever approved the call. The fake home directory and
//! toolgate's state live under `$CARGO_TARGET_TMPDIR`; the directories that show what a grant
//! opens inside the shared /tmp are the tests' own.
//!
//! The rows of `tests/corpus/sandbox_escapes.jsonl` marked `"upstream": true` (the escape
//! table commands are tested with; its placeholders are described in `tests/sandbox.rs`) run
//! from the upstreams too, besides this file's own probes. A machine without Landlock (strace
//! failing its system calls, as `tests/sandbox.rs` does for commands) starts no upstream.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use clients::*;
use support::{clients, fixture, home, procs, served};

/// A place of this test's own under `$CARGO_TARGET_TMPDIR`: a fake home with credential
/// stores holding canaries, toolgate's state and configuration directories, a workspace.
struct Places {
    _root: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    state: PathBuf,
    xdg_config: PathBuf,
    ws: PathBuf,
}

const CANARY: &str = "CANARY-9c41e7";

impl Places {
    fn new() -> Places {
        let root_dir = tempfile::Builder::new()
            .prefix("upstream-sandbox-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let root = root_dir.path().canonicalize().unwrap();
        let home = root.join("home");
        fixture::credential_stores(&home, CANARY);
        let state = root.join("state");
        let xdg_config = root.join("xdg-config");
        let ws = root.join("ws");
        for dir in [&state, &xdg_config, &ws] {
            fs::create_dir_all(dir).unwrap();
        }
        Places {
            _root: root_dir,
            root,
            home,
            state,
            xdg_config,
            ws,
        }
    }

    /// toolgate as the operator runs it here: this home, this state.
    fn toolgate(&self) -> Command {
        self.with_places(home::toolgate())
    }

    /// [`clients::without_landlock`] with the fake home and toolgate's directories.
    fn without_landlock(&self) -> Command {
        let mut command = self.with_places(clients::without_landlock());
        command.stdin(Stdio::null());
        command
    }

    fn with_places(&self, mut command: Command) -> Command {
        command
            .envs(home::vars(&self.home))
            .env("XDG_STATE_HOME", &self.state)
            .env("XDG_CONFIG_HOME", &self.xdg_config);
        command
    }

    fn run(&self, config: &Path, args: &[&str]) -> Output {
        self.toolgate()
            .args(args)
            .arg("--config")
            .arg(config)
            .output()
            .unwrap()
    }

    /// `toolgate tools admit UPSTREAM probe --effect read_only`, which must succeed.
    fn admit(&self, config: &Path, upstream: &str) {
        self.admit_tool(config, upstream, "probe");
    }

    /// `toolgate tools admit UPSTREAM TOOL --effect read_only`, which must succeed.
    fn admit_tool(&self, config: &Path, upstream: &str, tool: &str) {
        let output = self.run(
            config,
            &["tools", "admit", upstream, tool, "--effect", "read_only"],
        );
        assert!(
            output.status.success(),
            "admit {upstream} {tool}: {output:?}"
        );
    }
}

/// The `[[upstream]]` of the probe server named `name`, with `extra` lines (its
/// `[upstream.sandbox]`, or keys of its own before it).
fn probe_upstream(name: &str, extra: &str) -> String {
    format!(
        "[[upstream]]\nname = \"{name}\"\ncommand = [{}, {}]\ncall_timeout_ms = 30000\n{extra}\n",
        quoted(&python()),
        quoted(&root().join("tests/upstream/probe_server.py")),
    )
}

/// A running `toolgate serve --http` with its console, started with the places' HOME and
/// state.
struct Serving(served::Served);

impl Serving {
    fn start(places: &Places, config: &Path) -> Serving {
        let child = places
            .toolgate()
            .args(["serve", "--http", "127.0.0.1:0", "--workspace"])
            .arg(&places.ws)
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Serving(served::Served::from_child(child, &places.state))
    }

    /// Runs each probe through `tool`, in one session; the texts the tool returned.
    fn probe(&self, tool: &str, probes: &[String]) -> Vec<String> {
        let steps: Vec<Value> = probes
            .iter()
            .map(|python| json!({"op": "call", "tool": tool, "arguments": {"python": python}}))
            .collect();
        let plan = json!({"sessions": [{
            "transport": "http", "url": self.0.mcp_url, "token": self.0.mcp_token, "steps": steps,
        }]});
        let report = drive(&plan);
        report["sessions"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(probe_output)
            .collect()
    }
}

/// What a probe printed: the `probe` tool's string result, which the SDK also gives as the
/// structured `{"result": …}`.
fn probe_output(result: &Value) -> String {
    assert_eq!(result["isError"], false, "{result}");
    match result["structured"]["result"].as_str() {
        Some(text) => text.to_owned(),
        None => result["text"].as_str().unwrap().to_owned(),
    }
}

/// The values a probe's placeholders stand for.
struct Fill {
    pairs: Vec<(&'static str, String)>,
}

impl Fill {
    fn apply(&self, source: &str) -> String {
        let mut out = source.to_owned();
        for (name, value) in &self.pairs {
            out = out.replace(&format!("{{{name}}}"), value);
        }
        out
    }
}

/// A probe that must be refused: `action` (Python statements) escapes if it runs through.
fn refused(what: &str, action: &str) -> (String, String) {
    let body: String = action.lines().map(|l| format!("    {l}\n")).collect();
    (
        what.to_owned(),
        format!(
            "try:\n{body}    print(\"ESCAPED {what}\")\nexcept OSError as e:\n    print(\"REFUSED {what}:\", e)\n"
        ),
    )
}

/// The escapes every confined upstream must be refused, with placeholders.
fn escapes() -> Vec<(String, String)> {
    let mut probes = vec![
        refused("write outside", "open('{outside}/escaped', 'w').write('x')"),
        refused(
            "write the shared tmp",
            "open('/tmp/toolgate-upstream-escape-{toolgate_pid}', 'w').write('x')",
        ),
        refused("write home", "open('{home}/escaped', 'w').write('x')"),
        refused(
            "write the workspace",
            "open('{workspace}/escaped', 'w').write('x')",
        ),
        refused(
            "read an ssh key",
            "print(open('{home}/.ssh/id_ed25519').read())",
        ),
        refused(
            "read aws credentials",
            "print(open('{home}/.aws/credentials').read())",
        ),
        refused(
            "read gh hosts",
            "print(open('{home}/.config/gh/hosts.yml').read())",
        ),
        refused("read netrc", "print(open('{home}/.netrc').read())"),
        refused(
            "read the console token",
            "print(open('{token_file}').read())",
        ),
        refused(
            "list the state dir",
            "print(__import__('os').listdir('{state}'))",
        ),
        refused("read the configuration", "print(open('{config}').read())"),
        refused(
            "read a /tmp place not granted",
            "print(open('{hidden}/hidden.txt').read())",
        ),
        refused(
            "tcp to a local listener",
            "import socket\nsocket.create_connection(('127.0.0.1', {listener_port}), timeout=5)",
        ),
        refused(
            "tcp to the console",
            "import socket\nsocket.create_connection(('127.0.0.1', {console_port}), timeout=5)",
        ),
        refused(
            "udp",
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b'x', ('127.0.0.1', {listener_port}))",
        ),
        refused(
            "a raw socket",
            "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)",
        ),
        refused(
            "a pathname unix socket",
            "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.connect('{unix_socket}')\ns.sendall(b'x')",
        ),
        refused(
            "signal toolgate",
            "import os, signal\nos.kill({toolgate_pid}, signal.SIGCONT)",
        ),
    ];
    probes.push((
        "ptrace toolgate".to_owned(),
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         rc = libc.ptrace(16, {toolgate_pid}, None, None)\n\
         print('ESCAPED ptrace toolgate' if rc == 0 else 'REFUSED ptrace toolgate: errno %d' % ctypes.get_errno())\n"
            .to_owned(),
    ));
    probes
}

// The corpus rows marked `"tier": "mount-namespace"` (changing the mode or times of a file
// outside, which Landlock does not govern) are closed only by that tier, and are not run
// without it (`mount_tier`), since they would change the files this test checks.

/// The corpus rows marked for upstreams: (name, python). Lines starting with `//` are
/// comments.
fn corpus_rows() -> Vec<(String, String)> {
    let text = fs::read_to_string(root().join("tests/corpus/sandbox_escapes.jsonl")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("//"))
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .filter(|row| row["upstream"] == true)
        .filter(|row| row.get("tier").is_none() || mount_tier())
        .map(|row| {
            // The upstream's network is its configuration's, not a call's argument.
            assert!(row.get("network").is_none(), "{row}");
            (
                row["name"].as_str().unwrap().to_owned(),
                row["python"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn check_refused(upstream: &str, names: &[String], outputs: &[String]) {
    assert_eq!(names.len(), outputs.len());
    let failures: Vec<String> = names
        .iter()
        .zip(outputs)
        .filter(|(_, output)| {
            !output.trim_start().starts_with("REFUSED")
                || output.contains("ESCAPED")
                || output.contains(CANARY)
        })
        .map(|(name, output)| format!("upstream `{upstream}`, probe `{name}`: {output}"))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every file beneath `dir` with its contents and mode, to see that nothing changed.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, u32)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in fs::read_dir(&at).unwrap().map(Result::unwrap) {
            let path = entry.path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
                out.push((path, Vec::new(), meta.mode()));
            } else if meta.is_file() {
                out.push((path.clone(), fs::read(&path).unwrap(), meta.mode()));
            } else {
                out.push((path, Vec::new(), meta.mode()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_confined_upstream_is_refused_every_escape_and_changes_nothing() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::SocketAddr;

    let places = Places::new();
    // The configuration lives in a directory of the shared /tmp, so that its relative grant
    // (`visible`, beside it) opens a place the sandbox otherwise denies.
    let config_dir = tempfile::tempdir().unwrap();
    let config_dir_path = config_dir.path().canonicalize().unwrap();
    fs::create_dir(config_dir_path.join("visible")).unwrap();
    fs::write(config_dir_path.join("visible/visible.txt"), "granted").unwrap();
    let hidden = tempfile::tempdir().unwrap();
    fs::write(hidden.path().join("hidden.txt"), CANARY).unwrap();
    let outside = places.root.join("outside");
    let granted = places.root.join("granted");
    let audit_dir = places.root.join("audit");
    for dir in [&outside, &granted, &audit_dir] {
        fs::create_dir_all(dir).unwrap();
    }
    fs::write(
        outside.join("canary.txt"),
        "outside the upstream's grants\n",
    )
    .unwrap();
    let setuid = outside.join("id-setuid");
    fs::copy("/usr/bin/id", &setuid).unwrap();
    std::os::unix::fs::chown(&setuid, Some(65534), Some(65534)).unwrap();
    fs::set_permissions(&setuid, fs::Permissions::from_mode(0o4755)).unwrap();

    // Listeners the probes aim at; whatever reached one is still queued at the end.
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let listener_port = tcp.local_addr().unwrap().port();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let unix_socket = outside.join("docker.sock");
    let unix = UnixListener::bind(&unix_socket).unwrap();
    unix.set_nonblocking(true).unwrap();
    let abstract_name = format!("toolgate-upstream-sandbox-test-{}", std::process::id());
    let abstract_listener =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(&abstract_name).unwrap()).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();
    let other = procs::canary_process();

    let config = config_dir_path.join("toolgate.toml");
    let audit = audit_dir.join("audit.db");
    let toml = format!(
        "[audit]\npath = {}\n\n[sandbox]\nresolve = {{ \"allowed.test\" = [\"127.0.0.1\"] }}\n{}\n{}{}",
        quoted(&audit),
        repo_read(),
        probe_upstream(
            "probe",
            &format!(
                "[upstream.sandbox]\nread = [\"visible\"]\nwrite = [{}]\n",
                quoted(&granted)
            )
        ),
        probe_upstream("net", "[upstream.sandbox]\nnetwork = [\"allowed.test\"]\n"),
    );
    fs::write(&config, toml).unwrap();
    places.admit(&config, "probe");
    places.admit(&config, "net");

    let serving = Serving::start(&places, &config);
    let toolgate_pid = serving.0.child.id();
    let fill = Fill {
        pairs: vec![
            ("outside", outside.display().to_string()),
            ("home", places.home.display().to_string()),
            ("state", places.state.join("toolgate").display().to_string()),
            ("workspace", places.ws.display().to_string()),
            ("token_file", serving.0.token_file.display().to_string()),
            ("audit", audit.display().to_string()),
            ("config", config.display().to_string()),
            ("hidden", hidden.path().display().to_string()),
            ("console_port", serving.0.port.to_string()),
            ("listener_port", listener_port.to_string()),
            ("udp_port", udp_port.to_string()),
            ("unix_socket", unix_socket.display().to_string()),
            ("abstract", abstract_name.clone()),
            ("toolgate_pid", toolgate_pid.to_string()),
            ("other_pid", other.0.id().to_string()),
        ],
    };
    assert!(serving.0.token_file.starts_with(&places.state));
    let token_before = fs::read(&serving.0.token_file).unwrap();
    let protected = [&outside, &places.home, &places.ws];
    let before: Vec<_> = protected.iter().map(|d| snapshot(d)).collect();

    // This test's own escapes first: their calls also make the audit log the corpus aims at.
    let (names, sources): (Vec<String>, Vec<String>) = escapes().into_iter().unzip();
    let filled: Vec<String> = sources.iter().map(|s| fill.apply(s)).collect();
    let outputs = serving.probe("probe__probe", &filled);
    check_refused("probe", &names, &outputs);
    assert!(audit.exists(), "the audit log is where it was configured");

    // The corpus's rows for upstreams, from both. The standing grants file is the one
    // placeholder left unfilled: no call here makes a grant.
    let rows = corpus_rows();
    assert!(rows.len() >= 30, "only {} corpus rows", rows.len());
    let (rows, skipped): (Vec<_>, Vec<_>) = rows
        .into_iter()
        .map(|(name, python)| (name, fill.apply(&python)))
        .partition(|(_, python)| !python.contains("{grants_file}"));
    assert!(skipped.len() <= 1, "{skipped:?}");
    let (corpus_names, corpus_sources): (Vec<String>, Vec<String>) = rows.into_iter().unzip();
    for (_, python) in corpus_names.iter().zip(&corpus_sources) {
        assert!(
            !python.contains("{outside}") && !python.contains("{home}"),
            "unfilled: {python}"
        );
    }
    for upstream in ["probe", "net"] {
        let outputs = serving.probe(&format!("{upstream}__probe"), &corpus_sources);
        check_refused(upstream, &corpus_names, &outputs);
    }

    // Through its proxy the networked upstream reaches only its own host: another host is
    // refused by the proxy, and its own host here resolves, by the operator's pin, to a local
    // address, which the proxy refuses too (without the pin it would not resolve at all).
    let through_proxy = |host: &str| {
        format!(
            "import os, socket\n\
             proxy = os.environ['HTTPS_PROXY'].split('//')[-1].rstrip('/')\n\
             host, port = proxy.rsplit(':', 1)\n\
             s = socket.create_connection((host, int(port)), timeout=10)\n\
             s.sendall(b'CONNECT {host}:443 HTTP/1.1\\r\\nHost: {host}:443\\r\\n\\r\\n')\n\
             answer = s.recv(4096).decode(errors='replace')\n\
             status = answer.split('\\r\\n')[0]\n\
             reason = [l for l in answer.split('\\r\\n') if l.lower().startswith('x-toolgate-refused')]\n\
             print(('REFUSED ' if ' 403' in status else 'ESCAPED ') + status + ' ' + ' '.join(reason))\n"
        )
    };
    let mut net_names = names.clone();
    let mut net_sources = filled.clone();
    net_names.push("proxy to a host not on its list".to_owned());
    net_sources.push(through_proxy("forbidden.example"));
    net_names.push("proxy to its own host, pinned local".to_owned());
    net_sources.push(through_proxy("allowed.test"));
    let net_outputs = serving.probe("net__probe", &net_sources);
    check_refused("net", &net_names, &net_outputs);
    let n = net_outputs.len();
    assert!(
        net_outputs[n - 2].contains("host_not_allowed"),
        "{}",
        net_outputs[n - 2]
    );
    assert!(
        net_outputs[n - 1].contains("address_refused"),
        "{}",
        net_outputs[n - 1]
    );

    // What the grants open, and the environment each upstream gets.
    let works = serving.probe(
        "probe__probe",
        &[
            format!(
                "open({:?}, 'w').write('ok'); print('WROTE')",
                granted.join("ok.txt").display().to_string()
            ),
            format!(
                "print(open({:?}).read())",
                config_dir_path
                    .join("visible/visible.txt")
                    .display()
                    .to_string()
            ),
            "import os\np = os.path.join(os.environ['TMPDIR'], 'scratch')\nopen(p, 'w').write('x')\nprint('TMPDIR', os.environ['TMPDIR'], open(p).read())"
                .to_owned(),
            "import os\nprint('PROXY', os.environ.get('HTTPS_PROXY'))".to_owned(),
            format!(
                "print(open({:?}).read())",
                outside.join("canary.txt").display().to_string()
            ),
        ],
    );
    assert_eq!(works[0].trim(), "WROTE", "{works:?}");
    assert_eq!(fs::read_to_string(granted.join("ok.txt")).unwrap(), "ok");
    assert_eq!(works[1].trim(), "granted", "{works:?}");
    assert!(works[2].starts_with("TMPDIR "), "{works:?}");
    assert!(works[2].contains("toolgate-upstream-probe-"), "{works:?}");
    assert_eq!(works[3].trim(), "PROXY None", "{works:?}");
    // Outside its grants but not denied: readable, as the system is.
    assert_eq!(
        works[4].trim(),
        "outside the upstream's grants",
        "{works:?}"
    );
    let net_env = serving.probe(
        "net__probe",
        &["import os\nprint('PROXY', os.environ.get('HTTPS_PROXY'))".to_owned()],
    );
    assert!(
        net_env[0].starts_with("PROXY http://127.0.0.1:"),
        "{net_env:?}"
    );

    // Nothing changed: the protected trees as they were, nothing in /tmp, nothing reached a
    // listener, toolgate still serving with its token where it was.
    let after: Vec<_> = protected.iter().map(|d| snapshot(d)).collect();
    for ((dir, before), after) in protected.iter().zip(&before).zip(&after) {
        assert!(before == after, "{} changed", dir.display());
    }
    for marker in [
        format!("/tmp/toolgate-upstream-escape-{toolgate_pid}"),
        format!("/tmp/toolgate-sandbox-marker-{toolgate_pid}"),
    ] {
        assert!(!Path::new(&marker).exists(), "{marker} was written");
    }
    assert!(tcp.accept().is_err(), "a probe reached the tcp listener");
    let mut buffer = [0; 16];
    assert!(
        udp.recv(&mut buffer).is_err(),
        "a probe reached the udp socket"
    );
    assert!(unix.accept().is_err(), "a probe reached the unix socket");
    assert!(
        abstract_listener.accept().is_err(),
        "a probe reached the abstract socket"
    );
    assert_eq!(fs::read(&serving.0.token_file).unwrap(), token_before);
    let again = serving.probe("probe__probe", &["print('still serving')".to_owned()]);
    assert_eq!(again[0].trim(), "still serving");
}

/// Without `[upstream.sandbox]`: its working directory readable but not writable (here a
/// directory of the shared /tmp, which is otherwise denied), no network, a private TMPDIR
/// removed when the process ends.
#[test]
fn by_default_an_upstream_reads_its_cwd_writes_only_its_tmpdir_and_has_no_network() {
    let places = Places::new();
    let cwd = tempfile::tempdir().unwrap();
    let cwd_path = cwd.path().canonicalize().unwrap();
    fs::write(cwd_path.join("readme.txt"), "the upstream's own files").unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();

    let config = places.root.join("toolgate.toml");
    fs::write(
        &config,
        format!(
            "{}\n[sandbox]\n{}",
            probe_upstream("plain", &format!("cwd = {}", quoted(&cwd_path))),
            repo_read()
        ),
    )
    .unwrap();
    places.admit(&config, "plain");

    let probes = [
        "print(open('readme.txt').read())".to_owned(),
        refused("write its cwd", "open('written.txt', 'w').write('x')").1,
        refused(
            "tcp",
            &format!("import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)"),
        )
        .1,
        "import os\nprint('PROXY', os.environ.get('HTTPS_PROXY'), os.environ.get('HTTP_PROXY'))"
            .to_owned(),
        "import os\np = os.path.join(os.environ['TMPDIR'], 'scratch')\nopen(p, 'w').write('x')\nprint(os.environ['TMPDIR'])"
            .to_owned(),
    ];
    let steps: Vec<Value> = probes
        .iter()
        .map(
            |python| json!({"op": "call", "tool": "plain__probe", "arguments": {"python": python}}),
        )
        .collect();
    let mut env = serde_json::Map::new();
    for (key, value) in [
        ("HOME", places.home.display().to_string()),
        ("XDG_STATE_HOME", places.state.display().to_string()),
        ("XDG_CONFIG_HOME", places.xdg_config.display().to_string()),
        ("PATH", std::env::var("PATH").unwrap_or_default()),
    ] {
        env.insert(key.to_owned(), Value::String(value));
    }
    let args = stdio_serve_args(&places.ws, &config);
    let plan = json!({"sessions": [{
        "transport": "stdio", "command": toolgate_bin(), "args": args, "env": env, "steps": steps,
    }]});
    let report = drive(&plan);
    let texts: Vec<String> = report["sessions"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(probe_output)
        .collect();
    assert_eq!(texts[0].trim(), "the upstream's own files", "{texts:?}");
    assert!(texts[1].starts_with("REFUSED"), "{texts:?}");
    assert!(!cwd_path.join("written.txt").exists());
    assert!(texts[2].starts_with("REFUSED"), "{texts:?}");
    assert!(tcp.accept().is_err(), "the upstream reached the listener");
    assert_eq!(texts[3].trim(), "PROXY None None", "{texts:?}");
    let tmpdir = PathBuf::from(texts[4].trim());
    assert!(
        tmpdir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("toolgate-upstream-plain-"),
        "{tmpdir:?}"
    );
    // The session ended, toolgate stopped the upstream, and its temporary directory went
    // with it.
    assert!(!tmpdir.exists(), "{} is still there", tmpdir.display());
}

/// Mistakes in `[upstream.sandbox]` name the file and the line, like other configuration
/// errors.
#[test]
fn upstream_sandbox_mistakes_name_file_and_line() {
    let places = Places::new();
    let config = places.root.join("toolgate.toml");
    for (section, line, needle) in [
        (
            "[upstream.sandbox]\nreed = [\"/srv\"]\n",
            6,
            "unknown field `reed`",
        ),
        (
            "[upstream.sandbox]\nnetwork = [\"http://example.com/\"]\n",
            1,
            "network `http://example.com/` is not a host the proxy can allow",
        ),
        (
            "[upstream.sandbox]\nwrite = [\"~bob/x\"]\n",
            1,
            "only `~/` (the home directory) is understood",
        ),
    ] {
        fs::write(&config, probe_upstream("probe", section)).unwrap();
        let output = places.run(&config, &["tools", "list", "--candidates"]);
        assert!(!output.status.success(), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let located = format!("{}:{line}:", config.display());
        assert!(stderr.contains(&located), "{located} in {stderr}");
        assert!(stderr.contains(needle), "{needle} in {stderr}");
    }
}

/// On a machine without Landlock (made so by strace failing `landlock_create_ruleset`) an
/// upstream process is not started, and the reason names it; the operator's
/// `dangerous-unconfined` starts it unconfined.
#[test]
fn a_machine_without_landlock_starts_no_upstream_process() {
    let places = Places::new();
    let state = places.root.join("upstream-state");
    fs::create_dir_all(&state).unwrap();
    let upstream = format!(
        "[[upstream]]\nname = \"test\"\ncommand = [{}, {}, {}]\nstartup_timeout_ms = 5000\n\
         [upstream.sandbox]\nwrite = [{}]\n",
        quoted(&python()),
        quoted(&root().join("tests/upstream/test_upstream.py")),
        quoted(&state),
        quoted(&state),
    );
    let listing = |config: &Path| -> Value {
        let output = places
            .without_landlock()
            .args(["tools", "discover", "--json", "--config"])
            .arg(config)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice::<Value>(&output.stdout).unwrap()["servers"][0].clone()
    };

    let config = places.root.join("enforce.toml");
    fs::write(&config, &upstream).unwrap();
    let server = listing(&config);
    assert_eq!(server["connected"], false, "{server}");
    let events = server["events"].to_string();
    assert!(
        events.contains("upstream `test` was not started: sandbox_unavailable"),
        "{events}"
    );
    assert!(events.contains("landlock"), "{events}");
    assert!(!state.join("pid").exists(), "the upstream ran");

    let config = places.root.join("unconfined.toml");
    fs::write(
        &config,
        format!("[sandbox]\nmode = \"dangerous-unconfined\"\n\n{upstream}"),
    )
    .unwrap();
    let server = listing(&config);
    assert_eq!(server["connected"], true, "{server}");
    assert!(state.join("pid").exists(), "the upstream did not run");

    // A call to an admitted tool of an upstream that cannot be confined fails with the
    // sandbox's code, and the upstream is not started for it.
    places.admit_tool(&config, "test", "echo");
    let admitted = fs::read_to_string(&config)
        .unwrap()
        .replace("[sandbox]\nmode = \"dangerous-unconfined\"\n", "");
    let config = places.root.join("admitted.toml");
    fs::write(&config, admitted).unwrap();
    fs::remove_file(state.join("pid")).unwrap();
    let output = places
        .without_landlock()
        .args(["call", "--json", "--workspace"])
        .arg(&places.ws)
        .args([
            "--tool",
            "test__echo",
            "--args",
            r#"{"text":"hi"}"#,
            "--config",
        ])
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let outcome: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {output:?}"));
    assert_eq!(outcome["error"]["code"], "sandbox_unavailable", "{outcome}");
    assert!(
        outcome["error"]["message"]
            .as_str()
            .unwrap()
            .contains("upstream `test` was not started"),
        "{outcome}"
    );
    assert!(!state.join("pid").exists(), "the upstream ran");
}
