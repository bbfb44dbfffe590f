//! What every session of one server shares: the pipeline, and news that it changed.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rmcp::model::{Implementation, ServerConfig};
use tokio::sync::watch;
use toolgate_core::Pipeline;

/// How often a long call reports progress to a client that asked for it.
pub const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// The pipeline behind every session of one server.
///
/// The pipeline can be replaced while sessions run (a reloaded configuration, say). A call
/// keeps the pipeline, and so the registry entry, it started with; sessions are told that
/// their tool list changed, and a session may call only what it was shown, so a tool the new
/// registry adds or changes must be listed again before it can be called.
#[derive(Debug)]
pub struct Gateway {
    pipeline: RwLock<Arc<Pipeline>>,
    generation: watch::Sender<u64>,
    info: ServerConfig,
    progress_interval: Duration,
}

impl Gateway {
    /// A gateway to `pipeline`, introducing itself as `name` `version`.
    pub fn new(pipeline: Pipeline, name: &str, version: &str) -> Self {
        let info = ServerConfig::new(crate::logging::capabilities())
            .with_server_info(Implementation::new(name, version))
            .with_instructions(
                "Every tool call goes through toolgate's policy. A rejected call says at which \
                 stage it stopped and what to change; consequential calls may need a person's \
                 approval, which the model cannot give.",
            );
        Gateway {
            pipeline: RwLock::new(Arc::new(pipeline)),
            generation: watch::Sender::new(0),
            info,
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
        }
    }

    /// The same gateway, reporting progress on long calls every `interval`.
    #[must_use]
    pub fn with_progress_interval(mut self, interval: Duration) -> Self {
        self.progress_interval = interval;
        self
    }

    /// The pipeline new calls use.
    pub fn pipeline(&self) -> Arc<Pipeline> {
        Arc::clone(&self.pipeline.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces the pipeline for calls that start from now on, and tells every session that its
    /// tool list changed.
    pub fn replace_pipeline(&self, pipeline: Pipeline) {
        *self
            .pipeline
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(pipeline);
        self.generation.send_modify(|g| *g += 1);
    }

    pub(crate) fn info(&self) -> ServerConfig {
        self.info.clone()
    }

    pub(crate) fn progress_interval(&self) -> Duration {
        self.progress_interval
    }

    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }
}
