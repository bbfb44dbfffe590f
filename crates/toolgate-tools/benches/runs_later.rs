//! What the guard of the files that run later costs each command: the snapshot before its
//! first process and the comparison after its last, on a repository of 10,000 files (100
//! directories of 100, a `.git` as `git init` makes it with 1,000 loose objects, and the
//! agent and build configuration a project holds).
//!
//! - `take_10k`: the snapshot alone.
//! - `take_and_check_10k`: what a command that changes nothing pays, both walks.
//!
//! Run with `cargo bench -p toolgate-tools --bench runs_later`.

#![expect(
    clippy::expect_used,
    reason = "a benchmark whose fixture cannot be built must stop loudly, not measure nothing"
)]

use std::fs;
use std::hint::black_box;
use std::path::Path;
use std::process::Command;

use criterion::{Criterion, criterion_group, criterion_main};
use toolgate_tools::watch_files_that_run_later;
use toolgate_workspace::snapshot::Guarded;

fn repository(root: &Path) {
    let status = Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status()
        .expect("git init");
    assert!(status.success());
    for d in 0..100 {
        let dir = root.join(format!("src/module{d}"));
        fs::create_dir_all(&dir).expect("a directory");
        for f in 0..100 {
            fs::write(dir.join(format!("file{f}.rs")), "fn main() {}\n").expect("a file");
        }
    }
    for o in 0..1000 {
        let dir = root.join(format!(".git/objects/{:02x}", o % 256));
        fs::create_dir_all(&dir).expect("an object directory");
        fs::write(dir.join(format!("{o:038x}")), [0u8; 64]).expect("an object");
    }
    fs::create_dir_all(root.join(".claude")).expect(".claude");
    fs::write(root.join(".claude/settings.json"), "{}").expect("settings");
    fs::create_dir_all(root.join(".vscode")).expect(".vscode");
    fs::write(root.join(".vscode/settings.json"), "{}").expect("settings");
    fs::write(root.join(".npmrc"), "fund=false\n").expect(".npmrc");
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    repository(dir.path());
    let root = dir.path().to_path_buf();
    c.bench_function("take_10k", |b| {
        b.iter(|| {
            black_box(
                Guarded::take(&root, watch_files_that_run_later, Vec::new()).expect("snapshot"),
            )
        });
    });
    c.bench_function("take_and_check_10k", |b| {
        b.iter(|| {
            let guarded =
                Guarded::take(&root, watch_files_that_run_later, Vec::new()).expect("snapshot");
            black_box(guarded.check().expect("check"))
        });
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
