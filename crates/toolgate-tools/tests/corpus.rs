//! The shared hostile-input corpus against the library: builtin tools in a real pipeline.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/fixture.rs"]
mod fixture;

use std::collections::BTreeSet;
use std::sync::Arc;

use toolgate_core::policy::DEFAULT_POLICY;
use toolgate_core::*;
use toolgate_workspace::Workspace;

use fixture::{Fixture, corpus};

/// The pipeline the CLI would build for the fixture configuration `config`.
fn pipeline(fx: &Fixture, config: &str) -> Pipeline {
    let workspace = Arc::new(Workspace::open(&fx.workspace()).unwrap());
    let mut builder = RegistryBuilder::new();
    for tool in toolgate_tools::builtin(Arc::clone(&workspace)) {
        let mut entry = tool.entry;
        if config == "restricted" {
            match entry.name.as_str() {
                "list_dir" => entry.surfaces = BTreeSet::from([Surface::Cli, Surface::Console]),
                "search_text" => entry.enabled = false,
                _ => {}
            }
        }
        builder
            .register(tool.descriptor, entry, tool.executor)
            .unwrap();
    }
    let registry = builder.build().unwrap();
    let operator = fx
        .config(config)
        .map(|_| std::fs::read_to_string(fx.dir.path().join("restricted.cedar")).unwrap());
    let mut sources = vec![("<default policy>", DEFAULT_POLICY)];
    if let Some(text) = &operator {
        sources.push(("restricted.cedar", text));
    }
    let mut policy = PolicyEngine::from_sources(&sources).unwrap();
    policy.prepare(&registry).unwrap();
    Pipeline::new(
        Arc::new(registry),
        Arc::new(policy),
        Arc::new(HeadlessBroker),
        WorkspaceId::new(&workspace.root().to_string_lossy()),
    )
}

#[test]
fn hostile_corpus_through_the_library() {
    let fx = Fixture::new();
    let pipelines = [
        ("default", pipeline(&fx, "default")),
        ("restricted", pipeline(&fx, "restricted")),
    ];
    let rows = corpus();
    assert!(rows.len() > 50, "the corpus is all there");
    for row in rows {
        let pipeline = &pipelines
            .iter()
            .find(|(name, _)| *name == row.config)
            .unwrap()
            .1;
        let surface: Surface = row.surface.parse().unwrap();
        let raw = RawCall::text(row.tool.clone(), row.args.clone(), surface)
            .in_profile(row.profile.clone());
        let before = fx.snapshot();
        let outcome = pipeline.run(raw);
        let name = &row.name;
        assert_eq!(fx.snapshot(), before, "{name}: the world changed");
        match row.status.as_str() {
            "rejected" => {
                let rejection = outcome
                    .rejection
                    .as_ref()
                    .unwrap_or_else(|| panic!("{name}: not rejected: {outcome:?}"));
                assert_eq!(
                    (rejection.stage.as_str(), rejection.code.as_str()),
                    (row.stage.as_deref().unwrap(), row.code.as_str()),
                    "{name}: {rejection}"
                );
                assert!(
                    !outcome.evidence.durations_ns.contains_key("execute"),
                    "{name}: executed"
                );
                assert!(outcome.output.is_none(), "{name}");
            }
            "failed" => {
                assert_eq!(outcome.status, Status::Failed, "{name}: {outcome:?}");
                assert_eq!(outcome.error.as_ref().unwrap().code, row.code, "{name}");
            }
            other => panic!("{name}: unknown status {other}"),
        }
    }
}
