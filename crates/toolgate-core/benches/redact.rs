//! What redaction costs on output that holds no secret, which is nearly all output: 4 KiB and
//! 1 MiB of toolgate's own Rust source, read from the repository at start.
//!
//! Run with `cargo bench -p toolgate-core --bench redact -- --warm-up-time 1
//! --measurement-time 5`.

#![expect(
    clippy::expect_used,
    reason = "a benchmark whose fixture cannot be built must stop loudly, not measure nothing"
)]

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use toolgate_core::redact::redact_text;

/// Every `.rs` file under `crates/`, in a stable order, concatenated and repeated until there
/// is at least `len` bytes, then cut at a character boundary. The redaction code and its tests
/// are left out: they hold sample secrets on purpose, and the text should stay the same when
/// the rules change so that figures before and after compare.
fn source_text(len: usize) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    collect_rust_files(&root.join("crates"), &mut files);
    files.sort();
    let mut all = String::new();
    for file in &files {
        all.push_str(&std::fs::read_to_string(file).expect("read a source file"));
    }
    assert!(!all.is_empty(), "no Rust source found under crates/");
    let mut text = String::with_capacity(len + all.len());
    while text.len() < len {
        text.push_str(&all);
    }
    let mut cut = len;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text
}

fn collect_rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).expect("list a source directory");
    for entry in entries {
        let path = entry.expect("read a directory entry").path();
        if path.is_dir() {
            collect_rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs")
            && !path
                .file_name()
                .is_some_and(|name| name == "redact.rs" || name == "redaction.rs")
        {
            files.push(path);
        }
    }
}

fn redact(c: &mut Criterion) {
    let mut group = c.benchmark_group("redact_source");
    for (name, len) in [("4KiB", 4 * 1024), ("1MiB", 1024 * 1024)] {
        let text = source_text(len);
        // The first call builds the rules; measure the steady state a server runs in.
        black_box(redact_text(&text));
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &text, |b, text| {
            b.iter(|| redact_text(black_box(text)));
        });
    }
    group.finish();
}

criterion_group!(benches, redact);
criterion_main!(benches);
