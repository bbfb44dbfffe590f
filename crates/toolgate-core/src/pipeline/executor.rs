//! Stage 7, fused with stage 8: the only caller of an executor, and so of a tool.

use super::*;

impl Pipeline {
    /// Stages 7 and 8, as one step: re-checks the grant, runs the executor of the tool the
    /// proof was issued for, then describes the result and records it. The proof is consumed,
    /// so it runs once; there is no way to run it without a record.
    #[must_use = "the outcome is the call's only result, and may be a refusal"]
    pub fn execute(&self, authorized: Authorized, cx: &ExecContext) -> Outcome {
        self.describe(self.execute_step(authorized, cx))
    }

    /// Stage 7: re-checks the grant, then hands the call to its own tool's executor.
    pub(super) fn execute_step(
        &self,
        authorized: Authorized,
        cx: &ExecContext,
    ) -> Result<Executed, Stopped> {
        let started = Instant::now();
        // A proof is good only in the pipeline that checked it: another pipeline's registry,
        // policies, workspace and ledger judged nothing about this call.
        if authorized.trace.pipeline != self.id {
            let mut trace = authorized.trace;
            trace.record(Stage::Approve, started);
            trace.arguments = Some(authorized.arguments);
            return Err(Stopped {
                rejection: Rejection::new(
                    RejectCode::ApprovalInvalid,
                    "the call was authorized by another pipeline; it did not run",
                )
                .with_hint(Some(
                    "run each call through one pipeline, from stage 1 to stage 8".into(),
                )),
                trace,
            });
        }
        if let Some((grant, digest)) = &authorized.grant {
            // Re-checked here, not only when granted: expiry, revocation and the digest can
            // all change between the two.
            let redeemed = self.grants.redeem(
                grant,
                digest,
                self.workspace.digest(),
                &authorized.tool.entry.name,
            );
            if let Err(refusal) = redeemed {
                let mut trace = authorized.trace;
                // Redeeming is the last act of approval: its time counts there, and no
                // execution is recorded for a call that never ran.
                trace.record(Stage::Approve, started);
                trace.arguments = Some(authorized.arguments);
                let code = match refusal {
                    GrantRefusal::Expired => RejectCode::ApprovalExpired,
                    _ => RejectCode::ApprovalInvalid,
                };
                return Err(Stopped {
                    rejection: Rejection::new(code, format!("{refusal}; the call did not run"))
                        .with_hint(Some("request the call again to get a new approval".into())),
                    trace,
                });
            }
        }
        // A call with effects is on the record before it runs, so that a toolgate stopped
        // while it runs leaves a log saying the call began; a call whose intent cannot be kept
        // durably does not run at all.
        if authorized.effect != EffectClass::ReadOnly {
            let trace = &authorized.trace;
            let argument_digest = sha256_digest(canonical_json(&authorized.arguments).as_bytes());
            let version = authorized.tool.entry.version.to_string();
            let intent = crate::record::Intent {
                call_id: &trace.call_id,
                request_id: trace.request_id.as_deref(),
                tool: &trace.tool,
                version: Some(&version),
                surface: trace.surface,
                actor: &trace.actor,
                profile: &trace.profile,
                effect: authorized.effect,
                argument_digest: argument_digest.as_str(),
                approval_id: authorized.approval_id(),
                resources: &trace.resources,
                sandbox: None,
            };
            let refused = self.recorders.iter().find_map(|r| r.intend(&intent).err());
            if let Some(error) = refused {
                let mut trace = authorized.trace;
                trace.arguments = Some(authorized.arguments);
                trace.record(Stage::Execute, started);
                let message = format!(
                    "the call did not run: its start could not be recorded: {}",
                    error.0
                );
                return Ok(Executed {
                    result: Err(ToolError::new(
                        crate::outcome::ToolErrorCode::AuditUnavailable,
                        message,
                    )),
                    trace,
                });
            }
        }
        // The tool withholds what this pipeline's policy input calls sensitive, whatever
        // context the caller built.
        let cx = cx.clone().with_sensitivity(Arc::clone(&self.sensitivity));
        // A tool that panics has still run, perhaps halfway: its outcome must reach stage 8
        // (and the record) like any failure, not vanish with the thread that ran it.
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let call = Call {
                authorized: &authorized,
            };
            authorized.tool.executor.execute(&call, &cx)
        }))
        .unwrap_or_else(|payload| Err(panicked(payload.as_ref())));
        let mut trace = authorized.trace;
        trace.arguments = Some(authorized.arguments);
        trace.record(Stage::Execute, started);
        Ok(Executed { result, trace })
    }
}

/// The failure of an executor that panicked, with what its panic said.
fn panicked(payload: &(dyn std::any::Any + Send)) -> ToolError {
    let said = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    let mut error = ToolError::new(
        crate::outcome::ToolErrorCode::ToolPanicked,
        format!("the tool stopped unexpectedly: {said}"),
    );
    error
        .unknowns
        .push("the tool may have done part of its work before it stopped".to_owned());
    error
}
