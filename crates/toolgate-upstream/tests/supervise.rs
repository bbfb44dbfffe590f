//! `Upstreams` against a real upstream process (`tests/upstream/test_upstream.py`): what the
//! registry gets as the upstream changes, fails to list, and crashes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/procs.rs"]
mod procs;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use toolgate_sandbox::{DenyList, Sandbox, Support};
use toolgate_upstream::{
    AdmittedSection, SandboxSection, UpstreamConfinement, UpstreamSection, UpstreamSpec, Upstreams,
    pin_of,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn python() -> PathBuf {
    let path = root().join("target/test-deps/venv/bin/python");
    assert!(
        path.exists(),
        "test dependency `{}` is missing: run scripts/test-deps first",
        path.display()
    );
    path
}

fn section(state: &Path, refresh_secs: u64) -> UpstreamSection {
    UpstreamSection {
        name: "test".into(),
        command: vec![
            python().display().to_string(),
            root()
                .join("tests/upstream/test_upstream.py")
                .display()
                .to_string(),
            state.display().to_string(),
        ],
        url: None,
        headers: Default::default(),
        ca_file: None,
        cwd: None,
        env: Vec::new(),
        startup_timeout_ms: Some(10_000),
        call_timeout_ms: Some(3_000),
        refresh_secs: Some(refresh_secs),
        max_message_bytes: None,
        tools: Vec::new(),
        // The server keeps its state there, a directory under the shared /tmp that the
        // sandbox denies unless the operator grants it; and its script lives in this
        // repository, which may lie under /tmp too.
        sandbox: Some(SandboxSection {
            write: vec![state.display().to_string()],
            read: vec![root().display().to_string()],
            ..SandboxSection::default()
        }),
    }
}

fn spec(section: &UpstreamSection) -> UpstreamSpec {
    section
        .check(
            Path::new("/"),
            |name| std::env::var(name).ok(),
            UpstreamConfinement::detect(std::env::home_dir().as_deref()),
        )
        .unwrap()
}

fn signal(state: &Path, name: &str) {
    let pid = std::fs::read_to_string(state.join("pid")).unwrap();
    let status = Command::new("kill")
        .args([&format!("-{name}"), pid.trim()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The test upstream (refreshed every `refresh_secs`, 0 never) with `echo` admitted, started,
/// and `echo` current.
fn echo_admitted(state: &Path, refresh_secs: u64) -> Upstreams {
    let mut config = section(state, refresh_secs);
    config.tools.push(admit(state, "echo"));
    let upstreams = Upstreams::start(vec![spec(&config)]).unwrap();
    upstreams.wait_started();
    assert_eq!(admitted(&upstreams), [("test__echo".to_owned(), true)]);
    upstreams
}

/// The admitted tools' names, and whether each is visible (current and available).
fn admitted(upstreams: &Upstreams) -> Vec<(String, bool)> {
    let tools = upstreams.tools();
    let mut builder = toolgate_core::RegistryBuilder::new();
    for (descriptor, entry, executor) in tools.admitted {
        builder.register(descriptor, entry, executor).unwrap();
    }
    let registry = builder.build().unwrap();
    registry
        .tools()
        .map(|t| {
            let visible = registry
                .visible("default")
                .any(|v| v.entry().name == t.entry().name);
            (t.entry().name.clone(), visible)
        })
        .collect()
}

/// Pins `tool` as the upstream serves it now.
fn admit(state: &Path, tool: &str) -> AdmittedSection {
    let upstreams = Upstreams::start(vec![spec(&section(state, 0))]).unwrap();
    upstreams.wait_started();
    let status = upstreams.statuses().remove(0);
    let descriptor = status
        .tools
        .unwrap()
        .into_iter()
        .find(|d| d.name == tool)
        .unwrap();
    let (digest, pinned) = pin_of(&descriptor);
    AdmittedSection {
        tool: tool.into(),
        name: None,
        effect: Some(toolgate_core::EffectClass::ReadOnly),
        enabled: None,
        capability: None,
        surfaces: None,
        profiles: None,
        approval: None,
        description: None,
        timeout_ms: None,
        max_output_bytes: None,
        digest: digest.to_string(),
        pinned,
    }
}

#[test]
fn candidates_pins_and_a_change_announced_with_list_changed() {
    let state = tempfile::tempdir().unwrap();
    let mut config = section(state.path(), 0);
    config.tools.push(admit(state.path(), "echo"));
    let upstreams = Upstreams::start(vec![spec(&config)]).unwrap();
    let changes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = changes.clone();
    upstreams.on_change(std::sync::Arc::new(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }));
    upstreams.wait_started();
    assert_eq!(admitted(&upstreams), [("test__echo".to_owned(), true)]);
    let candidates: Vec<String> = upstreams
        .tools()
        .candidates
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(
        candidates,
        [
            "test__fault",
            "test__count",
            "test__delete_everything",
            "test__repeat"
        ]
    );

    // The first listing, if reported, was reported before the start counted as done.
    let before = changes.load(std::sync::atomic::Ordering::SeqCst);
    signal(state.path(), "USR1");
    wait_until("the change is seen", || {
        changes.load(std::sync::atomic::Ordering::SeqCst) > before
    });
    assert_eq!(admitted(&upstreams), [("test__echo".to_owned(), false)]);
    let (admission, current) = upstreams.admission("test__echo").unwrap();
    let diff = toolgate_upstream::diff(&admission.pinned, &current.unwrap());
    assert!(
        diff.contains("+  \"description\": \"Echoes its text back. Also,"),
        "{diff}"
    );
}

#[test]
fn a_failed_refresh_keeps_the_last_list_and_a_crash_restarts() {
    let state = tempfile::tempdir().unwrap();
    let upstreams = echo_admitted(state.path(), 1);

    signal(state.path(), "USR2");
    wait_until("a refresh fails", || {
        upstreams.statuses()[0]
            .events
            .iter()
            .any(|e| e.contains("failed, keeping the last tool list"))
    });
    assert_eq!(admitted(&upstreams), [("test__echo".to_owned(), true)]);
    assert!(upstreams.statuses()[0].tools.is_some());

    // A crash: the supervisor starts it again, with a fresh pid.
    let pid = std::fs::read_to_string(state.path().join("pid")).unwrap();
    std::fs::remove_file(state.path().join("list_fails")).unwrap();
    signal(state.path(), "KILL");
    wait_until("the upstream is restarted", || {
        let status = &upstreams.statuses()[0];
        status.connected
            && status.restarts >= 1
            && std::fs::read_to_string(state.path().join("pid")).is_ok_and(|p| p != pid)
    });
    assert_eq!(admitted(&upstreams), [("test__echo".to_owned(), true)]);

    // Stopping kills it.
    let pid = procs::pids(&state.path().join("pid"))[0];
    upstreams.shutdown();
    wait_until("the upstream is gone", || !procs::running(pid));
}

#[test]
fn a_pinned_schema_that_does_not_compile_makes_the_tool_unavailable() {
    let state = tempfile::tempdir().unwrap();
    let mut config = section(state.path(), 0);
    // An upstream that never starts: the pins stay in force, and calls find it unavailable.
    config.command = vec![state.path().join("no-such-server").display().to_string()];
    let mut good = admit(state.path(), "echo");
    good.name = Some("good".into());
    let broken =
        toolgate_core::Descriptor::new("count", "counts", serde_json::json!({"type": "string"}));
    let (digest, pinned) = pin_of(&broken);
    let mut bad = good.clone();
    bad.tool = "count".into();
    bad.name = Some("bad".into());
    bad.digest = digest.to_string();
    bad.pinned = pinned;
    config.tools = vec![good, bad];
    let upstreams = Upstreams::start(vec![spec(&config)]).unwrap();
    upstreams.wait_started();
    let status = upstreams.statuses().remove(0);
    assert!(!status.connected);
    assert!(
        status.events.iter().any(|e| e.contains("could not start")),
        "{status:?}"
    );
    assert_eq!(
        admitted(&upstreams),
        [("good".to_owned(), true), ("bad".to_owned(), false)]
    );

    let mut builder = toolgate_core::RegistryBuilder::new();
    for (descriptor, entry, executor) in upstreams.tools().admitted {
        builder.register(descriptor, entry, executor).unwrap();
    }
    let registry = std::sync::Arc::new(builder.build().unwrap());
    let policy = std::sync::Arc::new(
        toolgate_core::PolicyEngine::from_sources(&[("p", "permit(principal, action, resource);")])
            .unwrap(),
    );
    let pipeline = toolgate_core::Pipeline::new(
        registry,
        policy,
        std::sync::Arc::new(toolgate_core::HeadlessBroker),
        toolgate_core::WorkspaceId::new("/w"),
    );
    let call = |tool: &str, args: &str| {
        pipeline.run(toolgate_core::RawCall::text(
            tool,
            args,
            toolgate_core::Surface::Cli,
        ))
    };
    let outcome = call("bad", "{}");
    let rejection = outcome.rejection().unwrap();
    assert_eq!(rejection.code(), toolgate_core::RejectCode::Unavailable);
    assert!(
        rejection
            .message()
            .contains("pinned input schema does not compile"),
        "{}",
        rejection.message()
    );
    let outcome = call("good", r#"{"text": "hi"}"#);
    assert_eq!(outcome.error().unwrap().code, "upstream_unavailable");
}

#[test]
fn a_change_without_list_changed_is_caught_by_the_periodic_refresh() {
    let state = tempfile::tempdir().unwrap();
    let upstreams = echo_admitted(state.path(), 1);
    // The test upstream serves the changed description from now on, and says nothing.
    std::fs::write(state.path().join("changed"), "").unwrap();
    wait_until("the refresh quarantines the tool", || {
        admitted(&upstreams) == [("test__echo".to_owned(), false)]
    });
    assert!(
        upstreams.statuses()[0]
            .events
            .iter()
            .any(|e| e == "tool list changed (periodic refresh)"),
        "{:?}",
        upstreams.statuses()[0].events
    );
}

#[test]
fn a_list_naming_a_tool_twice_is_refused_and_the_last_list_stays() {
    let state = tempfile::tempdir().unwrap();
    let upstreams = echo_admitted(state.path(), 1);

    std::fs::write(state.path().join("duplicate"), "").unwrap();
    wait_until("a refresh is refused", || {
        upstreams.statuses()[0]
            .events
            .iter()
            .any(|e| e.contains("names `echo` more than once"))
    });
    assert_eq!(admitted(&upstreams), [("test__echo".to_owned(), true)]);
    let tools = upstreams.statuses().remove(0).tools.unwrap();
    assert_eq!(tools.iter().filter(|d| d.name == "echo").count(), 1);
}

#[test]
fn a_call_resolved_before_a_change_is_not_forwarded_after_it() {
    use toolgate_core::{
        ExecContext, HeadlessBroker, Pipeline, PolicyEngine, RawCall, RegistryBuilder, Surface,
        WorkspaceId, policy::DEFAULT_POLICY,
    };
    let state = tempfile::tempdir().unwrap();
    let upstreams = echo_admitted(state.path(), 0);
    let mut builder = RegistryBuilder::new();
    for (descriptor, entry, executor) in upstreams.tools().admitted {
        builder.register(descriptor, entry, executor).unwrap();
    }
    let registry = builder.build().unwrap();
    let mut policy = PolicyEngine::from_sources(&[("default", DEFAULT_POLICY)]).unwrap();
    policy.prepare(&registry).unwrap();
    let pipeline = Pipeline::new(
        std::sync::Arc::new(registry),
        std::sync::Arc::new(policy),
        std::sync::Arc::new(HeadlessBroker),
        WorkspaceId::new("/ws"),
    );
    let (outcome, before) = pipeline.enter(|stages| {
        let authorized = stages
            .authorize_call(RawCall::text(
                "test__echo",
                r#"{"text": "hi"}"#.to_owned(),
                Surface::Chat,
            ))
            .unwrap();
        let before = calls(state.path());

        // The upstream changes the descriptor after the call was resolved against the pin.
        signal(state.path(), "USR1");
        wait_until("the change is seen", || {
            admitted(&upstreams) == [("test__echo".to_owned(), false)]
        });
        let cx = ExecContext::new(Duration::from_secs(5), toolgate_core::Cancel::new());
        (stages.execute(authorized, &cx), before)
    });
    let error = outcome.error().unwrap();
    assert_eq!(error.code, "stale_descriptor", "{}", error.message);
    assert!(
        error.message.contains("toolgate tools pin"),
        "{}",
        error.message
    );
    assert_eq!(calls(state.path()), before);
}

/// The `tools/call` lines the test upstream logged.
fn calls(state: &Path) -> usize {
    std::fs::read_to_string(state.join("calls.log"))
        .map(|log| log.lines().count())
        .unwrap_or(0)
}

/// A machine that cannot confine starts no upstream process, and says why and which.
#[test]
fn an_upstream_is_not_started_where_it_cannot_be_confined() {
    let state = tempfile::tempdir().unwrap();
    let here = Sandbox::detect().support();
    for support in [
        Support {
            landlock_abi: None,
            ..here
        },
        Support {
            landlock_abi: Some(3),
            ..here
        },
        Support {
            seccomp: false,
            ..here
        },
    ] {
        let mut spec = spec(&section(state.path(), 0));
        spec.confinement =
            UpstreamConfinement::new(Sandbox::with_support(support), DenyList::scratch_only());
        let upstreams = Upstreams::start(vec![spec]).unwrap();
        upstreams.wait_started();
        let status = upstreams.statuses().remove(0);
        assert!(!status.connected, "{status:?}");
        assert!(status.tools.is_none(), "{status:?}");
        let event = status.events.back().unwrap();
        assert!(
            event.contains("upstream `test` was not started: sandbox_unavailable"),
            "{event}"
        );
        // Not started again: the machine will not learn to confine it by waiting (a failed
        // start is otherwise retried after 250 ms).
        std::thread::sleep(Duration::from_millis(700));
        let status = upstreams.statuses().remove(0);
        assert_eq!(status.restarts, 0, "{status:?}");
        assert_eq!(status.events.len(), 1, "{status:?}");
        drop(upstreams);
        // The server never ran: it writes its pid first thing.
        assert!(!state.path().join("pid").exists());
    }
}

/// The operator's `dangerous-unconfined` runs the upstream as it is, with nothing granted:
/// the state directory under /tmp is written without `[upstream.sandbox]`.
#[test]
fn dangerous_unconfined_leaves_upstreams_unconfined() {
    let state = tempfile::tempdir().unwrap();
    let mut config = section(state.path(), 0);
    config.sandbox = None;
    let mut confined = spec(&config);
    let upstreams = Upstreams::start(vec![confined.clone()]).unwrap();
    upstreams.wait_started();
    // Confined, it cannot even write its pid under /tmp.
    assert!(!upstreams.statuses().remove(0).connected);
    assert!(!state.path().join("pid").exists());
    drop(upstreams);
    confined.confinement = UpstreamConfinement::dangerous_unconfined();
    let upstreams = Upstreams::start(vec![confined]).unwrap();
    upstreams.wait_started();
    assert!(upstreams.statuses().remove(0).connected);
    assert!(state.path().join("pid").exists());
}
