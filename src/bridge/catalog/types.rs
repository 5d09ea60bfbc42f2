//! JSON Schema → the Python type text written in stubs.
//!
//! `string` → `str`, `integer` → `int`, `number` → `float`, `boolean` → `bool`, `null` →
//! `None`, `array` → `list[T]`, `object` → `dict`, type arrays and `anyOf`/`oneOf` → `A | B`,
//! `enum`/`const` → `Literal[…]` (at most [`MAX_LITERALS`] values), local `$ref`s are followed,
//! anything else is `Any`. Types stop at [`STUB_TYPE_DEPTH`] levels (deeper is `Any`), so the
//! text of one type is bounded whatever the schema.

use serde_json::{Map, Value};

use crate::limits::STUB_TYPE_DEPTH;
use crate::pyjson;

/// Values of an `enum` written before `...`.
pub(super) const MAX_LITERALS: usize = 10;
/// Members of a union written before `...`.
pub(super) const MAX_UNION_MEMBERS: usize = 8;
/// `$ref` hops followed while rendering one type (cycles end as `Any`).
const MAX_REF_HOPS: usize = 8;
/// Longest literal value written, in characters.
const MAX_LITERAL_CHARS: usize = 40;

/// Renders types of one tool's schema; `root` resolves `#/…` references.
pub(super) struct TypeWriter<'a> {
    root: &'a Value,
}

impl<'a> TypeWriter<'a> {
    /// A writer resolving references against `root` (the tool's whole inputSchema).
    pub(super) fn new(root: &'a Value) -> Self {
        Self { root }
    }

    /// The type text of `schema` seen at nesting level `level` (a top-level property is 1).
    pub(super) fn type_text(&self, schema: &Value, level: usize) -> String {
        self.render(schema, level, 0)
    }

    /// `schema`, or what its local `$ref`s lead to (at most a few hops; an unresolvable or
    /// external reference stays as it is).
    pub(super) fn deref(&self, schema: &'a Value) -> &'a Value {
        let mut current = schema;
        for _ in 0..MAX_REF_HOPS {
            match current
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| self.resolve(r))
            {
                Some(target) => current = target,
                None => break,
            }
        }
        current
    }

    /// Follow a local `$ref` (`#`, `#/$defs/x`, `#/definitions/x`, any JSON pointer).
    pub(super) fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(&percent_decode(pointer))
    }

    fn render(&self, schema: &Value, level: usize, hops: usize) -> String {
        if level > STUB_TYPE_DEPTH {
            return "Any".into();
        }
        let Value::Object(map) = schema else {
            return "Any".into();
        };
        if let Some(Value::String(reference)) = map.get("$ref") {
            if hops >= MAX_REF_HOPS {
                return "Any".into();
            }
            return match self.resolve(reference) {
                Some(target) => self.render(target, level, hops + 1),
                None => "Any".into(),
            };
        }
        if let Some(value) = map.get("const") {
            return format!("Literal[{}]", literal(value));
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let mut parts: Vec<String> = values.iter().take(MAX_LITERALS).map(literal).collect();
            if values.len() > MAX_LITERALS {
                parts.push("...".into());
            }
            return format!("Literal[{}]", parts.join(", "));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(members)) = map.get(key) {
                let rendered = members
                    .iter()
                    .map(|m| self.render(m, level, hops))
                    .collect::<Vec<_>>();
                return union(rendered);
            }
        }
        if let Some(Value::Array(members)) = map.get("allOf")
            && members.len() == 1
        {
            return self.render(&members[0], level, hops);
        }
        match map.get("type") {
            Some(Value::String(t)) => self.simple(t, map, level, hops),
            Some(Value::Array(types)) => union(
                types
                    .iter()
                    .map(|t| match t {
                        Value::String(t) => self.simple(t, map, level, hops),
                        _ => "Any".into(),
                    })
                    .collect(),
            ),
            _ if map.contains_key("properties") => "dict".into(),
            _ if map.contains_key("items") => self.simple("array", map, level, hops),
            _ => "Any".into(),
        }
    }

    fn simple(&self, t: &str, map: &Map<String, Value>, level: usize, hops: usize) -> String {
        match t {
            "string" => "str".into(),
            "integer" => "int".into(),
            "number" => "float".into(),
            "boolean" => "bool".into(),
            "null" => "None".into(),
            "object" => "dict".into(),
            "array" => match map.get("items") {
                Some(items @ Value::Object(_)) => {
                    format!("list[{}]", self.render(items, level + 1, hops))
                }
                _ => "list".into(),
            },
            _ => "Any".into(),
        }
    }
}

fn union(mut members: Vec<String>) -> String {
    // A set: a union of many members is deduplicated in linear time.
    let mut seen = std::collections::HashSet::new();
    members.retain(|m| seen.insert(m.clone()));
    if members.iter().any(|m| m == "Any") || members.is_empty() {
        return "Any".into();
    }
    let more = members.len() > MAX_UNION_MEMBERS;
    members.truncate(MAX_UNION_MEMBERS);
    if more {
        members.push("...".into());
    }
    members.join(" | ")
}

/// `value` as a Python literal: JSON with `None`, `True` and `False` (strings and numbers
/// are written as JSON writes them, which Python reads the same way).
pub(super) fn python_literal(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(python_literal)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!(
                    "{}: {}",
                    pyjson::to_string(&Value::String(k.clone())),
                    python_literal(v)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => pyjson::to_string(other),
    }
}

fn literal(value: &Value) -> String {
    let text = python_literal(value);
    if text.chars().count() > MAX_LITERAL_CHARS {
        let cut: String = text.chars().take(MAX_LITERAL_CHARS).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// Decode `%XX` escapes of a URI fragment (JSON pointers in `$ref` are URI-encoded).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(schema: Value) -> String {
        TypeWriter::new(&schema).type_text(&schema, 1)
    }

    #[test]
    fn simple_types_map_to_python() {
        assert_eq!(text(json!({"type": "integer"})), "int");
        assert_eq!(text(json!({"type": "string", "format": "date"})), "str");
        assert_eq!(text(json!({"type": ["string", "null"]})), "str | None");
        assert_eq!(
            text(json!({"type": "array", "items": {"type": "number"}})),
            "list[float]"
        );
        assert_eq!(text(json!({"type": "array"})), "list");
        assert_eq!(text(json!({})), "Any");
        assert_eq!(text(json!(true)), "Any");
        assert_eq!(
            text(json!({"anyOf": [{"type": "string"}, {"type": "null"}]})),
            "str | None"
        );
        assert_eq!(
            text(json!({"enum": ["a", 1, null]})),
            r#"Literal["a", 1, None]"#
        );
        assert_eq!(text(json!({"const": "x"})), r#"Literal["x"]"#);
    }

    #[test]
    fn local_refs_are_followed_and_cycles_end() {
        let schema = json!({
            "$defs": {"Node": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                      "Name": {"type": "string"}},
            "properties": {"n": {"$ref": "#/$defs/Name"}}
        });
        let w = TypeWriter::new(&schema);
        assert_eq!(w.type_text(&json!({"$ref": "#/$defs/Name"}), 1), "str");
        assert_eq!(
            w.type_text(&json!({"$ref": "#/$defs/Node"}), 1),
            "list[list[list[list[list[Any]]]]]"
        );
        assert_eq!(w.type_text(&json!({"$ref": "#"}), 1), "dict");
        let cyclic = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}});
        let w2 = TypeWriter::new(&cyclic);
        assert_eq!(w2.type_text(&json!({"$ref": "#/$defs/a"}), 1), "Any");
        assert_eq!(w.type_text(&json!({"$ref": "https://x/y.json"}), 1), "Any");
    }

    #[test]
    fn types_stop_at_five_levels() {
        let mut schema = json!({"type": "string"});
        for _ in 0..20 {
            schema = json!({"type": "array", "items": schema});
        }
        assert_eq!(text(schema), "list[list[list[list[list[Any]]]]]");
    }

    #[test]
    fn big_enums_and_unions_stay_bounded() {
        let values: Vec<Value> = (0..100).map(|i| json!("v".repeat(i))).collect();
        let t = text(json!({"enum": values}));
        assert!(t.ends_with(", ...]"), "{t}");
        let members: Vec<Value> = (0..50).map(|i| json!({"const": i})).collect();
        let t = text(json!({"anyOf": members}));
        assert!(t.ends_with("| ..."), "{t}");
        assert!(t.len() < 400);
    }
}
