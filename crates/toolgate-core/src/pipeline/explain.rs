//! `toolgate explain`: what each stage decided, from the same sequence a run follows.

use super::*;

impl Pipeline {
    /// Stages 1–6 without asking anyone and without running anything: what each stage
    /// decided, for `toolgate explain`.
    pub fn explain(&self, raw: RawCall) -> Vec<StageReport> {
        let mut reports = Vec::new();
        match self.through_policy(raw, None, Some(&mut reports)) {
            Err(stopped) => reports.push(StageReport {
                stage: stopped.rejection.stage(),
                decision: "reject",
                detail: stopped.rejection.to_string(),
            }),
            Ok(permitted) => {
                reports.push(approval(&permitted));
                reports.push(StageReport {
                    stage: Stage::Execute,
                    decision: "skip",
                    detail: "explain never executes".to_owned(),
                });
            }
        }
        reports
    }
}

/// What the pre_call hooks answered, each by name.
pub(super) fn hooked(hooks: &[HookRecord]) -> String {
    let said: Vec<String> = hooks
        .iter()
        .map(|h| {
            let answer = match (h.failure, h.decision) {
                (Some(kind), _) => format!("failed ({kind})"),
                (None, Some(decision)) => format!("{decision:?}").to_lowercase(),
                (None, None) => "no decision".to_owned(),
            };
            let changed = if h.changed {
                ", changed the arguments"
            } else {
                ""
            };
            let observed = if h.mode == HookMode::Observe {
                " (observing)"
            } else {
                ""
            };
            format!("`{}`{observed}: {answer}{changed}", h.name)
        })
        .collect();
    said.join("; ")
}

pub(super) fn normalized(normalized: &Normalized) -> String {
    let invocation = &normalized.invocation;
    format!(
        "tool `{}`, {} argument(s)",
        invocation.tool,
        invocation.arguments.len()
    )
}

pub(super) fn resolved(resolved: &Resolved) -> String {
    format!(
        "entry `{}` version {}, descriptor {}",
        resolved.tool.entry.name, resolved.tool.entry.version, resolved.tool.digest
    )
}

pub(super) fn validated(validated: &Validated) -> String {
    format!("arguments {}", validated.trace.argument_names.join(", "))
}

pub(super) fn classified(classified: &Classified) -> String {
    format!(
        "effect {}; resources: {}{}",
        classified.effect,
        if classified.classification.resources.is_empty() {
            "none".to_owned()
        } else {
            let shown: Vec<String> = classified
                .classification
                .resources
                .iter()
                .map(ToString::to_string)
                .collect();
            shown.join(", ")
        },
        if classified.sensitive.is_empty() {
            String::new()
        } else {
            format!("; sensitive: {}", classified.sensitive.join(", "))
        }
    )
}

pub(super) fn permitted(permitted: &Permitted) -> String {
    format!("permitted by {}", permitted.trace.policies.join(", "))
}

/// Stage 6 as it would go: whom it would ask, and what they would see.
fn approval(permitted: &Permitted) -> StageReport {
    if permitted.approval_required {
        // What the person would be shown: the diff of a write, the argv of a command.
        let preview = permitted
            .classification
            .preview
            .as_deref()
            .map_or_else(String::new, |p| format!(", seeing:\n{p}"));
        StageReport {
            stage: Stage::Approve,
            decision: "ask",
            detail: format!(
                "a person must approve this `{}` call{preview}",
                permitted.effect
            ),
        }
    } else {
        StageReport {
            stage: Stage::Approve,
            decision: "pass",
            detail: "no approval needed".to_owned(),
        }
    }
}
