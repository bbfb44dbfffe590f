//! Wiring: configuration + builtin tools + policy + approval channel → a [`Pipeline`].

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use toolgate_core::{
    ApprovalBroker, Descriptor, PolicyEngine, Recorder, Registry, RegistryBuilder, Sensitivity,
    ToolEntry, WorkspaceId, policy::DEFAULT_POLICY,
};
use toolgate_tools::{Builtin, Confinement};
use toolgate_upstream::{UpstreamSpec, UpstreamTools, Upstreams};
use toolgate_workspace::Workspace;

use crate::config::{Config, ConfigError};

/// Everything configured, before a workspace is chosen.
#[derive(Debug)]
pub struct Gate {
    pub config: Config,
    pub registry: Arc<Registry>,
    pub policy: Arc<PolicyEngine>,
    /// The configured upstream MCP servers, running; `None` when there are none.
    pub upstreams: Option<Upstreams>,
    workspace: Arc<Workspace>,
    /// How commands are confined, resolved once from `[sandbox]`.
    pub confinement: Arc<Confinement>,
    /// Where every outcome goes before it is returned (see [`Gate::with_audit_log`]).
    pub recorders: Vec<Arc<dyn Recorder>>,
}

impl Gate {
    /// Loads and checks the configuration and policy; starts the upstreams and waits for their
    /// first tool lists; builds the registry over `workspace`.
    pub fn build(config: Config, workspace: Arc<Workspace>) -> Result<Gate, ConfigError> {
        let confinement = Arc::new(config.confinement()?);
        let specs = upstream_specs(&config)?;
        let upstreams = if specs.is_empty() {
            None
        } else {
            let upstreams = crate::upstream::start_upstreams(specs)
                .map_err(|e| config.error(format!("{e:#}")))?;
            upstreams.wait_started();
            Some(upstreams)
        };
        let (registry, policy) = assemble(&config, &workspace, &confinement, upstreams.as_ref())?;
        let profiles = registry.profiles();
        for profile in &config.file.approval.elicitation {
            if !profiles.contains(profile.get_ref().as_str()) {
                let known: Vec<&str> = profiles.iter().copied().collect();
                return Err(config.error_at(
                    profile.span(),
                    format!(
                        "[approval] elicitation names unknown profile `{}`; profiles: {}",
                        profile.get_ref(),
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(Gate {
            config,
            registry: Arc::new(registry),
            policy: Arc::new(policy),
            upstreams,
            workspace,
            confinement,
            recorders: Vec::new(),
        })
    }

    /// A pipeline over the registry as it stands now: upstream tool lists change while the
    /// gate runs, and an entry whose upstream changed its descriptor becomes stale.
    pub fn current_pipeline(
        &self,
        broker: Arc<dyn ApprovalBroker>,
    ) -> Result<toolgate_core::Pipeline, ConfigError> {
        let (registry, policy) = assemble(
            &self.config,
            &self.workspace,
            &self.confinement,
            self.upstreams.as_ref(),
        )?;
        let pipeline = toolgate_core::Pipeline::new(
            Arc::new(registry),
            Arc::new(policy),
            broker,
            WorkspaceId::new(&self.workspace.root().to_string_lossy()),
        )
        .with_bounds(self.config.bounds())
        .with_sensitivity(self.sensitivity(&self.workspace));
        Ok(self.recording(pipeline))
    }

    /// The same gate, recording every outcome in the configured audit log; a log that cannot
    /// be opened, or whose newest record does not verify, stops toolgate from starting.
    pub fn with_audit_log(mut self) -> anyhow::Result<Gate> {
        let log = crate::audit::open_log(&self.config)?;
        self.recorders.push(Arc::new(log));
        Ok(self)
    }

    /// The pipeline for `workspace`, asking `broker` for approvals.
    pub fn pipeline(
        &self,
        workspace: &Workspace,
        broker: Arc<dyn ApprovalBroker>,
    ) -> toolgate_core::Pipeline {
        let pipeline = toolgate_core::Pipeline::new(
            Arc::clone(&self.registry),
            Arc::clone(&self.policy),
            broker,
            WorkspaceId::new(&workspace.root().to_string_lossy()),
        )
        .with_bounds(self.config.bounds())
        .with_sensitivity(self.sensitivity(workspace));
        self.recording(pipeline)
    }

    /// `pipeline`, handing every outcome to this gate's recorders.
    fn recording(&self, pipeline: toolgate_core::Pipeline) -> toolgate_core::Pipeline {
        self.recorders.iter().fold(pipeline, |pipeline, recorder| {
            pipeline.with_recorder(Arc::clone(recorder))
        })
    }

    /// The configuration and policy files, where they live inside `workspace`, join the
    /// sensitive paths: a model must not rewrite the rules it runs under. So does toolgate's
    /// state directory, with all it holds or will hold, when it lies inside the workspace (a
    /// workspace at `$HOME`): a model that read the console's token could approve its own
    /// calls, and one that wrote a grants file could grant them.
    fn sensitivity(&self, workspace: &Workspace) -> Sensitivity {
        let files = self
            .config
            .path
            .iter()
            .cloned()
            .chain(self.config.policy_path().map(|(path, _)| path));
        let inside = files.filter_map(|file| {
            let file = std::fs::canonicalize(file).ok()?;
            let rel = file.strip_prefix(workspace.root()).ok()?;
            Some(rel.to_str()?.to_owned())
        });
        let sensitivity = Sensitivity::with_config_paths(inside.collect::<Vec<_>>());
        let state = crate::console::resolved_state_dir();
        match state
            .as_deref()
            .and_then(|dir| dir.strip_prefix(workspace.root()).ok())
            .and_then(Path::to_str)
        {
            Some(rel) => sensitivity.with_config_dir(rel),
            None => sensitivity,
        }
    }
}

/// The registry and the policy prepared for it.
fn assemble(
    config: &Config,
    workspace: &Arc<Workspace>,
    confinement: &Arc<Confinement>,
    upstreams: Option<&Upstreams>,
) -> Result<(Registry, PolicyEngine), ConfigError> {
    let upstream_tools = upstreams.map(Upstreams::tools).unwrap_or_default();
    let registry = build_registry(
        config,
        toolgate_tools::builtin_confined(Arc::clone(workspace), Arc::clone(confinement)),
        upstream_tools,
    )?;
    let mut policy = load_policy(config)?;
    policy
        .prepare(&registry)
        .map_err(|e| config.error(e.to_string()))?;
    Ok((registry, policy))
}

/// The `[[upstream]]` sections, checked, with their environment read from toolgate's own and
/// the confinement `[sandbox]` asks for (see [`crate::upstream::confinement`]).
pub fn upstream_specs(config: &Config) -> Result<Vec<UpstreamSpec>, ConfigError> {
    let base = config
        .path
        .as_ref()
        .and_then(|p| p.parent())
        .unwrap_or(Path::new("."));
    if config.file.upstreams.is_empty() {
        return Ok(Vec::new());
    }
    let confinement = crate::upstream::confinement(config)?;
    config
        .file
        .upstreams
        .iter()
        .map(|section| {
            let mut spec = section
                .get_ref()
                .check(base, |name| std::env::var(name).ok())
                .map_err(|e| config.error_at(section.span(), e.to_string()))?;
            spec.confinement = confinement.clone();
            Ok(spec)
        })
        .collect()
}

/// Applies the configuration's `[[tool]]` and `[profiles]` sections to the builtin entries,
/// and adds the admitted upstream tools and the upstream candidates.
fn build_registry(
    config: &Config,
    builtins: Vec<Builtin>,
    upstream: UpstreamTools,
) -> Result<Registry, ConfigError> {
    let known: BTreeSet<String> = builtins.iter().map(|b| b.entry.name.clone()).collect();
    let mut entries: Vec<(Descriptor, ToolEntry, Arc<dyn toolgate_core::Executor>)> = builtins
        .into_iter()
        .map(|b| (b.descriptor, b.entry, b.executor))
        .collect();

    for section in &config.file.tools {
        let section = section.get_ref();
        let name = section.name.get_ref();
        let Some((_, entry, _)) = entries.iter_mut().find(|(_, e, _)| e.name == *name) else {
            return Err(config.error_at(
                section.name.span(),
                format!("unknown tool `{name}`; known tools: {}", list(&known)),
            ));
        };
        apply(section, entry);
    }
    entries.extend(upstream.admitted);

    for (profile, section) in &config.file.profiles {
        if profile.get_ref() == toolgate_core::registry::DEFAULT_PROFILE {
            return Err(config.error_at(
                profile.span(),
                "the `default` profile is defined by each tool's `profiles`; it cannot be redefined",
            ));
        }
        for tool in &section.tools {
            let Some((_, entry, _)) = entries
                .iter_mut()
                .find(|(_, e, _)| e.name == *tool.get_ref())
            else {
                return Err(config.error_at(
                    tool.span(),
                    format!(
                        "profile `{}` names unknown tool `{}`; known tools: {}",
                        profile.get_ref(),
                        tool.get_ref(),
                        list(&known)
                    ),
                ));
            };
            entry.profiles.insert(profile.get_ref().clone());
        }
    }

    let mut builder = RegistryBuilder::new();
    for candidate in upstream.candidates {
        builder.candidate(candidate);
    }
    for (descriptor, entry, executor) in entries {
        builder
            .register(descriptor, entry, executor)
            .map_err(|e| config.error(e.to_string()))?;
    }
    builder.build().map_err(|e| config.error(e.to_string()))
}

fn apply(section: &crate::config::ToolSection, entry: &mut ToolEntry) {
    if let Some(v) = section.enabled {
        entry.enabled = v;
    }
    if let Some(v) = section.version {
        entry.version = v;
    }
    if let Some(v) = &section.capability {
        entry.capability.clone_from(v);
    }
    if let Some(v) = section.effect {
        entry.effect = Some(v);
    }
    if let Some(v) = &section.surfaces {
        entry.surfaces.clone_from(v);
    }
    if let Some(v) = &section.profiles {
        entry.profiles.clone_from(v);
    }
    if let Some(v) = section.approval {
        entry.approval = v;
    }
    if let Some(v) = &section.description {
        entry.description = Some(v.clone());
    }
    if let Some(v) = section.timeout_ms {
        entry.limits.timeout_ms = v;
    }
    if let Some(v) = section.default_timeout_ms {
        entry.limits.default_timeout_ms = Some(v);
    }
    if let Some(v) = section.max_output_bytes {
        entry.limits.max_output_bytes = v;
    }
    if let Some(v) = section.max_results {
        entry.limits.max_results = v;
    }
}

/// The default policy (unless turned off) and the operator's file. A policy file that cannot
/// be read or parsed stops toolgate from starting.
fn load_policy(config: &Config) -> Result<PolicyEngine, ConfigError> {
    let mut sources: Vec<(String, String)> = Vec::new();
    if config.default_policy() {
        sources.push(("<default policy>".to_owned(), DEFAULT_POLICY.to_owned()));
    }
    if let Some((path, span)) = config.policy_path() {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            config.error_at(
                span,
                format!("cannot read policy file `{}`: {e}", path.display()),
            )
        })?;
        sources.push((path.display().to_string(), text));
    }
    let borrowed: Vec<(&str, &str)> = sources
        .iter()
        .map(|(name, text)| (name.as_str(), text.as_str()))
        .collect();
    PolicyEngine::from_sources(&borrowed).map_err(|e| ConfigError {
        file: config.display_path(),
        line: 0,
        message: format!("bad policy: {e}"),
    })
}

fn list(names: &BTreeSet<String>) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Opens `root` as a workspace, as a configuration-level error.
pub fn open_workspace(root: &Path) -> Result<Arc<Workspace>, anyhow::Error> {
    Workspace::open(root)
        .map(Arc::new)
        .map_err(|e| anyhow::anyhow!("workspace `{}`: {e}", root.display()))
}
