//! The command line as typed: flags close to the raw text. `gate` turns them into a working
//! pipeline.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use toolgate_core::Surface;

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
