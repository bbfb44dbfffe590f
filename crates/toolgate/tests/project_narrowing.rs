//! The property of an untrusted project configuration, checked on random configurations
//! through the library (no binary, so that many run in a few seconds): with the user's
//! `toolgate.toml` and a workspace's `.toolgate/` that nobody trusts, toolgate never permits
//! more than the user's configuration alone. For every call of a fixed set, in every surface
//! and profile, the answer is no more permissive (runs unattended > asks a person > refused);
//! no tool is visible that the user's configuration does not show, and none shows more (a
//! changed description or effect, a wider surface or profile, a higher limit, a lifted
//! approval); no hook, upstream, profile, token, audit path, approval channel or sandbox
//! grant comes from the project.
//!
//! The configurations are drawn by a seeded generator (`PROJECT_NARROWING_SEED` to replay
//! another seed) from pools of every kind of section and of Cedar policies: permits, forbids,
//! and forbids or permits that take the `@id` of a default or a user's policy.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolgate::{Gate, Settings};
use toolgate_core::{ApprovalMode, HeadlessBroker, RawCall, Surface};

use support::home;

const CASES: usize = 60;

/// xorshift64*: small, seeded, the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn some<T: Clone>(&mut self, items: &[T], percent: u64) -> Vec<T> {
        items
            .iter()
            .filter(|_| self.chance(percent))
            .cloned()
            .collect()
    }
}

const TOOLS: &[&str] = &[
    "read_file",
    "list_dir",
    "search_text",
    "git_status",
    "git_diff",
    "write_file",
    "edit_file",
    "run_command",
    "run_script",
];
const SURFACES: &[&str] = &["chat", "cli", "console"];
const PROFILES: &[&str] = &["default", "readonly", "team"];
const EFFECTS: &[&str] = &["read_only", "local_write", "network", "irreversible"];

/// Policies a user may write.
const USER_POLICIES: &[&str] = &[
    r#"@id("user-forbid-write") forbid (principal, action, resource) when { resource.name == "write_file" };"#,
    r#"@id("user-unattended-write") permit (principal, action == Action::"call_unattended", resource) when { resource.effect == "local_write" };"#,
    r#"@id("user-cap") permit (principal, action == Action::"call_unattended", resource) when { resource.capability == "cap.a" };"#,
    r#"@id("user-no-chat") forbid (principal, action == Action::"call_unattended", resource) when { context.surface == "chat" };"#,
    r#"@id("user-team") permit (principal, action == Action::"call_unattended", resource) when { context.profile == "team" };"#,
    r#"@id("sensitive-dotenv") forbid (principal, action, resource) when { context.sensitive.contains("dotenv") && context.surface == "chat" };"#,
    r#"permit (principal, action, resource) when { resource.effect == "network" };"#,
];

/// Policies a repository may ship: everything a user may write, and what would lift the
/// user's or the default rules by taking their `@id`.
const PROJECT_POLICIES: &[&str] = &[
    r#"permit (principal, action, resource);"#,
    r#"permit (principal, action == Action::"call_unattended", resource);"#,
    r#"permit (principal, action == Action::"call_unattended", resource) when { resource.effect == "local_write" };"#,
    r#"permit (principal, action, resource) when { resource.effect == "network" };"#,
    r#"forbid (principal, action, resource) when { resource.name == "run_command" };"#,
    r#"forbid (principal, action == Action::"call_unattended", resource) when { context.surface == "chat" };"#,
    r#"forbid (principal, action, resource) when { context.paths.contains("a.txt") };"#,
    r#"@id("team-forbid") forbid (principal, action, resource) when { resource.name == "list_dir" };"#,
    r#"@id("sensitive-dotenv") forbid (principal, action, resource) when { context.surface == "console" };"#,
    r#"@id("runs-later-agent-config") forbid (principal, action, resource) when { resource.name == "nothing" };"#,
    r#"@id("default-local-write") permit (principal, action in [Action::"call", Action::"call_unattended"], resource) when { resource.effect == "local_write" };"#,
    r#"@id("default-read-only") forbid (principal, action, resource) when { resource.name == "read_file" };"#,
    r#"@id("user-forbid-write") forbid (principal, action, resource) when { resource.name == "nothing" };"#,
    r#"@id("user-no-chat") permit (principal, action, resource);"#,
    r#"@id("user-team") forbid (principal, action, resource) when { context.profile == "nothing" };"#,
];

/// A `[[tool]]` section for `name`, each key set or not.
fn tool_section(rng: &mut Rng, name: &str) -> String {
    let mut out = format!("[[tool]]\nname = \"{name}\"\n");
    let list = |items: Vec<&str>| {
        items
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if rng.chance(25) {
        out += &format!("enabled = {}\n", rng.chance(50));
    }
    if rng.chance(20) {
        out += &format!("effect = \"{}\"\n", rng.pick(EFFECTS));
    }
    if rng.chance(25) {
        out += &format!("surfaces = [{}]\n", list(rng.some(SURFACES, 60)));
    }
    if rng.chance(25) {
        let mut profiles = rng.some(PROFILES, 50);
        if profiles.is_empty() {
            profiles.push("default");
        }
        out += &format!("profiles = [{}]\n", list(profiles));
    }
    if rng.chance(25) {
        out += &format!("approval = \"{}\"\n", rng.pick(&["policy", "each_call"]));
    }
    if rng.chance(15) {
        out += &format!("capability = \"{}\"\n", rng.pick(&["cap.a", "cap.b"]));
    }
    if rng.chance(15) {
        out += &format!("description = \"description {}\"\n", rng.below(4));
    }
    for key in ["timeout_ms", "max_output_bytes", "max_results"] {
        if rng.chance(20) {
            out += &format!("{key} = {}\n", rng.pick(&[10, 1000, 100_000, 100_000_000]));
        }
    }
    out
}

/// The sections a user and a project may both write.
fn common_sections(rng: &mut Rng, paths: &str) -> String {
    let mut out = String::new();
    let mut names: Vec<&str> = TOOLS.to_vec();
    for _ in 0..rng.below(4) {
        let name = names.remove(rng.below(names.len()));
        out += &tool_section(rng, name);
    }
    if rng.chance(30) {
        out += &format!(
            "[limits]\nmax_argument_bytes = {}\nmax_depth = {}\n",
            rng.pick(&[200, 1000, 100_000, 10_000_000]),
            rng.pick(&[2, 8, 64])
        );
    }
    if rng.chance(30) {
        out += &format!(
            "[approval]\ntimeout_secs = {}\n",
            rng.pick(&[5, 300, 86_400])
        );
    }
    if rng.chance(30) {
        let tools: Vec<String> = rng
            .some(TOOLS, 30)
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect();
        out += &format!("[profiles.team]\ntools = [{}]\n", tools.join(", "));
    }
    if rng.chance(40) {
        let pool: Vec<String> = (0..3).map(|i| format!("\"/{paths}-{i}\"")).collect();
        out += "[sandbox]\n";
        for key in ["deny", "read", "write"] {
            if rng.chance(50) {
                out += &format!("{key} = [{}]\n", rng.some(&pool, 50).join(", "));
            }
        }
        if rng.chance(50) {
            out += &format!(
                "[sandbox.limits]\npids_max = {}\nopen_files = {}\n",
                rng.pick(&[16, 4096, 1_000_000]),
                rng.pick(&[64, 100_000])
            );
        }
    }
    out
}

/// The user's `toolgate.toml`, and its policies (or `None`).
fn user_config(rng: &mut Rng) -> (String, Option<String>) {
    let mut text = String::new();
    if rng.chance(10) {
        text += "default_policy = false\n";
    }
    let policies = rng
        .chance(50)
        .then(|| rng.some(USER_POLICIES, 35).join("\n"));
    if policies.is_some() {
        text += "policy = \"user.cedar\"\n";
    }
    text += &common_sections(rng, "user");
    (text, policies)
}

/// The project's `.toolgate/toolgate.toml` and its policy files.
fn project_config(rng: &mut Rng) -> (String, Vec<String>) {
    let mut text = String::new();
    if rng.chance(15) {
        text += "default_policy = false\n";
    }
    if rng.chance(10) {
        text += "policy = \"../outside.cedar\"\n";
    }
    text += &common_sections(rng, "project");
    if rng.chance(20) {
        text += "[[hook]]\nname = \"team\"\nevent = \"pre_call\"\ncommand = [\"/bin/false\"]\n";
    }
    if rng.chance(20) {
        text += "[[upstream]]\nname = \"docs\"\ncommand = [\"/bin/false\"]\n";
    }
    if rng.chance(10) {
        text += "[audit]\npath = \"/project-audit.db\"\n";
    }
    if rng.chance(10) {
        text += "[[serve.token]]\nenv = \"PATH\"\nactor = \"admin\"\nprofile = \"default\"\n";
    }
    if rng.chance(10) {
        text += "[approval]\nelicitation = [\"default\"]\n";
    }
    if rng.chance(15) {
        let (key, value) = *rng.pick(&[
            ("mode", "\"dangerous-unconfined\""),
            ("allow", "[\"~/.ssh\"]"),
            ("dangerous_unconfined_network", "true"),
            ("dangerous_allow_unix_sockets", "true"),
        ]);
        text += &format!("[sandbox]\n{key} = {value}\n");
    }
    let files = (0..rng.below(3))
        .map(|_| rng.some(PROJECT_POLICIES, 30).join("\n"))
        .collect();
    (text, files)
}

/// The calls every pair of configurations is asked about.
fn calls() -> Vec<RawCall> {
    let big = format!(r#"{{"path": "b.txt", "content": "{}"}}"#, "x".repeat(500));
    let bodies: Vec<(&str, String)> = vec![
        ("read_file", r#"{"path": "a.txt"}"#.to_owned()),
        ("read_file", r#"{"path": ".env"}"#.to_owned()),
        ("list_dir", r#"{"path": "."}"#.to_owned()),
        ("git_status", "{}".to_owned()),
        (
            "write_file",
            r#"{"path": "b.txt", "content": "x"}"#.to_owned(),
        ),
        (
            "write_file",
            r#"{"path": ".mcp.json", "content": "{}"}"#.to_owned(),
        ),
        ("write_file", big),
        ("run_command", r#"{"argv": ["true"]}"#.to_owned()),
    ];
    let mut calls = Vec::new();
    for (tool, args) in &bodies {
        for surface in [Surface::Chat, Surface::Cli] {
            for profile in PROFILES {
                calls.push(RawCall::text(*tool, args.clone(), surface).in_profile(*profile));
            }
        }
    }
    calls
}

/// How permissive an answer is: refused, asks a person, runs unattended.
fn rank(gate: &Gate, ws: &toolgate_workspace::Workspace, call: &RawCall) -> (u8, String) {
    let pipeline = gate.pipeline(ws, Arc::new(HeadlessBroker));
    let reports = pipeline.explain(call.clone());
    let said = reports
        .iter()
        .map(|r| format!("{} {} {}", r.stage.as_str(), r.decision, r.detail))
        .collect::<Vec<_>>()
        .join("\n");
    let decisions: Vec<&str> = reports.iter().map(|r| r.decision).collect();
    let rank = if decisions.contains(&"reject") {
        0
    } else if decisions.contains(&"ask") {
        1
    } else {
        2
    };
    (rank, said)
}

/// Every way `combined` is wider than `user`, in words.
fn wider(user: &Gate, combined: &Gate) -> Vec<String> {
    let mut found = Vec::new();
    let (u, c) = (&user.settings, &combined.settings);
    let (ub, cb) = (u.bounds, c.bounds);
    if cb.max_name_bytes > ub.max_name_bytes
        || cb.max_argument_bytes > ub.max_argument_bytes
        || cb.max_depth > ub.max_depth
    {
        found.push(format!("bounds {cb:?} wider than {ub:?}"));
    }
    if c.approval.timeout > u.approval.timeout {
        found.push(format!("approval timeout {:?}", c.approval.timeout));
    }
    if c.approval.elicitation != u.approval.elicitation
        || c.approval.login_link_ttl != u.approval.login_link_ttl
    {
        found.push("approval channels".to_owned());
    }
    if c.audit.path != u.audit.path || c.audit.store_values != u.audit.store_values {
        found.push(format!("audit {:?}", c.audit.path));
    }
    if c.serve.tokens.len() != u.serve.tokens.len()
        || c.serve.dangerous_bind_any != u.serve.dangerous_bind_any
        || c.serve.allowed_hosts != u.serve.allowed_hosts
    {
        found.push("serve".to_owned());
    }
    if c.upstreams.len() != u.upstreams.len() || c.hooks.len() != u.hooks.len() {
        found.push("an upstream or a hook".to_owned());
    }
    let profiles = |s: &Settings| {
        s.profiles
            .iter()
            .map(|p| format!("{}:{:?}", p.name, p.tools))
            .collect::<Vec<_>>()
    };
    if profiles(c) != profiles(u) {
        found.push(format!("profiles {:?}", profiles(c)));
    }
    // The sandbox: the same mode, network and sockets; nothing readable or writable the
    // user's does not make so; nothing the user's denies lifted; limits no higher.
    let (us, cs) = (&u.sandbox, &c.sandbox);
    if cs.mode != us.mode || cs.dangerous_unconfined_network != us.dangerous_unconfined_network {
        found.push("sandbox mode or network".to_owned());
    }
    let (uc, cc) = (&us.confinement, &cs.confinement);
    if cc.unconfined_network() != uc.unconfined_network()
        || format!("{:?}", cc.unix_sockets()) != format!("{:?}", uc.unix_sockets())
        || cc.sandbox().is_some() != uc.sandbox().is_some()
    {
        found.push("confinement".to_owned());
    }
    for path in cc.read_paths() {
        if !uc.read_paths().contains(path) {
            found.push(format!("readable {}", path.display()));
        }
    }
    for path in uc.denied().entries() {
        if !cc.denied().entries().contains(path) {
            found.push(format!("no longer denied {}", path.display()));
        }
    }
    for i in 0..3 {
        let path = format!("/project-{i}");
        if format!("{cc:?}").contains(&path)
            && !format!("{uc:?}").contains(&path)
            && !cc.denied().entries().contains(&PathBuf::from(&path))
        {
            found.push(format!("writable or readable {path}"));
        }
    }
    let (ul, cl) = (&us.limits, &cs.limits);
    for (key, user, combined, default) in [
        (
            "file_size_bytes",
            ul.file_size_bytes,
            cl.file_size_bytes,
            Some(4u64 << 30),
        ),
        (
            "address_space_bytes",
            ul.address_space_bytes,
            cl.address_space_bytes,
            None,
        ),
        ("open_files", ul.open_files, cl.open_files, None),
        ("processes", ul.processes, cl.processes, None),
        ("pids_max", ul.pids_max, cl.pids_max, Some(4096)),
        (
            "memory_max_bytes",
            ul.memory_max_bytes,
            cl.memory_max_bytes,
            None,
        ),
    ] {
        match (user.or(default), combined.or(default)) {
            (Some(_), None) => found.push(format!("{key} lifted")),
            (Some(u), Some(c)) if c > u => found.push(format!("{key} {c} > {u}")),
            _ => {}
        }
    }
    // The tools: none visible that the user's are not, none showing more.
    let registry_profiles = combined.registry.profiles();
    for profile in &registry_profiles {
        for tool in combined.registry.visible(profile) {
            let entry = tool.entry();
            let Some(before) = user
                .registry
                .visible(profile)
                .find(|t| t.entry().name == entry.name)
            else {
                found.push(format!("`{}` visible in `{profile}`", entry.name));
                continue;
            };
            let before = before.entry();
            let (l, bl) = (&entry.limits, &before.limits);
            if tool.description() != before_description(user, &entry.name)
                || entry.effect != before.effect
                || entry.capability != before.capability
                || entry.version != before.version
                || !entry.surfaces.is_subset(&before.surfaces)
                || !entry.profiles.is_subset(&before.profiles)
                || l.timeout_ms > bl.timeout_ms
                || l.max_output_bytes > bl.max_output_bytes
                || l.max_results > bl.max_results
                || (before.approval == ApprovalMode::EachCall
                    && entry.approval != ApprovalMode::EachCall)
            {
                found.push(format!(
                    "`{}` shows more: {entry:?}\nthan {before:?}",
                    entry.name
                ));
            }
        }
    }
    if !registry_profiles.is_subset(&user.registry.profiles()) {
        found.push(format!("profiles {registry_profiles:?}"));
    }
    found
}

fn before_description<'a>(user: &'a Gate, name: &str) -> &'a str {
    user.registry
        .tools()
        .find(|t| t.entry().name == name)
        .map_or("", |t| t.description())
}

fn write_case(
    dir: &Path,
    ws: &Path,
    (user, user_policies): &(String, Option<String>),
    (project, project_policies): &(String, Vec<String>),
) -> PathBuf {
    let config = dir.join("config/toolgate.toml");
    std::fs::write(&config, user).unwrap();
    std::fs::write(
        dir.join("config/user.cedar"),
        user_policies.as_deref().unwrap_or(""),
    )
    .unwrap();
    let project_dir = ws.join(".toolgate");
    let _ = std::fs::remove_dir_all(&project_dir);
    std::fs::create_dir_all(&project_dir).unwrap();
    std::fs::write(project_dir.join("toolgate.toml"), project).unwrap();
    for (i, text) in project_policies.iter().enumerate() {
        std::fs::write(project_dir.join(format!("p{i}.cedar")), text).unwrap();
    }
    config
}

/// Runs `cases` random pairs of configurations, the project trusted or not: how many were
/// compared, how many the project made toolgate refuse, and each case found wider.
fn compare(cases: usize, trusted: bool) -> (usize, usize, Vec<String>) {
    let seed = std::env::var("PROJECT_NARROWING_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_7001_u64);
    let dir = home::fresh();
    let (plain, hostile) = (dir.join("plain"), dir.join("hostile"));
    for ws in [&plain, &hostile] {
        std::fs::create_dir_all(ws).unwrap();
        std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
        std::fs::write(ws.join(".env"), "API_KEY=secret\n").unwrap();
    }
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(
        dir.join("outside.cedar"),
        "permit (principal, action, resource);\n",
    )
    .unwrap();
    let plain_ws = toolgate::gate::open_workspace(&plain).unwrap();
    let hostile_ws = toolgate::gate::open_workspace(&hostile).unwrap();
    let state = toolgate::settings::StateDir::from_environment()
        .dir
        .unwrap();
    let calls = calls();
    let mut rng = Rng(seed);
    let (mut compared, mut refused) = (0, 0);
    let mut failures = Vec::new();
    for case in 0..cases {
        let user = user_config(&mut rng);
        let project = project_config(&mut rng);
        let config = write_case(&dir, &hostile, &user, &project);
        if trusted {
            let closure = toolgate::settings::project::closure_of(hostile_ws.root());
            if let Ok(Some(closure)) = closure {
                toolgate::trust::trust(&state, hostile_ws.root(), &closure, "terminal").unwrap();
            }
        }
        let Ok(user_gate) = Settings::load_for(Some(&config), plain_ws.root())
            .and_then(|s| Gate::configured(Arc::new(s), Arc::clone(&plain_ws)))
        else {
            continue;
        };
        // A project configuration toolgate refuses to start with is narrower than any.
        let Ok(combined) = Settings::load_for(Some(&config), hostile_ws.root())
            .and_then(|s| Gate::configured(Arc::new(s), Arc::clone(&hostile_ws)))
        else {
            refused += 1;
            continue;
        };
        compared += 1;
        let project_state = combined.settings.project.as_ref().unwrap();
        assert_eq!(project_state.is_trusted(), trusted);
        let mut wrong = wider(&user_gate, &combined);
        for call in &calls {
            let (before, before_said) = rank(&user_gate, &plain_ws, call);
            let (after, after_said) = rank(&combined, &hostile_ws, call);
            if after > before {
                wrong.push(format!(
                    "{} {:?} {}: {before} -> {after}\n{before_said}\n--\n{after_said}",
                    call.tool, call.surface, call.profile
                ));
            }
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "case {case} (seed {seed:#x})\n--- user:\n{}\n{}\n--- project:\n{}\n{}\n=> {}",
                user.0,
                user.1.as_deref().unwrap_or(""),
                project.0,
                project.1.join("\n--\n"),
                wrong.join("\n")
            ));
        }
    }
    let _ = toolgate::trust::revoke(&state, hostile_ws.root());
    (compared, refused, failures)
}

/// Runs the test `name` again in a process whose `HOME` and XDG directories are a fresh home
/// of the test's own, and checks that it passed there; false in that process, which runs the
/// test itself. The comparison loads settings in this process, and they read the state
/// directory (the trust records) from the environment: run as a plain `cargo test`, that
/// would be the user's own.
fn passed_in_a_home_of_its_own(name: &str) -> bool {
    const INSIDE: &str = "TOOLGATE_TEST_IN_A_HOME_OF_ITS_OWN";
    if std::env::var_os(INSIDE).is_some() {
        return false;
    }
    let exe = std::env::current_exe().unwrap();
    let out = home::isolated(std::process::Command::new(exe))
        .args([name, "--exact", "--test-threads", "1"])
        .env(INSIDE, "1")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("test result: ok. 1 passed"), "{said}");
    true
}

#[test]
fn an_untrusted_project_never_permits_more_than_the_user_alone() {
    if passed_in_a_home_of_its_own("an_untrusted_project_never_permits_more_than_the_user_alone") {
        return;
    }
    let (compared, refused, failures) = compare(CASES, false);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Most cases compare two running configurations: the test is not vacuous.
    assert!(
        compared >= CASES / 2,
        "only {compared} of {CASES} cases compared ({refused} refused by the project)"
    );
}

/// The same comparison finds what a trusted project widens: the check can fail.
#[test]
fn the_comparison_finds_what_a_trusted_project_widens() {
    if passed_in_a_home_of_its_own("the_comparison_finds_what_a_trusted_project_widens") {
        return;
    }
    let (compared, refused, failures) = compare(CASES / 3, true);
    // A third of no case compared would be none found: the check must find one at least.
    assert!(
        !failures.is_empty(),
        "no trusted project found wider: {compared} compared, {refused} refused"
    );
    assert!(
        failures.len() >= compared / 3,
        "only {} of {compared} trusted projects found wider",
        failures.len()
    );
}
