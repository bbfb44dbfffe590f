//! Release builds lay out first the functions toolgate runs to start and to serve its first
//! calls (`link-order.txt`, written by `scripts/update-link-order`).
fn main() {
    println!("cargo::rerun-if-changed=link-order.txt");
    if std::env::var("PROFILE").as_deref() != Ok("release") {
        return;
    }
    let Ok(dir) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    println!("cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={dir}/link-order.txt");
    println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}
