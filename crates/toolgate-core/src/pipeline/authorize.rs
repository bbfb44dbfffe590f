//! Stage 5: the surface the call came from and the operator's policy (`surface_not_allowed`,
//! `policy_denied`); a call let through may still need a person (stage 6).

use super::*;
use crate::policy::PolicyDecision;

impl Pipeline {
    /// Stage 5.
    pub(crate) fn authorize(&self, classified: Classified) -> Result<Permitted, Stopped> {
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
        if let Some(rejection) = self.foreign(&trace) {
            trace.arguments = Some(arguments);
            return Err(Stopped { rejection, trace });
        }
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
                let rejection = Rejection::new(RejectCode::PolicyDenied, message)
                    .with_hint(Some(
                        "this is the operator's decision; do not retry the same call".into(),
                    ))
                    .with_policies(policies);
                trace.arguments = Some(arguments);
                return Err(Stopped { rejection, trace });
            }
        };
        // A hook's ask adds a person; its allow was never a permit.
        let approval_required =
            asks_by_policy || tool.entry.approval == ApprovalMode::EachCall || trace.hook_asks;
        if approval_required {
            // Waiting for a person holds a thread.
            trace.placement = Placement::Worker;
        }
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
}
