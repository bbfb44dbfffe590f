//! toolgate's approval console: a web page on loopback where a person sees each call that
//! waits for approval — tool, effect, workspace, who asked, the rule that asked, and exactly
//! what will happen — and allows it once, allows file edits of that tool for the workspace,
//! or rejects it with a reason that goes back to the model.
//!
//! [`ConsoleBroker`] is the [`toolgate_core::ApprovalBroker`]: the pipeline's thread waits in
//! it until a decision, the call's cancellation or the approval timeout. It decides; the
//! pipeline's [`toolgate_core::GrantLedger`], which the console shares to list and revoke
//! standing grants, issues and redeems them. [`Console`] serves
//! the page and its narrow API on `127.0.0.1`, behind the checks in [`guard`]; a browser logs
//! in through a single-use link ([`login`]), so the session token is never printed.
//! [`RecentOutcomes`] is a [`toolgate_core::Recorder`] that keeps the last outcomes for the
//! page.
//! Given a [`ProjectTrust`] in [`ConsoleOptions::project`], the page also shows the
//! workspace's `.toolgate/` configuration as it stands and lets a person trust exactly the
//! files shown ([`project`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use toolgate_console::{
//!     BrokerOptions, Console, ConsoleBroker, ConsoleOptions, RecentOutcomes, grants_ledger,
//! };
//!
//! let options = BrokerOptions::default();
//! let grants = Arc::new(grants_ledger(&options));
//! let broker = Arc::new(ConsoleBroker::new(options, Arc::clone(&grants)));
//! let outcomes = Arc::new(RecentOutcomes::new(200));
//! let console = Console::start(
//!     Arc::clone(&broker),
//!     Arc::clone(&outcomes),
//!     ConsoleOptions::default(),
//! )?;
//! // Works once, for five minutes; the session token itself is never printed.
//! eprintln!("approval console: open {}", console.login_link()?);
//! // Pipeline::new(registry, policy, broker, workspace)
//! //     .with_grants(grants)
//! //     .with_recorder(outcomes) …
//! # Ok::<(), toolgate_console::ConsoleError>(())
//! ```

pub mod broker;
pub mod guard;
pub mod login;
pub mod outcomes;
pub mod project;
// The console's own tests and the binary's send the same hand-written requests.
#[cfg(test)]
mod raw_http;
pub mod server;
pub mod standing;

pub use broker::{
    BrokerOptions, ConsoleBroker, DecideError, Decision, GrantView, PendingView, grants_ledger,
};
pub use login::{DEFAULT_LOGIN_TTL, LoginLinks, LoginRefusal};
pub use outcomes::{OutcomeView, RecentOutcomes};
pub use project::{
    ProjectFile, ProjectItem, ProjectStatus, ProjectTrust, ProjectView, TrustRefusal,
};
pub use server::{CSRF_HEADER, Console, ConsoleError, ConsoleOptions};
pub use standing::{GrantsFile, GrantsFileError};
