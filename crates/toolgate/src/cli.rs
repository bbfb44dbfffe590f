//! The command line as typed: flags close to the raw text. `gate` turns them into a working
//! pipeline.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use toolgate_core::{EffectClass, Surface};

/// toolgate: a fail-closed boundary between the tool calls a model proposes and what runs.
#[derive(Debug, Parser)]
#[command(name = "toolgate", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one call through the full pipeline and print the outcome.
    Call(CallArgs),
    /// Show what each stage decides for a call, without running it or asking for approval.
    Explain(CallArgs),
    /// List tools.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Serve MCP over standard input and output, or over streamable HTTP with --http.
    Serve(ServeArgs),
    /// Check the configuration and policy files, then print what they register.
    Check {
        #[command(flatten)]
        config: ConfigArgs,
    },
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
    /// order, inserted or truncated (exit 1).
    Verify(AuditLogArgs),
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
        /// One JSON object per line, oldest first (the only format).
        #[arg(long, required = true)]
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
        /// Also list candidates: descriptors no entry admits, and entries that are disabled.
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
        #[arg(long, value_name = "E", value_parser = parse_effect)]
        effect: Option<EffectClass>,
        /// The name a model sees (default: UPSTREAM__TOOL).
        #[arg(long, value_name = "N")]
        name: Option<String>,
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

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Configuration file (default: $XDG_CONFIG_HOME/toolgate/toolgate.toml if it exists).
    #[arg(long, value_name = "F")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CallArgs {
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
    #[arg(long, value_name = "S", default_value = "cli", value_parser = parse_surface)]
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
    /// Ask at this terminal when the call needs approval (`call` only). Without it such a
    /// call is refused: anything that can drive a terminal can answer this prompt, so it is
    /// for a person at their own terminal, never for an agent's calls.
    #[arg(long)]
    pub ask: bool,
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

fn parse_surface(text: &str) -> Result<Surface, String> {
    text.parse()
}

fn parse_effect(text: &str) -> Result<EffectClass, String> {
    text.parse()
}
