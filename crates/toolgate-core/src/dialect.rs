//! The JSON Schema dialect a tool's schema declares, and the schema read by its rules.
//!
//! An MCP schema without `$schema` is draft 2020-12; one may name another dialect, and must
//! then be validated by that dialect's rules, and refused when the dialect is not supported.
//! This matters in practice: the official TypeScript SDK stamps every schema it emits as
//! draft-07, and writes a tuple as an array of `items` with `additionalItems`, which draft
//! 2020-12 reads as a malformed schema.
//!
//! Drafts 4, 6 and 7 are rewritten into the draft 2019-09 schema that accepts exactly the same
//! arguments. 2019-09 still has the array form of `items` and `additionalItems`, and it has
//! `unevaluatedProperties`, which stage 3 needs to close objects. The rewrite:
//! - drops a `$ref`'s sibling keywords, which those drafts ignore (`definitions` and `$defs`
//!   stay, as references may point into them);
//! - splits `dependencies` into `dependentRequired` and `dependentSchemas`;
//! - drops the keywords later drafts added (`if` in draft 6, `const` in draft 4,
//!   `unevaluatedProperties` in all three, …), which those drafts ignore;
//! - turns draft 4's boolean `exclusiveMaximum`/`exclusiveMinimum` into the numeric form and
//!   its `id` into `$id`, and an identifier's plain-name fragment into `$anchor`.
//!
//! Before that the schema is checked against its own draft's meta-schema. Every other `$schema`
//! is refused; nothing is fetched.

use jsonschema::Draft;
use serde_json::{Map, Value};

use crate::schema::{Holds, SchemaError, holds};

/// The draft 2019-09 meta-schema's URI, given to rewritten schemas.
const DRAFT_2019_09: &str = "https://json-schema.org/draft/2019-09/schema";

/// The draft `schema` is compiled for, and the schema to compile: `schema` itself for drafts
/// 2020-12 (also when no `$schema` is given) and 2019-09, its draft 2019-09 equivalent for
/// drafts 4, 6 and 7.
pub(crate) fn for_validation(schema: &Value) -> Result<(Draft, Value), SchemaError> {
    let declared = match schema.get("$schema") {
        None => return Ok((Draft::Draft202012, schema.clone())),
        Some(Value::String(uri)) => uri,
        Some(_) => {
            return Err(SchemaError::Invalid(
                "`$schema` must be a URI, a string".to_owned(),
            ));
        }
    };
    let draft = Draft::from_schema_uri(declared);
    let checked = match draft {
        Draft::Draft202012 | Draft::Draft201909 => return Ok((draft, schema.clone())),
        Draft::Draft4 => jsonschema::draft4::meta::validate(schema),
        Draft::Draft6 => jsonschema::draft6::meta::validate(schema),
        Draft::Draft7 => jsonschema::draft7::meta::validate(schema),
        _ => {
            return Err(SchemaError::UnsupportedDialect {
                dialect: declared.chars().take(200).collect(),
            });
        }
    };
    checked.map_err(|e| {
        let reason: String = e.to_string().chars().take(300).collect();
        SchemaError::Invalid(format!("not a valid {} schema: {reason}", name(draft)))
    })?;
    let mut rewritten = rewrite(schema, draft)?;
    if let Value::Object(map) = &mut rewritten {
        map.insert(
            "$schema".to_owned(),
            Value::String(DRAFT_2019_09.to_owned()),
        );
    }
    Ok((Draft::Draft201909, rewritten))
}

fn name(draft: Draft) -> &'static str {
    match draft {
        Draft::Draft4 => "draft-04",
        Draft::Draft6 => "draft-06",
        _ => "draft-07",
    }
}

/// Keywords that draft 2019-09 or 2020-12 added, and that `draft` therefore ignores.
fn added_later(keyword: &str, draft: Draft) -> bool {
    let after_7 = matches!(
        keyword,
        "dependentRequired"
            | "dependentSchemas"
            | "unevaluatedProperties"
            | "unevaluatedItems"
            | "minContains"
            | "maxContains"
            | "prefixItems"
            | "contentSchema"
            | "$anchor"
            | "$recursiveRef"
            | "$recursiveAnchor"
            | "$dynamicRef"
            | "$dynamicAnchor"
            | "$vocabulary"
    );
    let after_6 = matches!(keyword, "if" | "then" | "else");
    let after_4 = matches!(keyword, "const" | "contains" | "propertyNames" | "$id");
    match draft {
        Draft::Draft4 => after_7 || after_6 || after_4,
        Draft::Draft6 => after_7 || after_6,
        _ => after_7,
    }
}

/// `schema`, a schema of `draft` (4, 6 or 7), as draft 2019-09 reads the same constraints.
fn rewrite(schema: &Value, draft: Draft) -> Result<Value, SchemaError> {
    let Value::Object(map) = schema else {
        return Ok(schema.clone());
    };
    let referring = map.contains_key("$ref");
    let exclusive =
        |keyword: &str| draft == Draft::Draft4 && map.get(keyword) == Some(&Value::Bool(true));
    let mut out = Map::new();
    for (keyword, value) in map {
        if referring && !matches!(keyword.as_str(), "$ref" | "definitions" | "$defs") {
            continue;
        }
        if keyword == "$schema" || added_later(keyword, draft) {
            continue;
        }
        let value = match keyword.as_str() {
            "dependencies" => {
                let Value::Object(dependencies) = value else {
                    continue;
                };
                let (mut required, mut schemas) = (Map::new(), Map::new());
                for (property, dependency) in dependencies {
                    if dependency.is_array() {
                        required.insert(property.clone(), dependency.clone());
                    } else {
                        schemas.insert(property.clone(), rewrite(dependency, draft)?);
                    }
                }
                for (keyword, split) in [
                    ("dependentRequired", required),
                    ("dependentSchemas", schemas),
                ] {
                    if !split.is_empty() {
                        out.insert(keyword.to_owned(), Value::Object(split));
                    }
                }
                continue;
            }
            "exclusiveMaximum" | "exclusiveMinimum" if draft == Draft::Draft4 => {
                let bound = if keyword == "exclusiveMaximum" {
                    "maximum"
                } else {
                    "minimum"
                };
                match (value, map.get(bound)) {
                    (Value::Bool(true), Some(limit)) => limit.clone(),
                    _ => continue,
                }
            }
            "maximum" if exclusive("exclusiveMaximum") => continue,
            "minimum" if exclusive("exclusiveMinimum") => continue,
            "id" if draft == Draft::Draft4 => {
                identify(value, &mut out)?;
                continue;
            }
            "$id" => {
                identify(value, &mut out)?;
                continue;
            }
            other => match (holds(other), value) {
                (Some(Holds::NamedSchemas), _) => Value::Object(rewrite_each(value, draft)?),
                (Some(Holds::Schemas), Value::Array(list)) => Value::Array(
                    list.iter()
                        .map(|item| rewrite(item, draft))
                        .collect::<Result<_, _>>()?,
                ),
                (Some(Holds::Schemas), one) => rewrite(one, draft)?,
                (None, _) => value.clone(),
            },
        };
        out.insert(keyword.clone(), value);
    }
    Ok(Value::Object(out))
}

/// Each schema of a map of schemas (`properties`, `definitions`, …) rewritten.
fn rewrite_each(value: &Value, draft: Draft) -> Result<Map<String, Value>, SchemaError> {
    let Value::Object(map) = value else {
        return Ok(Map::new());
    };
    map.iter()
        .map(|(key, schema)| Ok((key.clone(), rewrite(schema, draft)?)))
        .collect()
}

/// An identifier of drafts 4 to 7 as 2019-09 writes it: its URI as `$id`, its plain-name
/// fragment (`#name`) as `$anchor`.
fn identify(value: &Value, out: &mut Map<String, Value>) -> Result<(), SchemaError> {
    let Value::String(id) = value else {
        return Ok(());
    };
    let (uri, fragment) = id.split_once('#').unwrap_or((id, ""));
    if !uri.is_empty() {
        out.insert("$id".to_owned(), Value::String(uri.to_owned()));
    }
    if fragment.is_empty() {
        return Ok(());
    }
    let plain = fragment.starts_with(|c: char| c.is_ascii_alphabetic())
        && fragment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if !plain {
        return Err(SchemaError::Invalid(format!(
            "identifier `{}` has a fragment that is not a plain name",
            id.chars().take(200).collect::<String>()
        )));
    }
    out.insert("$anchor".to_owned(), Value::String(fragment.to_owned()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::schema::{SchemaBounds, SchemaError, ToolSchema};

    const DRAFT_4: &str = "http://json-schema.org/draft-04/schema#";
    const DRAFT_6: &str = "http://json-schema.org/draft-06/schema#";
    const DRAFT_7: &str = "http://json-schema.org/draft-07/schema#";

    fn with(dialect: &str, properties: Value) -> Value {
        json!({"$schema": dialect, "type": "object", "properties": properties})
    }

    /// The pointers of the field errors `arguments` draw under `schema`.
    fn errors(schema: &Value, arguments: Value) -> Vec<String> {
        let compiled = ToolSchema::compile(schema, &SchemaBounds::default())
            .unwrap_or_else(|e| panic!("{schema} was refused: {e}"));
        compiled
            .check(&arguments)
            .into_iter()
            .map(|e| e.pointer)
            .collect()
    }

    #[test]
    fn a_draft_07_tuple_is_checked_place_by_place() {
        // What the official TypeScript SDK emits for `z.tuple([z.number(), z.number()])`.
        let schema = with(
            DRAFT_7,
            json!({"point": {"type": "array", "items": [{"type": "number"}, {"type": "number"}],
                             "additionalItems": false, "minItems": 2, "maxItems": 2}}),
        );
        assert!(errors(&schema, json!({"point": [1, 2]})).is_empty());
        assert_eq!(errors(&schema, json!({"point": [1, "2"]})), ["/point/1"]);
        assert!(!errors(&schema, json!({"point": [1, 2, 3]})).is_empty());
        // Objects inside a tuple are closed like any other.
        let objects = with(
            DRAFT_7,
            json!({"pair": {"type": "array", "items": [{"type": "object", "properties": {"a": {}}}]}}),
        );
        assert_eq!(
            errors(&objects, json!({"pair": [{"a": 1, "b": 2}]})),
            ["/pair/0/b"]
        );
    }

    #[test]
    fn siblings_of_a_ref_count_from_2019_09_on_and_not_before() {
        let properties = json!({"name": {"$ref": "#/definitions/text", "maxLength": 1}});
        let definitions = json!({"text": {"type": "string"}});
        let mut old = with(DRAFT_7, properties.clone());
        old["definitions"] = definitions.clone();
        assert!(errors(&old, json!({"name": "long"})).is_empty());
        assert_eq!(errors(&old, json!({"name": 1})), ["/name"]);
        let mut new =
            json!({"type": "object", "properties": properties, "definitions": definitions});
        assert_eq!(errors(&new, json!({"name": "long"})), ["/name"]);
        new["$schema"] = json!("https://json-schema.org/draft/2019-09/schema");
        assert_eq!(errors(&new, json!({"name": "long"})), ["/name"]);
    }

    #[test]
    fn dependencies_become_dependent_required_and_dependent_schemas() {
        let mut schema = with(DRAFT_6, json!({"a": {}, "b": {}, "c": {"type": "integer"}}));
        schema["dependencies"] = json!({"a": ["b"], "b": {"required": ["c"]}});
        assert_eq!(errors(&schema, json!({"a": 1})), ["/b"]);
        assert_eq!(errors(&schema, json!({"b": 1})), ["/c"]);
        assert!(errors(&schema, json!({"a": 1, "b": 1, "c": 2})).is_empty());
    }

    #[test]
    fn draft_04_bounds_and_identifiers_are_read_as_draft_04_reads_them() {
        let schema = with(
            DRAFT_4,
            json!({"n": {"type": "number", "maximum": 5, "exclusiveMaximum": true},
                   "m": {"type": "number", "minimum": 0, "exclusiveMinimum": false},
                   "k": {"$ref": "#count"},
                   "fixed": {"const": 3}}),
        );
        let mut schema = schema;
        schema["definitions"] = json!({"count": {"id": "#count", "type": "integer"}});
        assert_eq!(errors(&schema, json!({"n": 5})), ["/n"]);
        assert!(errors(&schema, json!({"n": 4.9, "m": 0, "k": 2})).is_empty());
        assert_eq!(errors(&schema, json!({"k": 2.5})), ["/k"]);
        // Draft 4 has no `const`: it constrains nothing there.
        assert!(errors(&schema, json!({"fixed": 4})).is_empty());
    }

    #[test]
    fn keywords_of_later_drafts_constrain_nothing_in_earlier_ones() {
        let schema = with(
            DRAFT_6,
            json!({"n": {"if": {"type": "integer"}, "then": {"minimum": 10}},
                   "list": {"type": "array", "contains": {"const": 1}, "minContains": 2}}),
        );
        assert!(errors(&schema, json!({"n": 3, "list": [1]})).is_empty());
        assert_eq!(errors(&schema, json!({"list": [2]})), ["/list"]);
        let seven = with(
            DRAFT_7,
            json!({"n": {"if": {"type": "integer"}, "then": {"minimum": 10}}}),
        );
        assert_eq!(errors(&seven, json!({"n": 3})), ["/n"]);
    }

    #[test]
    fn extra_arguments_are_refused_whatever_the_draft() {
        for dialect in [
            DRAFT_4,
            DRAFT_6,
            DRAFT_7,
            "https://json-schema.org/draft-07/schema",
        ] {
            let schema = with(dialect, json!({"path": {"type": "string"}}));
            assert_eq!(
                errors(&schema, json!({"path": "a", "mode": 1})),
                ["/mode"],
                "{dialect}"
            );
        }
    }

    #[test]
    fn unknown_dialects_and_schemas_invalid_under_their_own_are_refused() {
        let bounds = SchemaBounds::default();
        for dialect in [
            "https://example.com/my-dialect",
            "http://json-schema.org/draft-03/schema#",
            "https://spec.openapis.org/oas/3.1/dialect/base",
        ] {
            let refused = ToolSchema::compile(&with(dialect, json!({})), &bounds).unwrap_err();
            assert_eq!(
                refused,
                SchemaError::UnsupportedDialect {
                    dialect: dialect.to_owned()
                }
            );
        }
        let not_a_uri = json!({"$schema": 7, "type": "object"});
        assert!(matches!(
            ToolSchema::compile(&not_a_uri, &bounds),
            Err(SchemaError::Invalid(_))
        ));
        // Draft 4 demands at least one name in `required`; draft 7 does not.
        let mut empty = with(DRAFT_4, json!({}));
        empty["required"] = json!([]);
        let refused = ToolSchema::compile(&empty, &bounds)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("not a valid draft-04 schema"), "{refused}");
        empty["$schema"] = json!(DRAFT_7);
        assert!(ToolSchema::compile(&empty, &bounds).is_ok());
        // An identifier whose fragment is a pointer has no 2019-09 spelling.
        let pointer = json!({"$schema": DRAFT_7, "type": "object", "$id": "#/x"});
        assert!(ToolSchema::compile(&pointer, &bounds).is_err());
    }
}
