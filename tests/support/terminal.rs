//! Running the `toolgate` binary as a person at a terminal would.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

/// Runs `toolgate` on a pseudo-terminal (util-linux `script`) and types `answer` at it.
pub fn on_a_terminal(args: &str, answer: &str) -> (i32, String) {
    let bin = env!("CARGO_BIN_EXE_toolgate");
    let command = format!("{} {args}", bin);
    let output = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(answer.as_bytes())?;
            child.wait_with_output()
        })
        .expect("util-linux `script` runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
    )
}
