//! InputSchemas that no object can pass: a tool's arguments are always one JSON object
//! (MCP `tools/call` `arguments`), so a tool whose inputSchema refuses every object could
//! never be called. Such a tool is left out with a warning, as one whose schema cannot be
//! compiled is, instead of being shown to the model with a stub it can only fail with.
//!
//! The test is read off the schema's own top level (after following a local `$ref`), so it
//! never costs a validation: `false` (which the repair layer sends as `{"not": {}}`), a
//! `type` that names no `object`, a `const` that is not an object, an `enum` holding no
//! object. A schema refusing every object in a deeper way (an `allOf` of contradictions)
//! keeps its tool; its calls are refused by the check as before.

use serde_json::Value;

use super::types::TypeWriter;

/// Why no object can pass `schema`, or `None` when some object may.
pub(super) fn refuses_every_object(schema: &Value) -> Option<String> {
    let top = TypeWriter::new(schema).deref(schema);
    let map = match top {
        Value::Bool(false) => return Some("it is `false`".into()),
        Value::Object(map) => map,
        _ => return None,
    };
    if let Some(not) = map.get("not")
        && (not == &Value::Bool(true) || not.as_object().is_some_and(|m| m.is_empty()))
    {
        return Some("it is `false`".into());
    }
    match map.get("type") {
        Some(Value::String(kind)) if kind != "object" => {
            return Some(format!("its type is {kind:?}"));
        }
        Some(Value::Array(kinds)) if !kinds.iter().any(|k| k == "object") => {
            return Some("its types name no \"object\"".into());
        }
        _ => {}
    }
    if let Some(constant) = map.get("const")
        && !constant.is_object()
    {
        return Some("its const is not an object".into());
    }
    if let Some(Value::Array(values)) = map.get("enum")
        && !values.iter().any(Value::is_object)
    {
        return Some("its enum holds no object".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_no_object_can_pass_are_named_with_the_reason() {
        for (schema, why) in [
            (json!(false), "it is `false`"),
            (json!({"not": {}}), "it is `false`"),
            (json!({"type": "string"}), "its type is \"string\""),
            (
                json!({"type": "array", "items": {}}),
                "its type is \"array\"",
            ),
            (json!({"type": "null"}), "its type is \"null\""),
            (
                json!({"type": ["string", "null"]}),
                "its types name no \"object\"",
            ),
            (json!({"const": 3}), "its const is not an object"),
            (json!({"enum": [1, "a"]}), "its enum holds no object"),
            (
                json!({"$ref": "#/$defs/s", "$defs": {"s": {"type": "string"}}}),
                "its type is \"string\"",
            ),
        ] {
            assert_eq!(
                refuses_every_object(&schema).as_deref(),
                Some(why),
                "{schema}"
            );
        }
    }

    #[test]
    fn schemas_some_object_may_pass_are_kept() {
        for schema in [
            json!({}),
            json!(true),
            json!({"type": "object"}),
            json!({"type": ["object", "null"]}),
            json!({"properties": {"a": {}}, "required": ["a"]}),
            json!({"anyOf": [{"type": "string"}, {"type": "object"}]}),
            json!({"not": {"type": "string"}}),
            json!({"enum": [{"a": 1}, 2]}),
            json!({"const": {}}),
        ] {
            assert_eq!(refuses_every_object(&schema), None, "{schema}");
        }
    }
}
