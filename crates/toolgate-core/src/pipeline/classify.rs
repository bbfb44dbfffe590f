//! Stage 4: what a call touches, its effect and its plan. It cannot reject: it only learns.

use super::*;
use crate::runs_later;

impl Pipeline {
    /// Stage 4. Classification cannot reject: it only learns.
    pub(crate) fn classify(&self, validated: Validated) -> Classified {
        let started = Instant::now();
        let Validated {
            invocation,
            tool,
            arguments,
            parsed,
            mut trace,
        } = validated;
        // Another pipeline's value is not planned, and is marked as no pipeline's: every later
        // stage, of whichever pipeline, refuses it.
        let (plan, classification) = if trace.pipeline == self.id {
            tool.executor.plan_call(parsed)
        } else {
            trace.pipeline = NO_PIPELINE;
            (Planned::untyped(), Classification::default())
        };
        trace.plan = plan;
        // Arguments may make a call more consequential than its entry, never less.
        let effect = classification
            .effect
            .map_or(tool.entry.effect(), |refined| {
                refined.max(tool.entry.effect())
            });
        let sensitive = self.sensitivity.kinds(&classification.paths);
        let runs_later = runs_later_kinds(effect, &classification);
        trace.effect = Some(effect);
        trace.placement = placement(&tool, &trace.plan, effect);
        // Evidence is shown to the caller: a link's target in toolgate's state directory is
        // named as the directory. The approval still binds, and shows, the resources whole.
        trace.resources = classification
            .resources
            .iter()
            .map(|resource| self.sensitivity.evidence_resource(resource))
            .collect();
        trace.record(Stage::Classify, started);
        Classified {
            invocation,
            tool,
            arguments,
            effect,
            classification,
            sensitive,
            runs_later,
            trace,
        }
    }
}

/// Where the rest of a call of `tool`, planned as `plan`, may run: only a read runs anywhere
/// but on a worker; stage 5 keeps there a call a person must approve.
fn placement(tool: &Tool, plan: &Planned, effect: EffectClass) -> Placement {
    if effect != EffectClass::ReadOnly {
        Placement::Worker
    } else if tool.executor.forwards() {
        Placement::Forwarded
    } else if tool.executor.brief() && tool.executor.brief_call(plan) {
        Placement::Arrival
    } else {
        Placement::Worker
    }
}

/// The kinds of the files that run later a call writes, the paths its tool found named by a
/// repository's configuration included.
pub(super) fn runs_later_kinds(
    effect: EffectClass,
    classification: &Classification,
) -> Vec<&'static str> {
    runs_later::kinds_with(
        written(effect, classification),
        &classification.named_runs_later,
    )
}

/// The paths a call writes: all of its paths when it is a local write or carries the diff or
/// creation of a file (whatever class the operator gave the tool), none otherwise. Commands
/// change files too, but what they change is known only once they have run; their own guard
/// is in the tools that run them.
pub(super) fn written(effect: EffectClass, classification: &Classification) -> &[String] {
    let writes = effect == EffectClass::LocalWrite
        || classification
            .resources
            .iter()
            .any(|r| matches!(r, Resource::Diff(_) | Resource::Create(_)));
    if writes { &classification.paths } else { &[] }
}
