//! Release builds lay out first the functions toolgate runs to start and to serve its first
//! calls (`link-order.txt`, written by `scripts/update-link-order`), so that an idle server
//! keeps little of its code resident.
//!
//! Only where the linker is known to be LLD, which reads `--symbol-ordering-file`: Rust 1.90
//! and later link `x86_64-unknown-linux-gnu` with it, unless told to use another linker.
//! `TOOLGATE_LINK_ORDER=0` leaves the layout to the linker.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=link-order.txt");
    println!("cargo::rerun-if-env-changed=TOOLGATE_LINK_ORDER");
    if env::var("PROFILE").as_deref() != Ok("release")
        || env::var("TOOLGATE_LINK_ORDER").as_deref() == Ok("0")
        || env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu")
        || env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|flags| flags.contains("link"))
        || !rustc_links_with_lld()
    {
        return;
    }
    let Ok(dir) = env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    println!("cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={dir}/link-order.txt");
    println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

/// Whether the compiler is Rust 1.90 or later, whose default linker here is LLD.
fn rustc_links_with_lld() -> bool {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let Ok(output) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    let version = String::from_utf8_lossy(&output.stdout);
    let mut numbers = version
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('.')
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}
