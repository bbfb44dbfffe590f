//! Stage 2: the registry entry a call will use, or why there is none (`unknown_tool`,
//! `not_in_profile`, `disabled`, `version_incompatible`, `ambiguous_version`,
//! `stale_descriptor`, `unavailable`). A caller that was shown a list of tools (an MCP
//! session) hands it in as [`Shown`], data this stage judges by: no transport words a refusal
//! of its own.

use crate::hint::{did_you_mean, hint_for};
use crate::registry::Registry;

use super::*;

impl Pipeline {
    /// Stage 2 for a caller that was [shown](Shown) its tools (an MCP session): a tool it
    /// was not shown is unknown to it, one that changed since is stale. What it was shown can
    /// narrow what resolves, never widen it.
    pub(crate) fn resolve_within(
        &self,
        normalized: Normalized,
        shown: Option<&Shown>,
    ) -> Result<Resolved, Stopped> {
        let started = Instant::now();
        let Normalized {
            invocation,
            mut trace,
        } = normalized;
        if let Some(rejection) = self.foreign(&trace) {
            return Err(Stopped { rejection, trace });
        }
        let result = match (resolve(&self.registry, &invocation), shown) {
            (result, None) => result,
            (Ok(tool), Some(shown)) => shown.check(&invocation, Some(&tool)).map(|()| tool),
            (Err(refused), Some(shown)) => {
                Err(shown.check(&invocation, None).err().unwrap_or(refused))
            }
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
}

/// The tools a caller was shown, in registry order, one entry per name: what an MCP session
/// listed (or, before it listed, what was visible when it began).
#[derive(Debug, Default)]
pub struct Shown {
    tools: Vec<Arc<Tool>>,
}

impl Shown {
    /// The tools visible in `profile`; where several versions of a name are visible, the
    /// newest.
    pub fn of(registry: &Registry, profile: &str) -> Shown {
        let mut tools: Vec<Arc<Tool>> = Vec::new();
        for tool in registry.visible(profile) {
            match tools
                .iter_mut()
                .find(|t| t.entry().name == tool.entry().name)
            {
                Some(listed) if listed.entry().version < tool.entry().version => {
                    *listed = Arc::clone(tool);
                }
                Some(_) => {}
                None => tools.push(Arc::clone(tool)),
            }
        }
        Shown { tools }
    }

    /// The tools shown, in registry order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.iter()
    }

    fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.iter().find(|t| t.entry().name == name)
    }

    /// Whether the entry the registry `resolved` (`None` when it refused the call) may be
    /// called by whoever was shown these tools: a tool not shown is unknown to them, whatever
    /// the registry holds; one whose entry changed since it was shown is stale. A tool hidden
    /// since, disabled or unavailable the registry refuses with its own code.
    fn check(
        &self,
        invocation: &Invocation,
        resolved: Option<&Arc<Tool>>,
    ) -> Result<(), Rejection> {
        let name = invocation.tool.as_str();
        let Some(listed) = self.get(name) else {
            let hint = if resolved.is_some() {
                // The registry resolved it in this profile, so it became visible after the
                // caller's listing.
                Some(format!(
                    "`{name}` became available after this session last listed its tools; list them again (tools/list) before calling it"
                ))
            } else {
                let names = self.tools.iter().map(|t| t.entry().name.as_str());
                hint_for(did_you_mean(name, names.clone())).or_else(|| {
                    let names: Vec<String> = names.map(|n| format!("`{n}`")).collect();
                    Some(if names.is_empty() {
                        "this session has no tools".to_owned()
                    } else {
                        format!("available tools: {}", names.join(", "))
                    })
                })
            };
            return Err(Rejection::new(
                RejectCode::UnknownTool,
                format!("no tool `{name}` in this session's tool list"),
            )
            .with_hint(hint));
        };
        let Some(resolved) = resolved else {
            return Ok(());
        };
        if let Some(major) = invocation.version
            && major != listed.entry().version.major
        {
            return Err(Rejection::new(
                RejectCode::VersionIncompatible,
                format!(
                    "this session was shown `{name}` version {}, not major version {major}",
                    listed.entry().version
                ),
            )
            .with_hint(Some(format!("call it as `{name}`"))));
        }
        if same_entry(listed, resolved) {
            Ok(())
        } else {
            Err(Rejection::new(
                RejectCode::StaleDescriptor,
                format!("tool `{name}` changed since this session listed it"),
            )
            .with_hint(Some(
                "list the tools again (tools/list) and read its description and schema".into(),
            )))
        }
    }
}

/// The same tool as far as a model can tell: same version, descriptor and description.
fn same_entry(a: &Arc<Tool>, b: &Arc<Tool>) -> bool {
    Arc::ptr_eq(a, b)
        || (a.entry().name == b.entry().name
            && a.entry().version == b.entry().version
            && a.digest() == b.digest()
            && a.description() == b.description())
}

/// Stage 2: exactly one enabled, compatible, current, available entry in the caller's
/// profile. Each filter that empties the set names itself in the rejection.
pub(crate) fn resolve(
    registry: &Registry,
    invocation: &Invocation,
) -> Result<Arc<Tool>, Rejection> {
    let name = &invocation.tool;
    let profile = &invocation.profile;
    let Some(named) = registry.named(name) else {
        let visible: Vec<&str> = registry
            .visible(profile)
            .map(|t| t.entry().name.as_str())
            .collect();
        return Err(Rejection::new(
            RejectCode::UnknownTool,
            format!("no tool `{name}` is registered"),
        )
        .with_hint(
            hint_for(did_you_mean(name, visible.iter().copied())).or_else(|| {
                Some(format!(
                    "available tools: {}",
                    backticked(visible.iter().copied())
                ))
            }),
        ));
    };
    let mut matches: Vec<&Arc<Tool>> = named.collect();

    if let Some(major) = invocation.version {
        let majors: Vec<String> = matches
            .iter()
            .map(|t| t.entry().version.major.to_string())
            .collect();
        matches.retain(|t| t.entry().version.major == major);
        if matches.is_empty() {
            return Err(Rejection::new(
                RejectCode::VersionIncompatible,
                format!("tool `{name}` has no major version {major}"),
            )
            .with_hint(Some(format!(
                "registered major versions: {}",
                majors.join(", ")
            ))));
        }
    }
    matches.retain(|t| t.entry().profiles.contains(profile.as_str()));
    if matches.is_empty() {
        return Err(Rejection::new(
            RejectCode::NotInProfile,
            format!("tool `{name}` is not available in profile `{profile}`"),
        ));
    }
    matches.retain(|t| t.entry().enabled);
    if matches.is_empty() {
        return Err(Rejection::new(
            RejectCode::Disabled,
            format!("tool `{name}` is disabled by the operator"),
        ));
    }
    let tool = match matches[..] {
        [tool] => tool,
        [first, ..] => {
            let versions: Vec<String> = matches
                .iter()
                .map(|t| t.entry().version.to_string())
                .collect();
            return Err(Rejection::new(
                RejectCode::AmbiguousVersion,
                format!(
                    "tool `{name}` has several enabled versions: {}",
                    versions.join(", ")
                ),
            )
            .with_hint(Some(format!(
                "name one, as `{name}@{}`",
                first.entry().version.major
            ))));
        }
        [] => {
            return Err(Rejection::new(
                RejectCode::Disabled,
                format!("tool `{name}` has no enabled entry"),
            ));
        }
    };
    if tool.is_stale() {
        return Err(Rejection::new(
            RejectCode::StaleDescriptor,
            format!("tool `{name}` changed since the operator pinned it and is quarantined"),
        )
        .with_hint(Some(
            format!("the operator can review the change with `toolgate tools diff {name}` and re-pin it with `toolgate tools pin {name}`"),
        )));
    }
    if let Some(available) = &tool.entry().availability
        && let Err(reason) = available()
    {
        return Err(Rejection::new(
            RejectCode::Unavailable,
            format!("tool `{name}` is unavailable: {reason}"),
        ));
    }
    Ok(Arc::clone(tool))
}

fn backticked<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let list: Vec<String> = names.map(|n| format!("`{n}`")).collect();
    if list.is_empty() {
        "none".to_owned()
    } else {
        list.join(", ")
    }
}
