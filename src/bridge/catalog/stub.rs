//! Stubs and summary lines for tools, as the run_python description and `TOOLS` show them.
//!
//! ```text
//! async def add(params: dict) -> str:
//!     """
//!     Add two integers.
//!
//!     params: a: int, b: int
//!     """
//! ```
//! The description is cut at 2 KiB; `\` and `"""` in it, and in parameter descriptions, are
//! escaped so they cannot end the docstring; parameter names that are not plain identifiers are written as JSON strings,
//! cut at 64 characters first; optional parameters are written `name?: type`; at most
//! [`MAX_PARAMS`] parameters are listed. A tool with an `outputSchema` gets a `returns:` line.

use serde_json::Value;

use super::names::is_plain_identifier;
use super::types::TypeWriter;
use crate::limits::{MAX_DESCRIPTION_BYTES, MAX_PARAM_NAME_CHARS};
use crate::pyjson;

/// Parameters listed in one stub before `... (N more)`.
pub(super) const MAX_PARAMS: usize = 50;
use crate::sandbox::escape_controls;

/// Longest short description in a summary line, in characters.
pub(super) const MAX_SUMMARY_CHARS: usize = 200;

/// What a stub is made from.
pub(super) struct StubInput<'a> {
    /// The Python name.
    pub name: &'a str,
    /// The server's description, uncut.
    pub description: Option<&'a str>,
    /// The inputSchema.
    pub input_schema: &'a Value,
    /// The outputSchema, if declared.
    pub output_schema: Option<&'a Value>,
    /// Whether the tool is labelled private.
    pub private: bool,
    /// Whether each call waits for a person's approval (`--approve`).
    pub approve: bool,
}

/// The stub line of a tool whose calls wait for a person's approval.
pub(crate) const ASKS_FIRST_LINE: &str = "[asks first]: each call waits for a person's approval through the MCP client (the run's deadline keeps running); a declined call raises ToolError(\"declined by the user\").";

/// Cut `text` to at most `max` bytes on a character boundary.
pub(super) fn cut_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The description as kept: cut at [`MAX_DESCRIPTION_BYTES`] (then ending in ` …`),
/// surrounding blank space trimmed, control and format characters escaped
/// ([`escape_controls`]: a server's ESC sequence or bidi override reaches nobody's screen).
pub(super) fn kept_description(description: Option<&str>) -> String {
    let full = description.unwrap_or("");
    let kept = cut_bytes(full, MAX_DESCRIPTION_BYTES).trim();
    if kept.len() < full.trim().len() {
        format!("{} …", escape_controls(kept))
    } else {
        escape_controls(kept)
    }
}

/// A parameter name as written in stubs and summaries: bare, or quoted after cutting.
pub(super) fn param_name(name: &str) -> String {
    if name.chars().count() <= MAX_PARAM_NAME_CHARS && is_plain_identifier(name) {
        return name.to_owned();
    }
    let cut: String = name.chars().take(MAX_PARAM_NAME_CHARS).collect();
    pyjson::to_string(&Value::String(cut))
}

/// The parameter names as written (at most [`MAX_PARAMS`]) and how many there are.
fn param_names(schema: &Value) -> (Vec<String>, usize) {
    let schema = TypeWriter::new(schema).deref(schema);
    let properties = schema.get("properties").and_then(Value::as_object);
    let names = properties
        .into_iter()
        .flatten()
        .take(MAX_PARAMS)
        .map(|(name, _)| param_name(name))
        .collect();
    (names, properties.map_or(0, |p| p.len()))
}

/// The parameter names a `start` gives the runner for a tool ([`ToolEntry::params`]): the
/// first [`MAX_PARAMS`] the schema names, as the server spells them, for the hint of a call
/// of the wrong shape, and `params` whenever the schema names it, wherever it stands. The
/// runner reads a call whose only keyword is `params=`, holding a dict, as the dict form
/// (the stub's signature is `(params: dict)`) unless `params` is among these names.
///
/// [`ToolEntry::params`]: crate::run::protocol::ToolEntry::params
pub(super) fn runner_params(schema: &Value) -> Vec<String> {
    let schema = TypeWriter::new(schema).deref(schema);
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut names: Vec<String> = properties.keys().take(MAX_PARAMS).cloned().collect();
    if properties.contains_key("params") && !names.iter().any(|n| n == "params") {
        names.push("params".to_owned());
    }
    names
}

fn returns_line(output_schema: &Value) -> String {
    let writer = TypeWriter::new(output_schema);
    if let Some(inner) = crate::bridge::upstream::result::result_wrapper(output_schema) {
        return match writer.type_text(inner, 1).as_str() {
            "str" => "the text itself (str)".to_owned(),
            other => format!("JSON {other}"),
        };
    }
    match output_schema.get("properties").and_then(Value::as_object) {
        Some(props) => {
            let fields: Vec<String> = props
                .iter()
                .take(MAX_PARAMS)
                .map(|(k, v)| {
                    let key = pyjson::to_string(&Value::String(
                        k.chars().take(MAX_PARAM_NAME_CHARS).collect(),
                    ));
                    format!("{key}: {}", writer.type_text(v, 1))
                })
                .collect();
            let more = if props.len() > MAX_PARAMS {
                ", ..."
            } else {
                ""
            };
            format!("JSON {{{}{more}}}", fields.join(", "))
        }
        None => format!("JSON {}", writer.type_text(output_schema, 1)),
    }
}

/// `text` as written inside a stub's docstring: `\` doubled and `"""` written `\"\"\"`, so
/// no text a server wrote (a tool's description, a parameter's description or a variant's
/// title) can end the docstring and show lines of its own as code.
pub(super) fn escape_docstring(text: &str) -> String {
    text.replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"")
}

/// The stub of one tool.
pub(super) fn stub(input: &StubInput<'_>) -> String {
    let mut out = format!(
        "async def {}(params: dict) -> str:\n    \"\"\"\n",
        input.name
    );
    let description = kept_description(input.description);
    if !description.is_empty() {
        for line in escape_docstring(&description).lines() {
            if line.trim().is_empty() {
                out.push('\n');
            } else {
                out.push_str("    ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push('\n');
    }
    if input.private {
        out.push_str("    [private]: its results may hold private data; after calling it only private tools can be called.\n");
    }
    if input.approve {
        out.push_str("    ");
        out.push_str(ASKS_FIRST_LINE);
        out.push('\n');
    }
    out.push_str(&super::params::params_block(input.input_schema));
    if let Some(output) = input.output_schema {
        out.push_str("    returns: ");
        out.push_str(&returns_line(output));
        out.push('\n');
    }
    out.push_str("    \"\"\"");
    out
}

/// The one-line summary: `name(a, b) [private]: first line of the description`.
pub(super) fn summary(input: &StubInput<'_>) -> String {
    let (mut names, total) = param_names(input.input_schema);
    if total > names.len() {
        names.push("...".into());
    }
    let mut line = format!("{}({})", input.name, names.join(", "));
    if input.private {
        line.push_str(" [private]");
    }
    if input.approve {
        line.push_str(" [asks first]");
    }
    let description = kept_description(input.description);
    if let Some(first) = description.lines().map(str::trim).find(|l| !l.is_empty()) {
        line.push_str(": ");
        if first.chars().count() > MAX_SUMMARY_CHARS {
            line.extend(first.chars().take(MAX_SUMMARY_CHARS));
            line.push('…');
        } else {
            line.push_str(first);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add_schema() -> Value {
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]})
    }

    #[test]
    fn a_tool_of_two_required_integers_renders_as_an_async_def_and_a_one_line_summary() {
        let schema = add_schema();
        let input = StubInput {
            name: "add",
            description: Some("Add two integers."),
            input_schema: &schema,
            output_schema: None,
            private: false,
            approve: false,
        };
        assert_eq!(
            stub(&input),
            "async def add(params: dict) -> str:\n    \"\"\"\n    Add two integers.\n\n    params: a: int, b: int\n    \"\"\""
        );
        assert_eq!(summary(&input), "add(a, b): Add two integers.");
    }

    #[test]
    fn long_descriptions_are_cut() {
        let schema = json!({});
        let long = "é".repeat(5000);
        let input = StubInput {
            name: "t",
            description: Some(&long),
            input_schema: &schema,
            output_schema: None,
            private: false,
            approve: false,
        };
        let s = stub(&input);
        assert!(s.len() < MAX_DESCRIPTION_BYTES + 200);
        assert!(s.contains(&"é".repeat(1024)));
        assert!(!s.contains(&"é".repeat(1025)));
    }

    #[test]
    fn a_description_cannot_end_the_docstring() {
        let schema = json!({});
        let input = StubInput {
            name: "t",
            description: Some("x\"\"\"\nimport os\\"),
            input_schema: &schema,
            output_schema: None,
            private: false,
            approve: false,
        };
        let s = stub(&input);
        assert_eq!(s.matches("\"\"\"").count(), 2, "{s}");
    }

    #[test]
    fn odd_and_long_parameter_names_are_quoted_and_cut() {
        let long = "n".repeat(100);
        let schema = json!({"properties": {"from": {}, "cik-A": {"type": "string"}, long.clone(): {}, "ok": {"type": "boolean"}}, "required": ["ok"]});
        let input = StubInput {
            name: "t",
            description: None,
            input_schema: &schema,
            output_schema: None,
            private: true,
            approve: false,
        };
        let s = stub(&input);
        assert!(s.contains(r#""from"?: Any"#), "{s}");
        assert!(s.contains(r#""cik-A"?: str"#), "{s}");
        assert!(s.contains(&format!("\"{}\"?: Any", "n".repeat(64))), "{s}");
        assert!(s.contains("ok: bool"), "{s}");
        assert!(s.contains("[private]"));
        assert_eq!(summary(&input).matches("[private]").count(), 1);
    }

    #[test]
    fn the_runner_is_told_of_a_params_parameter_wherever_the_schema_names_it() {
        let mut props: serde_json::Map<String, Value> =
            (0..60).map(|i| (format!("p{i:02}"), json!({}))).collect();
        props.insert("params".into(), json!({}));
        let names = runner_params(&json!({ "properties": props }));
        assert_eq!(names.len(), MAX_PARAMS + 1);
        assert_eq!(names.last().map(String::as_str), Some("params"));
        assert_eq!(runner_params(&add_schema()), ["a", "b"]);
        assert!(runner_params(&json!({})).is_empty());
    }

    #[test]
    fn typed_returns_say_what_the_string_holds() {
        let schema = add_schema();
        let output = json!({"type": "object", "properties": {"sum": {"type": "integer"}}});
        let input = StubInput {
            name: "add",
            description: None,
            input_schema: &schema,
            output_schema: Some(&output),
            private: false,
            approve: false,
        };
        assert!(stub(&input).contains("    returns: JSON {\"sum\": int}\n"));
    }

    #[test]
    fn many_parameters_are_bounded() {
        let props: serde_json::Map<String, Value> = (0..500)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let schema = json!({"properties": props});
        let input = StubInput {
            name: "t",
            description: None,
            input_schema: &schema,
            output_schema: None,
            private: false,
            approve: false,
        };
        let s = stub(&input);
        assert!(s.contains("... (450 more)"));
        assert!(s.len() < 2000);
    }

    #[test]
    fn a_tool_whose_calls_wait_for_approval_says_so_in_its_stub_and_summary() {
        let schema = add_schema();
        let mut input = StubInput {
            name: "delete",
            description: Some("Delete a file."),
            input_schema: &schema,
            output_schema: None,
            private: false,
            approve: true,
        };
        let asks = stub(&input);
        assert!(asks.contains(&format!("    {ASKS_FIRST_LINE}\n")), "{asks}");
        assert!(
            asks.contains("ToolError(\"declined by the user\")"),
            "{asks}"
        );
        assert!(summary(&input).starts_with("delete(a, b) [asks first]: "));
        input.approve = false;
        assert!(!stub(&input).contains("[asks first]"));
        assert!(!summary(&input).contains("[asks first]"));
    }
}
