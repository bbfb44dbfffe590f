//! The pipeline builder: [`Settings`] + builtin tools + upstream tools + policy → a
//! [`Pipeline`](toolgate_core::Pipeline), the same for every command and for the tests.
//!
//! [`Gate::configured`] starts nothing: an admitted upstream tool is registered from its pin,
//! as it is before its upstream is first reached. [`Gate::running`] checks the same first, so
//! that a mistake stops toolgate before any upstream process exists, then starts the
//! upstreams and registers what they serve.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use toolgate_core::{
    ApprovalBroker, Descriptor, GrantLedger, GrantTimes, PolicyEngine, Recorder, Registry,
    RegistryBuilder, Sensitivity, ToolEntry, WorkspaceId,
};
use toolgate_tools::Builtin;
use toolgate_upstream::{UpstreamTools, Upstreams};
use toolgate_workspace::Workspace;

use crate::settings::{ConfigError, Settings};

/// Everything configured, over one workspace.
#[derive(Debug)]
pub struct Gate {
    pub settings: Arc<Settings>,
    pub registry: Arc<Registry>,
    pub policy: Arc<PolicyEngine>,
    /// The configured upstream MCP servers, running; `None` when none was started.
    pub upstreams: Option<Upstreams>,
    workspace: Arc<Workspace>,
    /// Where every outcome goes before it is returned (see [`Gate::with_audit_log`]).
    pub recorders: Vec<Arc<dyn Recorder>>,
    /// The one ledger every pipeline of this gate issues grants from and redeems them
    /// against, so that a standing grant outlives a rebuilt pipeline; the approval console
    /// shares it (see `RunningConsole::attach`).
    pub grants: Arc<GrantLedger>,
    /// How long the grants issued from a person's decision last.
    pub grant_times: GrantTimes,
}

impl Gate {
    /// The registry and policy `settings` describe over `workspace`, with nothing started:
    /// admitted upstream tools are registered from their pins, and no upstream lists
    /// candidates.
    pub fn configured(
        settings: Arc<Settings>,
        workspace: Arc<Workspace>,
    ) -> Result<Gate, ConfigError> {
        let pinned = crate::upstream::pinned_tools(&settings.upstreams);
        let (registry, policy) = assemble(&settings, &workspace, pinned)?;
        let profiles = registry.profiles();
        for (profile, line) in &settings.approval.elicitation {
            if !profiles.contains(profile.as_str()) {
                let known: Vec<&str> = profiles.iter().copied().collect();
                return Err(settings.error_at_line(
                    *line,
                    format!(
                        "[approval] elicitation names unknown profile `{profile}`; profiles: {}",
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(Gate {
            settings,
            registry: Arc::new(registry),
            policy: Arc::new(policy),
            upstreams: None,
            workspace,
            recorders: Vec::new(),
            grants: Arc::default(),
            grant_times: GrantTimes::default(),
        })
    }

    /// As [`Gate::configured`], then [`Gate::start`]ed.
    pub fn running(
        settings: Arc<Settings>,
        workspace: Arc<Workspace>,
    ) -> Result<Gate, ConfigError> {
        Gate::configured(settings, workspace)?.start()
    }

    /// Starts the upstreams, waits for their first tool lists, and registers what they serve.
    pub fn start(mut self) -> Result<Gate, ConfigError> {
        if self.settings.upstreams.is_empty() || self.upstreams.is_some() {
            return Ok(self);
        }
        let upstreams = crate::upstream::start_upstreams(self.settings.upstreams.clone())
            .map_err(|e| self.settings.error(format!("{e:#}")))?;
        upstreams.wait_started();
        let (registry, policy) = assemble(&self.settings, &self.workspace, upstreams.tools())?;
        self.registry = Arc::new(registry);
        self.policy = Arc::new(policy);
        self.upstreams = Some(upstreams);
        Ok(self)
    }

    /// A pipeline over the registry as it stands now: upstream tool lists change while the
    /// gate runs, and an entry whose upstream changed its descriptor becomes stale.
    pub fn current_pipeline(
        &self,
        broker: Arc<dyn ApprovalBroker>,
    ) -> Result<toolgate_core::Pipeline, ConfigError> {
        let tools = match &self.upstreams {
            Some(upstreams) => upstreams.tools(),
            None => crate::upstream::pinned_tools(&self.settings.upstreams),
        };
        let (registry, policy) = assemble(&self.settings, &self.workspace, tools)?;
        let pipeline = toolgate_core::Pipeline::new(
            Arc::new(registry),
            Arc::new(policy),
            broker,
            WorkspaceId::new(&self.workspace.root().to_string_lossy()),
        )
        .with_bounds(self.settings.bounds)
        .with_sensitivity(self.sensitivity(&self.workspace));
        Ok(self.recording(pipeline))
    }

    /// The same gate, recording every outcome in the configured audit log; a log that cannot
    /// be opened, or whose newest record does not verify, stops toolgate from starting.
    pub fn with_audit_log(mut self, appending: crate::audit::Appending) -> anyhow::Result<Gate> {
        let log = crate::audit::open_log(&self.settings, appending)?;
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
        .with_bounds(self.settings.bounds)
        .with_sensitivity(self.sensitivity(workspace));
        self.recording(pipeline)
    }

    /// `pipeline`, granting in this gate's ledger and handing every outcome to its
    /// recorders.
    fn recording(&self, pipeline: toolgate_core::Pipeline) -> toolgate_core::Pipeline {
        let pipeline = pipeline
            .with_grants(Arc::clone(&self.grants))
            .with_grant_times(self.grant_times);
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
            .settings
            .path()
            .map(Path::to_path_buf)
            .into_iter()
            .chain(self.settings.policy_path.clone());
        let inside = files.filter_map(|file| {
            let file = std::fs::canonicalize(file).ok()?;
            let rel = file.strip_prefix(workspace.root()).ok()?;
            Some(rel.to_str()?.to_owned())
        });
        let sensitivity = Sensitivity::with_config_paths(inside.collect::<Vec<_>>());
        match self
            .settings
            .state_dir
            .resolved
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
    settings: &Settings,
    workspace: &Arc<Workspace>,
    upstream: UpstreamTools,
) -> Result<(Registry, PolicyEngine), ConfigError> {
    let registry = build_registry(
        settings,
        toolgate_tools::builtin_confined(
            Arc::clone(workspace),
            Arc::clone(&settings.sandbox.confinement),
        ),
        upstream,
    )?;
    let mut policy = settings.policy_engine()?;
    policy
        .prepare(&registry)
        .map_err(|e| settings.error(e.to_string()))?;
    Ok((registry, policy))
}

/// Applies the `[[tool]]` and `[profiles]` settings to the builtin entries, and adds the
/// admitted upstream tools and the upstream candidates.
fn build_registry(
    settings: &Settings,
    builtins: Vec<Builtin>,
    upstream: UpstreamTools,
) -> Result<Registry, ConfigError> {
    let known: BTreeSet<String> = builtins.iter().map(|b| b.entry.name.clone()).collect();
    let mut entries: Vec<(Descriptor, ToolEntry, Arc<dyn toolgate_core::Executor>)> = builtins
        .into_iter()
        .map(|b| (b.descriptor, b.entry, b.executor))
        .collect();

    for tool in &settings.tools {
        let Some((_, entry, _)) = entries.iter_mut().find(|(_, e, _)| e.name == tool.name) else {
            return Err(settings.error_at_line(
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
    entries.extend(upstream.admitted);

    for profile in &settings.profiles {
        for (tool, line) in &profile.tools {
            let Some((_, entry, _)) = entries.iter_mut().find(|(_, e, _)| e.name == *tool) else {
                return Err(settings.error_at_line(
                    *line,
                    format!(
                        "profile `{}` names unknown tool `{tool}`{} known tools: {}",
                        profile.name,
                        guess(tool, entries.iter().map(|(_, e, _)| e.name.as_str())),
                        list(&known)
                    ),
                ));
            };
            entry.profiles.insert(profile.name.clone());
        }
    }

    let mut builder = RegistryBuilder::new();
    for candidate in upstream.candidates {
        builder.candidate(candidate);
    }
    for (descriptor, entry, executor) in entries {
        builder
            .register(descriptor, entry, executor)
            .map_err(|e| settings.error(e.to_string()))?;
    }
    builder.build().map_err(|e| settings.error(e.to_string()))
}

/// What follows "unknown tool `name`" in a configuration error: `: did you mean `x`?` when one
/// of `candidates` is close to a misspelt `name`, else `;`.
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

/// Opens `root` as a workspace, as a configuration-level error.
pub fn open_workspace(root: &Path) -> Result<Arc<Workspace>, anyhow::Error> {
    Workspace::open(root)
        .map(Arc::new)
        .map_err(|e| anyhow::anyhow!("workspace `{}`: {e}", root.display()))
}
