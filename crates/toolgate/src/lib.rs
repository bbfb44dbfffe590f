//! The `toolgate` command as a library: [`Settings`], resolved once from `toolgate.toml` and
//! the environment, and [`Gate`], the one builder of the pipeline every command (and every
//! test that needs the binary's pipeline) runs calls through.
//!
//! ```no_run
//! # fn example() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! let settings = Arc::new(toolgate::Settings::load(None)?);
//! let workspace = toolgate::gate::open_workspace(std::path::Path::new("."))?;
//! // Starts nothing: upstream tools are known from their pins.
//! let gate = toolgate::Gate::configured(settings, Arc::clone(&workspace))?;
//! let pipeline = gate.pipeline(&workspace, Arc::new(toolgate_core::HeadlessBroker));
//! # let _ = pipeline; Ok(()) }
//! ```

mod approve;
mod audit;
pub mod cli;
mod commands;
mod console;
pub mod gate;
mod hook;
mod sandbox;
mod serve;
pub mod settings;
pub mod terminal;
pub mod trust;
mod upstream;

pub use commands::{EXIT_COMPLETED, EXIT_FAILED, EXIT_REJECTED, EXIT_USAGE, run};
pub use gate::Gate;
pub use settings::{ConfigError, Settings};
