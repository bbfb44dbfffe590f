//! The pipeline the CLI builds over a workspace (every builtin, the default policy), shared by
//! the tools' end-to-end tests. Not every test file uses every function.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use toolgate_core::*;
use toolgate_workspace::Workspace;

/// Every builtin over `root`, the default policy, and `broker`.
pub fn pipeline(root: &Path, broker: Arc<dyn ApprovalBroker>) -> Pipeline {
    pipeline_with(root, broker, |_| {})
}

/// As [`pipeline`], with `adjust` applied to each builtin's entry.
pub fn pipeline_with(
    root: &Path,
    broker: Arc<dyn ApprovalBroker>,
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
    let mut policy = PolicyEngine::default_policy().unwrap();
    policy.prepare(&registry).unwrap();
    Pipeline::new(
        Arc::new(registry),
        Arc::new(policy),
        broker,
        WorkspaceId::new(&workspace.root().to_string_lossy()),
    )
}
