//! The pipeline builder: [`Settings`] + builtin tools + upstream tools + policy → a
//! [`Pipeline`](toolgate_core::Pipeline), the same for every command and for the tests.
//!
//! [`Gate::configured`] starts nothing: an admitted upstream tool is registered from its pin,
//! as it is before its upstream is first reached. Every name the configuration gives a tool or
//! a profile is checked there, once (see [`Settings::configured_tools`]), so that a mistake
//! stops toolgate before any upstream process exists; [`Gate::start`] then starts the
//! upstreams and registers what they serve.

use std::path::Path;
use std::sync::Arc;

use toolgate_core::{
    ApprovalBroker, GrantLedger, GrantTimes, Hook, PolicyEngine, Recorder, Registry, Sensitivity,
    WorkspaceId,
};
use toolgate_upstream::{UpstreamTools, Upstreams};
use toolgate_workspace::Workspace;

use crate::settings::{ConfigError, ConfiguredTools, Settings};

/// Everything configured, over one workspace.
#[derive(Debug)]
pub struct Gate {
    pub settings: Arc<Settings>,
    /// The builtin tools as configured, made once: each registry is built from them.
    tools: ConfiguredTools,
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
    /// The `[[hook]]` programs, run over this workspace by every pipeline of this gate.
    hooks: Vec<Arc<dyn Hook>>,
}

impl Gate {
    /// The registry and policy `settings` describe over `workspace`, with nothing started:
    /// admitted upstream tools are registered from their pins, and no upstream lists
    /// candidates.
    ///
    /// A hook or upstream that runs a file a command could change in the workspace is refused
    /// here (see [`HookSpec::outside_workspace`](crate::settings::hooks::HookSpec::outside_workspace) and
    /// [`upstream_files_outside`]).
    pub fn configured(
        settings: Arc<Settings>,
        workspace: Arc<Workspace>,
    ) -> Result<Gate, ConfigError> {
        Gate::assembled(settings, workspace, true)
    }

    /// As [`Gate::configured`], for a listing of its tools that runs nothing over the current
    /// directory (`tools list`, the lint's tool names): it is not taken for a workspace a hook
    /// or upstream runs in, so one whose files lie there is not refused. Its pipelines are
    /// never run.
    pub fn listed(settings: Arc<Settings>, workspace: Arc<Workspace>) -> Result<Gate, ConfigError> {
        Gate::assembled(settings, workspace, false)
    }

    /// The gate of `settings` over `workspace`; `runs`: its hooks and upstreams will run there,
    /// so none may run a file of it a command could change.
    fn assembled(
        settings: Arc<Settings>,
        workspace: Arc<Workspace>,
        runs: bool,
    ) -> Result<Gate, ConfigError> {
        let tools = settings.configured_tools(toolgate_tools::builtin_confined(
            Arc::clone(&workspace),
            Arc::clone(&settings.sandbox.confinement),
        ))?;
        let pinned = UpstreamTools::pinned(&settings.upstreams);
        let (registry, policy) = assemble(&settings, &tools, pinned)?;
        let hooks = settings
            .hooks
            .iter()
            .map(|spec| {
                let hook = crate::hook::ProcessHook::new(
                    spec.clone(),
                    Arc::clone(&settings.sandbox.confinement),
                    workspace.root().to_path_buf(),
                )
                .and_then(|hook| {
                    if runs {
                        hook.outside_workspace()?;
                    }
                    Ok(hook)
                })
                .map_err(|detail| ConfigError {
                    file: spec.at.0.clone(),
                    line: spec.at.1,
                    message: format!("hook `{}`: {detail}", spec.name),
                })?;
                Ok(Arc::new(hook) as Arc<dyn Hook>)
            })
            .collect::<Result<_, ConfigError>>()?;
        for spec in settings.upstreams.iter().filter(|_| runs) {
            upstream_files_outside(&settings, spec, workspace.root())?;
        }
        Ok(Gate {
            settings,
            tools,
            registry: Arc::new(registry),
            policy: Arc::new(policy),
            upstreams: None,
            workspace,
            recorders: Vec::new(),
            grants: Arc::default(),
            grant_times: GrantTimes::default(),
            hooks,
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
        let (registry, policy) = assemble(&self.settings, &self.tools, upstreams.tools())?;
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
            None => UpstreamTools::pinned(&self.settings.upstreams),
        };
        let (registry, policy) = assemble(&self.settings, &self.tools, tools)?;
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
            .with_grant_times(self.grant_times)
            .with_hooks(self.hooks.clone());
        self.recorders.iter().fold(pipeline, |pipeline, recorder| {
            pipeline.with_recorder(Arc::clone(recorder))
        })
    }

    /// The configuration and policy files, where they live inside `workspace`, join the
    /// sensitive paths: a model must not rewrite the rules it runs under. So do toolgate's
    /// state and configuration directories, with all they hold or will hold, when they lie
    /// inside the workspace (a workspace at `$HOME`): a model that read the console's token
    /// could approve its own calls, one that wrote a grants file could grant them, and one
    /// that wrote a hook or policy kept beside the configuration would judge its own calls.
    /// Commands are denied both directories already.
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
        let dirs = [
            self.settings.state_dir.resolved.as_deref(),
            self.settings.config_dir.as_deref(),
        ];
        dirs.into_iter()
            .flatten()
            .filter_map(|dir| {
                // As the sandbox denies it: by where it really is.
                let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
                Some(
                    dir.strip_prefix(workspace.root())
                        .ok()?
                        .to_str()?
                        .to_owned(),
                )
            })
            .fold(sensitivity, |sensitivity, rel| {
                sensitivity.with_config_dir(&rel)
            })
    }
}

/// The registry of `tools` and `upstream`'s, and the configuration's policies prepared for it
/// (parsed once, with the settings).
fn assemble(
    settings: &Settings,
    tools: &ConfiguredTools,
    upstream: UpstreamTools,
) -> Result<(Registry, PolicyEngine), ConfigError> {
    let registry = tools
        .registry(upstream)
        .map_err(|e| settings.error(e.to_string()))?;
    let mut policy = settings.policy_engine();
    policy
        .prepare(&registry)
        .map_err(|e| settings.error(e.to_string()))?;
    Ok((registry, policy))
}

/// Refuses the upstream of `spec` when a file it runs lies in the workspace at `root`, by
/// [`crate::settings::upstream_files::outside_workspace`], located where it is configured.
fn upstream_files_outside(
    settings: &Settings,
    spec: &toolgate_upstream::UpstreamSpec,
    root: &Path,
) -> Result<(), ConfigError> {
    let origin = settings.upstream_origins.get(&spec.name);
    crate::settings::upstream_files::outside_workspace(
        spec,
        origin.unwrap_or(&Default::default()),
        root,
    )
    .map_err(|detail| {
        let message = format!("upstream `{}`: {detail}", spec.name);
        match origin {
            Some(origin) => ConfigError {
                file: origin.at.0.clone(),
                line: origin.at.1,
                message,
            },
            None => settings.error(message),
        }
    })
}

/// Opens `root` as a workspace, as a configuration-level error.
pub fn open_workspace(root: &Path) -> Result<Arc<Workspace>, anyhow::Error> {
    Workspace::open(root)
        .map(Arc::new)
        .map_err(|e| anyhow::anyhow!("workspace `{}`: {e}", root.display()))
}
