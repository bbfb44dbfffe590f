//! Stages 1–6, each a consuming function from one stage value to the next, and the one
//! sequence of stages 1–5 that running, authorizing and explaining a call all follow.

use super::*;
use crate::policy::PolicyDecision;
use crate::runs_later;

impl Pipeline {
    /// Stages 1–5, the one sequence that running, authorizing and explaining a call follow.
    /// `admit` narrows stage 2 (see [`Admit`]); `reports`, when given, hears what each stage
    /// that passed decided, worded only then.
    pub(super) fn through_policy(
        &self,
        raw: RawCall,
        admit: &Admit<'_>,
        mut reports: Option<&mut Vec<StageReport>>,
    ) -> Result<Permitted, Stopped> {
        let mut passed = |stage, detail: &dyn Fn() -> String| {
            if let Some(reports) = reports.as_deref_mut() {
                reports.push(StageReport {
                    stage,
                    decision: "pass",
                    detail: detail(),
                });
            }
        };
        let normalized = self.normalize(raw)?;
        passed(Stage::Normalize, &|| explain::normalized(&normalized));
        let resolved = self.resolve_within(normalized, admit)?;
        passed(Stage::Resolve, &|| explain::resolved(&resolved));
        let validated = self.validate(resolved)?;
        passed(Stage::Validate, &|| explain::validated(&validated));
        let classified = self.classify(validated);
        passed(Stage::Classify, &|| explain::classified(&classified));
        let permitted = self.authorize(classified)?;
        passed(Stage::Authorize, &|| explain::permitted(&permitted));
        Ok(permitted)
    }

    /// Stage 1.
    pub fn normalize(&self, raw: RawCall) -> Result<Normalized, Stopped> {
        let started = Instant::now();
        let mut trace = Box::new(Trace {
            pipeline: self.id,
            started,
            durations: [None; 8],
            tool: crate::invocation::escape(&raw.tool),
            call_id: new_call_id(),
            request_id: raw.request_id.clone(),
            surface: raw.surface,
            actor: crate::invocation::escape(&raw.actor),
            profile: crate::invocation::escape(&raw.profile),
            resolved: None,
            argument_names: Vec::new(),
            effect: None,
            resources: Vec::new(),
            policies: Vec::new(),
            approval_id: None,
            arguments: None,
            plan: Planned::untyped(),
        });
        let result = normalize(raw, &self.bounds);
        trace.record(Stage::Normalize, started);
        match result {
            Ok(invocation) => {
                trace.tool.clone_from(&invocation.tool);
                Ok(Normalized { invocation, trace })
            }
            Err(rejection) => Err(Stopped { rejection, trace }),
        }
    }

    /// Stage 2.
    pub fn resolve(&self, normalized: Normalized) -> Result<Resolved, Stopped> {
        self.resolve_within(normalized, &|_, _| Ok(()))
    }

    /// Stage 2 with the caller's further condition (see [`Admit`]): an MCP session admits
    /// only the tools it was shown. It can narrow what resolves, never widen it.
    pub fn resolve_within(
        &self,
        normalized: Normalized,
        admit: &Admit<'_>,
    ) -> Result<Resolved, Stopped> {
        let started = Instant::now();
        let Normalized {
            invocation,
            mut trace,
        } = normalized;
        let result = match self.registry.resolve(&invocation) {
            Ok(tool) => admit(&invocation, Some(&tool)).map(|()| tool),
            Err(refused) => Err(admit(&invocation, None).err().unwrap_or(refused)),
        };
        trace.record(Stage::Resolve, started);
        match result {
            Ok(tool) => {
                trace.resolved = Some(Arc::clone(&tool));
                Ok(Resolved {
                    invocation,
                    tool,
                    trace,
                })
            }
            Err(rejection) => Err(Stopped { rejection, trace }),
        }
    }

    /// Stage 3.
    pub fn validate(&self, resolved: Resolved) -> Result<Validated, Stopped> {
        let started = Instant::now();
        let Resolved {
            mut invocation,
            tool,
            mut trace,
        } = resolved;
        let arguments = Value::Object(std::mem::take(&mut invocation.arguments));
        let schema_errors = tool.schema.check(&arguments);
        let checked = if schema_errors.is_empty() {
            tool.executor.parse(&arguments)
        } else {
            Err(schema_errors)
        };
        trace.record(Stage::Validate, started);
        let parsed = match checked {
            Ok(parsed) => parsed,
            Err(errors) => {
                return Err(Stopped {
                    rejection: Rejection::from_field_errors(errors),
                    trace,
                });
            }
        };
        if let Value::Object(map) = &arguments {
            trace.argument_names = map.keys().cloned().collect();
            trace.argument_names.sort_unstable();
        }
        Ok(Validated {
            invocation,
            tool,
            arguments,
            parsed,
            trace,
        })
    }

    /// Stage 4. Classification cannot reject: it only learns.
    pub fn classify(&self, validated: Validated) -> Classified {
        let started = Instant::now();
        let Validated {
            invocation,
            tool,
            arguments,
            parsed,
            mut trace,
        } = validated;
        let (plan, classification) = tool.executor.plan_call(parsed);
        trace.plan = plan;
        // Arguments may make a call more consequential than its entry, never less.
        let effect = classification
            .effect
            .map_or(tool.entry.effect(), |refined| {
                refined.max(tool.entry.effect())
            });
        let sensitive = self.sensitivity.kinds(&classification.paths);
        let runs_later = runs_later::kinds(written(effect, &classification));
        trace.effect = Some(effect);
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

    /// Stage 5.
    pub fn authorize(&self, classified: Classified) -> Result<Permitted, Stopped> {
        let started = Instant::now();
        let Classified {
            invocation,
            tool,
            arguments,
            effect,
            classification,
            sensitive,
            runs_later,
            mut trace,
        } = classified;
        if !tool.entry.surfaces.contains(&invocation.surface) {
            trace.record(Stage::Authorize, started);
            // Validated arguments go into the evidence of every later rejection, as a digest.
            trace.arguments = Some(arguments);
            let allowed: Vec<&str> = tool.entry.surfaces.iter().map(|s| s.as_str()).collect();
            return Err(Stopped {
                rejection: Rejection::new(
                    RejectCode::SurfaceNotAllowed,
                    format!(
                        "tool `{}` may not be called from the {} surface",
                        tool.entry.name, invocation.surface
                    ),
                )
                .with_hint(Some(format!("allowed surfaces: {}", allowed.join(", ")))),
                trace,
            });
        }
        let decision = self.policy.decide(
            &tool,
            &PolicyContext {
                effect,
                actor: &invocation.actor,
                surface: invocation.surface,
                profile: &invocation.profile,
                workspace: self.workspace.digest(),
                paths: &classification.paths,
                sensitive: &sensitive,
                runs_later: &runs_later,
                network: NetworkRequest::from_resources(&classification.resources),
            },
        );
        trace.policies = decision.policies().to_vec();
        trace.record(Stage::Authorize, started);
        let asks_by_policy = match decision {
            PolicyDecision::Allow { .. } => false,
            PolicyDecision::AllowWithApproval { .. } => true,
            PolicyDecision::Deny { policies, errors } => {
                let message = if !errors.is_empty() {
                    format!(
                        "policy evaluation failed, so the call is denied: {}",
                        errors.join("; ")
                    )
                } else if policies.is_empty() {
                    format!(
                        "no policy permits `{}` ({effect}) for actor `{}` on the {} surface",
                        tool.entry.name, invocation.actor, invocation.surface
                    )
                } else {
                    let named: Vec<String> = policies
                        .iter()
                        .map(|p| match self.policy.reason(p) {
                            Some(reason) => format!("`{p}` ({reason})"),
                            None => format!("`{p}`"),
                        })
                        .collect();
                    format!(
                        "`{}` is forbidden by policy {}",
                        tool.entry.name,
                        named.join(", ")
                    )
                };
                let mut rejection = Rejection::new(RejectCode::PolicyDenied, message).with_hint(
                    Some("this is the operator's decision; do not retry the same call".into()),
                );
                rejection.policies = policies;
                trace.arguments = Some(arguments);
                return Err(Stopped { rejection, trace });
            }
        };
        let approval_required = asks_by_policy || tool.entry.approval == ApprovalMode::EachCall;
        Ok(Permitted {
            invocation,
            tool,
            arguments,
            effect,
            classification,
            approval_required,
            trace,
        })
    }

    /// Stage 6.
    pub fn approve(&self, permitted: Permitted) -> Result<Authorized, Stopped> {
        self.approve_cancellable(permitted, Cancel::new())
    }

    /// Stage 6, with a signal the caller may give to stop waiting for a person.
    pub fn approve_cancellable(
        &self,
        permitted: Permitted,
        cancel: Cancel,
    ) -> Result<Authorized, Stopped> {
        self.approve_with(permitted, cancel, &|_| {})
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
        let grant = if approval_required {
            let mut request =
                self.approval_request(&invocation, &tool, &arguments, effect, &classification);
            request.policies.clone_from(&trace.policies);
            request.call_id.clone_from(&trace.call_id);
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
            && runs_later::kinds(written(effect, classification)).is_empty()
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
            approval_mode: tool.entry.approval,
            client: invocation.client.clone(),
            call_id: String::new(),
            cancel: Cancel::new(),
        }
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

/// The paths a call writes: all of its paths when it is a local write or carries the diff or
/// creation of a file (whatever class the operator gave the tool), none otherwise. Commands
/// change files too, but what they change is known only once they have run; their own guard
/// is in the tools that run them.
fn written(effect: EffectClass, classification: &Classification) -> &[String] {
    let writes = effect == EffectClass::LocalWrite
        || classification
            .resources
            .iter()
            .any(|r| matches!(r, Resource::Diff(_) | Resource::Create(_)));
    if writes { &classification.paths } else { &[] }
}
