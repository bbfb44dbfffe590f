//! Stage 8: what a call did, redacted, bounded and recorded before anyone sees it.

use super::*;

impl Pipeline {
    /// Stage 8: the outcome, redacted and bounded, with evidence, once it is recorded.
    pub(super) fn describe(&self, result: Result<Executed, Stopped>) -> Outcome {
        let result = self.post_call(result);
        let started = Instant::now();
        let (mut undescribed, mut trace, truncated, mut unknowns) = match result {
            Err(Stopped { rejection, trace }) => {
                (Undescribed::Refused(rejection), trace, false, Vec::new())
            }
            Ok(Executed {
                result: Ok(output),
                trace,
            }) => (
                Undescribed::Done(output.value),
                trace,
                output.truncated,
                output.unknowns,
            ),
            Ok(Executed {
                result: Err(error),
                trace,
            }) => {
                let unknowns = error.unknowns.clone();
                (Undescribed::Failed(error), trace, false, unknowns)
            }
        };
        let limit = trace
            .resolved
            .as_ref()
            .map_or(usize::MAX, |t| t.entry.limits.max_output_bytes);
        // An output over the limit as the tool returned it fails here, before any of it is
        // redacted: nothing is spent on text that is thrown away. A hostile upstream's
        // 15 MB answer took 22-31 ms to redact, on the thread its session's requests share;
        // measuring it takes 2.5-6 ms.
        let returned = match &undescribed {
            Undescribed::Done(output) => Some(json_len(output)),
            Undescribed::Failed(_) | Undescribed::Refused(_) => None,
        };
        if let Some(bytes) = returned
            && bytes > limit
        {
            undescribed = too_large(bytes, limit);
        }
        // Resources are evidence, and evidence is kept: a secret-shaped path is hidden too.
        let mut resources = std::mem::take(&mut trace.resources);
        // What a refusal or failure says can quote the tool or the arguments: it is output
        // too, for the model, the console and the audit log alike.
        let said = match &mut undescribed {
            Undescribed::Done(output) => redact_value(output),
            Undescribed::Failed(error) => redact_string(&mut error.message),
            Undescribed::Refused(rejection) => rejection.redact(),
        };
        let redactions = said
            + unknowns.iter_mut().map(redact_string).sum::<usize>()
            + resources.iter_mut().map(redact_string).sum::<usize>();
        let output_bytes = match (&undescribed, returned) {
            // Nothing redacted, nothing changed.
            (Undescribed::Done(_), Some(bytes)) if said == 0 => bytes,
            (Undescribed::Done(output), _) => json_len(output),
            (Undescribed::Failed(_) | Undescribed::Refused(_), _) => 0,
        };
        if output_bytes > limit {
            // Redaction lengthened it past the limit (a short secret is longer redacted).
            undescribed = too_large(output_bytes, limit);
        }
        if truncated {
            unknowns.push("output was truncated to stay within limits".to_owned());
        }
        trace.record(Stage::Describe, started);
        let argument_digest = trace
            .arguments
            .as_ref()
            .map(|a| sha256_digest(canonical_json(a).as_bytes()));
        let evidence = Evidence {
            call_id: std::mem::take(&mut trace.call_id),
            request_id: trace.request_id.clone(),
            client: trace.client.take(),
            tool: trace.tool.clone(),
            version: trace.resolved.as_ref().map(|t| t.entry.version.to_string()),
            descriptor_digest: trace.resolved.as_ref().map(|t| t.digest.clone()),
            surface: trace.surface,
            actor: trace.actor.clone(),
            profile: trace.profile.clone(),
            workspace: self.workspace.digest().to_owned(),
            effect: trace.effect,
            argument_names: std::mem::take(&mut trace.argument_names),
            argument_digest,
            resources,
            approval_id: trace.approval_id.take(),
            policies: std::mem::take(&mut trace.policies),
            durations_ns: Stage::ALL
                .iter()
                .zip(trace.durations.iter())
                .filter_map(|(stage, d)| d.map(|d| (stage.as_str().to_owned(), nanos(d))))
                .collect::<BTreeMap<_, _>>(),
            total_ns: nanos(trace.started.elapsed()),
            output_bytes: match undescribed {
                Undescribed::Done(_) => output_bytes,
                Undescribed::Failed(_) | Undescribed::Refused(_) => 0,
            },
            truncated,
            redactions,
            hooks: std::mem::take(&mut trace.hooks),
        };
        self.recorded(match undescribed {
            Undescribed::Done(output) => Outcome::done(output, evidence, unknowns),
            Undescribed::Failed(error) => Outcome::failed(error, evidence, unknowns),
            Undescribed::Refused(rejection) => Outcome::refused(rejection, evidence, unknowns),
        })
    }

    /// `outcome`, once every recorder has kept it; else a failure that carries no output.
    fn recorded(&self, outcome: Outcome) -> Outcome {
        for recorder in &self.recorders {
            if let Err(error) = recorder.record(&outcome) {
                return outcome.withheld(ToolError::new(
                    crate::outcome::ToolErrorCode::AuditUnavailable,
                    error.to_string(),
                ));
            }
        }
        outcome
    }
}

/// A call's result as stage 8 receives it, before it is bounded, redacted and described as
/// an [`Outcome`].
enum Undescribed {
    Done(Value),
    Failed(ToolError),
    Refused(Rejection),
}

/// The failure of an executor that broke its output limit: closed, rather than passed on.
fn too_large(bytes: usize, limit: usize) -> Undescribed {
    Undescribed::Failed(ToolError::new(
        crate::outcome::ToolErrorCode::OutputTooLarge,
        format!("the tool's output is {bytes} bytes; the limit is {limit}"),
    ))
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
