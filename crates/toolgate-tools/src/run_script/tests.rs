//! The project files' parsers and their precedence, each on a workspace of its own.

use super::cargo::cargo_toml;
use super::make::{MAKE_ENV, makefile};
use super::npm::package_json;
use super::project::{Found, Parsed, Project, Source};
use super::pyproject::pyproject_toml;
use super::*;

/// What `parse` finds in `text`, as the file `file` of an otherwise empty workspace that
/// also holds `others`.
fn parse_in(
    parse: fn(&Source) -> Parsed,
    file: &'static str,
    text: &str,
    others: &[(&str, &str)],
) -> Parsed {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in others {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    let workspace = Workspace::open(dir.path()).unwrap();
    parse(&Source {
        workspace: &workspace,
        environment: &environment(),
        file,
        text,
    })
}

/// The environment commands start from in these tests: this process's, scrubbed, as
/// toolgate's settings give it.
fn environment() -> Vec<(String, String)> {
    toolgate_exec::scrub_env(toolgate_exec::utf8_env(std::env::vars_os()))
}

fn found_in(parsed: Parsed) -> Vec<Found> {
    match parsed {
        Parsed::Found(found) => found,
        Parsed::Problem(p) | Parsed::Blocked(p) => panic!("not found: {p}"),
    }
}

fn scripts(found: &[Found]) -> Vec<(&str, String)> {
    found
        .iter()
        .map(|f| {
            let steps: Vec<String> = f.steps.iter().map(|s| s.argv.join(" ")).collect();
            (f.script, steps.join(" && "))
        })
        .collect()
}

#[test]
fn makefile_targets_run_with_the_file_named_and_show_their_rules() {
    let text = "\
.PHONY: test lint
VAR := value
# build: not a target, a comment
test: build
\tcargo test --all
\t@echo done

build:
\tcargo build
lint format:
\tcargo clippy
typecheck: ; cargo check
";
    let found = found_in(parse_in(makefile, "Makefile", text, &[]));
    assert_eq!(
        scripts(&found),
        [
            (
                "test",
                "make --no-builtin-rules -f Makefile test".to_owned()
            ),
            (
                "build",
                "make --no-builtin-rules -f Makefile build".to_owned()
            ),
            (
                "lint",
                "make --no-builtin-rules -f Makefile lint".to_owned()
            ),
            (
                "typecheck",
                "make --no-builtin-rules -f Makefile typecheck".to_owned()
            ),
            (
                "format",
                "make --no-builtin-rules -f Makefile format".to_owned()
            ),
        ]
    );
    let test = &found[0];
    assert!(test.shown.find("cargo build") < test.shown.find("cargo test --all"));
    assert!(test.shown.contains("@echo done"), "{}", test.shown);
    assert_eq!(test.steps[0].unset, MAKE_ENV);
    match parse_in(
        makefile,
        "GNUmakefile",
        "SHELL = ./x.sh\ntest:\n\techo\n",
        &[],
    ) {
        Parsed::Blocked(why) => {
            assert!(why.starts_with("`GNUmakefile` line 1: "), "{why}");
            assert!(why.contains("`SHELL`"), "{why}");
        }
        _ => panic!("an unreliable Makefile is refused"),
    }
}

#[test]
fn package_json_scripts_run_as_steps_of_their_own() {
    let found = found_in(parse_in(
        package_json,
        "package.json",
        r#"{"name": "tiny", "version": "1.2.3", "scripts": {"test": "jest", "pretest": "lint-staged",
            "posttest": "echo done", "typecheck": "tsc --noEmit", "start": "node ."}}"#,
        &[],
    ));
    assert_eq!(
        scripts(&found),
        [
            (
                "test",
                "/bin/sh -c lint-staged && /bin/sh -c jest && /bin/sh -c echo done".to_owned()
            ),
            ("typecheck", "/bin/sh -c tsc --noEmit".to_owned())
        ]
    );
    let main = &found[0].steps[1];
    let env = |name: &str| {
        main.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(env("npm_lifecycle_event"), Some("test"));
    assert_eq!(env("npm_lifecycle_script"), Some("jest"));
    assert_eq!(env("npm_package_name"), Some("tiny"));
    assert_eq!(env("npm_package_version"), Some("1.2.3"));
    assert!(env("npm_package_json").unwrap().ends_with("/package.json"));
    assert!(env("PATH").unwrap().contains("/node_modules/.bin:"));
    assert_eq!(found[0].steps[0].name, "pretest");
    assert!(
        found_in(parse_in(
            package_json,
            "package.json",
            r#"{"name": "x"}"#,
            &[]
        ))
        .is_empty()
    );
    assert!(
        found_in(parse_in(
            package_json,
            "package.json",
            r#"{"scripts": {"test": 1}}"#,
            &[]
        ))
        .is_empty()
    );
    assert!(matches!(
        parse_in(package_json, "package.json", "{nope", &[]),
        Parsed::Problem(_)
    ));
}

#[test]
fn cargo_manifests_define_every_script_and_show_their_configuration() {
    let found = found_in(parse_in(
        cargo_toml,
        "Cargo.toml",
        "[package]\nname = \"x\"\n",
        &[],
    ));
    assert_eq!(
        scripts(&found),
        [
            ("test", "cargo test".to_owned()),
            ("build", "cargo build".to_owned()),
            ("lint", "cargo clippy".to_owned()),
            ("typecheck", "cargo check".to_owned()),
            ("format", "cargo fmt".to_owned()),
        ]
    );
    assert!(found[0].bound.is_empty());
    let configured = found_in(parse_in(
        cargo_toml,
        "Cargo.toml",
        "[workspace]\nmembers = []\n",
        &[
            (
                ".cargo/config.toml",
                "[target.x86_64-unknown-linux-gnu]\nrunner = \"./x.sh\"\n[alias]\nt = \"test\"\n",
            ),
            ("rust-toolchain.toml", "[toolchain]\nchannel = \"stable\"\n"),
        ],
    ));
    assert_eq!(configured.len(), 5);
    let shown = &configured[0].shown;
    assert!(
        shown.contains("`alias`, `target.x86_64-unknown-linux-gnu.runner`"),
        "{shown}"
    );
    assert!(shown.contains("   2| runner = \"./x.sh\""), "{shown}");
    assert!(
        shown.contains("cargo reads `rust-toolchain.toml`"),
        "{shown}"
    );
    let bound: Vec<&str> = configured[0]
        .bound
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        bound,
        ["config:.cargo/config.toml", "config:rust-toolchain.toml"]
    );
    assert!(found_in(parse_in(cargo_toml, "Cargo.toml", "[dependencies]\n", &[])).is_empty());
    assert!(matches!(
        parse_in(cargo_toml, "Cargo.toml", "[package\n", &[]),
        Parsed::Problem(_)
    ));
}

#[test]
fn pyproject_defines_what_it_configures_and_says_what_runs() {
    let found = found_in(parse_in(
        pyproject_toml,
        "pyproject.toml",
        "[tool.pytest.ini_options]\naddopts = \"-q\"\n[tool.ruff]\n[tool.black]\n[tool.mypy]\n",
        &[],
    ));
    assert_eq!(
        scripts(&found),
        [
            ("test", "python3 -m pytest".to_owned()),
            ("lint", "ruff check".to_owned()),
            ("format", "ruff format".to_owned()),
            ("typecheck", "mypy .".to_owned()),
        ]
    );
    assert!(
        found[0].shown.contains("project's own test code"),
        "{}",
        found[0].shown
    );
    assert!(found[0].shown.contains("conftest.py"));
    let black = parse_in(pyproject_toml, "pyproject.toml", "[tool.black]\n", &[]);
    assert_eq!(
        scripts(&found_of(black)),
        [("format", "black .".to_owned())]
    );
    assert!(
        found_of(parse_in(
            pyproject_toml,
            "pyproject.toml",
            "[project]\nname = \"x\"\n",
            &[]
        ))
        .is_empty()
    );
}

fn found_of(parsed: Parsed) -> Vec<Found> {
    found_in(parsed)
}

#[test]
fn precedence_and_the_list_of_defined_scripts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    std::fs::write(
        dir.path().join("package.json"),
        r#"{"scripts": {"test": "jest"}}"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("Makefile"), "lint:\n\techo lint\n").unwrap();
    std::fs::write(dir.path().join("pyproject.toml"), "[tool.mypy\n").unwrap();
    let workspace = Workspace::open(dir.path()).unwrap();
    let project = Project::read(&workspace, &environment());
    let from = |script| project.find(script).map(|d| d.file);
    assert_eq!(from("lint"), Some("Makefile"));
    assert_eq!(from("test"), Some("package.json"));
    assert_eq!(from("build"), Some("Cargo.toml"));
    let hint = project.defined();
    assert!(
        hint.starts_with("this project defines: `test` (package.json: `/bin/sh -c jest`)"),
        "{hint}"
    );
    assert!(
        hint.contains("`pyproject.toml` could not be read"),
        "{hint}"
    );
    assert!(project.blocker.is_none());

    std::fs::write(dir.path().join("Makefile"), "include extra.mk\n").unwrap();
    let project = Project::read(&workspace, &environment());
    let blocker = project.blocker.clone().unwrap();
    assert!(
        blocker.contains("line 1") && blocker.contains("`include`"),
        "{blocker}"
    );

    let empty = tempfile::tempdir().unwrap();
    let project = Project::read(&Workspace::open(empty.path()).unwrap(), &environment());
    assert!(project.find("test").is_none());
    assert!(project.defined().starts_with("no Makefile, package.json"));
}
