//! Tool schemas in the shapes real MCP servers emit (`tests/corpus/schemas.jsonl`), compiled by
//! stage 3's validator: each must accept and refuse the arguments its row names, or be refused
//! itself as its row says.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;

use serde_json::Value;
use toolgate_core::schema::{SchemaBounds, SchemaError, ToolSchema};

fn rows() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/schemas.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with("//"))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[test]
fn real_world_schemas_accept_and_refuse_what_their_dialect_says() {
    let rows = rows();
    assert!(rows.len() >= 15, "{} rows", rows.len());
    let bounds = SchemaBounds::default();
    for row in &rows {
        let id = row["id"].as_str().unwrap();
        let compiled = ToolSchema::compile(&row["schema"], &bounds);
        if let Some(refused) = row["refused"].as_str() {
            let error = compiled.err().unwrap_or_else(|| panic!("{id}: compiled"));
            let kind = match error {
                SchemaError::UnsupportedDialect { .. } => "unsupported_dialect",
                SchemaError::NotAnObject => "not_an_object",
                SchemaError::Invalid(_) => "invalid",
                _ => "other",
            };
            assert_eq!(kind, refused, "{id}: {error}");
            continue;
        }
        let schema = compiled.unwrap_or_else(|e| panic!("{id}: {e}"));
        for arguments in row["accept"].as_array().unwrap() {
            let errors = schema.check(arguments);
            assert!(errors.is_empty(), "{id}: {arguments} drew {errors:?}");
        }
        for refusal in row["refuse"].as_array().unwrap() {
            let errors = schema.check(&refusal["arguments"]);
            let found = errors.iter().any(|e| {
                serde_json::to_value(e.code).unwrap() == refusal["code"]
                    && e.pointer == refusal["at"]
            });
            assert!(found, "{id}: {refusal} drew {errors:?}");
        }
    }
}
