//! Any input schema a tool source might declare (an upstream server is not trusted), checked
//! against any arguments: the schema is refused or compiled, and checking arguments against a
//! compiled schema gives field errors, never a panic or a hang.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate_core::{SchemaBounds, ToolSchema};

fuzz_target!(|data: &[u8]| {
    // The first byte says how much of the rest is the schema; the remainder is the arguments.
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let split = (usize::from(split) * 4).min(rest.len());
    let (schema, arguments) = rest.split_at(split);
    let Ok(schema) = serde_json::from_slice::<Value>(schema) else {
        return;
    };
    let Ok(compiled) = ToolSchema::compile(&schema, &SchemaBounds::default()) else {
        return;
    };
    let arguments = serde_json::from_slice::<Value>(arguments).unwrap_or(Value::Null);
    let _ = compiled.check(&arguments);
});
