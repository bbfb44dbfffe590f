//! What the `toolgate` binary's end-to-end tests share, behind one `#[path]` include: the
//! real clients and servers they drive, the hostile-input fixture and corpus, a running server
//! with its console, Claude Code, terminals and `/proc` readings, and the home of its own each
//! process a test starts gets.
//!
//! A test file names the modules it uses (`use support::{clients, served};`); each module
//! allows its own unused items, since no test binary uses all of them.

pub mod claude;
pub mod clients;
pub mod fixture;
pub mod home;
// The console crate's own hand-written request, which its tests use as well.
#[path = "../../crates/toolgate-console/src/raw_http.rs"]
pub mod http;
pub mod procs;
pub mod served;
pub mod terminal;
