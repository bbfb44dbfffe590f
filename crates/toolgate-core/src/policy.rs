//! Stage 5: deny-by-default authorization with Cedar.
//!
//! The request a policy sees:
//!
//! | Cedar      | value |
//! |------------|-------|
//! | principal  | `Actor::"<actor>"` |
//! | action     | `Action::"call"` (may the call happen at all), then `Action::"call_unattended"` (may it happen without a person's approval) |
//! | resource   | `Tool::"<name>"` with attributes `name`, `capability`, `effect` (`"read_only"`, `"local_write"`, `"network"`, `"irreversible"`: the call's class after classification, which arguments can make stricter than the entry's) and `major` (a Long) |
//! | context    | `surface`, `profile`, `workspace` (a digest), `paths` (the workspace-relative paths the call touches, a Set of Strings), `sensitive` (their sensitive kinds), `runs_later` (the kinds of file that another program runs later which the call writes: see [`crate::runs_later`]) and `network` (what the call asks of the network: `mode` is `"none"`, `"proxy"` or `"unconfined"`, `hosts` the Set of host patterns the proxy would let through) |
//!
//! [`SCHEMA`] (`policy.cedarschema`) declares exactly this request, and every policy is
//! validated against it in strict mode when it is loaded: a policy that reads what a call does
//! not have, mixes types, names an unknown action or can never apply is refused then, at its
//! file, line and column, rather than at run time.
//!
//! Decisions are values and never errors: any evaluation error that remains (one only a call's
//! values reveal, such as an overflow) denies the call, even where Cedar alone would let a
//! `permit` stand; it names the policy and its `file:line`. Policies are
//! sliced per tool and action when the engine is built, so a call evaluates only the policies
//! whose scope can match it; the slices give the same decisions as the whole set because a
//! policy whose scope does not match is never evaluated by Cedar either.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::OnceLock;

use cedar_policy::{
    ActionConstraint, AuthorizationError, Authorizer, Context, Decision, Entities, Entity,
    EntityId, EntityTypeName, EntityUid, Policy, PolicyId, PolicySet, PrincipalConstraint, Request,
    ResourceConstraint, RestrictedExpression, Schema, ValidationMode, Validator,
};
use miette::Diagnostic;
use thiserror::Error;

use crate::invocation::Surface;
use crate::pipeline::Resource;
use crate::registry::{EffectClass, Registry, Tool};

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

// Sensitive files: denied to every tool, read or write, unless an operator replaces the rule
// (a policy with the same @id in the operator's file takes its place).
@id("sensitive-dotenv")
@reason("`.env*` files often hold secrets")
forbid (principal, action, resource) when { context.sensitive.contains("dotenv") };

@id("sensitive-pem")
@reason("`*.pem` files hold certificates and private keys")
forbid (principal, action, resource) when { context.sensitive.contains("pem") };

@id("sensitive-key")
@reason("`*.key` files and keystores (`*.p12`, `*.pfx`, `*.jks`, `*.keystore`) hold private keys")
forbid (principal, action, resource) when { context.sensitive.contains("key") };

@id("sensitive-ssh-key")
@reason("`id_rsa*` and other SSH key files hold private keys")
forbid (principal, action, resource) when { context.sensitive.contains("ssh_key") };

@id("sensitive-git-internals")
@reason("`.git/` internals are git's own state; its hooks and config run code")
forbid (principal, action, resource) when { context.sensitive.contains("git_internals") };

@id("sensitive-ssh-dir")
@reason("`.ssh/` holds keys and the hosts they open")
forbid (principal, action, resource) when { context.sensitive.contains("ssh_dir") };

@id("sensitive-aws-dir")
@reason("`.aws/` holds cloud credentials")
forbid (principal, action, resource) when { context.sensitive.contains("aws_dir") };

@id("sensitive-credentials")
@reason("`.netrc`, `.pgpass`, `.git-credentials`, `.pypirc`, `.my.cnf`, `.docker/config.json`, `.cargo/credentials`, `gh`'s `hosts.yml`, Google Cloud's application default credentials, Terraform's credentials, `.vault-token`, `.s3cfg`, Terraform state and kubeconfig files hold passwords and tokens")
forbid (principal, action, resource) when { context.sensitive.contains("credentials") };

@id("sensitive-credentials-dir")
@reason("`.gnupg/` holds private keys, `.kube/` cluster credentials, and `.azure/` and `.config/gcloud/` cloud tokens")
forbid (principal, action, resource) when { context.sensitive.contains("credentials_dir") };

// Files that another program runs later with the user's full authority (see
// `toolgate_core::runs_later`): the write tools may not change them unless an operator
// replaces the rule; no standing grant ever covers such a write.
@id("runs-later-git")
@reason("git's own files (config, hooks, `commondir`, alternates) make git run programs on the user's next git command")
forbid (principal, action, resource) when { context.runs_later.contains("git") };

@id("runs-later-agent-config")
@reason("agent clients' configuration (`.mcp.json`, `.claude/`, `.codex/`, `.cursor/`, `.vscode/`, …) starts servers and runs hooks and tasks with the user's full authority")
forbid (principal, action, resource) when { context.runs_later.contains("agent_config") };

@id("runs-later-env-loader")
@reason("environment loaders (`.envrc`, `mise.toml`) run as shell code when the user enters the directory")
forbid (principal, action, resource) when { context.runs_later.contains("env_loader") };

@id("runs-later-build-config")
@reason("package managers' and build tools' configuration (`.npmrc`, `.yarnrc.yml`, `.cargo/config.toml`, …) chooses programs they run")
forbid (principal, action, resource) when { context.runs_later.contains("build_config") };

@id("runs-later-shell-startup")
@reason("shell and tool startup files (`.bashrc`, `.profile`, `.gitconfig`, …) run in the user's every shell")
forbid (principal, action, resource) when { context.runs_later.contains("shell_startup") };

@id("sensitive-toolgate-config")
@reason("toolgate's own configuration decides what tools may do; a model must not change it")
forbid (principal, action, resource) when { context.sensitive.contains("toolgate_config") };
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
    /// The text is not Cedar.
    #[error("{file}:{line}:{column}: {reason}")]
    Parse {
        file: String,
        line: usize,
        column: usize,
        reason: String,
    },
    /// A policy does not fit [`SCHEMA`]: it reads something a call does not have, compares
    /// values of different types, names an action that does not exist, or can never apply.
    #[error("{file}:{line}:{column}: {reason}")]
    Schema {
        file: String,
        line: usize,
        column: usize,
        reason: String,
    },
    #[error("{file}:{line}:{column}: policy templates are not supported; write static policies")]
    Template {
        file: String,
        line: usize,
        column: usize,
    },
    #[error("{file}:{line}:{column}: policy id `{id}` is used twice")]
    DuplicateId {
        file: String,
        line: usize,
        column: usize,
        id: String,
    },
    #[error("{file}: {reason}")]
    Invalid { file: String, reason: String },
}

impl PolicyError {
    /// The file, line and column the error is about, where it has them.
    pub fn location(&self) -> Option<(&str, usize, usize)> {
        match self {
            PolicyError::Parse {
                file, line, column, ..
            }
            | PolicyError::Schema {
                file, line, column, ..
            }
            | PolicyError::Template { file, line, column }
            | PolicyError::DuplicateId {
                file, line, column, ..
            } => Some((file, *line, *column)),
            PolicyError::Invalid { .. } => None,
        }
    }

    /// What is wrong, without the location.
    pub fn reason(&self) -> String {
        match self {
            PolicyError::Parse { reason, .. }
            | PolicyError::Schema { reason, .. }
            | PolicyError::Invalid { reason, .. } => reason.clone(),
            PolicyError::Template { .. } => {
                "policy templates are not supported; write static policies".to_owned()
            }
            PolicyError::DuplicateId { id, .. } => format!("policy id `{id}` is used twice"),
        }
    }
}

/// A policy of a narrowing source that was not loaded, and why (see
/// [`PolicyEngine::from_sources_narrowed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub why: String,
}

/// The Cedar schema of what toolgate gives a policy: the `Actor` principal, the two actions,
/// the `Tool` resource and the context of a call. Every policy is validated against it in
/// strict mode when it is loaded, so a policy that reads an attribute a call does not have,
/// compares values of different types or can never apply is refused then, with its file, line
/// and column, rather than denying every call at run time.
pub const SCHEMA: &str = include_str!("policy.cedarschema");

/// What the policy decided for one call. The policies that determined it are named by their
/// `@id` where they have one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyDecision {
    /// The call may not happen: a policy forbids it, none permits it (`policies` is then
    /// empty), or evaluation failed (`errors`; any error denies).
    Deny {
        policies: Vec<String>,
        errors: Vec<String>,
    },
    /// The call may happen without asking anyone.
    Allow { policies: Vec<String> },
    /// The call may happen once a person approves it.
    AllowWithApproval { policies: Vec<String> },
}

impl PolicyDecision {
    /// The policies that determined the decision.
    pub fn policies(&self) -> &[String] {
        match self {
            PolicyDecision::Deny { policies, .. }
            | PolicyDecision::Allow { policies }
            | PolicyDecision::AllowWithApproval { policies } => policies,
        }
    }

    /// Whether the call may happen at all, with or without a person's approval.
    pub fn is_allowed(&self) -> bool {
        !matches!(self, PolicyDecision::Deny { .. })
    }
}

/// The context of one call, as policies see it.
#[derive(Debug, Clone, Copy)]
pub struct PolicyContext<'a> {
    /// The call's effect class after classification, which may be stricter than the entry's;
    /// policies see it as `resource.effect`.
    pub effect: EffectClass,
    pub actor: &'a str,
    pub surface: Surface,
    pub profile: &'a str,
    pub workspace: &'a str,
    pub paths: &'a [String],
    /// The kinds of sensitive file the paths touch (see [`crate::sensitive`]).
    pub sensitive: &'a [&'static str],
    /// The kinds of file that another program runs later which the call writes (see
    /// [`crate::runs_later`]).
    pub runs_later: &'a [&'static str],
    /// What the call asks of the network, from its `network:` resources.
    pub network: NetworkRequest<'a>,
}

/// What a call asks of the network, as policies see it in `context.network`: read from the
/// classification's resources, `network:none`, `network:unconfined`, or one `network:<host>`
/// per host pattern the call's proxy would let through. A call with no `network:` resource
/// (a tool that opens no connection of its own) asks for `none`.
#[derive(Debug, Clone, Copy)]
pub struct NetworkRequest<'a> {
    resources: &'a [Resource],
}

impl<'a> NetworkRequest<'a> {
    /// The request the `network:` entries of `resources` make.
    pub fn from_resources(resources: &'a [Resource]) -> Self {
        NetworkRequest { resources }
    }

    fn entries(&self) -> impl Iterator<Item = &'a str> {
        self.resources.iter().filter_map(|r| match r {
            Resource::Network(host) => Some(host.as_str()),
            _ => None,
        })
    }

    /// `"none"`, `"proxy"` or `"unconfined"`.
    pub fn mode(&self) -> &'static str {
        if self.entries().any(|e| e == NETWORK_UNCONFINED) {
            "unconfined"
        } else if self.hosts().next().is_some() {
            "proxy"
        } else {
            "none"
        }
    }

    /// The host patterns the proxy would let through.
    pub fn hosts(&self) -> impl Iterator<Item = &'a str> {
        self.entries()
            .filter(|e| *e != NETWORK_NONE && *e != NETWORK_UNCONFINED)
    }
}

/// The prefix of a resource that says what a call asks of the network.
pub const NETWORK_PREFIX: &str = "network:";
/// `network:none`: no connection at all.
pub const NETWORK_NONE: &str = "none";
/// `network:unconfined`: the operator let commands reach the network unfiltered.
pub const NETWORK_UNCONFINED: &str = "unconfined";

/// A loaded policy set, sliced per tool. Cloned to prepare the same policies for another
/// registry without parsing them again.
#[derive(Debug, Clone)]
pub struct PolicyEngine {
    all: Vec<Policy>,
    /// What each policy in `all` depends on (see [`ActionSlice`]), decided once at load.
    dependence: Vec<Dependence>,
    /// Each policy's name for messages: its `@id` annotation, or its generated id. Looked up
    /// once here because reading an annotation parses its key.
    names: HashMap<PolicyId, String>,
    /// Where each policy is, `file:line`, for messages about errors in evaluating it.
    places: HashMap<PolicyId, String>,
    /// Each named policy's `@reason` annotation, where it has one.
    reasons: HashMap<String, String>,
    /// `Action::"call"` and `Action::"call_unattended"`, parsed once.
    actions: [EntityUid; 2],
    /// The `Actor` entity type, parsed once.
    actor_type: EntityTypeName,
    /// For each tool name: the sliced sets for `call` and `call_unattended`, and the tool's
    /// entity. Built by [`PolicyEngine::prepare`].
    slices: HashMap<String, ToolSlice>,
    authorizer: Authorizer,
}

#[derive(Debug, Clone)]
struct ToolSlice {
    /// The effect class the tool entity carries in this slice.
    effect: EffectClass,
    /// For `call` and `call_unattended`, when the call touches no sensitive file (`quiet`)
    /// and when it does.
    quiet: [ActionSlice; 2],
    touched: [ActionSlice; 2],
    entities: Entities,
    uid: EntityUid,
}

/// The policies that can apply to one tool and one action, split in two. A *static* policy
/// reads neither `principal` nor `context` and has no principal scope, so for this tool and
/// action its result is the same on every call: it is evaluated once, when the slice is built.
/// Only the *dynamic* rest goes to Cedar per call. A policy that reads only
/// `context.sensitive` (the default sensitive-file rules) is static in the slice for calls
/// that touch no sensitive file, and dynamic in the one for calls that do.
#[derive(Debug, Clone)]
struct ActionSlice {
    dynamic: PolicySet,
    has_dynamic: bool,
    static_permits: Vec<String>,
    static_forbids: Vec<String>,
    static_errors: Vec<String>,
}

/// One action's verdict: allowed, the deciding policies, evaluation errors.
type Verdict = (bool, Vec<String>, Vec<String>);

impl PolicyEngine {
    /// The built-in policy alone.
    pub fn default_policy() -> Result<Self, PolicyError> {
        PolicyEngine::from_sources(&[("<default policy>", DEFAULT_POLICY)])
    }

    /// Policies from several named sources, e.g. the default policy and an operator's file.
    ///
    /// A policy whose `@id` an earlier source already used *replaces* the earlier one: that is
    /// how an operator narrows or lifts one default rule (`sensitive-dotenv`, say) without
    /// turning the whole default policy off. Within one source an `@id` may appear only once.
    pub fn from_sources(sources: &[(&str, &str)]) -> Result<Self, PolicyError> {
        PolicyEngine::from_sources_narrowed(sources, &[]).map(|(engine, _)| engine)
    }

    /// As [`PolicyEngine::from_sources`], then the policies of `narrowing` that can only
    /// narrow what `sources` decide: each `forbid` whose `@id` no earlier policy has. A
    /// `permit` (it may allow what nothing else does) and a policy that would replace an
    /// earlier one by its `@id` (it may lift a `forbid`) are not loaded; they are returned,
    /// each with its place and why, for the person to see. A `narrowing` source that does not
    /// parse or fit the schema is an error, as any source's is.
    pub fn from_sources_narrowed(
        sources: &[(&str, &str)],
        narrowing: &[(&str, &str)],
    ) -> Result<(Self, Vec<Withheld>), PolicyError> {
        let validator = validator()?;
        // (policy, its name, the index of its source)
        let mut loaded: Vec<(Policy, String, usize)> = Vec::new();
        let mut places = HashMap::new();
        let mut withheld = Vec::new();
        let all_sources = sources.iter().map(|s| (s, false));
        let all_sources = all_sources.chain(narrowing.iter().map(|s| (s, true)));
        for (index, ((file, text), narrows_only)) in all_sources.enumerate() {
            let set = PolicySet::from_str(text).map_err(|e| parse_error(file, text, &e))?;
            let starts = source_starts(text, &set);
            let at = |id: &PolicyId| line_column(text, starts.get(id).copied().unwrap_or(0));
            if let Some(template) = set.templates().next() {
                let (line, column) = at(template.id());
                return Err(PolicyError::Template {
                    file: (*file).to_owned(),
                    line,
                    column,
                });
            }
            validate(validator, file, text, &set, &at)?;
            let mut ids_here = HashSet::new();
            let mut policies: Vec<&Policy> = set.policies().collect();
            policies.sort_by_key(|p| starts.get(p.id()).copied().unwrap_or(0));
            for (n, policy) in policies.into_iter().enumerate() {
                let (line, column) = at(policy.id());
                let id = policy.annotation("id").map(str::to_owned);
                if narrows_only {
                    let replaces = id
                        .as_ref()
                        .filter(|id| loaded.iter().any(|(_, name, _)| name == *id));
                    let why = match (policy.effect(), replaces) {
                        (cedar_policy::Effect::Permit, _) => {
                            Some("a `permit` can widen what is allowed".to_owned())
                        }
                        (_, Some(id)) => Some(format!("it would replace the policy `{id}`")),
                        _ => None,
                    };
                    if let Some(why) = why {
                        withheld.push(Withheld {
                            file: (*file).to_owned(),
                            line,
                            column,
                            why,
                        });
                        continue;
                    }
                }
                if let Some(id) = &id {
                    if !ids_here.insert(id.clone()) {
                        return Err(PolicyError::DuplicateId {
                            file: (*file).to_owned(),
                            line,
                            column,
                            id: id.clone(),
                        });
                    }
                    loaded.retain(|(_, name, source)| !(name == id && *source < index));
                }
                let policy = policy.new_id(PolicyId::new(format!("s{index}p{n}")));
                // A policy without an `@id` is named by where it is: by the file's own name,
                // since decisions reach the model and the audit record, which carry no
                // absolute paths of the operator's (load errors, for the operator, name the
                // file whole).
                let short = file.rsplit('/').next().unwrap_or(file);
                let name = id.unwrap_or_else(|| format!("{short}:{line}"));
                places.insert(policy.id().clone(), format!("{short}:{line}"));
                loaded.push((policy, name, index));
            }
        }
        let reasons = loaded
            .iter()
            .filter_map(|(p, name, _)| Some((name.clone(), p.annotation("reason")?.to_owned())))
            .collect();
        let names = loaded
            .iter()
            .map(|(p, name, _)| (p.id().clone(), name.clone()))
            .collect();
        let all: Vec<Policy> = loaded.into_iter().map(|(p, _, _)| p).collect();
        // Only the policies in force, not those a later source replaced.
        let kept: HashSet<&PolicyId> = all.iter().map(Policy::id).collect();
        places.retain(|id, _| kept.contains(id));
        let dependence = all.iter().map(Dependence::of).collect();
        let engine = PolicyEngine {
            all,
            dependence,
            names,
            places,
            reasons,
            actions: PolicyAction::ALL.map(|action| entity_uid("Action", action.id())),
            actor_type: entity_type("Actor"),
            slices: HashMap::new(),
            authorizer: Authorizer::new(),
        };
        Ok((engine, withheld))
    }

    /// Why the policy named `name` exists, from its `@reason` annotation.
    pub fn reason(&self, name: &str) -> Option<&str> {
        self.reasons.get(name).map(String::as_str)
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
    /// sliced on the fly, with the same result.
    pub fn prepare(&mut self, registry: &Registry) -> Result<(), PolicyError> {
        for tool in registry.tools() {
            let slice = self.slice_for(tool, tool.entry.effect())?;
            self.slices.insert(tool.entry.name.clone(), slice);
        }
        Ok(())
    }

    fn slice_for(&self, tool: &Tool, effect: EffectClass) -> Result<ToolSlice, PolicyError> {
        let uid = entity_uid("Tool", &tool.entry.name);
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
                RestrictedExpression::new_string(effect.as_str().to_owned()),
            ),
            (
                "major".to_owned(),
                RestrictedExpression::new_long(i64::from(tool.entry.version.major)),
            ),
        ]);
        let invalid = |reason: String| PolicyError::Invalid {
            file: tool.entry.name.clone(),
            reason,
        };
        let entity =
            Entity::new(uid.clone(), attrs, HashSet::new()).map_err(|e| invalid(e.to_string()))?;
        let entities =
            Entities::from_entities([entity], None).map_err(|e| invalid(e.to_string()))?;
        let quiet = self
            .actions
            .clone()
            .map(|action| self.slice_action(&action, &uid, &entities, true));
        let touched = self
            .actions
            .clone()
            .map(|action| self.slice_action(&action, &uid, &entities, false));
        Ok(ToolSlice {
            effect,
            quiet,
            touched,
            entities,
            uid,
        })
    }

    fn slice_action(
        &self,
        action: &EntityUid,
        tool: &EntityUid,
        entities: &Entities,
        quiet: bool,
    ) -> ActionSlice {
        let mut slice = ActionSlice {
            dynamic: PolicySet::new(),
            has_dynamic: false,
            static_permits: Vec::new(),
            static_forbids: Vec::new(),
            static_errors: Vec::new(),
        };
        let anyone = EntityUid::from_type_name_and_id(self.actor_type.clone(), EntityId::new(""));
        for (policy, dependence) in self.all.iter().zip(&self.dependence) {
            if !action_matches(&policy.action_constraint(), action)
                || !resource_matches(&policy.resource_constraint(), tool)
            {
                continue;
            }
            let context = match dependence {
                Dependence::Static => Context::empty(),
                Dependence::Sensitive if quiet => no_sensitive_context(),
                Dependence::Sensitive | Dependence::Dynamic => {
                    // Ids are unique in `all`, so adding cannot collide.
                    let _ = slice.dynamic.add(policy.clone());
                    slice.has_dynamic = true;
                    continue;
                }
            };
            // Evaluate it alone, once: nothing else about a call can change its result.
            let mut alone = PolicySet::new();
            let _ = alone.add(policy.clone());
            let (allowed, reasons, errors) =
                self.evaluate(action, &anyone, tool, entities, &alone, &context);
            let name = self.name(policy.id());
            if !errors.is_empty() {
                slice.static_errors.extend(errors);
            } else if reasons.is_empty() {
                // Not satisfied: it can never apply to this tool and action.
            } else if allowed {
                slice.static_permits.push(name);
            } else {
                slice.static_forbids.push(name);
            }
        }
        slice
    }

    /// An evaluation error, naming the policy by its name and place rather than the id it has
    /// inside the engine.
    fn evaluation_error(&self, error: &AuthorizationError) -> String {
        match error {
            AuthorizationError::PolicyEvaluationError(e) => {
                let id = e.policy_id();
                let name = self.name(id);
                match self.places.get(id) {
                    Some(place) if *place != name => {
                        format!("policy `{name}` ({place}): {}", e.inner())
                    }
                    _ => format!("policy `{name}`: {}", e.inner()),
                }
            }
        }
    }

    fn name(&self, id: &PolicyId) -> String {
        self.names
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }

    /// Decides a call to `tool` in `context`. Never fails: every error is a denial.
    pub fn decide(&self, tool: &Tool, context: &PolicyContext<'_>) -> PolicyDecision {
        let built;
        // A call whose arguments made it more consequential than its entry is decided as what
        // it is: that slice is built for it, here.
        let slice = match self.slices.get(&tool.entry.name) {
            Some(slice) if slice.effect == context.effect => slice,
            _ => match self.slice_for(tool, context.effect) {
                Ok(slice) => {
                    built = slice;
                    &built
                }
                Err(e) => return deny_with_error(e.to_string()),
            },
        };
        let principal =
            EntityUid::from_type_name_and_id(self.actor_type.clone(), EntityId::new(context.actor));
        // The context is built only if a dynamic policy will read it.
        let mut cedar_context = None;
        let [call_slice, unattended_slice] =
            if context.sensitive.is_empty() && context.runs_later.is_empty() {
                &slice.quiet
            } else {
                &slice.touched
            };
        let [call_uid, unattended_uid] = &self.actions;

        let (allow, policies, mut errors) = self.verdict(
            call_slice,
            call_uid,
            &principal,
            slice,
            context,
            &mut cedar_context,
        );
        //  decision  errors   → result
        //  Allow     none     → go on to the approval question
        //  Allow     some     → deny: a policy that could not be evaluated might have forbidden it
        //  Deny      any      → deny
        if !allow || !errors.is_empty() {
            return PolicyDecision::Deny { policies, errors };
        }
        let (unattended, unattended_policies, unattended_errors) = self.verdict(
            unattended_slice,
            unattended_uid,
            &principal,
            slice,
            context,
            &mut cedar_context,
        );
        // An error while deciding whether approval may be skipped denies the call outright:
        // the operator's policy is broken, and asking a person would hide that.
        if !unattended_errors.is_empty() {
            errors.extend(unattended_errors);
            return PolicyDecision::Deny { policies, errors };
        }
        if unattended {
            PolicyDecision::Allow {
                policies: unattended_policies,
            }
        } else {
            PolicyDecision::AllowWithApproval { policies }
        }
    }

    /// Combines a slice's static results with Cedar's verdict on its dynamic policies, as
    /// Cedar would on the whole slice: any error denies, a satisfied forbid denies, else a
    /// satisfied permit allows, else deny.
    fn verdict(
        &self,
        slice: &ActionSlice,
        action: &EntityUid,
        principal: &EntityUid,
        tool: &ToolSlice,
        context: &PolicyContext<'_>,
        cedar_context: &mut Option<Result<Context, String>>,
    ) -> Verdict {
        if !slice.static_errors.is_empty() {
            return (false, Vec::new(), slice.static_errors.clone());
        }
        if !slice.static_forbids.is_empty() {
            return (false, slice.static_forbids.clone(), Vec::new());
        }
        if !slice.has_dynamic {
            return (
                !slice.static_permits.is_empty(),
                slice.static_permits.clone(),
                Vec::new(),
            );
        }
        let built = cedar_context.get_or_insert_with(|| build_context(context));
        let cedar_context = match built {
            Ok(c) => c,
            Err(e) => return (false, Vec::new(), vec![e.clone()]),
        };
        let (allowed, reasons, errors) = self.evaluate(
            action,
            principal,
            &tool.uid,
            &tool.entities,
            &slice.dynamic,
            cedar_context,
        );
        if !errors.is_empty() {
            return (false, reasons, errors);
        }
        match (allowed, reasons.is_empty()) {
            // A dynamic permit matched.
            (true, _) => {
                let mut policies = reasons;
                policies.extend(slice.static_permits.iter().cloned());
                (true, policies, Vec::new())
            }
            // A dynamic forbid matched.
            (false, false) => (false, reasons, Vec::new()),
            // Nothing dynamic matched: the static permits decide.
            (false, true) => (
                !slice.static_permits.is_empty(),
                slice.static_permits.clone(),
                Vec::new(),
            ),
        }
    }

    fn evaluate(
        &self,
        action: &EntityUid,
        principal: &EntityUid,
        resource: &EntityUid,
        entities: &Entities,
        set: &PolicySet,
        context: &Context,
    ) -> Verdict {
        let request = match Request::new(
            principal.clone(),
            action.clone(),
            resource.clone(),
            context.clone(),
            None,
        ) {
            Ok(request) => request,
            Err(e) => return (false, Vec::new(), vec![e.to_string()]),
        };
        let response = self.authorizer.is_authorized(&request, set, entities);
        let diagnostics = response.diagnostics();
        let policies = diagnostics.reason().map(|id| self.name(id)).collect();
        let errors = diagnostics
            .errors()
            .map(|error| self.evaluation_error(error))
            .collect();
        (response.decision() == Decision::Allow, policies, errors)
    }
}

/// What a policy's result can depend on besides the tool and action. Anything we cannot tell
/// is dynamic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dependence {
    /// Nothing: its principal scope is open and its conditions read neither `principal` nor
    /// `context`.
    Static,
    /// Only `context.sensitive`: decided in advance for calls that touch no sensitive file.
    Sensitive,
    /// Anything else about the call.
    Dynamic,
}

impl Dependence {
    fn of(policy: &Policy) -> Dependence {
        /// (reads `principal` or any of `context` but `sensitive`, reads `context.sensitive`)
        fn reads(value: &serde_json::Value) -> (bool, bool) {
            match value {
                serde_json::Value::Object(map) => {
                    if let Some(access) = map.get(".")
                        && access.get("left") == Some(&serde_json::json!({"Var": "context"}))
                        && (access.get("attr") == Some(&serde_json::json!("sensitive"))
                            || access.get("attr") == Some(&serde_json::json!("runs_later")))
                    {
                        return (false, true);
                    }
                    map.iter()
                        .fold((false, false), |(other, sensitive), (key, item)| {
                            let direct = key == "Var" && (item == "principal" || item == "context");
                            let (o, s) = reads(item);
                            (other || direct || o, sensitive || s)
                        })
                }
                serde_json::Value::Array(items) => items
                    .iter()
                    .map(reads)
                    .fold((false, false), |(a, b), (c, d)| (a || c, b || d)),
                _ => (false, false),
            }
        }
        if !matches!(policy.principal_constraint(), PrincipalConstraint::Any) {
            return Dependence::Dynamic;
        }
        let Ok(est) = policy.to_json() else {
            return Dependence::Dynamic;
        };
        match reads(est.get("conditions").unwrap_or(&serde_json::Value::Null)) {
            (false, false) => Dependence::Static,
            (false, true) => Dependence::Sensitive,
            (true, _) => Dependence::Dynamic,
        }
    }
}

/// The context a call that touches no sensitive file has, as far as a
/// [`Dependence::Sensitive`] policy can see.
fn no_sensitive_context() -> Context {
    Context::from_pairs([
        (
            "sensitive".to_owned(),
            RestrictedExpression::new_set(std::iter::empty()),
        ),
        (
            "runs_later".to_owned(),
            RestrictedExpression::new_set(std::iter::empty()),
        ),
    ])
    .unwrap_or_else(|_| Context::empty())
}

fn deny_with_error(error: String) -> PolicyDecision {
    PolicyDecision::Deny {
        policies: Vec::new(),
        errors: vec![error],
    }
}

fn entity_uid(kind: &str, id: &str) -> EntityUid {
    EntityUid::from_type_name_and_id(entity_type(kind), EntityId::new(id))
}

fn entity_type(kind: &str) -> EntityTypeName {
    // The type names used here are fixed identifiers that always parse.
    EntityTypeName::from_str(kind).unwrap_or_else(|_| unreachable_type())
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
        (
            "sensitive".to_owned(),
            RestrictedExpression::new_set(
                context
                    .sensitive
                    .iter()
                    .map(|kind| RestrictedExpression::new_string((*kind).to_owned())),
            ),
        ),
        (
            "runs_later".to_owned(),
            RestrictedExpression::new_set(
                context
                    .runs_later
                    .iter()
                    .map(|kind| RestrictedExpression::new_string((*kind).to_owned())),
            ),
        ),
        (
            "network".to_owned(),
            RestrictedExpression::new_record([
                (
                    "mode".to_owned(),
                    RestrictedExpression::new_string(context.network.mode().to_owned()),
                ),
                (
                    "hosts".to_owned(),
                    RestrictedExpression::new_set(
                        context
                            .network
                            .hosts()
                            .map(|h| RestrictedExpression::new_string(h.to_owned())),
                    ),
                ),
            ])
            .map_err(|e| e.to_string())?,
        ),
    ])
    .map_err(|e| e.to_string())
}

/// The validator over [`SCHEMA`], built once.
fn validator() -> Result<&'static Validator, PolicyError> {
    static VALIDATOR: OnceLock<Result<Validator, String>> = OnceLock::new();
    VALIDATOR
        .get_or_init(|| {
            Schema::from_cedarschema_str(SCHEMA)
                .map(|(schema, _warnings)| Validator::new(schema))
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|reason| PolicyError::Invalid {
            file: "<policy schema>".to_owned(),
            reason: reason.clone(),
        })
}

/// Validates the policies of one source against [`SCHEMA`] in strict mode. Besides Cedar's
/// errors, a warning that a policy can never apply (an impossible condition, a scope no
/// request matches) is refused: such a policy is a mistake that would otherwise pass
/// silently, and a forbid that can never apply protects nothing. So are bidirectional
/// control characters, which make a policy read differently from what it does. Warnings
/// about mixed scripts and confusable identifiers are not refused: a path may mix scripts.
fn validate(
    validator: &Validator,
    file: &str,
    text: &str,
    set: &PolicySet,
    at: &dyn Fn(&PolicyId) -> (usize, usize),
) -> Result<(), PolicyError> {
    let result = validator.validate(set, ValidationMode::Strict);
    let errors = result
        .validation_errors()
        .map(|e| (false, e.policy_id(), e as &dyn Diagnostic));
    let warnings = result
        .validation_warnings()
        .filter(|w| {
            matches!(
                w,
                cedar_policy::ValidationWarning::ImpossiblePolicy(_)
                    | cedar_policy::ValidationWarning::InvalidActionApplication(_)
                    | cedar_policy::ValidationWarning::BidiCharsInString(_)
                    | cedar_policy::ValidationWarning::BidiCharsInIdentifier(_)
            )
        })
        .map(|w| (true, w.policy_id(), w as &dyn Diagnostic));
    // The first error in the file, by where it is, else the first warning: an error says
    // more (an unknown action is also a scope no request matches).
    let first = errors
        .chain(warnings)
        .map(|(warning, id, diagnostic)| {
            let offset = diagnostic
                .labels()
                .and_then(|mut labels| labels.next())
                .map(|label| label.offset());
            let (line, column) = offset.map_or_else(|| at(id), |o| line_column(text, o));
            (
                warning,
                line,
                column,
                diagnostic.to_string(),
                id,
                diagnostic,
            )
        })
        // The text last, so that of two errors in one place (one per action) the message
        // is always the same one.
        .min_by(|a, b| (a.0, a.1, a.2, &a.3).cmp(&(b.0, b.1, b.2, &b.3)));
    let Some((_, line, column, _, id, diagnostic)) = first else {
        return Ok(());
    };
    // Cedar names the policy by the id it generated (`policy0`); the location says which it
    // is, and its `@id` where it has one.
    let mut reason = diagnostic.to_string();
    if let Some(help) = diagnostic.help() {
        reason.push_str(&format!(" ({help})"));
    }
    let mut reason = reason.replace(&format!("for policy `{id}`, "), "");
    if let Some(name) = set.policy(id).and_then(|p| p.annotation("id")) {
        reason = format!("policy `{name}`: {reason}");
    }
    Err(PolicyError::Schema {
        file: file.to_owned(),
        line,
        column,
        reason,
    })
}

/// Where each policy and template of `set` starts in `text`, the source it was parsed from.
/// Cedar keeps each one's own text, a slice of the source, and numbers them in order
/// (`policy0`, `policy1`, …), so each is found after the one before it.
fn source_starts(text: &str, set: &PolicySet) -> HashMap<PolicyId, usize> {
    let mut items: Vec<(usize, PolicyId, String)> = set
        .policies()
        .map(|p| (p.id().clone(), p.to_string()))
        .chain(set.templates().map(|t| (t.id().clone(), t.to_string())))
        .map(|(id, own)| {
            let n = AsRef::<str>::as_ref(&id)
                .strip_prefix("policy")
                .and_then(|n| n.parse().ok())
                .unwrap_or(usize::MAX);
            (n, id, own)
        })
        .collect();
    items.sort_by_key(|(n, _, _)| *n);
    let mut cursor = 0;
    let mut starts = HashMap::new();
    for (_, id, own) in items {
        if let Some(found) = text.get(cursor..).and_then(|rest| rest.find(&own)) {
            cursor += found;
            starts.insert(id, cursor);
            cursor += own.len();
        }
    }
    starts
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// A parse error with the file, the 1-based line and column of its first label, and Cedar's
/// reason.
fn parse_error(file: &str, text: &str, errors: &cedar_policy::ParseErrors) -> PolicyError {
    let first = errors.iter().next();
    let offset = first
        .and_then(|e| e.labels())
        .and_then(|mut labels| labels.next())
        .map_or(0, |label| label.offset());
    let (line, column) = line_column(text, offset);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Descriptor;
    use crate::registry::tests::Noop;
    use crate::registry::{RegistryBuilder, ToolEntry};
    use std::sync::Arc;

    /// A registry of one tool, `runner`, whose entry names no effect.
    fn runner() -> Registry {
        let mut builder = RegistryBuilder::new();
        let descriptor = Descriptor::new("runner", "t", serde_json::json!({"type": "object"}));
        builder
            .register(descriptor, ToolEntry::new("runner", "exec"), Arc::new(Noop))
            .unwrap();
        builder.build().unwrap()
    }

    /// Cedar on the whole, unsliced set, with toolgate's stricter error rule: the reference the
    /// sliced, pre-evaluated engine must agree with.
    fn reference(
        engine: &PolicyEngine,
        all: &PolicySet,
        slice: &ToolSlice,
        context: &PolicyContext<'_>,
    ) -> (bool, bool) {
        let principal = entity_uid("Actor", context.actor);
        let cedar_context = build_context(context).unwrap();
        let ask = |action: &EntityUid| {
            let (allowed, _, errors) = engine.evaluate(
                action,
                &principal,
                &slice.uid,
                &slice.entities,
                all,
                &cedar_context,
            );
            allowed && errors.is_empty()
        };
        let [call, unattended] = &engine.actions;
        let allow = ask(call);
        (allow, allow && !ask(unattended))
    }

    const OPERATOR: &str = r#"
        @id("static-forbid") forbid (principal, action, resource == Tool::"fetcher");
        @id("static-permit") permit (principal, action, resource) when { resource.capability == "special" };
        @id("static-error") permit (principal, action == Action::"call", resource == Tool::"broken") when { resource.major + 9223372036854775807 > 0 };
        @id("principal-scope") permit (principal == Actor::"admin", action, resource);
        @id("principal-var") forbid (principal, action, resource) when { principal == Actor::"intruder" };
        @id("context") forbid (principal, action == Action::"call_unattended", resource) when { context.surface == "chat" && resource.effect == "read_only" };
        @id("paths") forbid (principal, action, resource) when { context.paths.contains(".env") };
        @id("in-list") permit (principal, action in [Action::"call_unattended"], resource is Tool) when { context.profile == "trusted" };
        @id("is-in") forbid (principal, action == Action::"call", resource is Tool in Tool::"reader") when { context.surface == "cli" };
        @id("cli-write") permit (principal, action == Action::"call_unattended", resource) when { resource.effect == "local_write" && context.surface == "cli" };
        @id("sensitive-permit") permit (principal, action == Action::"call_unattended", resource) when { context.sensitive.contains("pem") };
        @id("sensitive-error") forbid (principal, action, resource == Tool::"special") when { context.sensitive.isEmpty() && resource.major + 9223372036854775807 > 0 };
        @id("sensitive-mixed") forbid (principal, action, resource) when { context.sensitive.contains("dotenv") && context.surface == "cli" };
    "#;

    #[test]
    fn counts() {
        let engine = PolicyEngine::default_policy().unwrap();
        assert_eq!((engine.len(), engine.is_empty()), (18, false));
        let none = PolicyEngine::from_sources(&[]).unwrap();
        assert_eq!((none.len(), none.is_empty()), (0, true));
    }

    #[test]
    fn a_later_source_replaces_a_policy_by_its_id_and_a_source_may_not_repeat_one() {
        let operator = r#"
            @id("sensitive-dotenv")
            @reason("only the example file")
            forbid (principal, action, resource)
            when { context.sensitive.contains("dotenv") && !context.paths.contains(".env.example") };
        "#;
        let engine =
            PolicyEngine::from_sources(&[("default", DEFAULT_POLICY), ("operator", operator)])
                .unwrap();
        assert_eq!(engine.len(), 18);
        assert_eq!(
            engine.reason("sensitive-dotenv"),
            Some("only the example file")
        );
        assert_eq!(
            engine.reason("sensitive-pem"),
            Some("`*.pem` files hold certificates and private keys")
        );
        let twice = r#"
            @id("a") permit (principal, action, resource);
            @id("a") forbid (principal, action, resource);
        "#;
        let error = PolicyEngine::from_sources(&[("ops.cedar", twice)]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "ops.cedar:3:13: policy id `a` is used twice"
        );
    }

    #[test]
    fn a_narrowing_source_adds_only_forbids_that_replace_nothing() {
        let project = r#"
            @id("no-fetch") forbid (principal, action, resource == Tool::"fetcher");
            @id("wide") permit (principal, action, resource);
            @id("sensitive-dotenv") forbid (principal, action, resource == Tool::"nothing");
            forbid (principal, action == Action::"call_unattended", resource);
        "#;
        let (engine, withheld) = PolicyEngine::from_sources_narrowed(
            &[("default", DEFAULT_POLICY)],
            &[(".toolgate/p.cedar", project)],
        )
        .unwrap();
        assert_eq!(engine.len(), 18 + 2);
        let why: Vec<(usize, &str)> = withheld.iter().map(|w| (w.line, w.why.as_str())).collect();
        assert_eq!(
            why,
            [
                (3, "a `permit` can widen what is allowed"),
                (4, "it would replace the policy `sensitive-dotenv`"),
            ]
        );
        // The default rule it tried to lift is still the default's.
        assert_eq!(
            engine.reason("sensitive-dotenv"),
            PolicyEngine::default_policy()
                .unwrap()
                .reason("sensitive-dotenv")
        );
    }

    /// Policies that parse but do not fit the schema: (policy, line:column of the mistake,
    /// words of Cedar's reason). Each is refused at load, named by file, line and column.
    const MISFITS: &[(&str, &str, &str)] = &[
        // An unknown context attribute.
        (
            "permit (principal, action, resource)\nwhen { context.nope == \"x\" };",
            "2:8",
            "attribute `nope` in context for Action::\"call\" not found (did you mean `network`?)",
        ),
        // An unknown resource attribute.
        (
            "@id(\"mine\")\npermit (principal, action, resource)\n  when { resource.owner == \"me\" };",
            "3:10",
            "policy `mine`: attribute `owner` on entity type `Tool` not found",
        ),
        // A number compared with a string.
        (
            "forbid (principal, action, resource) when { resource.major == \"1\" };",
            "1:45",
            "the types Long and String are not compatible",
        ),
        // A set compared with a string.
        (
            "forbid (principal, action, resource) when {\n  context.paths == \"x\"\n};",
            "2:3",
            "Set<String> are not compatible",
        ),
        // A string where a set is needed.
        (
            "forbid (principal, action, resource) when { context.surface.contains(\"x\") };",
            "1:45",
            "unexpected type",
        ),
        // An attribute of the principal, which has none.
        (
            "permit (principal, action, resource) when { principal.admin };",
            "1:45",
            "attribute `admin` on entity type `Actor` not found",
        ),
        // A record field that does not exist.
        (
            "forbid (principal, action, resource) when { context.network.port == 80 };",
            "1:45",
            "attribute `network.port` in context for Action::\"call\" not found (did you mean `hosts`?)",
        ),
        // An action that does not exist.
        (
            "\n\npermit (principal, action == Action::\"delete\", resource);",
            "3:30",
            "unrecognized action `Action::\"delete\"`",
        ),
        // An entity type that does not exist.
        (
            "permit (principal == User::\"alice\", action, resource);",
            "1:22",
            "unrecognized entity type `User`",
        ),
        // A condition that can never hold.
        (
            "permit (principal, action, resource) when { resource is Actor };",
            "1:1",
            "policy is impossible",
        ),
        // A scope no request matches: a tool is never the principal.
        (
            "permit (principal is Tool, action, resource);",
            "1:1",
            "policy is impossible",
        ),
    ];

    #[test]
    fn policies_that_do_not_fit_the_schema_are_refused_at_load_with_their_place() {
        for (text, at, words) in MISFITS {
            let error = PolicyEngine::from_sources(&[
                ("<default policy>", DEFAULT_POLICY),
                ("ops.cedar", text),
            ])
            .map(|_| ())
            .unwrap_err();
            let message = error.to_string();
            assert!(
                matches!(error, PolicyError::Schema { .. }),
                "{text}: {message}"
            );
            assert!(
                message.starts_with(&format!("ops.cedar:{at}: ")),
                "{text}: {message}"
            );
            assert!(message.contains(words), "{text}: {message}");
            assert!(!message.contains("policy0"), "{text}: {message}");
        }
    }

    #[test]
    fn the_schema_declares_exactly_what_a_call_gives_a_policy() {
        let (schema, _) = Schema::from_cedarschema_str(SCHEMA).unwrap();
        let registry = runner();
        let tool = registry.tools().next().unwrap();
        let engine = PolicyEngine::default_policy().unwrap();
        let slice = engine.slice_for(tool, EffectClass::Network).unwrap();
        // The tool entity, checked against the schema: no attribute missing, none extra, each
        // of its declared type.
        let entity = slice.entities.get(&slice.uid).unwrap().clone();
        Entities::from_entities([entity], Some(&schema)).unwrap();
        let paths = vec![".env".to_owned()];
        let resources = [Resource::Network("crates.io".to_owned())];
        let context = PolicyContext {
            effect: EffectClass::Network,
            actor: "local",
            surface: Surface::Chat,
            profile: "default",
            workspace: "w",
            paths: &paths,
            sensitive: &["dotenv"],
            runs_later: &["git"],
            network: NetworkRequest::from_resources(&resources),
        };
        // The context and the request, checked against the schema the same way, for both
        // actions.
        for uid in &engine.actions {
            Request::new(
                entity_uid("Actor", "local"),
                uid.clone(),
                slice.uid.clone(),
                build_context(&context).unwrap(),
                Some(&schema),
            )
            .unwrap();
        }
        // And the schema is strict: a context with one attribute more is refused.
        let extra = Context::from_pairs([(
            "nope".to_owned(),
            RestrictedExpression::new_string("x".to_owned()),
        )])
        .unwrap();
        let merged = build_context(&context).unwrap().merge(extra).unwrap();
        assert!(
            Request::new(
                entity_uid("Actor", "local"),
                engine.actions[0].clone(),
                slice.uid.clone(),
                merged,
                Some(&schema),
            )
            .is_err()
        );
    }

    #[test]
    fn the_schema_docs_policies_md_shows_is_the_schema() {
        let doc = include_str!("../../../docs/policies.md");
        let shown = doc
            .split("```cedarschema\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .unwrap();
        let json = |text: &str| {
            cedar_policy::SchemaFragment::from_cedarschema_str(text)
                .unwrap()
                .0
                .to_json_value()
                .unwrap()
        };
        assert_eq!(json(shown), json(SCHEMA));
    }

    #[test]
    fn evaluation_errors_name_the_policy_and_its_place() {
        let text = "permit (principal, action, resource);\n\n@id(\"overflow\")\nforbid (principal, action, resource)\nwhen { context.surface == \"chat\" && resource.major + 9223372036854775807 > 0 };\nforbid (principal, action, resource)\nwhen { context.surface == \"cli\" && resource.major + 9223372036854775807 > 0 };\n";
        let mut engine = PolicyEngine::from_sources(&[("ops.cedar", text)]).unwrap();
        let registry = runner();
        engine.prepare(&registry).unwrap();
        let tool = registry.tools().next().unwrap();
        let decide = |surface| {
            engine.decide(
                tool,
                &PolicyContext {
                    effect: tool.entry.effect(),
                    actor: "local",
                    surface,
                    profile: "default",
                    workspace: "w",
                    paths: &[],
                    sensitive: &[],
                    runs_later: &[],
                    network: NetworkRequest::from_resources(&[]),
                },
            )
        };
        let decision = decide(Surface::Chat);
        let PolicyDecision::Deny { errors, .. } = decision else {
            panic!("an evaluation error must deny");
        };
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("policy `overflow` (ops.cedar:3): "),
            "{errors:?}"
        );
        assert!(errors[0].contains("overflow"), "{errors:?}");
        let PolicyDecision::Deny { errors, .. } = decide(Surface::Cli) else {
            panic!("an evaluation error must deny");
        };
        // An unnamed policy is named by its place.
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("policy `ops.cedar:6`: "),
            "{errors:?}"
        );
        assert!(!errors[0].contains("s0p"), "{errors:?}");
        assert!(decide(Surface::Console).is_allowed());
    }

    #[test]
    fn static_policies_are_recognised() {
        let engine = PolicyEngine::from_sources(&[("o", OPERATOR)]).unwrap();
        let of = |dependence: Dependence| -> Vec<String> {
            engine
                .all
                .iter()
                .zip(&engine.dependence)
                .filter(|(_, d)| **d == dependence)
                .map(|(p, _)| engine.name(p.id()))
                .collect()
        };
        assert_eq!(
            of(Dependence::Static),
            ["static-forbid", "static-permit", "static-error"]
        );
        assert_eq!(
            of(Dependence::Sensitive),
            ["sensitive-permit", "sensitive-error"]
        );
        let defaults = PolicyEngine::default_policy().unwrap();
        assert!(
            defaults.all.iter().zip(&defaults.dependence).all(|(p, d)| {
                let name = defaults.name(p.id());
                (*d == Dependence::Sensitive)
                    == (name.starts_with("sensitive-") || name.starts_with("runs-later-"))
            }),
            "every default rule on sensitive files and files that run later is decided in \
             advance for quiet calls"
        );
    }

    #[test]
    fn policies_see_the_network_a_call_asks_for() {
        let operator = r#"
            @id("proxy-only-to-crates")
            forbid (principal, action, resource)
            when { context.network.mode == "proxy"
                   && !(["crates.io", "*.crates.io"].containsAll(context.network.hosts)) };
            @id("never-unconfined")
            forbid (principal, action, resource) when { context.network.mode == "unconfined" };
            @id("permit") permit (principal, action == Action::"call", resource);
        "#;
        let mut engine = PolicyEngine::from_sources(&[("o", operator)]).unwrap();
        let registry = runner();
        engine.prepare(&registry).unwrap();
        let tool = registry.tools().next().unwrap();
        let decide = |resources: &[&str]| {
            let resources: Vec<Resource> = resources
                .iter()
                .map(|r| match r.split_once(':') {
                    Some(("network", host)) => Resource::Network(host.to_owned()),
                    _ => Resource::Program((*r).to_owned()),
                })
                .collect();
            let request = NetworkRequest::from_resources(&resources);
            let context = PolicyContext {
                effect: tool.entry.effect(),
                actor: "local",
                surface: Surface::Chat,
                profile: "default",
                workspace: "w",
                paths: &[],
                sensitive: &[],
                runs_later: &[],
                network: request,
            };
            (request.mode(), engine.decide(tool, &context).is_allowed())
        };
        assert_eq!(decide(&[]), ("none", true));
        assert_eq!(
            decide(&["program:/bin/true", "network:none"]),
            ("none", true)
        );
        assert_eq!(
            decide(&["network:crates.io", "network:*.crates.io"]),
            ("proxy", true)
        );
        assert_eq!(
            decide(&["network:crates.io", "network:evil.test"]),
            ("proxy", false)
        );
        assert_eq!(decide(&["network:unconfined"]), ("unconfined", false));
    }

    #[test]
    fn sliced_and_pre_evaluated_decisions_equal_whole_set_decisions() {
        let mut engine =
            PolicyEngine::from_sources(&[("d", DEFAULT_POLICY), ("o", OPERATOR)]).unwrap();
        let mut builder = RegistryBuilder::new();
        let tools = [
            ("reader", Some(EffectClass::ReadOnly), "plain"),
            ("writer", Some(EffectClass::LocalWrite), "plain"),
            ("fetcher", Some(EffectClass::Network), "plain"),
            ("runner", None, "plain"),
            ("special", Some(EffectClass::Network), "special"),
            ("broken", Some(EffectClass::ReadOnly), "plain"),
        ];
        for (name, effect, capability) in tools {
            let mut entry = ToolEntry::new(name, capability);
            entry.effect = effect;
            let descriptor = Descriptor::new(name, "t", serde_json::json!({"type": "object"}));
            builder.register(descriptor, entry, Arc::new(Noop)).unwrap();
        }
        let registry = builder.build().unwrap();
        engine.prepare(&registry).unwrap();
        let mut all = PolicySet::new();
        for policy in &engine.all {
            all.add(policy.clone()).unwrap();
        }
        let mut checked = 0;
        for tool in registry.tools() {
            let slice = engine.slice_for(tool, tool.entry.effect()).unwrap();
            for surface in Surface::ALL {
                for actor in ["local", "admin", "intruder"] {
                    for profile in ["default", "trusted"] {
                        for paths in [
                            vec![],
                            vec![".env".to_owned()],
                            vec!["a".to_owned()],
                            vec!["k.pem".to_owned(), ".env.local".to_owned()],
                        ] {
                            let sensitive = crate::Sensitivity::default().kinds(&paths);
                            let context = PolicyContext {
                                effect: tool.entry.effect(),
                                actor,
                                surface,
                                profile,
                                workspace: "w",
                                paths: &paths,
                                sensitive: &sensitive,
                                runs_later: &[],
                                network: NetworkRequest::from_resources(&[]),
                            };
                            let decision = engine.decide(tool, &context);
                            let got = (
                                decision.is_allowed(),
                                matches!(decision, PolicyDecision::AllowWithApproval { .. }),
                            );
                            assert_eq!(
                                got,
                                reference(&engine, &all, &slice, &context),
                                "{} {surface} {actor} {profile} {paths:?}: {decision:?}",
                                tool.entry.name
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 6 * 3 * 3 * 2 * 4);
    }
}
