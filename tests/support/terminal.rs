//! Running the `toolgate` binary on a terminal, as a person would — or as anything that can
//! drive a terminal would, which `toolgate` cannot tell apart.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

/// Runs `toolgate ARGS` on a pseudo-terminal (util-linux `script`) with the prompt asked for:
/// a `call` gets `--ask`, as a person at their own terminal who wants to be asked would type
/// it. Types `answer` at it; the exit code and everything the terminal showed.
pub fn on_a_terminal(args: &str, answer: &str) -> (i32, String) {
    let args = match args.strip_prefix("call ") {
        Some(rest) => format!("call --ask {rest}"),
        None => args.to_owned(),
    };
    typed_at_a_terminal(&args, answer)
}

/// Runs `toolgate ARGS` exactly as given on a pseudo-terminal (util-linux `script`) and types
/// `answer` at it — what an agent with a shell can do.
pub fn typed_at_a_terminal(args: &str, answer: &str) -> (i32, String) {
    let command = format!("{} {args}", super::clients::toolgate_bin());
    let output = super::home::isolated(std::process::Command::new("script"))
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
