//! The pipeline the CLI builds over a workspace (every builtin, the default policy), for the
//! tests of the crates below the binary that run the builtins: the tools' and the audit log's.
//! Not every test file uses every function.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use toolgate_core::policy::DEFAULT_POLICY;
use toolgate_core::{
    ApprovalBroker, Pipeline, PolicyEngine, RegistryBuilder, ToolEntry, WorkspaceId,
};
use toolgate_workspace::Workspace;

/// Every builtin over `root`, the default policy, and `broker`.
pub fn pipeline(root: &Path, broker: Arc<dyn ApprovalBroker>) -> Pipeline {
    pipeline_with(root, broker, "", |_| {})
}

/// As [`pipeline`], with `operator` (Cedar text, empty for none) after the default policy and
/// `adjust` applied to each builtin's entry.
pub fn pipeline_with(
    root: &Path,
    broker: Arc<dyn ApprovalBroker>,
    operator: &str,
    adjust: impl Fn(&mut ToolEntry),
) -> Pipeline {
    let workspace = Arc::new(Workspace::open(root).unwrap());
    let mut builder = RegistryBuilder::new();
    for tool in toolgate_tools::builtin(
        Arc::clone(&workspace),
        std::env::home_dir().as_deref(),
        std::env::vars_os(),
    ) {
        let mut entry = tool.entry;
        adjust(&mut entry);
        builder
            .register(tool.descriptor, entry, tool.executor)
            .unwrap();
    }
    let registry = builder.build().unwrap();
    let mut sources = vec![("<default policy>", DEFAULT_POLICY)];
    if !operator.is_empty() {
        sources.push(("operator", operator));
    }
    let mut policy = PolicyEngine::from_sources(&sources).unwrap();
    policy.prepare(&registry).unwrap();
    Pipeline::new(
        Arc::new(registry),
        Arc::new(policy),
        broker,
        WorkspaceId::new(&workspace.root().to_string_lossy()),
    )
}
