//! Where every outcome goes before its caller sees it.
//!
//! Stage 8 hands each [`Outcome`] to the pipeline's [`Recorder`]s, in order, before returning
//! it. A recorder that cannot keep an outcome makes the call fail closed: the caller gets a
//! failure with code `audit_unavailable` and no tool output, because a result that is not on
//! the record must not be acted on.

use crate::invocation::Surface;
use crate::outcome::Outcome;
use crate::registry::EffectClass;

/// Keeps outcomes: a durable audit log, a console's list of recent calls.
pub trait Recorder: Send + Sync + std::fmt::Debug {
    /// Records `outcome`. Returns only once the record is kept as durably as this recorder
    /// promises; an error fails the call closed.
    fn record(&self, outcome: &Outcome) -> Result<(), RecordError>;

    /// Records that a call with effects is about to run, before its executor starts: should
    /// toolgate stop while the call runs, the log still says the call began. Returns only once
    /// the intent is durable; an error keeps the call from running. Recorders that keep only
    /// outcomes (a console's list) need not implement it.
    fn intend(&self, intent: &Intent<'_>) -> Result<(), RecordError> {
        let _ = intent;
        Ok(())
    }
}

/// A call about to run, as the pipeline knows it just before its executor starts.
#[derive(Debug, Clone, Copy)]
pub struct Intent<'a> {
    pub call_id: &'a str,
    pub request_id: Option<&'a str>,
    pub tool: &'a str,
    pub version: Option<&'a str>,
    pub surface: Surface,
    pub actor: &'a str,
    pub profile: &'a str,
    pub effect: EffectClass,
    /// `sha256:<hex>` of the canonical arguments.
    pub argument_digest: &'a str,
    pub approval_id: Option<&'a str>,
    pub resources: &'a [String],
    /// The confinement the call runs under, when the pipeline knows it.
    pub sandbox: Option<&'a str>,
}

/// Why an outcome could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the outcome could not be recorded: {0}")]
pub struct RecordError(pub String);

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use super::*;
    use crate::*;

    #[derive(Debug)]
    struct Echo;
    impl Executor for Echo {
        fn execute(
            &self,
            call: &Call<'_, Self>,
            _cx: &ExecContext,
        ) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::new(json!({ "echo": call.arguments() })))
        }
    }

    #[derive(Debug, Default)]
    struct Kept(Mutex<Vec<Outcome>>);
    impl Recorder for Kept {
        fn record(&self, outcome: &Outcome) -> Result<(), RecordError> {
            self.0
                .lock()
                .map_err(|e| RecordError(e.to_string()))?
                .push(outcome.clone());
            Ok(())
        }
    }

    #[derive(Debug)]
    struct Broken;
    impl Recorder for Broken {
        fn intend(&self, _: &Intent<'_>) -> Result<(), RecordError> {
            Err(RecordError("disk full".to_owned()))
        }
        fn record(&self, _: &Outcome) -> Result<(), RecordError> {
            Err(RecordError("disk full".to_owned()))
        }
    }

    #[derive(Debug)]
    struct Panics;
    impl Executor for Panics {
        fn execute(&self, _: &Call<'_, Self>, _: &ExecContext) -> Result<ToolOutput, ToolError> {
            panic!("index out of bounds")
        }
    }

    fn pipeline() -> Pipeline {
        pipeline_with(Arc::new(Echo))
    }

    fn pipeline_with(executor: Arc<dyn Executor>) -> Pipeline {
        pipeline_of(executor, EffectClass::ReadOnly)
    }

    fn pipeline_of(executor: Arc<dyn Executor>, effect: EffectClass) -> Pipeline {
        let descriptor = Descriptor::new(
            "echo",
            "Echoes its arguments.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        );
        let mut entry = ToolEntry::new("echo", "reads nothing");
        entry.effect = Some(effect);
        let mut registry = RegistryBuilder::new();
        registry.register(descriptor, entry, executor).unwrap();
        Pipeline::new(
            Arc::new(registry.build().unwrap()),
            Arc::new(PolicyEngine::default_policy().unwrap()),
            Arc::new(HeadlessBroker),
            WorkspaceId::new("/tmp/project"),
        )
    }

    #[test]
    fn every_outcome_is_recorded_before_it_is_returned() {
        let kept = Arc::new(Kept::default());
        let pipeline = pipeline().with_recorder(kept.clone());
        let done = pipeline.run(RawCall::text("echo", r#"{"text": "hi"}"#, Surface::Chat));
        let refused = pipeline.run(RawCall::text("echo", r#"{"txt": "hi"}"#, Surface::Chat));
        assert_eq!(*kept.0.lock().unwrap(), vec![done, refused]);
    }

    #[test]
    fn an_outcome_that_cannot_be_recorded_fails_closed_without_its_output() {
        let kept = Arc::new(Kept::default());
        let pipeline = pipeline()
            .with_recorder(Arc::new(Broken))
            .with_recorder(kept.clone());
        let done = pipeline.run(RawCall::text("echo", r#"{"text": "hi"}"#, Surface::Chat));
        assert_eq!(done.status(), Status::Failed);
        assert_eq!(done.output(), None);
        assert_eq!(done.error().unwrap().code, "audit_unavailable");
        let refused = pipeline.run(RawCall::text("echo", r#"{"txt": "hi"}"#, Surface::Chat));
        assert_eq!(refused.status(), Status::Failed);
        assert!(
            refused
                .unknowns()
                .iter()
                .any(|u| u.contains("unknown_argument"))
        );
        assert!(
            kept.0.lock().unwrap().is_empty(),
            "a later recorder is not asked"
        );
    }

    /// A call whose start cannot be recorded does not run, and when its refusal cannot be
    /// recorded either, what it says does not claim that the tool ran.
    #[test]
    fn a_call_whose_start_cannot_be_recorded_does_not_say_it_ran() {
        let pipeline =
            pipeline_of(Arc::new(Panics), EffectClass::LocalWrite).with_recorder(Arc::new(Broken));
        let outcome = pipeline.authorize_call(RawCall::text("echo", "{}", Surface::Cli));
        let Ok(authorized) = outcome else {
            // The default policy asks a person for writes; nothing to record here.
            return;
        };
        let cx = ExecContext::new(std::time::Duration::from_secs(5), Cancel::new());
        let done = pipeline.execute(authorized, &cx);
        assert_eq!(done.error().unwrap().code, "audit_unavailable");
        assert!(
            done.unknowns().iter().any(|u| u.contains("did not run")),
            "{done:?}"
        );
        assert!(!done.unknowns().iter().any(|u| u.contains("the tool ran")));
    }

    #[test]
    fn a_tool_that_panics_is_a_recorded_failure() {
        let kept = Arc::new(Kept::default());
        let pipeline = pipeline_with(Arc::new(Panics)).with_recorder(kept.clone());
        let done = pipeline.run(RawCall::text("echo", r#"{"text": "hi"}"#, Surface::Chat));
        assert_eq!(done.status(), Status::Failed);
        let error = done.error().cloned().unwrap();
        assert_eq!(error.code, "tool_panicked");
        assert!(error.message.contains("index out of bounds"), "{error:?}");
        assert!(!done.unknowns().is_empty());
        assert_eq!(*kept.0.lock().unwrap(), vec![done]);
    }
}
