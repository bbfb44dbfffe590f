//! Upstream MCP servers as tool sources: candidates until admitted, pinned, quarantined when
//! they change.
//!
//! toolgate is an MCP *client* here. Each `[[upstream]]` is a child process whose whole tree —
//! what it starts, in its process group or out of it — is followed and ended with it, as an
//! approved command's is (see [`connection`]), kept running by a [`supervisor`] thread that
//! shakes hands, lists every page of tools, listens for `notifications/tools/list_changed`
//! (coalesced and paced, so a flood of them costs a handful of refreshes), refreshes
//! periodically, and restarts the process with exponential backoff when it dies. What an
//! upstream reports about a call while it runs, its progress and log notifications, is relayed
//! as that call's own (see [`relay`]). The process runs confined, in the same sandbox as
//! approved commands, with what its `[upstream.sandbox]` grants (see [`sandbox`]).
//!
//! What an upstream lists is only a *candidate*. A tool becomes callable when the operator
//! admits it (`[[upstream.tool]]`), under the name `<upstream>__<tool>`, with an effect class
//! the operator chose (missing means `irreversible`; upstream annotations are hints) and a pin:
//! the digest of the whole descriptor and the descriptor itself. The registry entry is built
//! from the *pinned* descriptor, so stage 3 validates arguments against the schema the
//! operator reviewed. When the upstream serves a different descriptor, the entry is *stale*:
//! hidden, and rejected at resolve with `stale_descriptor`, until it is re-pinned.
//!
//! ```no_run
//! # fn example(spec: toolgate_upstream::UpstreamSpec) -> Result<(), toolgate_upstream::UpstreamError> {
//! let upstreams = toolgate_upstream::Upstreams::start(vec![spec])?;
//! upstreams.wait_started();
//! let tools = upstreams.tools();
//! for (descriptor, entry, _executor) in &tools.admitted {
//!     println!("{} ({})", descriptor.name, entry.effect());
//! }
//! # Ok(()) }
//! ```

pub mod config;
pub mod connection;
pub mod descriptor;
pub mod executor;
pub mod http;
pub mod relay;
pub mod sandbox;
pub mod supervisor;
pub mod watchdog;

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;
use thiserror::Error;
use toolgate_core::{
    Call, Descriptor, Digest, ExecContext, Executor, SchemaBounds, ToolEntry, ToolError,
    ToolErrorCode, ToolOutput, ToolSchema,
};

pub use config::{Admission, AdmittedSection, Endpoint, UpstreamSection, UpstreamSpec, namespaced};
pub use descriptor::{MalformedTool, descriptor_of, diff, hints};
pub use executor::UpstreamExecutor;
pub use sandbox::{SandboxSection, UpstreamConfinement, UpstreamSandbox};
pub use supervisor::{OnChange, OnUnended, REFRESHES_PER_MINUTE, UpstreamStatus};
pub use watchdog::{Watchdog, run_watchdog};

use crate::supervisor::Supervisor;

/// Why upstreams could not be configured or started.
#[derive(Debug, Error)]
pub enum UpstreamError {
    #[error("{0}")]
    Config(String),
    #[error("cannot start a supervisor for upstream `{name}`: {source}")]
    Thread {
        name: String,
        source: std::io::Error,
    },
}

/// Where an admitted tool stands against what its upstream serves now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinState {
    /// The upstream serves the pinned descriptor, or has not been reached yet (the pin stays
    /// in force).
    Current,
    /// The upstream serves a different descriptor.
    Stale,
    /// The upstream no longer lists the tool.
    Missing,
}

/// Every upstream's admitted tools as registry entries, and its candidates.
#[derive(Debug, Default)]
pub struct UpstreamTools {
    /// Descriptor (pinned, under the admitted name), entry, executor.
    pub admitted: Vec<(Descriptor, ToolEntry, Arc<dyn Executor>)>,
    /// Listed tools no entry admits, under their namespaced names.
    pub candidates: Vec<Descriptor>,
}

/// The running upstreams of one gateway. Dropping it stops them and ends their process
/// trees.
#[derive(Debug)]
pub struct Upstreams {
    supervisors: Vec<Arc<Supervisor>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Upstreams {
    /// Starts a supervisor for each upstream; returns at once.
    pub fn start(specs: Vec<UpstreamSpec>) -> Result<Upstreams, UpstreamError> {
        Upstreams::start_watched(specs, None)
    }

    /// As [`Upstreams::start`], telling `watchdog` of every upstream process tree, so that
    /// they are killed even when the gateway is (see [`watchdog`]).
    pub fn start_watched(
        specs: Vec<UpstreamSpec>,
        watchdog: Option<Arc<Watchdog>>,
    ) -> Result<Upstreams, UpstreamError> {
        let mut upstreams = Upstreams {
            supervisors: Vec::new(),
            threads: Mutex::new(Vec::new()),
        };
        for spec in specs {
            let name = spec.name.clone();
            let (supervisor, thread) = Supervisor::start(spec, watchdog.clone())
                .map_err(|source| UpstreamError::Thread { name, source })?;
            upstreams.supervisors.push(supervisor);
            lock(&upstreams.threads).push(thread);
        }
        Ok(upstreams)
    }

    /// Calls `on_unended` with a sentence whenever an upstream process is stopped and not
    /// everything it started is known to be gone; without it, the sentence is written to
    /// standard error. Either way it is recorded among the upstream's events.
    pub fn on_unended(&self, on_unended: OnUnended) {
        for supervisor in &self.supervisors {
            supervisor.set_on_unended(Arc::clone(&on_unended));
        }
    }

    /// Calls `on_change` whenever an upstream's tool list changes.
    pub fn on_change(&self, on_change: OnChange) {
        for supervisor in &self.supervisors {
            supervisor.set_on_change(Arc::clone(&on_change));
        }
    }

    /// Waits until each upstream's first start ended, or its startup timeout passed.
    pub fn wait_started(&self) {
        for supervisor in &self.supervisors {
            supervisor.wait_attempted(supervisor.spec.startup_timeout + Duration::from_secs(1));
        }
    }

    /// The upstreams, as configured, in order.
    pub fn specs(&self) -> impl Iterator<Item = &UpstreamSpec> {
        self.supervisors.iter().map(|s| &s.spec)
    }

    pub fn statuses(&self) -> Vec<UpstreamStatus> {
        self.supervisors.iter().map(|s| s.status()).collect()
    }

    /// Every admitted tool as a registry entry, and every candidate.
    ///
    /// A current pin registers the pinned descriptor. A stale or missing one registers it too,
    /// marked so that the registry hides it and rejects calls: stale with `stale_descriptor`,
    /// missing as unavailable. A pinned schema that does not compile makes the tool
    /// unavailable; it is never called without validation.
    pub fn tools(&self) -> UpstreamTools {
        let mut tools = UpstreamTools::default();
        for supervisor in &self.supervisors {
            let status = supervisor.status();
            let listed = status.tools.clone().unwrap_or_default();
            for admission in &supervisor.spec.admitted {
                let current = status
                    .tools
                    .as_ref()
                    .map(|tools| tools.iter().find(|d| d.name == admission.tool));
                let state = pin_state(admission, current);
                tools
                    .admitted
                    .push(admitted(supervisor, admission, state, current.flatten()));
            }
            for descriptor in listed {
                if supervisor
                    .spec
                    .admitted
                    .iter()
                    .any(|a| a.tool == descriptor.name)
                {
                    continue;
                }
                let mut candidate = descriptor;
                candidate.name = namespaced(&supervisor.spec.name, &candidate.name);
                tools.candidates.push(candidate);
            }
        }
        tools
    }

    /// The admission named `name`, and the descriptor its upstream serves now, if it listed.
    pub fn admission(&self, name: &str) -> Option<(&Admission, Option<Descriptor>)> {
        self.supervisors.iter().find_map(|supervisor| {
            let admission = supervisor
                .spec
                .admitted
                .iter()
                .find(|a| a.entry.name == name)?;
            let current = supervisor
                .status()
                .tools
                .and_then(|tools| tools.into_iter().find(|d| d.name == admission.tool));
            Some((admission, current))
        })
    }

    /// Stops every upstream and ends its process tree.
    pub fn shutdown(&self) {
        for supervisor in &self.supervisors {
            supervisor.shutdown();
        }
        let current = std::thread::current().id();
        for thread in lock(&self.threads).drain(..) {
            // The last owner may be a supervisor's own change callback; it cannot wait for
            // itself, and returns right after.
            if thread.thread().id() != current {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for Upstreams {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Compares a pin with what the upstream serves; `None` when it has not listed yet.
pub fn pin_state(admission: &Admission, current: Option<Option<&Descriptor>>) -> PinState {
    match current {
        None => PinState::Current,
        Some(None) => PinState::Missing,
        Some(Some(descriptor)) if descriptor.digest() == admission.digest => PinState::Current,
        Some(Some(_)) => PinState::Stale,
    }
}

impl UpstreamTools {
    /// Every admitted tool of `specs` as its pin says, for a gateway that starts no upstream:
    /// registered as an upstream's tools are before it is first reached, but calls are
    /// refused, since nothing would take them.
    pub fn pinned(specs: &[UpstreamSpec]) -> UpstreamTools {
        let mut tools = UpstreamTools::default();
        for admission in specs.iter().flat_map(|spec| &spec.admitted) {
            let (descriptor, entry, _) = registered(admission, PinState::Current, None);
            let executor = NotStarted {
                upstream: admission.upstream.clone(),
            };
            tools.admitted.push((descriptor, entry, Arc::new(executor)));
        }
        tools
    }
}

/// The executor of an admitted tool whose upstream was not started.
#[derive(Debug)]
struct NotStarted {
    upstream: String,
}

impl Executor for NotStarted {
    fn execute(&self, _call: &Call<'_, Self>, _cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        Err(ToolError::new(
            ToolErrorCode::UpstreamUnavailable,
            format!(
                "upstream `{}` was not started by this command",
                self.upstream
            ),
        ))
    }
}

fn admitted(
    supervisor: &Arc<Supervisor>,
    admission: &Admission,
    state: PinState,
    current: Option<&Descriptor>,
) -> (Descriptor, ToolEntry, Arc<dyn Executor>) {
    let (descriptor, entry, output_schema) = registered(admission, state, current);
    let executor = UpstreamExecutor::new(
        Arc::clone(supervisor),
        admission.tool.clone(),
        admission.digest.clone(),
        output_schema,
    );
    (descriptor, entry, Arc::new(executor))
}

/// The one place an admission becomes a registry entry: its pinned descriptor under the
/// admitted name, the operator's entry, and the output schema calls are checked against.
/// `state` is the pin against what the upstream serves now (`current`).
fn registered(
    admission: &Admission,
    state: PinState,
    current: Option<&Descriptor>,
) -> (Descriptor, ToolEntry, Option<Arc<ToolSchema>>) {
    let mut descriptor = admission.pinned.clone();
    descriptor.name.clone_from(&admission.entry.name);
    let mut entry = admission.entry.clone();
    entry.pinned_digest = Some(descriptor.digest());
    let mut unavailable: Option<String> = None;
    if let Err(e) = ToolSchema::compile(&descriptor.input_schema, &SchemaBounds::default()) {
        unavailable = Some(format!("its pinned input schema does not compile: {e}"));
    }
    let output_schema = match &descriptor.output_schema {
        None => None,
        Some(schema) => match ToolSchema::compile_output(schema, &SchemaBounds::default()) {
            Ok(schema) => Some(Arc::new(schema)),
            Err(e) => {
                unavailable = Some(format!("its pinned output schema does not compile: {e}"));
                None
            }
        },
    };
    match state {
        PinState::Current => {}
        PinState::Stale => {
            // Pinning the entry to the digest of what the upstream serves now (under the
            // admitted name) makes the registered, pinned descriptor differ from the pin: the
            // registry's own staleness check then hides it and rejects calls.
            if let Some(current) = current {
                let mut renamed = current.clone();
                renamed.name.clone_from(&admission.entry.name);
                entry.pinned_digest = Some(renamed.digest());
            }
        }
        PinState::Missing => {
            unavailable = Some(format!(
                "upstream `{}` no longer lists `{}`",
                admission.upstream, admission.tool
            ));
        }
    }
    if let Some(reason) = unavailable {
        // The registry must compile some schema; this one accepts nothing, and the entry is
        // unavailable anyway, so no call reaches validation.
        descriptor.input_schema = json!({"type": "object", "not": {}});
        descriptor.output_schema = None;
        if state != PinState::Stale {
            entry.pinned_digest = Some(descriptor.digest());
        }
        entry.availability = Some(Arc::new(move || Err(reason.clone())));
    }
    (descriptor, entry, output_schema)
}

/// The digest an admission of `descriptor` pins.
pub fn pin_of(descriptor: &Descriptor) -> (Digest, String) {
    let value = serde_json::to_value(descriptor).unwrap_or_default();
    (descriptor.digest(), toolgate_core::canonical_json(&value))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_schemas_compile_like_input_schemas() {
        // Read by the dialect it names: draft 4's boolean `exclusiveMaximum` excludes 5, and an
        // unknown dialect is refused, for output schemas as for input schemas.
        let draft4 = json!({
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "object",
            "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": true}},
        });
        let bounds = SchemaBounds::default();
        let draft4 = ToolSchema::compile_output(&draft4, &bounds).unwrap();
        assert!(!draft4.check(&json!({"n": 5})).is_empty());
        assert!(draft4.check(&json!({"n": 4, "extra": true})).is_empty());
        let unknown = json!({"$schema": "https://example.com/dialect", "type": "object"});
        assert!(ToolSchema::compile_output(&unknown, &bounds).is_err());
        let fine = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let fine = ToolSchema::compile_output(&fine, &bounds).unwrap();
        // Left open: more than the schema declares is fine; a wrong type is not.
        assert!(fine.check(&json!({"n": 1, "extra": true})).is_empty());
        assert!(!fine.check(&json!({"n": "one"})).is_empty());
    }
}
