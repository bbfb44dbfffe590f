//! The watchdog that kills upstream process groups (and commands' trees) when the gateway
//! dies: it lives in `toolgate-exec` beside the process runner, whose `/proc` reading and
//! stop-then-kill it shares. See [`toolgate_exec::watchdog`].

pub use toolgate_exec::watchdog::{Watchdog, run_watchdog};
