//! Compiling a tool's inputSchema into a validator, once, at startup.
//!
//! One policy for every draft:
//! - the draft comes from a known `$schema` (draft-04, -06, -07, 2019-09, 2020-12, with or
//!   without `https`, trailing `#`); an unknown or missing `$schema` means 2020-12;
//! - `format` is an annotation, never asserted (servers write `format` loosely, and the
//!   2020-12 default is annotation-only; one rule for all drafts);
//! - `$ref`s resolve only inside the schema: nothing is fetched from the network or a file
//!   (a remote or `file:` reference leaves the tool out);
//! - a schema nested deeper than [`MAX_SCHEMA_DEPTH`], or one the validator cannot compile,
//!   leaves its tool out with a warning (test `a_schema_too_deep_to_check_is_left_out_not_fatal`);
//! - arguments the schema does not name are refused unless it says `additionalProperties`
//!   (true or a schema) or `patternProperties`/`unevaluatedProperties` allow them (README "How a call works", step 3).

use jsonschema::{Draft, Validator};
use serde_json::Value;

/// Deepest JSON nesting of a schema that is compiled.
pub const MAX_SCHEMA_DEPTH: usize = 64;
/// Errors listed in one refusal before it says how many more.
const MAX_LISTED_ERRORS: usize = 3;

/// A compiled inputSchema.
pub struct ArgsValidator {
    validator: Validator,
    named: Option<Vec<String>>,
}

/// Why a schema could not be compiled (the tool is left out).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SchemaError {
    /// Deeper than [`MAX_SCHEMA_DEPTH`].
    #[error(
        "its inputSchema is nested more than {MAX_SCHEMA_DEPTH} levels deep, too deep to check"
    )]
    TooDeep,
    /// The inputSchema is not an object or boolean.
    #[error("its inputSchema is not a JSON Schema object")]
    NotASchema,
    /// The validator refused it (bad keyword values, unresolvable `$ref`).
    #[error("its inputSchema cannot be compiled: {0}")]
    Invalid(String),
}

/// JSON nesting depth of `value` (a scalar is 0), computed without recursion.
pub fn depth(value: &Value) -> usize {
    let mut max = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    max
}

fn draft_of(schema: &Value) -> Draft {
    let uri = schema.get("$schema").and_then(Value::as_str).unwrap_or("");
    let uri = uri
        .trim_end_matches('#')
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    match uri {
        "json-schema.org/draft-04/schema" => Draft::Draft4,
        "json-schema.org/draft-06/schema" => Draft::Draft6,
        "json-schema.org/draft-07/schema" => Draft::Draft7,
        "json-schema.org/draft/2019-09/schema" => Draft::Draft201909,
        _ => Draft::Draft202012,
    }
}

impl ArgsValidator {
    /// Compile `schema`.
    ///
    /// # Errors
    /// [`SchemaError`] when the schema is too deep, not a schema, or not compilable offline.
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        if depth(schema) > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::TooDeep);
        }
        if !matches!(schema, Value::Object(_) | Value::Bool(_)) {
            return Err(SchemaError::NotASchema);
        }
        let draft = draft_of(schema);
        let mut prepared = schema.clone();
        if let Value::Object(map) = &mut prepared {
            // The draft is chosen above; an unknown meta-schema URI must not be fetched.
            map.remove("$schema");
        }
        let validator = jsonschema::options()
            .with_draft(draft)
            .should_validate_formats(false)
            .offline()
            .build(&prepared)
            .map_err(|e| SchemaError::Invalid(crate::bridge::refusal::cap(&e.to_string(), 200)))?;
        Ok(Self {
            validator,
            named: named_only(schema),
        })
    }

    /// Check `args`; `Err` holds a short, bounded reason.
    pub fn check(&self, args: &Value) -> Result<(), String> {
        let Value::Object(map) = args else {
            return Err("the arguments must be an object".into());
        };
        if let Some(named) = &self.named {
            let unnamed: Vec<&str> = map
                .keys()
                .filter(|k| !named.iter().any(|n| n == *k))
                .map(String::as_str)
                .collect();
            if !unnamed.is_empty() {
                return Err(format!(
                    "arguments the schema does not name: {}",
                    unnamed
                        .iter()
                        .take(MAX_LISTED_ERRORS)
                        .map(|k| pyjson_str(k))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        let errors: Vec<String> = self
            .validator
            .iter_errors(args)
            .take(MAX_LISTED_ERRORS + 1)
            .map(|e| {
                let path = e.instance_path().to_string();
                let place = if path.is_empty() {
                    "arguments".to_owned()
                } else {
                    path
                };
                format!(
                    "{place}: {}",
                    crate::bridge::refusal::cap(&e.to_string(), 120)
                )
            })
            .collect();
        if errors.is_empty() {
            return Ok(());
        }
        let mut text = errors
            .iter()
            .take(MAX_LISTED_ERRORS)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if errors.len() > MAX_LISTED_ERRORS {
            text.push_str("; …");
        }
        Err(text)
    }
}

fn pyjson_str(s: &str) -> String {
    crate::pyjson::to_string(&Value::String(s.chars().take(64).collect()))
}

/// The property names when the schema allows no others, or `None` when it allows any.
fn named_only(schema: &Value) -> Option<Vec<String>> {
    let Value::Object(map) = schema else {
        return None;
    };
    let allows_more = match map.get("additionalProperties") {
        Some(Value::Bool(false)) | None => false,
        Some(_) => true,
    };
    if allows_more
        || map.contains_key("patternProperties")
        || map.contains_key("unevaluatedProperties")
        || map.contains_key("$ref")
        || ["anyOf", "oneOf", "allOf", "if", "dependentSchemas"]
            .iter()
            .any(|k| map.contains_key(*k))
    {
        // The schema itself decides through its composition; the validator enforces it.
        return None;
    }
    Some(
        map.get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add() -> ArgsValidator {
        ArgsValidator::compile(&json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]})).unwrap()
    }

    #[test]
    fn arguments_outside_the_schema_are_refused() {
        let v = add();
        assert!(v.check(&json!({"a": 1, "b": 2})).is_ok());
        assert!(v.check(&json!({"a": "x", "b": 1})).is_err());
        assert!(v.check(&json!({"a": 1})).is_err());
        let e = v.check(&json!({"a": 1, "b": 2, "c": 3})).unwrap_err();
        assert!(e.contains("\"c\""), "{e}");
        assert!(v.check(&json!([1, 2])).is_err());
    }

    #[test]
    fn schemas_that_allow_more_accept_more() {
        let v =
            ArgsValidator::compile(&json!({"properties": {"a": {}}, "additionalProperties": true}))
                .unwrap();
        assert!(v.check(&json!({"a": 1, "zzz": 2})).is_ok());
        let v = ArgsValidator::compile(&json!({})).unwrap();
        assert!(v.check(&json!({})).is_ok());
        assert!(v.check(&json!({"x": 1})).is_err());
    }

    #[test]
    fn a_schema_too_deep_is_refused() {
        let mut s = json!({"type": "string"});
        for _ in 0..100 {
            s = json!({"type": "object", "properties": {"x": s}});
        }
        assert_eq!(ArgsValidator::compile(&s).err(), Some(SchemaError::TooDeep));
        assert!(depth(&s) > MAX_SCHEMA_DEPTH);
    }

    #[test]
    fn remote_and_file_refs_are_never_fetched() {
        for r in [
            "http://127.0.0.1:9/x.json",
            "file:///etc/passwd",
            "https://example.com/s",
        ] {
            assert!(ArgsValidator::compile(&json!({"$ref": r})).is_err(), "{r}");
        }
    }

    #[test]
    fn drafts_and_unknown_schema_uris_compile() {
        for uri in [
            "http://json-schema.org/draft-07/schema#",
            "https://json-schema.org/draft/2020-12/schema",
            "http://json-schema.org/draft-04/schema#",
            "urn:example:unknown",
        ] {
            let v = ArgsValidator::compile(&json!({"$schema": uri, "properties": {"a": {"type": "integer", "format": "weird"}}})).unwrap();
            assert!(v.check(&json!({"a": 1})).is_ok());
            assert!(v.check(&json!({"a": "x"})).is_err());
        }
    }

    #[test]
    fn recursive_refs_validate() {
        let s = json!({
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}}}},
            "type": "object", "properties": {"head": {"$ref": "#/$defs/node"}}
        });
        let v = ArgsValidator::compile(&s).unwrap();
        assert!(
            v.check(&json!({"head": {"v": 1, "next": {"v": 2}}}))
                .is_ok()
        );
        assert!(
            v.check(&json!({"head": {"v": 1, "next": {"v": "x"}}}))
                .is_err()
        );
    }
}
