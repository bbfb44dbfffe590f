//! The command line as typed: flags close to the raw text, which `gate` turns into a working
//! pipeline; and what `call` prints for the person who typed it.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde_json::Value;
use toolgate_core::{EffectClass, Outcome, Status, Surface};

/// toolgate: a fail-closed boundary between the tool calls a model proposes and what runs.
///
/// For an MCP client (Claude Code, Codex, ...), start it with `toolgate serve --workspace DIR`:
/// the client's model gets the workspace's tools, and a person approves writes and commands in
/// the console whose address `serve` prints. `toolgate call` runs one call from this terminal.
// Plain styles: a usage error quotes the argument it refused, and without styling of its own
// every escape in the rendered text came from that argument, which is then shown, not obeyed
// (see `main`).
#[derive(Debug, Parser)]
#[command(name = "toolgate", version, verbatim_doc_comment)]
#[command(styles = clap::builder::Styles::plain())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one call through the full pipeline and print the outcome.
    Call(CallArgs),
    /// Show what each stage decides for a call, without running it or asking for approval.
    Explain(ProposedCall),
    /// List tools.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Serve MCP over standard input and output, or over streamable HTTP with --http.
    Serve(ServeArgs),
    /// Print a fresh single-use login link to the approval console of the running
    /// `toolgate serve` for a workspace.
    Console(ConsoleArgs),
    /// Check the configuration and policy files, then print what they register, and what of
    /// the workspace's `.toolgate/` configuration applies and what waits for trust.
    Check {
        #[command(flatten)]
        config: ConfigArgs,
        /// The workspace whose `.toolgate/` configuration is checked.
        #[arg(long, value_name = "DIR", default_value = ".")]
        workspace: PathBuf,
    },
    /// Trust the workspace's `.toolgate/` configuration as it stands, after showing what it
    /// would widen; asks at a terminal. Any change to its files makes it pending again.
    Trust(TrustArgs),
    /// What this machine can confine, and how the configuration confines commands.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Verify, follow or export the audit log.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Started by toolgate itself: kills the upstream process groups and the commands' process
    /// trees listed on standard input when that input closes.
    #[command(hide = true)]
    UpstreamWatchdog,
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Print what this machine supports, what the configuration asks for and the gaps that
    /// remain, after running one confined child; exit 1 when commands would be refused.
    Check {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        config: ConfigArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check every record's hash and link; name the first record edited, missing, out of
    /// order, inserted or truncated (exit 1). With the verification key, also check every
    /// sealed epoch and name the first one altered (exit 1).
    Verify {
        /// The key `toolgate audit seal-setup` printed.
        #[arg(long, value_name = "K")]
        verification_key: Option<String>,
        #[command(flatten)]
        log: AuditLogArgs,
    },
    /// Start sealing the log: print the verification key (once: keep it off this machine)
    /// and store the sealing key, which changes every epoch, beside the log.
    SealSetup {
        #[command(flatten)]
        log: AuditLogArgs,
    },
    /// Print the newest record's number and hash, for a witness outside this machine.
    Head {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        log: AuditLogArgs,
    },
    /// Print the newest records, one line each.
    Tail {
        /// How many records.
        #[arg(short = 'n', long, value_name = "N", default_value_t = 10)]
        lines: usize,
        /// Keep printing records as they are appended.
        #[arg(long)]
        follow: bool,
        #[command(flatten)]
        log: AuditLogArgs,
    },
    /// Print every record.
    Export {
        /// One JSON object per line, oldest first: the only format, and the default.
        #[arg(long)]
        jsonl: bool,
        #[command(flatten)]
        log: AuditLogArgs,
    },
}

#[derive(Debug, Args)]
pub struct AuditLogArgs {
    /// The audit log (default: `[audit] path` from the configuration, else
    /// $XDG_STATE_HOME/toolgate/audit.db).
    #[arg(long, value_name = "F")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// The tools visible in a profile, with their descriptions.
    List {
        /// Profile whose tools to list.
        #[arg(long, default_value = "default")]
        profile: String,
        /// Also list candidates: entries that are hidden, and each upstream's admitted tools
        /// as their pins say (no upstream is started; see `tools discover`).
        #[arg(long)]
        candidates: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Admit an upstream's tool: write its entry, with the pin of its current descriptor, into
    /// the configuration file.
    Admit {
        /// The upstream, as named in `[[upstream]]`.
        upstream: String,
        /// The tool, as the upstream names it.
        tool: String,
        /// Its effect class (default: irreversible; upstream annotations never decide this).
        #[arg(long, value_name = "E")]
        effect: Option<EffectClass>,
        /// The name a model sees (default: UPSTREAM__TOOL).
        #[arg(long, value_name = "N")]
        name: Option<String>,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Start the configured upstreams, list what each serves (candidates, and admitted tools
    /// against their pins), and stop them. `tools list` starts nothing and cannot tell.
    Discover {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Show how an admitted upstream tool's current descriptor differs from its pin.
    Diff {
        /// The admitted name.
        name: String,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Re-pin an admitted upstream tool to the descriptor its upstream serves now.
    Pin {
        /// The admitted name.
        name: String,
        /// Pin only if the upstream still serves this digest (the `current` one `tools diff`
        /// printed), so what is pinned is what was reviewed.
        #[arg(long, value_name = "D")]
        digest: Option<String>,
        #[command(flatten)]
        config: ConfigArgs,
    },
}

/// `trust`: a workspace's project configuration, trusted, revoked or listed.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The workspace whose `.toolgate/` configuration is trusted.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub workspace: PathBuf,
    /// Remove the trust given to the workspace's configuration.
    #[arg(long, conflicts_with = "list")]
    pub revoke: bool,
    /// List the trusted workspaces, and whether each still is as trusted.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Configuration file (default: $XDG_CONFIG_HOME/toolgate/toolgate.toml if it exists).
    #[arg(long, value_name = "F")]
    pub config: Option<PathBuf>,
}

/// `call`: a proposed call, and how to answer if it needs approval.
#[derive(Debug, Args)]
pub struct CallArgs {
    #[command(flatten)]
    pub call: ProposedCall,
    /// Ask at this terminal when the call needs approval. Without it such a call is refused:
    /// anything that can drive a terminal can answer this prompt, so it is for a person at
    /// their own terminal, never for an agent's calls.
    #[arg(long)]
    pub ask: bool,
}

/// A call as `call` and `explain` take it.
#[derive(Debug, Args)]
pub struct ProposedCall {
    /// The workspace directory every path is confined to.
    #[arg(long, value_name = "DIR")]
    pub workspace: PathBuf,
    /// Tool name, optionally `name@major`.
    #[arg(long, value_name = "NAME")]
    pub tool: String,
    /// Arguments as a JSON object; `-` reads them from standard input.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub args: String,
    /// Where the call claims to come from.
    #[arg(long, value_name = "S", default_value = "cli")]
    pub surface: Surface,
    /// Profile whose tools the call may use.
    #[arg(long, value_name = "P", default_value = "default")]
    pub profile: String,
    /// Who is calling, as policies see it.
    #[arg(long, value_name = "A", default_value = "local")]
    pub actor: String,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The workspace directory every path is confined to.
    #[arg(long, value_name = "DIR")]
    pub workspace: PathBuf,
    /// Profile of the stdio session (with --http: of the generated token, or of requests
    /// without one under --dangerous-no-auth).
    #[arg(long, value_name = "P", default_value = "default")]
    pub profile: String,
    /// Who the stdio session acts for, as policies see it (with --http: as for --profile).
    #[arg(long, value_name = "A", default_value = "local")]
    pub actor: String,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio; a loopback address
    /// such as 127.0.0.1:8787.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Allow --http to listen on an address that is not loopback.
    #[arg(long, requires = "http")]
    pub dangerous_bind_any: bool,
    /// Serve HTTP requests that carry no token, as actor `anonymous` in --profile. Loopback
    /// only; for test rigs that cannot send a header.
    #[arg(long, requires = "http")]
    pub dangerous_no_auth: bool,
    /// Start no approval console: calls that need a person's approval are refused.
    #[arg(long)]
    pub no_console: bool,
    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// The workspace the server was started for (its real path is compared).
    #[arg(long, value_name = "DIR")]
    pub workspace: PathBuf,
    /// Also open the link with the desktop's opener (`xdg-open`).
    #[arg(long)]
    pub open: bool,
}

/// What `toolgate call` prints for a person, without `--json`: a file's text as text, a
/// listing and a search's matches as lines, a diff or a command's output as it is, and any
/// other output as JSON, on standard output; a refusal or failure as one paragraph, and what
/// is cut short or unknown, on standard error. `--json` prints the whole outcome instead.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Printed {
    pub stdout: String,
    pub stderr: String,
}

/// Prints `outcome` as [`Printed`] says, or as JSON.
pub fn print_call(outcome: &Outcome, as_json: bool) -> anyhow::Result<()> {
    use std::io::Write as _;
    if as_json {
        crate::terminal::write_out(&crate::terminal::json(outcome)?, true);
        return Ok(());
    }
    let printed = for_a_person(outcome);
    // What the tool gave back came from a file, a command or an upstream: a terminal is
    // given it with its control characters made visible.
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(crate::terminal::visible(&printed.stdout).as_bytes())?;
    stdout.flush()?;
    crate::terminal::write_err(&printed.stderr, false);
    Ok(())
}

/// `outcome` as a person reads it; see [`Printed`].
pub fn for_a_person(outcome: &Outcome) -> Printed {
    let mut printed = Printed::default();
    match (outcome.output(), outcome.status()) {
        (Some(output), Status::Completed) => print_output(output, &mut printed),
        _ => printed.note(&outcome.summary()),
    }
    for unknown in outcome.unknowns() {
        printed.note(&format!("unknown: {unknown}"));
    }
    printed
}

impl Printed {
    fn line(&mut self, text: &str) {
        self.stdout.push_str(text);
        self.stdout.push('\n');
    }

    fn note(&mut self, text: &str) {
        self.stderr.push_str("toolgate: ");
        self.stderr.push_str(text);
        self.stderr.push('\n');
    }
}

fn print_output(output: &Value, printed: &mut Printed) {
    let text = |key: &str| output.get(key).and_then(Value::as_str);
    let number = |key: &str| output.get(key).and_then(Value::as_u64);
    let cut = output.get("truncated") == Some(&Value::Bool(true));
    if let (Some(content), Some(total)) = (text("content"), number("total_lines")) {
        // A file's text, exactly as read.
        printed.stdout.push_str(content);
        let first = number("offset").unwrap_or(1);
        let returned = number("lines_returned").unwrap_or(0);
        if cut {
            printed.note(&format!(
                "the text was cut at 256 KiB; the rest starts at offset {}",
                first + returned
            ));
        } else if first > 1 || first + returned <= total {
            let last = (first + returned).saturating_sub(1);
            printed.note(&format!(
                "{} lines {first}-{last} of {total}",
                text("path").unwrap_or("the file")
            ));
        }
    } else if let Some(entries) = output.get("entries").and_then(Value::as_array)
        && text("path").is_some()
    {
        // A listing: one path a line, directories with `/` and links with `@`, as `ls -F`.
        for entry in entries {
            let path = entry
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mark = match entry.get("kind").and_then(Value::as_str) {
                Some("dir") => "/",
                Some("symlink") => "@",
                _ => "",
            };
            printed.line(&format!("{path}{mark}"));
        }
        if cut {
            printed.note("there are more entries: list a subdirectory or a lower depth");
        }
    } else if let Some(matches) = output.get("matches").and_then(Value::as_array) {
        // Matches as grep prints them: path, line number, text.
        for found in matches {
            let path = found
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let line = found
                .get("line")
                .and_then(Value::as_u64)
                .unwrap_or_default();
            let text = found
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default();
            printed.line(&format!("{path}:{line}:{text}"));
        }
        if cut {
            printed.note("there are more matches: narrow the path, the glob or the pattern");
        }
    } else if let (Some(diff), Some(_)) = (text("diff"), output.get("files")) {
        printed.stdout.push_str(diff);
        if cut {
            printed.note("the diff was cut: call again with a path to see the rest");
        }
    } else if let (Some(out), Some(err), Some(code)) = (
        text("stdout"),
        text("stderr"),
        output.get("exit_code").and_then(Value::as_i64),
    ) {
        printed.stdout.push_str(out);
        printed.stderr.push_str(err);
        printed.note(&format!("exit code {code}"));
    } else if let Some(blocks) = output.get("content").and_then(Value::as_array)
        && output.as_object().is_some_and(|o| o.len() == 1)
    {
        // An upstream's MCP content: its text as text, other blocks named.
        for block in blocks {
            match block.get("text").and_then(Value::as_str) {
                Some(text) => printed.line(text),
                None => printed.note(&format!(
                    "a `{}` block is not shown; --json prints it",
                    block
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown")
                )),
            }
        }
    } else {
        printed.line(&serde_json::to_string_pretty(output).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn completed(output: Value) -> Outcome {
        serde_json::from_value(json!({
            "status": "completed",
            "output": output,
            "evidence": {"tool": "t", "surface": "cli", "actor": "local", "profile": "default",
                         "workspace": "sha256:00", "argument_names": [], "resources": [],
                         "policies": [], "durations_ns": {}, "total_ns": 0,
                         "output_bytes": 0, "truncated": false, "redactions": 0},
            "unknowns": []
        }))
        .unwrap()
    }

    #[test]
    fn a_file_is_its_text() {
        let whole = completed(
            json!({"path": "a.txt", "content": "alpha\nbeta\n", "offset": 1,
            "lines_returned": 2, "total_lines": 2, "digest": "sha256:00", "truncated": false}),
        );
        assert_eq!(
            for_a_person(&whole),
            Printed {
                stdout: "alpha\nbeta\n".into(),
                stderr: String::new()
            }
        );
        let part = completed(json!({"path": "a.txt", "content": "beta\n", "offset": 2,
            "lines_returned": 1, "total_lines": 3, "digest": "sha256:00", "truncated": false}));
        assert_eq!(
            for_a_person(&part).stderr,
            "toolgate: a.txt lines 2-2 of 3\n"
        );
    }

    #[test]
    fn listings_and_matches_are_lines() {
        let listing = completed(json!({"path": ".", "entries": [
            {"path": "a.txt", "kind": "file", "size": 3},
            {"path": "src", "kind": "dir"},
            {"path": "link", "kind": "symlink"}], "truncated": true}));
        let printed = for_a_person(&listing);
        assert_eq!(printed.stdout, "a.txt\nsrc/\nlink@\n");
        assert!(printed.stderr.contains("more entries"), "{printed:?}");
        let search = completed(json!({"pattern": "fn", "matches": [
            {"path": "src/lib.rs", "line": 1, "text": "pub fn answer() -> u32 {"}],
            "files_searched": 2, "truncated": false}));
        assert_eq!(
            for_a_person(&search).stdout,
            "src/lib.rs:1:pub fn answer() -> u32 {\n"
        );
    }

    #[test]
    fn other_outputs_are_json() {
        let written = completed(json!({"path": "b.txt", "digest": "sha256:00"}));
        let printed = for_a_person(&written);
        assert_eq!(
            serde_json::from_str::<Value>(&printed.stdout).unwrap(),
            json!({"path": "b.txt", "digest": "sha256:00"})
        );
    }
}
