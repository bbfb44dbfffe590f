//! Stage 2's ground truth: descriptors are candidates, registry entries make them callable.
//!
//! A [`Descriptor`] is what a tool *claims* (name, description, schemas, annotations). A
//! [`ToolEntry`] is what the operator *allows* (version, pinned digest, effect class, surfaces,
//! profiles, approval, limits, enabled). Only a descriptor with an entry is a [`Tool`]; the rest
//! stay candidates, listed for the operator and never shown to a model.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::canonical::{Digest, canonical_json, sha256_digest};
use crate::pipeline::Executor;
use crate::schema::{SchemaBounds, SchemaError, ToolSchema};

/// The profile every entry is in unless it says otherwise.
pub const DEFAULT_PROFILE: &str = "default";
/// The built-in profile for sub-agents: read, list, search and git inspection only.
pub const READONLY_PROFILE: &str = "readonly";

/// What a tool claims to be. Its digest covers every field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

impl Descriptor {
    /// A descriptor with no title, output schema or annotations.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Descriptor {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema,
            output_schema: None,
            annotations: None,
        }
    }

    /// SHA-256 of the canonical JSON of the whole descriptor.
    pub fn digest(&self) -> Digest {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        sha256_digest(canonical_json(&value).as_bytes())
    }
}

/// What a call may do to the world. Ordered from least to most consequential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectClass {
    ReadOnly,
    LocalWrite,
    Network,
    Irreversible,
}

impl EffectClass {
    pub fn as_str(self) -> &'static str {
        match self {
            EffectClass::ReadOnly => "read_only",
            EffectClass::LocalWrite => "local_write",
            EffectClass::Network => "network",
            EffectClass::Irreversible => "irreversible",
        }
    }
}

impl fmt::Display for EffectClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An effect class's name that names none.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown effect class `{0}`")]
pub struct UnknownEffectClass(pub String);

impl FromStr for EffectClass {
    type Err = UnknownEffectClass;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            EffectClass::ReadOnly,
            EffectClass::LocalWrite,
            EffectClass::Network,
            EffectClass::Irreversible,
        ]
        .into_iter()
        .find(|e| e.as_str() == s)
        .ok_or_else(|| UnknownEffectClass(s.to_owned()))
    }
}

/// How an entry asks for a person's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// The policy decides; a workspace-scoped grant may be remembered for local writes.
    #[default]
    Policy,
    /// Every call needs a fresh approval, whatever the policy says; nothing is remembered.
    EachCall,
}

/// Bounds an executor must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wall time for one call: the most any call may have.
    pub timeout_ms: u64,
    /// Wall time a call gets when it does not ask for less (tools whose arguments may ask for a
    /// time, like `run_command`); `None` means `timeout_ms`. Never more than `timeout_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_timeout_ms: Option<u64>,
    /// Largest output, in bytes, after redaction.
    pub max_output_bytes: usize,
    /// Most results (matches, entries) one call may return.
    pub max_results: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: 30_000,
            default_timeout_ms: None,
            max_output_bytes: 512 * 1024,
            max_results: 1_000,
        }
    }
}

/// An entry's version, `major.minor`. Invocations may name a major version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for Version {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (major, minor) = s.split_once('.').unwrap_or((s, "0"));
        match (major.parse(), minor.parse()) {
            (Ok(major), Ok(minor)) => Ok(Version { major, minor }),
            _ => Err(format!(
                "`{s}` is not a version; write `MAJOR` or `MAJOR.MINOR`"
            )),
        }
    }
}

impl Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Whether a tool can run right now, and if not, why.
pub type Availability = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What the operator allows for one tool.
#[derive(Clone)]
pub struct ToolEntry {
    pub name: String,
    pub version: Version,
    /// The descriptor digest this entry accepts; `None` accepts the descriptor registered with it
    /// (builtin tools, whose descriptors ship with the binary).
    pub pinned_digest: Option<Digest>,
    /// What the tool is for, in the operator's words (`workspace_read`, `vcs_inspect`).
    pub capability: String,
    /// `None` is treated as [`EffectClass::Irreversible`].
    pub effect: Option<EffectClass>,
    pub surfaces: BTreeSet<crate::invocation::Surface>,
    pub profiles: BTreeSet<String>,
    pub approval: ApprovalMode,
    pub limits: Limits,
    pub enabled: bool,
    /// Replaces the descriptor's description in listings shown to a model.
    pub description: Option<String>,
    pub availability: Option<Availability>,
}

impl fmt::Debug for ToolEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolEntry")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("pinned_digest", &self.pinned_digest)
            .field("capability", &self.capability)
            .field("effect", &self.effect)
            .field("surfaces", &self.surfaces)
            .field("profiles", &self.profiles)
            .field("approval", &self.approval)
            .field("limits", &self.limits)
            .field("enabled", &self.enabled)
            .field("description", &self.description)
            .field("availability", &self.availability.is_some())
            .finish()
    }
}

impl ToolEntry {
    /// An enabled entry, version 1.0, on every surface, in the default profile, with no effect
    /// class (so treated as irreversible until the operator says otherwise).
    pub fn new(name: impl Into<String>, capability: impl Into<String>) -> Self {
        ToolEntry {
            name: name.into(),
            version: Version { major: 1, minor: 0 },
            pinned_digest: None,
            capability: capability.into(),
            effect: None,
            surfaces: crate::invocation::Surface::ALL.into_iter().collect(),
            profiles: BTreeSet::from([DEFAULT_PROFILE.to_owned()]),
            approval: ApprovalMode::Policy,
            limits: Limits::default(),
            enabled: true,
            description: None,
            availability: None,
        }
    }

    /// The effect class that governs this entry: an entry without one is irreversible.
    pub fn effect(&self) -> EffectClass {
        self.effect.unwrap_or(EffectClass::Irreversible)
    }
}

/// A registered tool: descriptor, entry, compiled schema and the executor that owns it.
///
/// Its fields are private to this crate: anyone may read what the tool is, but its executor
/// is reached only by the pipeline, so that holding a tool is never a way to run it.
#[derive(Debug)]
pub struct Tool {
    pub(crate) descriptor: Descriptor,
    pub(crate) entry: ToolEntry,
    pub(crate) digest: Digest,
    pub(crate) schema: ToolSchema,
    pub(crate) executor: Arc<dyn Executor>,
}

impl Tool {
    /// What the tool claims to be.
    pub fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    /// What the operator allows it.
    pub fn entry(&self) -> &ToolEntry {
        &self.entry
    }

    /// The digest of its descriptor as registered.
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// Its compiled input schema.
    pub fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    /// The descriptor no longer matches the digest the entry pinned.
    pub fn is_stale(&self) -> bool {
        self.entry
            .pinned_digest
            .as_ref()
            .is_some_and(|pin| *pin != self.digest)
    }

    /// The description a model sees: the operator's rewrite, or the descriptor's own.
    pub fn description(&self) -> &str {
        self.entry
            .description
            .as_deref()
            .unwrap_or(&self.descriptor.description)
    }
}

/// Why a registry could not be built.
#[derive(Debug, Error)]
pub enum RegistryError {
    #[error("entry `{entry}` names descriptor `{descriptor}`; they must match")]
    NameMismatch { entry: String, descriptor: String },
    #[error("tool `{name}` version {version} is registered twice")]
    Duplicate { name: String, version: Version },
    #[error("schema of tool `{name}`: {source}")]
    Schema { name: String, source: SchemaError },
    #[error("tool `{name}` is `{effect}` and cannot be in the `readonly` profile")]
    NotReadOnly { name: String, effect: EffectClass },
    #[error("tool name `{0}` must be 1–64 ASCII letters, digits, `_`, `-` or `.`")]
    BadName(String),
    #[error("tool `{0}` is allowed on no surface")]
    NoSurface(String),
    #[error("tool `{name}`: default_timeout_ms {default} exceeds timeout_ms {max}")]
    DefaultTimeout {
        name: String,
        default: u64,
        max: u64,
    },
}

/// Collects descriptors, entries and executors, then builds an immutable [`Registry`].
#[derive(Debug, Default)]
pub struct RegistryBuilder {
    tools: Vec<Tool>,
    candidates: Vec<Descriptor>,
    bounds: SchemaBounds,
}

impl RegistryBuilder {
    pub fn new() -> Self {
        RegistryBuilder::default()
    }

    /// Schema bounds for the descriptors registered after this call.
    pub fn schema_bounds(&mut self, bounds: SchemaBounds) -> &mut Self {
        self.bounds = bounds;
        self
    }

    /// Registers `descriptor` under `entry`, owned by `executor`.
    pub fn register(
        &mut self,
        descriptor: Descriptor,
        entry: ToolEntry,
        executor: Arc<dyn Executor>,
    ) -> Result<&mut Self, RegistryError> {
        if entry.name != descriptor.name {
            return Err(RegistryError::NameMismatch {
                entry: entry.name,
                descriptor: descriptor.name,
            });
        }
        let well_formed = (1..=64).contains(&entry.name.len())
            && entry
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !well_formed {
            return Err(RegistryError::BadName(entry.name));
        }
        if entry.surfaces.is_empty() {
            return Err(RegistryError::NoSurface(entry.name));
        }
        if let Some(default) = entry.limits.default_timeout_ms
            && default > entry.limits.timeout_ms
        {
            return Err(RegistryError::DefaultTimeout {
                default,
                max: entry.limits.timeout_ms,
                name: entry.name,
            });
        }
        if entry.profiles.contains(READONLY_PROFILE) && entry.effect() != EffectClass::ReadOnly {
            return Err(RegistryError::NotReadOnly {
                effect: entry.effect(),
                name: entry.name,
            });
        }
        if self
            .tools
            .iter()
            .any(|t| t.entry.name == entry.name && t.entry.version.major == entry.version.major)
        {
            return Err(RegistryError::Duplicate {
                name: entry.name,
                version: entry.version,
            });
        }
        let schema =
            ToolSchema::compile(&descriptor.input_schema, &self.bounds).map_err(|source| {
                RegistryError::Schema {
                    name: entry.name.clone(),
                    source,
                }
            })?;
        self.tools.push(Tool {
            digest: descriptor.digest(),
            descriptor,
            entry,
            schema,
            executor,
        });
        Ok(self)
    }

    /// Records a descriptor that has no entry: visible to the operator, never callable.
    pub fn candidate(&mut self, descriptor: Descriptor) -> &mut Self {
        self.candidates.push(descriptor);
        self
    }

    pub fn build(self) -> Result<Registry, RegistryError> {
        let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (index, tool) in self.tools.iter().enumerate() {
            by_name
                .entry(tool.entry.name.clone())
                .or_default()
                .push(index);
        }
        Ok(Registry {
            tools: self.tools.into_iter().map(Arc::new).collect(),
            by_name,
            candidates: self.candidates,
        })
    }
}

/// The operator's approved capability map. Immutable once built; swap the whole registry to
/// change it, so that a call in flight keeps the entry it was resolved to.
#[derive(Debug)]
pub struct Registry {
    tools: Vec<Arc<Tool>>,
    by_name: BTreeMap<String, Vec<usize>>,
    candidates: Vec<Descriptor>,
}

impl Registry {
    /// Every registered tool, in registration order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.iter()
    }

    /// Descriptors without an entry.
    pub fn candidates(&self) -> &[Descriptor] {
        &self.candidates
    }

    /// The tools a model in `profile` is shown: enabled, in the profile, not stale, available.
    pub fn visible(&self, profile: &str) -> impl Iterator<Item = &Arc<Tool>> {
        self.tools.iter().filter(move |t| {
            t.entry.enabled
                && t.entry.profiles.contains(profile)
                && !t.is_stale()
                && t.entry
                    .availability
                    .as_ref()
                    .is_none_or(|available| available().is_ok())
        })
    }

    /// Every profile some entry is in, plus the built-in two.
    pub fn profiles(&self) -> BTreeSet<&str> {
        let mut profiles: BTreeSet<&str> = [DEFAULT_PROFILE, READONLY_PROFILE].into();
        for tool in &self.tools {
            profiles.extend(tool.entry.profiles.iter().map(String::as_str));
        }
        profiles
    }

    /// Whether every entry named `name` (and there is one) has an executor that is
    /// [brief](crate::Executor::brief) or [forwards](crate::Executor::forwards) its calls.
    pub fn all_brief_or_forwarding(&self, name: &str) -> bool {
        self.by_name.get(name).is_some_and(|indices| {
            indices.iter().all(|&i| {
                self.tools
                    .get(i)
                    .is_some_and(|t| t.executor.brief() || t.executor.forwards())
            })
        })
    }

    /// Every entry named `name`, in registration order; `None` when none is.
    pub(crate) fn named(&self, name: &str) -> Option<impl Iterator<Item = &Arc<Tool>>> {
        let indices = self.by_name.get(name)?;
        Some(indices.iter().filter_map(|&i| self.tools.get(i)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::invocation::{NormalizeBounds, RawCall, Surface, normalize};
    use crate::outcome::{ToolError, ToolOutput};
    use crate::pipeline::{Call, ExecContext};
    use crate::rejection::{RejectCode, Rejection};
    use serde_json::json;

    /// An executor that does nothing, for the crate's tests that need a tool and never mind
    /// what it does.
    #[derive(Debug)]
    pub(crate) struct Noop;
    impl Executor for Noop {
        fn execute(&self, _: &Call<'_, Self>, _: &ExecContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::new(Value::Null))
        }
    }

    fn descriptor(name: &str) -> Descriptor {
        Descriptor::new(name, format!("the {name} tool"), json!({"type": "object"}))
    }

    fn read_only(name: &str) -> ToolEntry {
        let mut entry = ToolEntry::new(name, "test");
        entry.effect = Some(EffectClass::ReadOnly);
        entry
    }

    fn resolve(registry: &Registry, tool: &str, profile: &str) -> Result<Arc<Tool>, Rejection> {
        let raw = RawCall::text(tool, "{}", Surface::Chat).in_profile(profile);
        crate::pipeline::resolve::resolve(
            registry,
            &normalize(raw, &NormalizeBounds::default()).unwrap(),
        )
    }

    #[test]
    fn effect_classes_round_trip_and_order_by_consequence() {
        let all = [
            EffectClass::ReadOnly,
            EffectClass::LocalWrite,
            EffectClass::Network,
            EffectClass::Irreversible,
        ];
        for effect in all {
            assert_eq!(effect.to_string().parse::<EffectClass>(), Ok(effect));
            assert_eq!(
                serde_json::to_value(effect).unwrap(),
                json!(effect.as_str())
            );
        }
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        let unknown = "dangerous".parse::<EffectClass>().unwrap_err();
        assert_eq!(unknown.to_string(), "unknown effect class `dangerous`");
        assert_eq!(ToolEntry::new("x", "y").effect(), EffectClass::Irreversible);
    }

    #[test]
    fn versions_parse_and_deserialize() {
        assert_eq!("2".parse(), Ok(Version { major: 2, minor: 0 }));
        assert_eq!("1.3".parse(), Ok(Version { major: 1, minor: 3 }));
        assert!("1.x".parse::<Version>().is_err());
        assert!("".parse::<Version>().is_err());
        let version: Version = serde_json::from_value(json!("4.2")).unwrap();
        assert_eq!(version, Version { major: 4, minor: 2 });
        assert_eq!(serde_json::to_value(version).unwrap(), json!("4.2"));
        assert!(serde_json::from_value::<Version>(json!("four")).is_err());
    }

    #[test]
    fn entries_debug_without_their_closure() {
        let mut entry = read_only("dbg");
        entry.availability = Some(Arc::new(|| Ok(())));
        let text = format!("{entry:?}");
        assert!(text.starts_with("ToolEntry { name: \"dbg\""), "{text}");
        assert!(text.contains("availability: true"), "{text}");
    }

    #[test]
    fn the_model_sees_the_operators_description() {
        let mut builder = RegistryBuilder::new();
        let mut rewritten = read_only("a");
        rewritten.description = Some("Use this to read.".into());
        builder
            .register(descriptor("a"), rewritten, Arc::new(Noop))
            .unwrap();
        builder
            .register(descriptor("b"), read_only("b"), Arc::new(Noop))
            .unwrap();
        let registry = builder.build().unwrap();
        let descriptions: Vec<&str> = registry.tools().map(|t| t.description()).collect();
        assert_eq!(descriptions, ["Use this to read.", "the b tool"]);
    }

    #[test]
    fn registration_rules() {
        let mut builder = RegistryBuilder::new();
        // Writes may be in the default profile, not in `readonly`.
        let mut write = read_only("w");
        write.effect = Some(EffectClass::LocalWrite);
        builder
            .register(descriptor("w"), write.clone(), Arc::new(Noop))
            .unwrap();
        let mut sneaky = write.clone();
        sneaky.name = "w2".into();
        sneaky.profiles.insert(READONLY_PROFILE.into());
        let error = builder
            .register(descriptor("w2"), sneaky, Arc::new(Noop))
            .unwrap_err();
        assert!(
            matches!(error, RegistryError::NotReadOnly { .. }),
            "{error}"
        );
        let error = builder
            .register(descriptor("w"), write.clone(), Arc::new(Noop))
            .unwrap_err();
        assert!(matches!(error, RegistryError::Duplicate { .. }), "{error}");
        let mut next = write.clone();
        next.version = Version { major: 2, minor: 0 };
        builder
            .register(descriptor("w"), next, Arc::new(Noop))
            .unwrap();
        let error = builder
            .register(descriptor("v"), write.clone(), Arc::new(Noop))
            .unwrap_err();
        assert!(
            matches!(error, RegistryError::NameMismatch { .. }),
            "{error}"
        );
        let mut nowhere = read_only("n");
        nowhere.surfaces.clear();
        let error = builder
            .register(descriptor("n"), nowhere, Arc::new(Noop))
            .unwrap_err();
        assert!(matches!(error, RegistryError::NoSurface(_)), "{error}");
        for bad in ["", "has space", "ünïcode", &"x".repeat(65)] {
            let error = builder
                .register(descriptor(bad), read_only(bad), Arc::new(Noop))
                .unwrap_err();
            assert!(matches!(error, RegistryError::BadName(_)), "{bad}: {error}");
        }
        builder
            .register(
                descriptor(&"x".repeat(64)),
                read_only(&"x".repeat(64)),
                Arc::new(Noop),
            )
            .unwrap();
    }

    #[test]
    fn schema_bounds_apply_to_later_registrations() {
        let mut builder = RegistryBuilder::new();
        let schema = json!({"type": "object", "properties": {"a": {"enum": [1, 2, 3]}}});
        builder.schema_bounds(SchemaBounds {
            max_enum_values: 2,
            ..SchemaBounds::default()
        });
        let error = builder
            .register(
                Descriptor::new("e", "d", schema),
                read_only("e"),
                Arc::new(Noop),
            )
            .unwrap_err();
        assert!(matches!(error, RegistryError::Schema { .. }), "{error}");
    }

    #[test]
    fn candidates_are_listed_but_never_resolved() {
        let mut builder = RegistryBuilder::new();
        builder.candidate(descriptor("upstream__delete"));
        let registry = builder.build().unwrap();
        assert_eq!(registry.candidates(), [descriptor("upstream__delete")]);
        assert_eq!(
            resolve(&registry, "upstream__delete", "default")
                .unwrap_err()
                .code(),
            RejectCode::UnknownTool
        );
        assert_eq!(registry.visible("default").count(), 0);
    }

    #[test]
    fn visibility_needs_every_condition() {
        let mut builder = RegistryBuilder::new();
        builder
            .register(descriptor("shown"), read_only("shown"), Arc::new(Noop))
            .unwrap();
        let mut off = read_only("off");
        off.enabled = false;
        builder
            .register(descriptor("off"), off, Arc::new(Noop))
            .unwrap();
        let mut elsewhere = read_only("elsewhere");
        elsewhere.profiles = ["ops".to_owned()].into();
        builder
            .register(descriptor("elsewhere"), elsewhere, Arc::new(Noop))
            .unwrap();
        let mut stale = read_only("stale");
        stale.pinned_digest = Some(descriptor("something else").digest());
        builder
            .register(descriptor("stale"), stale, Arc::new(Noop))
            .unwrap();
        let mut pinned = read_only("pinned");
        pinned.pinned_digest = Some(descriptor("pinned").digest());
        builder
            .register(descriptor("pinned"), pinned, Arc::new(Noop))
            .unwrap();
        let mut down = read_only("down");
        down.availability = Some(Arc::new(|| Err("offline".into())));
        builder
            .register(descriptor("down"), down, Arc::new(Noop))
            .unwrap();
        let registry = builder.build().unwrap();
        let visible: Vec<&str> = registry
            .visible("default")
            .map(|t| t.entry.name.as_str())
            .collect();
        assert_eq!(visible, ["shown", "pinned"]);
        let ops: Vec<&str> = registry
            .visible("ops")
            .map(|t| t.entry.name.as_str())
            .collect();
        assert_eq!(ops, ["elsewhere"]);
        assert_eq!(
            registry.profiles().into_iter().collect::<Vec<_>>(),
            ["default", "ops", "readonly"]
        );
    }

    #[test]
    fn unknown_tools_list_what_is_there() {
        let mut builder = RegistryBuilder::new();
        builder
            .register(descriptor("alpha"), read_only("alpha"), Arc::new(Noop))
            .unwrap();
        builder
            .register(descriptor("beta"), read_only("beta"), Arc::new(Noop))
            .unwrap();
        let registry = builder.build().unwrap();
        let rejection = resolve(&registry, "zzz", "default").unwrap_err();
        assert_eq!(rejection.message(), "no tool `zzz` is registered");
        assert_eq!(rejection.hint(), Some("available tools: `alpha`, `beta`"));
        let empty = RegistryBuilder::new().build().unwrap();
        let rejection = resolve(&empty, "zzz", "default").unwrap_err();
        assert_eq!(rejection.hint(), Some("available tools: none"));
    }
}
