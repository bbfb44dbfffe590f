//! Stage 6: a person's approval, a standing grant, or neither needed (`approval_required`,
//! `approval_denied`, `approval_expired`, `approval_invalid`); and the last act of approval,
//! redeeming the grant as stage 7 begins.

use super::classify::runs_later_kinds;
use super::*;

impl Pipeline {
    /// Stage 6.
    pub(crate) fn approve(&self, permitted: Permitted) -> Result<Authorized, Stopped> {
        self.approve_with(permitted, Cancel::new(), &|_| {})
    }

    /// Stage 6, calling `awaiting` with the call's id when a person is about to be asked
    /// (not when a standing grant covers the call, nor when the broker can never grant).
    pub(super) fn approve_with(
        &self,
        permitted: Permitted,
        cancel: Cancel,
        awaiting: &dyn Fn(&str),
    ) -> Result<Authorized, Stopped> {
        let started = Instant::now();
        let Permitted {
            invocation,
            tool,
            arguments,
            effect,
            classification,
            approval_required,
            mut trace,
        } = permitted;
        if let Some(rejection) = self.foreign(&trace) {
            trace.arguments = Some(arguments);
            return Err(Stopped { rejection, trace });
        }
        let grant = if approval_required {
            let mut request =
                self.approval_request(&invocation, &tool, &arguments, effect, &classification);
            request.policies.clone_from(&trace.policies);
            request.call_id.clone_from(&trace.call_id);
            request.digest = request.digest.with_hooks(&trace.hooks_bound);
            if trace.hook_asks {
                // A hook asked about this call: a person answers for it, not for the tool.
                request.scope_allowed = GrantScope::Once;
                request.hook_asks = hook::asks(&trace.hooks);
            }
            request.cancel = cancel;
            match self.obtain_grant(request, &tool, awaiting) {
                Ok(grant) => {
                    trace.approval_id = Some(grant.0.id.clone());
                    Some(grant)
                }
                Err(rejection) => {
                    trace.record(Stage::Approve, started);
                    trace.arguments = Some(arguments);
                    return Err(Stopped { rejection, trace });
                }
            }
        } else {
            None
        };
        trace.record(Stage::Approve, started);
        Ok(Authorized {
            invocation,
            tool,
            arguments,
            effect,
            classification,
            grant,
            trace,
        })
    }

    /// A standing workspace grant where one applies, else a grant this pipeline issues from
    /// a person's decision. `awaiting` is told only when a person can be asked: a broker that
    /// can never allow answers with a refusal, and a transport told of a wait would promise
    /// one that never comes.
    fn obtain_grant(
        &self,
        request: ApprovalRequest,
        tool: &Tool,
        awaiting: &dyn Fn(&str),
    ) -> Result<(Grant, ApprovalDigest), Rejection> {
        if request.scope_allowed == GrantScope::WorkspaceAction
            && let Some(grant) = self
                .grants
                .standing(self.workspace.digest(), &tool.entry.name)
        {
            return Ok((grant, request.digest));
        }
        let approver = self.broker.can_allow();
        // A full console answers at once: that is not a wait either.
        if approver && self.broker.has_room() {
            awaiting(&request.call_id);
        }
        let allowed = match self.broker.ask(&request) {
            ApprovalDecision::AllowOnce => GrantScope::Once,
            ApprovalDecision::AllowWorkspace => GrantScope::WorkspaceAction,
            ApprovalDecision::Reject { reason } => {
                return Err(Rejection::new(
                    RejectCode::ApprovalDenied,
                    format!("the user refused this call: {reason}"),
                )
                .with_hint(Some(
                    "do not retry the same call; ask the user what they want instead".into(),
                )));
            }
            ApprovalDecision::Expired { reason } => {
                return Err(Rejection::new(
                    RejectCode::ApprovalExpired,
                    format!("`{}` waited for approval, and {reason}", tool.entry.name),
                )
                .with_hint(Some(
                    "ask the user whether they still want it before trying again".into(),
                )));
            }
            ApprovalDecision::Unanswered { reason } => {
                return Err(unanswered(tool, approver, &reason));
            }
        };
        // The grant binds the request's own digest, whatever the broker did meanwhile: a
        // decision can allow this call, never another one.
        match self.grants.grant(&request, allowed, self.grant_times) {
            Ok(grant) => Ok((grant, request.digest)),
            Err(not_kept) => Err(unanswered(
                tool,
                approver,
                &format!("the workspace grant could not be kept: {not_kept}"),
            )),
        }
    }

    fn approval_request(
        &self,
        invocation: &Invocation,
        tool: &Tool,
        arguments: &Value,
        effect: EffectClass,
        classification: &Classification,
    ) -> ApprovalRequest {
        let version = tool.entry.version.to_string();
        let digest = ApprovalDigest::compute(
            &tool.entry.name,
            &version,
            arguments,
            self.workspace.digest(),
            &classification.resources,
            &classification.preimages,
        );
        // Only file edits may be remembered for the workspace; everything else asks each time,
        // and so does an edit of a file that another program runs later, wherever the
        // operator's policy lets one through.
        let scope_allowed = if effect == EffectClass::LocalWrite
            && tool.entry.approval == ApprovalMode::Policy
            && runs_later_kinds(effect, classification).is_empty()
        {
            GrantScope::WorkspaceAction
        } else {
            GrantScope::Once
        };
        ApprovalRequest {
            digest,
            tool: tool.entry.name.clone(),
            version,
            effect,
            surface: invocation.surface,
            actor: invocation.actor.clone(),
            workspace: self.workspace.digest().to_owned(),
            arguments: arguments.clone(),
            resources: classification.resources.clone(),
            preview: classification.preview.clone(),
            scope_allowed,
            policies: Vec::new(),
            hook_asks: Vec::new(),
            approval_mode: tool.entry.approval,
            client: invocation.client.clone(),
            call_id: String::new(),
            cancel: Cancel::new(),
        }
    }
}

impl Pipeline {
    /// The refusal of a stage value this pipeline did not begin, if `trace` is one: another
    /// pipeline's registry, policies, workspace and ledger judged nothing about this call, and
    /// a pipeline rebuilt by a builder is another pipeline. Every stage asks this first.
    pub(super) fn foreign(&self, trace: &Trace) -> Option<Rejection> {
        (trace.pipeline != self.id).then(|| {
            Rejection::new(
                RejectCode::ApprovalInvalid,
                "the call was begun by another pipeline; it did not run",
            )
            .with_hint(Some(
                "run each call through one pipeline, from stage 1 to stage 8".into(),
            ))
        })
    }

    /// The last act of approval, as stage 7 begins: the proof is this pipeline's and its
    /// grant, if it needed one, still good. Its time counts as approval's, and no execution is
    /// recorded for a call that never ran.
    pub(super) fn redeem(
        &self,
        authorized: Authorized,
        started: Instant,
    ) -> Result<Authorized, Stopped> {
        if let Some(rejection) = self.foreign(&authorized.trace) {
            let mut trace = authorized.trace;
            trace.record(Stage::Approve, started);
            trace.arguments = Some(authorized.arguments);
            return Err(Stopped { rejection, trace });
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
        Ok(authorized)
    }
}

/// The refusal of a call nobody approved: said so that a model neither retries nor sends the
/// user to a console that is not there, and the operator reading along learns what would
/// allow it.
fn unanswered(tool: &Tool, approver: bool, reason: &str) -> Rejection {
    if approver {
        Rejection::new(
            RejectCode::ApprovalRequired,
            format!(
                "`{}` needs a person's approval and none could be obtained: {reason}",
                tool.entry.name
            ),
        )
        .with_hint(Some(
            "ask the user to approve it in toolgate's approval console, or to run it themselves"
                .into(),
        ))
    } else {
        Rejection::new(
            RejectCode::ApprovalRequired,
            format!(
                "`{}` needs a person's approval, and nobody can be asked: {reason}",
                tool.entry.name
            ),
        )
        .with_hint(Some(NO_APPROVER_HINT.into()))
    }
}

/// What to do about a call that needs approval when no one can give it.
const NO_APPROVER_HINT: &str = "it cannot be approved here, so do not retry it; the user can run \
it themselves, or the operator can allow it: `toolgate serve` with its approval console, or a \
policy that permits it without approval";
