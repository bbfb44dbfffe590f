//! Stage 3's structural half: a tool's input schema, bounded, compiled once, and its errors
//! turned into [`FieldError`]s with JSON pointers and hints.
//!
//! Schemas come from descriptors, and an upstream descriptor is untrusted input too. Before
//! compiling one we bound its size, depth, node count and enum values, and refuse any `$ref`
//! that is not local to the schema, so a hostile descriptor can neither fetch anything nor make
//! validation slow. Patterns compile with the linear-time `regex` engine; a `pattern` that
//! needs lookaround or backreferences (ECMA-262 has both, and zod's `hostname`, `emoji` and
//! `duration` patterns use lookahead) runs on a backtracking engine, every match bounded in
//! steps and in the length of the string (the crate's `pattern` module).
//!
//! Extra arguments are rejected unless the schema itself allows them: where an object schema
//! says nothing about extra properties we add `unevaluatedProperties: false`, which (unlike
//! `additionalProperties`) sees through `allOf` and `$ref`.
//!
//! A schema is read by the rules of the dialect its `$schema` names (2020-12 when it names
//! none); drafts 4 to 7 are rewritten into 2019-09 (the crate's `dialect` module).

use jsonschema::{PatternOptions, ValidationError, Validator, error::ValidationErrorKind};
use serde_json::{Map, Value};
use thiserror::Error;

use crate::hint::{did_you_mean, hint_for};
pub use crate::pattern::{BACKTRACK_LIMIT, MAX_BACKTRACKING_MATCHES, MAX_SUBJECT_CHARS};
use crate::rejection::{FieldError, MAX_FIELD_ERRORS, RejectCode};

/// Limits on a schema before it is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaBounds {
    /// Canonical JSON size, in bytes.
    pub max_bytes: usize,
    /// Nesting of arrays and objects.
    pub max_depth: usize,
    /// JSON values in the schema, all told.
    pub max_nodes: usize,
    /// Values across every `enum` and `const` in the schema.
    pub max_enum_values: usize,
    /// Length of any one `pattern` or `patternProperties` key.
    pub max_pattern_bytes: usize,
}

impl Default for SchemaBounds {
    fn default() -> Self {
        SchemaBounds {
            max_bytes: 256 * 1024,
            max_depth: 32,
            max_nodes: 20_000,
            max_enum_values: 4_096,
            max_pattern_bytes: 1_024,
        }
    }
}

/// Why a schema was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SchemaError {
    #[error("schema is {actual} bytes; the limit is {limit}")]
    TooLarge { actual: usize, limit: usize },
    #[error("schema nests deeper than {limit} levels")]
    TooDeep { limit: usize },
    #[error("schema has more than {limit} values")]
    TooManyNodes { limit: usize },
    #[error("schema has more than {limit} enum values")]
    TooManyEnumValues { limit: usize },
    #[error("schema pattern at `{pointer}` is longer than {limit} bytes")]
    PatternTooLong { pointer: String, limit: usize },
    #[error("schema refers to `{reference}`; only references inside the schema (`#…`) are allowed")]
    RemoteReference { reference: String },
    #[error(
        "schema declares the dialect `{dialect}`; toolgate validates JSON Schema 2020-12 (the \
         default), 2019-09 and drafts 7, 6 and 4"
    )]
    UnsupportedDialect { dialect: String },
    #[error("an input schema must describe an object (`\"type\": \"object\"`)")]
    NotAnObject,
    #[error("schema does not compile: {0}")]
    Invalid(String),
}

/// A compiled input schema.
#[derive(Debug)]
pub struct ToolSchema {
    validator: Validator,
    /// The schema as compiled (with extra properties closed).
    effective: Value,
}

impl ToolSchema {
    /// Checks `schema` against `bounds`, closes its objects and compiles it for the dialect it
    /// declares.
    pub fn compile(schema: &Value, bounds: &SchemaBounds) -> Result<ToolSchema, SchemaError> {
        ToolSchema::build(schema, bounds, true)
    }

    /// An output schema, compiled like an input schema (bounded, read by its declared dialect,
    /// nothing fetched, regexes bounded) but left open: a tool may return more than its schema
    /// declares.
    pub fn compile_output(
        schema: &Value,
        bounds: &SchemaBounds,
    ) -> Result<ToolSchema, SchemaError> {
        ToolSchema::build(schema, bounds, false)
    }

    fn build(
        schema: &Value,
        bounds: &SchemaBounds,
        close: bool,
    ) -> Result<ToolSchema, SchemaError> {
        check_bounds(schema, bounds)?;
        let is_object = schema.get("type").is_some_and(|t| {
            t == "object"
                || t.as_array()
                    .is_some_and(|ts| ts.len() == 1 && ts.first().is_some_and(|t| t == "object"))
        });
        if !is_object {
            return Err(SchemaError::NotAnObject);
        }
        let (draft, mut effective) = crate::dialect::for_validation(schema)?;
        if close {
            close_objects(&mut effective);
        }
        crate::pattern::hand_over(&mut effective);
        let validator = jsonschema::options()
            .with_draft(draft)
            .offline()
            .with_pattern_options(PatternOptions::regex().size_limit(crate::pattern::SIZE_LIMIT))
            .with_keyword(crate::pattern::KEYWORD, crate::pattern::keyword)
            .should_validate_formats(false)
            .build(&effective)
            .map_err(|e| SchemaError::Invalid(e.to_string()))?;
        Ok(ToolSchema {
            validator,
            effective,
        })
    }

    /// The problems with `arguments`, as field errors; empty when they are valid. At most
    /// [`MAX_FIELD_ERRORS`] and one more are found (the one more says there are more), and
    /// only the first in arguments of more than 4,096 JSON values.
    pub fn check(&self, arguments: &Value) -> Vec<FieldError> {
        if crate::pattern::budgeted(|| self.validator.is_valid(arguments)) {
            return Vec::new();
        }
        let found: Vec<ValidationError<'_>> = crate::pattern::budgeted(|| {
            if has_at_most(arguments, EVERY_ERROR_VALUES) {
                self.validator
                    .iter_errors(arguments)
                    .take(MAX_FIELD_ERRORS + 1)
                    .collect()
            } else {
                // The validator finds every error before it yields one, in time that grows
                // with the arguments (0.1 s for 100,000 empty objects missing their fields);
                // the first one alone it finds at once.
                self.validator
                    .validate(arguments)
                    .err()
                    .into_iter()
                    .collect()
            }
        });
        let mut errors = Vec::new();
        for error in &found {
            self.convert(error, arguments, &mut errors);
        }
        errors.truncate(MAX_FIELD_ERRORS + 1);
        errors
    }

    /// The names of the top-level properties the schema declares.
    pub fn property_names(&self) -> impl Iterator<Item = &str> {
        properties_of(&self.effective)
            .into_iter()
            .flat_map(|p| p.keys().map(String::as_str))
    }

    fn convert(&self, error: &ValidationError<'_>, arguments: &Value, out: &mut Vec<FieldError>) {
        let pointer = error.instance_path().as_str().to_owned();
        match error.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected }
            | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
                let declared = self.declared_at(&pointer);
                let provided = provided_at(arguments, &pointer);
                for name in unexpected.iter().take(MAX_FIELD_ERRORS + 1) {
                    let missing: Vec<&str> = declared
                        .iter()
                        .copied()
                        .filter(|d| !provided.contains(d))
                        .collect();
                    // Prefer a declared name the caller left out: `file_path` given and `path`
                    // missing is almost surely one mistake, not two.
                    let suggestion = did_you_mean(name, missing.iter().copied())
                        .or_else(|| did_you_mean(name, declared.iter().copied()));
                    let message = match &declared[..] {
                        [] => format!("unknown argument `{}`", escape_name(name)),
                        known => format!(
                            "unknown argument `{}`; expected one of {}",
                            escape_name(name),
                            known
                                .iter()
                                .map(|k| format!("`{k}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    };
                    out.push(
                        FieldError::new(
                            format!("{pointer}/{}", escape_pointer(name)),
                            RejectCode::UnknownArgument,
                            message,
                        )
                        .with_hint(hint_for(suggestion)),
                    );
                }
            }
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                out.push(FieldError::new(
                    format!("{pointer}/{}", escape_pointer(name)),
                    RejectCode::MissingInput,
                    format!("missing required argument `{name}`"),
                ));
            }
            ValidationErrorKind::Type { .. } => out.push(FieldError::new(
                pointer,
                RejectCode::InvalidType,
                bounded_message(&error.to_string()),
            )),
            _ => out.push(FieldError::new(
                pointer,
                RejectCode::ConstraintViolation,
                bounded_message(&error.to_string()),
            )),
        }
    }

    /// The properties declared for the object at `pointer`, found by walking `properties` and
    /// `items` from the root.
    fn declared_at(&self, pointer: &str) -> Vec<&str> {
        let mut schema = &self.effective;
        for segment in pointer.split('/').skip(1) {
            let segment = unescape_pointer(segment);
            let next = properties_of(schema)
                .and_then(|p| p.get(&segment))
                .or_else(|| {
                    schema
                        .get("items")
                        .filter(|_| segment.parse::<usize>().is_ok())
                });
            match next {
                Some(next) => schema = next,
                None => return Vec::new(),
            }
        }
        properties_of(schema)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }
}

/// What a keyword's value holds where it holds schemas: every applicator of drafts 4 to
/// 2020-12. The walks that rewrite a schema (`dialect`, `pattern`) follow these and nothing
/// else, so that a value that only looks like a schema (a `const`, a property named `pattern`)
/// is never touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holds {
    /// One schema, or a list of them (`items` in either form, `allOf`, `not`, …).
    Schemas,
    /// Schemas by name (`properties`, `$defs`, …).
    NamedSchemas,
}

pub(crate) fn holds(keyword: &str) -> Option<Holds> {
    match keyword {
        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
            Some(Holds::NamedSchemas)
        }
        "items"
        | "prefixItems"
        | "allOf"
        | "anyOf"
        | "oneOf"
        | "additionalItems"
        | "additionalProperties"
        | "unevaluatedItems"
        | "unevaluatedProperties"
        | "contains"
        | "propertyNames"
        | "not"
        | "if"
        | "then"
        | "else"
        | "contentSchema" => Some(Holds::Schemas),
        _ => None,
    }
}

/// The longest field error message, in characters. The validator's messages quote the value
/// they judge (`[{},{},…] has more than 100 items`), which may be a megabyte.
const MAX_MESSAGE_CHARS: usize = 240;

/// `message`, its middle left out when it is longer than [`MAX_MESSAGE_CHARS`]: the start
/// shows the value, the end what is wrong with it.
fn bounded_message(message: &str) -> String {
    let count = message.chars().count();
    if count <= MAX_MESSAGE_CHARS {
        return message.to_owned();
    }
    let head: String = message.chars().take(80).collect();
    let tail: String = message.chars().skip(count - 140).collect();
    format!("{head} … {tail}")
}

/// Arguments with at most this many JSON values have every error found (up to
/// [`MAX_FIELD_ERRORS`]); larger ones their first.
const EVERY_ERROR_VALUES: usize = 4_096;

/// Whether `value` holds at most `limit` JSON values, itself included; counts no further.
fn has_at_most(value: &Value, limit: usize) -> bool {
    let mut stack = vec![value];
    let mut seen = 0usize;
    while let Some(value) = stack.pop() {
        seen += 1;
        if seen > limit {
            return false;
        }
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    true
}

fn properties_of(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

fn provided_at<'a>(arguments: &'a Value, pointer: &str) -> Vec<&'a str> {
    arguments
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn unescape_pointer(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

fn escape_name(name: &str) -> String {
    crate::invocation::escape(name)
}

fn check_bounds(schema: &Value, bounds: &SchemaBounds) -> Result<(), SchemaError> {
    let size = crate::canonical::canonical_json(schema).len();
    if size > bounds.max_bytes {
        return Err(SchemaError::TooLarge {
            actual: size,
            limit: bounds.max_bytes,
        });
    }
    let (mut nodes, mut enum_values) = (0usize, 0usize);
    let mut stack: Vec<(&Value, usize, String)> = vec![(schema, 1, String::new())];
    while let Some((value, depth, pointer)) = stack.pop() {
        nodes += 1;
        if nodes > bounds.max_nodes {
            return Err(SchemaError::TooManyNodes {
                limit: bounds.max_nodes,
            });
        }
        match value {
            Value::Array(items) => {
                if depth > bounds.max_depth {
                    return Err(SchemaError::TooDeep {
                        limit: bounds.max_depth,
                    });
                }
                for (i, item) in items.iter().enumerate() {
                    stack.push((item, depth + 1, format!("{pointer}/{i}")));
                }
            }
            Value::Object(map) => {
                if depth > bounds.max_depth {
                    return Err(SchemaError::TooDeep {
                        limit: bounds.max_depth,
                    });
                }
                // Only toolgate hands a pattern to its bounded engine, after the checks here
                // (a pattern's length among them).
                if map.contains_key(crate::pattern::KEYWORD) {
                    return Err(SchemaError::Invalid(format!(
                        "`{}` at `{pointer}` is toolgate's own keyword; a schema may not use it",
                        crate::pattern::KEYWORD
                    )));
                }
                for keyword in ["$ref", "$dynamicRef"] {
                    if let Some(Value::String(reference)) = map.get(keyword)
                        && !reference.starts_with('#')
                    {
                        return Err(SchemaError::RemoteReference {
                            reference: reference.clone(),
                        });
                    }
                }
                if let Some(Value::String(pattern)) = map.get("pattern")
                    && pattern.len() > bounds.max_pattern_bytes
                {
                    return Err(SchemaError::PatternTooLong {
                        pointer: format!("{pointer}/pattern"),
                        limit: bounds.max_pattern_bytes,
                    });
                }
                if let Some(Value::Object(patterns)) = map.get("patternProperties")
                    && patterns.keys().any(|k| k.len() > bounds.max_pattern_bytes)
                {
                    return Err(SchemaError::PatternTooLong {
                        pointer: format!("{pointer}/patternProperties"),
                        limit: bounds.max_pattern_bytes,
                    });
                }
                enum_values += map
                    .get("enum")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                enum_values += usize::from(map.contains_key("const"));
                if enum_values > bounds.max_enum_values {
                    return Err(SchemaError::TooManyEnumValues {
                        limit: bounds.max_enum_values,
                    });
                }
                for (key, item) in map {
                    stack.push((
                        item,
                        depth + 1,
                        format!("{pointer}/{}", escape_pointer(key)),
                    ));
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
        }
    }
    Ok(())
}

/// Adds `unevaluatedProperties: false` to the root and to object schemas reached through
/// `properties`, `items` and `prefixItems` that say nothing about extra properties. Schemas
/// inside combinators are left alone: closing one branch of an `allOf` would reject the
/// properties its siblings declare.
fn close_objects(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    let open_keywords = [
        "additionalProperties",
        "unevaluatedProperties",
        "patternProperties",
        "propertyNames",
    ];
    let describes_object = map.get("type").is_some_and(|t| {
        t == "object"
            || t.as_array()
                .is_some_and(|ts| ts.iter().any(|t| t == "object"))
    }) || map.contains_key("properties");
    if describes_object && !open_keywords.iter().any(|k| map.contains_key(*k)) {
        map.insert("unevaluatedProperties".to_owned(), Value::Bool(false));
    }
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        properties.values_mut().for_each(close_objects);
    }
    match map.get_mut("items") {
        // Drafts before 2020-12 write a tuple as an array of `items`.
        Some(Value::Array(items)) => items.iter_mut().for_each(close_objects),
        Some(items) => close_objects(items),
        None => {}
    }
    if let Some(Value::Array(items)) = map.get_mut("prefixItems") {
        items.iter_mut().for_each(close_objects);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_schema() -> ToolSchema {
        ToolSchema::compile(
            &json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 1},
                    "limit": {"type": "integer", "minimum": 1},
                    "opts": {"type": "object", "properties": {"follow": {"type": "boolean"}}}
                },
                "required": ["path"]
            }),
            &SchemaBounds::default(),
        )
        .unwrap()
    }

    fn codes(errors: &[FieldError]) -> Vec<(&str, RejectCode)> {
        errors
            .iter()
            .map(|e| (e.pointer.as_str(), e.code))
            .collect()
    }

    #[test]
    fn valid_arguments_have_no_errors() {
        assert!(
            read_schema()
                .check(&json!({"path": "a", "offset": 2}))
                .is_empty()
        );
    }

    #[test]
    fn misspelt_argument_gets_a_hint() {
        let errors = read_schema().check(&json!({"file_path": "a"}));
        let mut got = codes(&errors);
        got.sort();
        assert_eq!(
            got,
            [
                ("/file_path", RejectCode::UnknownArgument),
                ("/path", RejectCode::MissingInput)
            ]
        );
        let unknown = errors
            .iter()
            .find(|e| e.code == RejectCode::UnknownArgument)
            .unwrap();
        assert_eq!(unknown.hint.as_deref(), Some("did you mean `path`?"));
    }

    #[test]
    fn nested_objects_are_closed_and_hinted() {
        let errors = read_schema().check(&json!({"path": "a", "opts": {"folow": true}}));
        assert_eq!(
            codes(&errors),
            [("/opts/folow", RejectCode::UnknownArgument)]
        );
        assert_eq!(errors[0].hint.as_deref(), Some("did you mean `follow`?"));
    }

    #[test]
    fn all_errors_are_reported_with_pointers() {
        let errors = read_schema().check(&json!({"path": 3, "offset": 0, "limit": "x"}));
        let mut got = codes(&errors);
        got.sort();
        assert_eq!(
            got,
            [
                ("/limit", RejectCode::InvalidType),
                ("/offset", RejectCode::ConstraintViolation),
                ("/path", RejectCode::InvalidType),
            ]
        );
    }

    #[test]
    fn schemas_that_allow_extras_keep_them() {
        let schema = ToolSchema::compile(
            &json!({"type": "object", "properties": {"a": {}}, "additionalProperties": true}),
            &SchemaBounds::default(),
        )
        .unwrap();
        assert!(schema.check(&json!({"a": 1, "b": 2})).is_empty());
    }

    #[test]
    fn all_of_properties_are_not_extras() {
        let schema = ToolSchema::compile(
            &json!({
                "type": "object",
                "allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {}}}]
            }),
            &SchemaBounds::default(),
        )
        .unwrap();
        assert!(schema.check(&json!({"a": "x", "b": 2})).is_empty());
        assert_eq!(
            codes(&schema.check(&json!({"a": "x", "c": 2}))),
            [("/c", RejectCode::UnknownArgument)]
        );
    }

    #[test]
    fn hostile_schemas_are_refused() {
        let bounds = SchemaBounds::default();
        let compile = |s: Value| ToolSchema::compile(&s, &bounds).unwrap_err();
        assert!(matches!(
            compile(
                json!({"type": "object", "properties": {"a": {"$ref": "https://evil.example/s.json"}}})
            ),
            SchemaError::RemoteReference { .. }
        ));
        assert!(matches!(
            compile(json!({"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}})),
            SchemaError::RemoteReference { .. }
        ));
        let mut deep = json!({"type": "string"});
        for _ in 0..40 {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        assert!(matches!(compile(deep), SchemaError::TooDeep { .. }));
        let many: Vec<Value> = (0..5000).map(|i| json!(i)).collect();
        assert!(matches!(
            compile(json!({"type": "object", "properties": {"a": {"enum": many}}})),
            SchemaError::TooManyEnumValues { .. }
        ));
        let wide: Map<String, Value> = (0..25_000)
            .map(|i| (format!("p{i}"), json!(true)))
            .collect();
        assert!(matches!(
            compile(json!({"type": "object", "properties": wide})),
            SchemaError::TooLarge { .. } | SchemaError::TooManyNodes { .. }
        ));
        assert!(matches!(
            compile(json!({"type": "object", "properties": {"a": {"pattern": "a".repeat(2000)}}})),
            SchemaError::PatternTooLong { .. }
        ));
        assert_eq!(compile(json!({"type": "string"})), SchemaError::NotAnObject);
        assert!(matches!(
            compile(json!({"type": "object", "properties": {"a": {"type": 7}}})),
            SchemaError::Invalid(_)
        ));
    }

    #[test]
    fn patterns_use_a_linear_time_engine() {
        // Catastrophic for a backtracking engine; linear for `regex`.
        let schema = ToolSchema::compile(
            &json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}}),
            &SchemaBounds::default(),
        )
        .unwrap();
        let errors = schema.check(&json!({"a": format!("{}!", "a".repeat(5000))}));
        assert_eq!(codes(&errors), [("/a", RejectCode::ConstraintViolation)]);
    }

    #[test]
    fn patterns_with_lookaround_compile_and_every_match_is_bounded() {
        // zod's `hostname` and `duration`, as the TypeScript SDK emits them.
        let hostname = r"^(?=.{1,253}\.?$)[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[-0-9a-zA-Z]{0,61}[0-9a-zA-Z])?)*\.?$";
        let duration = r"^P(?:(\d+W)|(?!.*W)(?=\d|T\d)(\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+([.,]\d+)?S)?)?)$";
        let schema = ToolSchema::compile(
            &json!({"type": "object", "properties": {
                "host": {"type": "string", "pattern": hostname},
                "every": {"type": "string", "pattern": duration},
                "twice": {"type": "string", "pattern": r"^(\w+) \1$"},
            }}),
            &SchemaBounds::default(),
        )
        .unwrap();
        assert!(
            schema
                .check(&json!({"host": "example.org", "every": "P1DT2H", "twice": "ab ab"}))
                .is_empty()
        );
        let errors = schema.check(&json!({"host": "-x.org", "every": "P1W2D", "twice": "ab cd"}));
        let mut got = codes(&errors);
        got.sort();
        assert_eq!(
            got,
            [
                ("/every", RejectCode::ConstraintViolation),
                ("/host", RejectCode::ConstraintViolation),
                ("/twice", RejectCode::ConstraintViolation)
            ]
        );
        // A catastrophic pattern behind a lookahead, on a long string it does not match: the
        // call is refused, in bounded time.
        let hostile = ToolSchema::compile(
            &json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?=(a+)+$)a"}}}),
            &SchemaBounds::default(),
        )
        .unwrap();
        let errors = hostile.check(&json!({"a": format!("{}!", "a".repeat(5000))}));
        assert_eq!(codes(&errors), [("/a", RejectCode::ConstraintViolation)]);
        assert!(hostile.check(&json!({"a": "aaaa"})).is_empty());
        // The bound leaves room for real values: a hostname of the longest allowed length.
        let label = "a".repeat(63);
        let longest = format!("{label}.{label}.{label}.{}", "b".repeat(61));
        assert_eq!(longest.len(), 253);
        assert!(schema.check(&json!({"host": longest})).is_empty());
        assert!(
            !schema
                .check(&json!({"host": format!("{longest}c")}))
                .is_empty()
        );
        // How many strings one call may have matched against such patterns is bounded.
        let list = ToolSchema::compile(
            &json!({"type": "object", "properties": {"hosts": {"type": "array", "items": {"type": "string", "pattern": hostname}}}}),
            &SchemaBounds::default(),
        )
        .unwrap();
        let hosts = |n: usize| json!({"hosts": vec!["example.org"; n]});
        assert!(list.check(&hosts(MAX_BACKTRACKING_MATCHES)).is_empty());
        let errors = list.check(&hosts(MAX_BACKTRACKING_MATCHES + 1));
        assert_eq!(
            codes(&errors),
            [(
                format!("/hosts/{MAX_BACKTRACKING_MATCHES}").as_str(),
                RejectCode::ConstraintViolation
            )]
        );
        // A string longer than the engine is given is refused, though the pattern matches it.
        assert_eq!(MAX_SUBJECT_CHARS, 512);
        let half = "x".repeat(300);
        let long = format!("{half} {half}");
        let twice = fancy_regex::Regex::new(r"^(\w+) \1$").unwrap();
        assert!(twice.is_match(&long).unwrap());
        let errors = schema.check(&json!({"twice": long}));
        assert_eq!(
            codes(&errors),
            [("/twice", RejectCode::ConstraintViolation)]
        );
        assert!(
            errors[0].message.contains("longer than 512 characters"),
            "{errors:?}"
        );
        // A match that needs more backtracking than the bound is refused, though an unbounded
        // engine finds it: the bound decides, not the pattern.
        let costly = r"^((a|aa)*)\1c$";
        let subject = format!("{}c", "a".repeat(24));
        let unbounded = fancy_regex::RegexBuilder::new(costly)
            .backtrack_limit(100_000_000)
            .build()
            .unwrap();
        assert!(unbounded.is_match(&subject).unwrap());
        let bounded = ToolSchema::compile(
            &json!({"type": "object", "properties": {"a": {"type": "string", "pattern": costly}}}),
            &SchemaBounds::default(),
        )
        .unwrap();
        let errors = bounded.check(&json!({"a": subject}));
        assert_eq!(codes(&errors), [("/a", RejectCode::ConstraintViolation)]);
        assert!(
            errors[0].message.contains("within 1000 backtracking steps"),
            "{errors:?}"
        );
        assert!(bounded.check(&json!({"a": "aac"})).is_empty());
        // toolgate's own keyword for such patterns is not a schema's to use: it would skip the
        // checks a `pattern` gets, its length among them.
        let own = json!({"type": "object", "properties": {"a": {"toolgate:bounded-pattern": "a".repeat(5000)}}});
        assert!(matches!(
            ToolSchema::compile(&own, &SchemaBounds::default()),
            Err(SchemaError::Invalid(message)) if message.contains("toolgate's own keyword")
        ));
    }

    #[test]
    fn many_problems_are_found_in_bounded_time() {
        let schema = ToolSchema::compile(
            &json!({"type": "object", "properties": {"edits": {"type": "array", "items": {
                "type": "object",
                "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}},
                "required": ["oldText", "newText"]}}}}),
            &SchemaBounds::default(),
        )
        .unwrap();
        // A few hundred values: every problem, up to the most a rejection names and one more.
        let errors = schema.check(&json!({"edits": vec![json!({}); 100]}));
        assert_eq!(errors.len(), MAX_FIELD_ERRORS + 1);
        assert!(errors.iter().all(|e| e.code == RejectCode::MissingInput));
        // A message quotes no more of a value than its start and end.
        let long = schema.check(&json!({"edits": "x".repeat(100_000)}));
        assert_eq!(codes(&long), [("/edits", RejectCode::InvalidType)]);
        assert!(long[0].message.chars().count() < 250, "{}", long[0].message);
        assert!(
            long[0].message.ends_with(r#"xxx" is not of type "array""#),
            "{}",
            long[0].message
        );
        // 300,000 values: the first problem, found without finding the rest.
        let errors = schema.check(&json!({"edits": vec![json!({}); 300_000]}));
        assert_eq!(
            codes(&errors),
            [("/edits/0/oldText", RejectCode::MissingInput)]
        );
        assert!(
            schema
                .check(&json!({"edits": vec![json!({"oldText": "a", "newText": "b"}); 5_000]}))
                .is_empty()
        );
    }
}
