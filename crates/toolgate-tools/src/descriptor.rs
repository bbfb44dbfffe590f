//! What every builtin's descriptor is made of: a closed object schema, and a title.

use serde_json::{Value, json};
use toolgate_core::Descriptor;

/// A builtin's input schema: an object of `properties`, `required` among them, and nothing
/// else, so that a misspelt argument is refused instead of ignored.
pub(crate) fn closed_schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// A builtin's descriptor, with the `title` a client shows for it.
pub(crate) fn titled(name: &str, title: &str, description: &str, schema: Value) -> Descriptor {
    let mut descriptor = Descriptor::new(name, description, schema);
    descriptor.title = Some(title.to_owned());
    descriptor
}
