//! The shared hostile-input corpus against the library: builtin tools in the pipeline the
//! `toolgate` binary builds, from the same settings and with the same builder.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use toolgate::{Gate, Settings};
use toolgate_core::*;
use toolgate_workspace::Workspace;

use fixture::{Fixture, corpus};
use support::fixture;

/// The pipeline the CLI builds for the fixture configuration `config`, asking nobody.
fn pipeline(fx: &Fixture, config: &str) -> Pipeline {
    let workspace = Arc::new(Workspace::open(&fx.workspace()).unwrap());
    let settings = match fx.config(config) {
        Some(path) => Settings::load(Some(&path)).unwrap(),
        None => Settings::defaults().unwrap(),
    };
    let gate = Gate::configured(Arc::new(settings), Arc::clone(&workspace)).unwrap();
    gate.pipeline(&workspace, Arc::new(HeadlessBroker))
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
                    .rejection()
                    .unwrap_or_else(|| panic!("{name}: not rejected: {outcome:?}"));
                assert_eq!(
                    (rejection.stage().as_str(), rejection.code().as_str()),
                    (row.stage.as_deref().unwrap(), row.code.as_str()),
                    "{name}: {rejection}"
                );
                assert!(
                    !outcome.evidence().durations_ns.contains_key("execute"),
                    "{name}: executed"
                );
                assert!(outcome.output().is_none(), "{name}");
            }
            "failed" => {
                assert_eq!(outcome.status(), Status::Failed, "{name}: {outcome:?}");
                assert_eq!(outcome.error().unwrap().code, row.code, "{name}");
            }
            other => panic!("{name}: unknown status {other}"),
        }
    }
}
