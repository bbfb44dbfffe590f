//! What the configuration makes of the tools, checked once: the builtin tools with `[[tool]]`
//! applied, and the profiles `[profiles]` adds tools to.
//!
//! Every name in the file that must be a tool or a profile is checked here, at its line:
//! `[[tool]] name`, `[profiles.NAME] tools`, `[approval] elicitation`, `[[serve.token]]
//! profile` and `[[hook]] tools`. The tools that exist are the builtins and the admitted upstream tools, which are
//! known from their pins before any upstream runs, so a mistake stops toolgate before an
//! upstream process exists; the registries built later, one for each tool list the upstreams
//! serve, hold the same names and cannot fail these checks.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use toolgate_core::registry::{DEFAULT_PROFILE, READONLY_PROFILE};
use toolgate_core::{Descriptor, Executor, Registry, RegistryBuilder, RegistryError, ToolEntry};
use toolgate_tools::Builtin;
use toolgate_upstream::UpstreamTools;

use super::{ConfigError, Settings};

/// One registry entry: what the model sees, the operator's entry, who runs it.
type Entry = (Descriptor, ToolEntry, Arc<dyn Executor>);

/// The builtin tools as configured, and the profiles `[profiles]` adds each tool to (see
/// [`Settings::configured_tools`]).
#[derive(Debug)]
pub struct ConfiguredTools {
    builtins: Vec<Entry>,
    /// Tool name → the `[profiles.NAME]` sections that add it.
    added: BTreeMap<String, BTreeSet<String>>,
}

impl ConfiguredTools {
    /// The registry of these tools and `upstream`'s admitted tools and candidates.
    pub fn registry(&self, upstream: UpstreamTools) -> Result<Registry, RegistryError> {
        let mut builder = RegistryBuilder::new();
        for candidate in upstream.candidates {
            builder.candidate(candidate);
        }
        let builtins = self.builtins.iter().map(|(descriptor, entry, executor)| {
            (descriptor.clone(), entry.clone(), Arc::clone(executor))
        });
        for (descriptor, mut entry, executor) in builtins.chain(upstream.admitted) {
            if let Some(profiles) = self.added.get(&entry.name) {
                entry.profiles.extend(profiles.iter().cloned());
            }
            builder.register(descriptor, entry, executor)?;
        }
        builder.build()
    }
}

impl Settings {
    /// `builtins` with the `[[tool]]` sections applied, and every name of a tool or a profile
    /// in the file checked against the tools that exist: the builtins and the admitted
    /// upstream tools, as their pins say, which are the same whatever the upstreams serve.
    pub fn configured_tools(&self, builtins: Vec<Builtin>) -> Result<ConfiguredTools, ConfigError> {
        let known: BTreeSet<String> = builtins.iter().map(|b| b.entry.name.clone()).collect();
        let mut entries: Vec<Entry> = builtins
            .into_iter()
            .map(|b| (b.descriptor, b.entry, b.executor))
            .collect();
        for tool in &self.tools {
            let Some((_, entry, _)) = entries.iter_mut().find(|(_, e, _)| e.name == tool.name)
            else {
                return Err(self.error_in(
                    tool.file.as_deref(),
                    tool.line,
                    format!(
                        "unknown tool `{}`{} known tools: {}",
                        tool.name,
                        guess(&tool.name, known.iter().map(String::as_str)),
                        list(&known)
                    ),
                ));
            };
            tool.apply(entry);
        }
        // The same entries whatever the upstreams serve: only their state follows the upstream.
        let admitted: Vec<&ToolEntry> = self
            .upstreams
            .iter()
            .flat_map(|spec| &spec.admitted)
            .map(|admission| &admission.entry)
            .collect();
        let all = || {
            entries
                .iter()
                .map(|(_, e, _)| e)
                .chain(admitted.iter().copied())
        };
        let mut added: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for profile in &self.profiles {
            for (tool, line) in &profile.tools {
                if !all().any(|e| e.name == *tool) {
                    return Err(self.error_in(
                        profile.file.as_deref(),
                        *line,
                        format!(
                            "profile `{}` names unknown tool `{tool}`{} known tools: {}",
                            profile.name,
                            guess(tool, all().map(|e| e.name.as_str())),
                            list(&known)
                        ),
                    ));
                }
                added
                    .entry(tool.clone())
                    .or_default()
                    .insert(profile.name.clone());
            }
        }
        // A hook on a tool that does not exist would never run: a misspelt name is refused.
        for hook in &self.hooks {
            for tool in hook.tools.iter().flatten() {
                if !all().any(|e| e.name == *tool) {
                    return Err(self.error_at_line(
                        hook.tools_line,
                        format!(
                            "hook `{}` names unknown tool `{tool}`{} known tools: {}",
                            hook.name,
                            guess(tool, all().map(|e| e.name.as_str())),
                            list(&known)
                        ),
                    ));
                }
            }
        }
        // As `Registry::profiles` will say.
        let mut profiles: BTreeSet<&str> = [DEFAULT_PROFILE, READONLY_PROFILE].into();
        profiles.extend(all().flat_map(|e| e.profiles.iter().map(String::as_str)));
        profiles.extend(added.values().flatten().map(String::as_str));
        let unknown = |profile: &str| {
            (!profiles.contains(profile)).then(|| {
                let known: Vec<&str> = profiles.iter().copied().collect();
                format!(
                    "unknown profile `{profile}`{} profiles: {}",
                    guess(profile, known.iter().copied()),
                    known.join(", ")
                )
            })
        };
        for (profile, line) in &self.approval.elicitation {
            if let Some(message) = unknown(profile) {
                return Err(
                    self.error_at_line(*line, format!("[approval] elicitation names {message}"))
                );
            }
        }
        for token in &self.serve.tokens {
            if let Some(message) = unknown(&token.profile) {
                return Err(self.error_at_line(
                    token.profile_line,
                    format!("[[serve.token]] profile: {message}"),
                ));
            }
        }
        Ok(ConfiguredTools {
            builtins: entries,
            added,
        })
    }
}

/// What follows "unknown tool `name`" or "unknown profile `name`" in a configuration error:
/// `: did you mean `x`?` when one of `candidates` is close to a misspelt `name`, else `;`.
fn guess<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    toolgate_core::hint::did_you_mean(name, candidates).map_or_else(
        || ";".to_owned(),
        |found| format!(": did you mean `{found}`?"),
    )
}

fn list(names: &BTreeSet<String>) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
