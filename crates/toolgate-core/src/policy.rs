//! Stage 5: deny-by-default authorization with Cedar.
//!
//! The request a policy sees:
//!
//! | Cedar      | value |
//! |------------|-------|
//! | principal  | `Actor::"<actor>"` |
//! | action     | `Action::"call"` (may the call happen at all), then `Action::"call_unattended"` (may it happen without a person's approval) |
//! | resource   | `Tool::"<name>"` with attributes `name`, `capability`, `effect` (`"read_only"`, `"local_write"`, `"network"`, `"irreversible"`) and `major` (a Long) |
//! | context    | `surface`, `profile`, `workspace` (a digest) and `paths` (the workspace-relative paths the call touches, a Set of Strings) |
//!
//! Decisions are values and never errors: any evaluation error — a missing attribute, a type
//! error — denies the call, even where Cedar alone would let a `permit` stand. Policies are
//! sliced per tool and action when the engine is built, so a call evaluates only the policies
//! whose scope can match it; the slices give the same decisions as the whole set because a
//! policy whose scope does not match is never evaluated by Cedar either.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Decision, Entities, Entity, EntityId, EntityTypeName,
    EntityUid, Policy, PolicyId, PolicySet, Request, ResourceConstraint, RestrictedExpression,
};
use miette::Diagnostic;
use thiserror::Error;

use crate::invocation::Surface;
use crate::registry::{Registry, Tool};

/// The policy toolgate runs with when the operator adds none.
pub const DEFAULT_POLICY: &str = r#"
// Read-only tools run on every surface without asking anyone.
@id("default-read-only")
permit (principal, action in [Action::"call", Action::"call_unattended"], resource)
when { resource.effect == "read_only" };

// Local writes may run, each after a person approves it.
@id("default-local-write")
permit (principal, action == Action::"call", resource)
when { resource.effect == "local_write" };

// Irreversible actions (commands among them) may run, each after a fresh approval.
@id("default-irreversible")
permit (principal, action == Action::"call", resource)
when { resource.effect == "irreversible" };

// Network effects have no permit: denied unless an operator's policy allows them.
"#;

/// The two Cedar actions, as an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PolicyAction {
    Call,
    CallUnattended,
}

impl PolicyAction {
    const ALL: [PolicyAction; 2] = [PolicyAction::Call, PolicyAction::CallUnattended];

    fn id(self) -> &'static str {
        match self {
            PolicyAction::Call => "call",
            PolicyAction::CallUnattended => "call_unattended",
        }
    }
}

/// Why a policy set could not be loaded. Refusing to start is the only safe answer.
#[derive(Debug, Error)]
pub enum PolicyError {
    #[error("{file}:{line}:{column}: {reason}")]
    Parse {
        file: String,
        line: usize,
        column: usize,
        reason: String,
    },
    #[error("{file}: policy templates are not supported; write static policies")]
    Template { file: String },
    #[error("{file}: {reason}")]
    Invalid { file: String, reason: String },
}

/// What the policy decided for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDecision {
    /// May the call happen at all.
    pub allow: bool,
    /// Must a person approve it first. Meaningless when `allow` is false.
    pub approval_required: bool,
    /// The policies that determined the decision, by their `@id` where they have one.
    pub policies: Vec<String>,
    /// Evaluation errors; any error denies.
    pub errors: Vec<String>,
}

/// The context of one call, as policies see it.
#[derive(Debug, Clone, Copy)]
pub struct PolicyContext<'a> {
    pub actor: &'a str,
    pub surface: Surface,
    pub profile: &'a str,
    pub workspace: &'a str,
    pub paths: &'a [String],
}

/// A loaded policy set, sliced per tool.
#[derive(Debug)]
pub struct PolicyEngine {
    all: Vec<Policy>,
    /// For each tool name: the sliced sets for `call` and `call_unattended`, and the tool's
    /// entity. Built by [`PolicyEngine::prepare`].
    slices: HashMap<String, ToolSlice>,
    authorizer: Authorizer,
}

#[derive(Debug)]
struct ToolSlice {
    sets: [PolicySet; 2],
    entities: Entities,
    uid: EntityUid,
}

impl PolicyEngine {
    /// The built-in policy alone.
    pub fn default_policy() -> Result<Self, PolicyError> {
        PolicyEngine::from_sources(&[("<default policy>", DEFAULT_POLICY)])
    }

    /// Policies from several named sources, e.g. the default policy and an operator's file.
    pub fn from_sources(sources: &[(&str, &str)]) -> Result<Self, PolicyError> {
        let mut all = Vec::new();
        for (index, (file, text)) in sources.iter().enumerate() {
            let set = PolicySet::from_str(text).map_err(|e| parse_error(file, text, &e))?;
            if set.templates().next().is_some() {
                return Err(PolicyError::Template {
                    file: (*file).to_owned(),
                });
            }
            for (n, policy) in set.policies().enumerate() {
                all.push(policy.new_id(PolicyId::new(format!("s{index}p{n}"))));
            }
        }
        Ok(PolicyEngine {
            all,
            slices: HashMap::new(),
            authorizer: Authorizer::new(),
        })
    }

    /// Number of policies loaded.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// Whether no policy is loaded (everything is then denied).
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Slices the policies for every tool in `registry`. Calls to tools not prepared are
    /// evaluated against the whole set.
    pub fn prepare(&mut self, registry: &Registry) -> Result<(), PolicyError> {
        for tool in registry.tools() {
            let slice = self.slice_for(tool)?;
            self.slices.insert(tool.entry.name.clone(), slice);
        }
        Ok(())
    }

    fn slice_for(&self, tool: &Tool) -> Result<ToolSlice, PolicyError> {
        let uid = entity_uid("Tool", &tool.entry.name);
        let sets = PolicyAction::ALL.map(|action| {
            let action_uid = entity_uid("Action", action.id());
            let mut set = PolicySet::new();
            for policy in &self.all {
                if action_matches(&policy.action_constraint(), &action_uid)
                    && resource_matches(&policy.resource_constraint(), &uid)
                {
                    // Ids are unique in `all`, so adding cannot collide.
                    let _ = set.add(policy.clone());
                }
            }
            set
        });
        let attrs = HashMap::from([
            (
                "name".to_owned(),
                RestrictedExpression::new_string(tool.entry.name.clone()),
            ),
            (
                "capability".to_owned(),
                RestrictedExpression::new_string(tool.entry.capability.clone()),
            ),
            (
                "effect".to_owned(),
                RestrictedExpression::new_string(tool.entry.effect().as_str().to_owned()),
            ),
            (
                "major".to_owned(),
                RestrictedExpression::new_long(i64::from(tool.entry.version.major)),
            ),
        ]);
        let entity =
            Entity::new(uid.clone(), attrs, HashSet::new()).map_err(|e| PolicyError::Invalid {
                file: tool.entry.name.clone(),
                reason: e.to_string(),
            })?;
        let entities =
            Entities::from_entities([entity], None).map_err(|e| PolicyError::Invalid {
                file: tool.entry.name.clone(),
                reason: e.to_string(),
            })?;
        Ok(ToolSlice {
            sets,
            entities,
            uid,
        })
    }

    /// Decides a call to `tool` in `context`. Never fails: every error is a denial.
    pub fn decide(&self, tool: &Tool, context: &PolicyContext<'_>) -> PolicyDecision {
        let built;
        let slice = match self.slices.get(&tool.entry.name) {
            Some(slice) => slice,
            None => match self.slice_for(tool) {
                Ok(slice) => {
                    built = slice;
                    &built
                }
                Err(e) => return deny_with_error(e.to_string()),
            },
        };
        let cedar_context = match build_context(context) {
            Ok(c) => c,
            Err(e) => return deny_with_error(e),
        };
        let principal = entity_uid("Actor", context.actor);
        let [call_set, unattended_set] = &slice.sets;

        let call = self.evaluate(
            PolicyAction::Call,
            &principal,
            slice,
            call_set,
            &cedar_context,
        );
        //  decision  errors   → result
        //  Allow     none     → go on to the approval question
        //  Allow     some     → deny: a policy that could not be evaluated might have forbidden it
        //  Deny      any      → deny
        let (allow, mut policies, mut errors) = call;
        if !allow || !errors.is_empty() {
            return PolicyDecision {
                allow: false,
                approval_required: true,
                policies,
                errors,
            };
        }
        let (unattended, unattended_policies, unattended_errors) = self.evaluate(
            PolicyAction::CallUnattended,
            &principal,
            slice,
            unattended_set,
            &cedar_context,
        );
        // An error while deciding whether approval may be skipped denies the call outright:
        // the operator's policy is broken, and asking a person would hide that.
        if !unattended_errors.is_empty() {
            errors.extend(unattended_errors);
            return PolicyDecision {
                allow: false,
                approval_required: true,
                policies,
                errors,
            };
        }
        if unattended {
            policies = unattended_policies;
        }
        PolicyDecision {
            allow: true,
            approval_required: !unattended,
            policies,
            errors,
        }
    }

    fn evaluate(
        &self,
        action: PolicyAction,
        principal: &EntityUid,
        slice: &ToolSlice,
        set: &PolicySet,
        context: &Context,
    ) -> (bool, Vec<String>, Vec<String>) {
        let request = match Request::new(
            principal.clone(),
            entity_uid("Action", action.id()),
            slice.uid.clone(),
            context.clone(),
            None,
        ) {
            Ok(request) => request,
            Err(e) => return (false, Vec::new(), vec![e.to_string()]),
        };
        let response = self
            .authorizer
            .is_authorized(&request, set, &slice.entities);
        let diagnostics = response.diagnostics();
        let policies = diagnostics
            .reason()
            .map(|id| display_name(set, id))
            .collect();
        let errors = diagnostics.errors().map(ToString::to_string).collect();
        (response.decision() == Decision::Allow, policies, errors)
    }
}

fn deny_with_error(error: String) -> PolicyDecision {
    PolicyDecision {
        allow: false,
        approval_required: true,
        policies: Vec::new(),
        errors: vec![error],
    }
}

fn display_name(set: &PolicySet, id: &PolicyId) -> String {
    set.policy(id)
        .and_then(|p| p.annotation("id").map(str::to_owned))
        .unwrap_or_else(|| id.to_string())
}

fn entity_uid(kind: &str, id: &str) -> EntityUid {
    // The type names used here are fixed identifiers that always parse.
    let kind = EntityTypeName::from_str(kind).unwrap_or_else(|_| unreachable_type());
    EntityUid::from_type_name_and_id(kind, EntityId::new(id))
}

#[expect(
    clippy::panic,
    reason = "INVARIANT: `Actor`, `Action` and `Tool` are valid Cedar type names"
)]
fn unreachable_type() -> EntityTypeName {
    panic!("fixed Cedar type name failed to parse")
}

fn action_matches(constraint: &ActionConstraint, action: &EntityUid) -> bool {
    match constraint {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(uid) => uid == action,
        // Actions here have no parents, so `in` is membership of the list itself.
        ActionConstraint::In(uids) => uids.contains(action),
    }
}

fn resource_matches(constraint: &ResourceConstraint, tool: &EntityUid) -> bool {
    match constraint {
        ResourceConstraint::Any => true,
        // Tools have no parents, so `resource in X` holds only when X is the tool itself.
        ResourceConstraint::Eq(uid) | ResourceConstraint::In(uid) => uid == tool,
        ResourceConstraint::Is(kind) => kind == tool.type_name(),
        ResourceConstraint::IsIn(kind, uid) => kind == tool.type_name() && uid == tool,
    }
}

fn build_context(context: &PolicyContext<'_>) -> Result<Context, String> {
    Context::from_pairs([
        (
            "surface".to_owned(),
            RestrictedExpression::new_string(context.surface.as_str().to_owned()),
        ),
        (
            "profile".to_owned(),
            RestrictedExpression::new_string(context.profile.to_owned()),
        ),
        (
            "workspace".to_owned(),
            RestrictedExpression::new_string(context.workspace.to_owned()),
        ),
        (
            "paths".to_owned(),
            RestrictedExpression::new_set(
                context
                    .paths
                    .iter()
                    .map(|p| RestrictedExpression::new_string(p.clone())),
            ),
        ),
    ])
    .map_err(|e| e.to_string())
}

/// A parse error with the file, the 1-based line and column of its first label, and Cedar's
/// reason.
fn parse_error(file: &str, text: &str, errors: &cedar_policy::ParseErrors) -> PolicyError {
    let first = errors.iter().next();
    let offset = first
        .and_then(|e| e.labels())
        .and_then(|mut labels| labels.next())
        .map_or(0, |label| label.offset());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    let reason = first.map_or_else(
        || errors.to_string(),
        |e| {
            let mut reason = e.to_string();
            if let Some(help) = e.help() {
                reason.push_str(&format!(" ({help})"));
            }
            reason
        },
    );
    PolicyError::Parse {
        file: file.to_owned(),
        line,
        column,
        reason,
    }
}
