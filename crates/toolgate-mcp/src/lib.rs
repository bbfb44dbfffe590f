//! toolgate's MCP server: every `tools/call` through the fail-closed pipeline.
//!
//! This is the only crate that knows MCP and JSON-RPC. It speaks MCP with rmcp, the official
//! Rust SDK, over standard input and output ([`serve_stdio`]) or streamable HTTP
//! ([`serve_http`]), and adds what a server needs on top:
//!
//! - **Sessions see what their profile allows, and call only what they were shown.** A
//!   [`Session`] runs as one [`Principal`] (actor and profile); `tools/list` shows the tools
//!   visible in its profile, and a call resolves only against the tools of the session's last
//!   listing (see [`session`]).
//! - **Every call is the pipeline's.** `tools/call` becomes a [`toolgate_core::RawCall`] on
//!   the `chat` surface, with the argument text exactly as sent, run on a blocking thread.
//! - **Errors the model can use.** A rejection or failure is a tool result with
//!   `isError: true`, whose text names the stage, the code and what to change (an unknown
//!   tool included: it gets the did-you-mean hint); malformed JSON-RPC gets JSON-RPC errors,
//!   and nothing a client sends ends the session.
//! - **Long calls report progress and can be cancelled**, by `notifications/cancelled` or, over
//!   HTTP, by closing the response stream. What a tool reports while it runs (an upstream
//!   server's progress and log messages) reaches the client as the call's own.
//! - **Clients hear that the tools changed**: those of the 2025 revisions unasked, those of
//!   2026-07-28 through `subscriptions/listen`, which the `subscriptions` module serves.
//! - **HTTP is loopback-only and authenticated** by default: `Host` and `Origin` checked,
//!   bearer tokens mapped to principals (see [`http`]).
//!
//! ```no_run
//! # async fn example(pipeline: toolgate_core::Pipeline) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use toolgate_mcp::{Server, Principal};
//!
//! let server = Arc::new(Server::new(pipeline, "toolgate", "0.1.0"));
//! toolgate_mcp::serve_stdio(server, Principal::new("local", "readonly"), 4 << 20).await?;
//! # Ok(()) }
//! ```

pub mod auth;
pub mod elicit;
pub mod http;
mod logging;
mod reply;
mod server;
pub mod session;
pub mod stdio;
mod subscriptions;
mod watcher;
pub mod wire;

use std::time::Duration;

pub use auth::{Principal, TokenError, TokenTable, generate_token};
pub use elicit::{Answer, ApprovalDesk, Arrivals, Elicitation, NotTaken};
pub use http::{HttpError, HttpOptions, bind, run_http, serve_http};
pub use server::{DEFAULT_PROGRESS_INTERVAL, Server};
pub use session::Session;
pub use stdio::{StdioError, run_stdio, serve_stdio, serve_streams};

/// How long a stopping server waits for executors to finish what they were told to stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A small runtime: the pipeline runs on blocking threads, so one thread drives all the I/O.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
