//! The `toolgate` command.
//!
//! `main` is `run(parse())` with explicit exit codes: 0 completed, 1 the tool failed, 2 the
//! call was rejected or denied, 3 bad usage or configuration.

use std::process::ExitCode;

use clap::Parser;
use toolgate::cli::Cli;
use toolgate::{EXIT_COMPLETED, EXIT_USAGE};

fn main() -> ExitCode {
    // Before anything else: the commands toolgate will confine must not read its /proc
    // entries (its environment holds the tokens it was given).
    if let Err(e) = toolgate_sandbox::protect_parent() {
        eprintln!("toolgate: cannot make this process undumpable: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            // A usage error quotes the argument it refused, which can hold anything: its
            // control characters made visible (the command's styles are plain, so every
            // escape in the text is the argument's).
            toolgate::terminal::write_err(&e.render().ansi().to_string(), false);
            return ExitCode::from(EXIT_USAGE);
        }
        Err(e) => {
            // `--help` and `--version`: toolgate's own text.
            let _ = e.print();
            return ExitCode::from(EXIT_COMPLETED);
        }
    };
    match toolgate::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // An error can quote input (a path, a value from a file or an upstream).
            toolgate::terminal::write_err(&format!("toolgate: {e:#}"), true);
            ExitCode::from(EXIT_USAGE)
        }
    }
}
