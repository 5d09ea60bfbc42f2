//! A tool's result as the string the code receives (README "How a call works", step 4).
//!
//! `structuredContent` when present, as Python's `json.dumps` writes it (integers exact at
//! any length, as the server wrote them); otherwise the content blocks: text as is, joined by `\n`, and every other block as a short bracketed
//! line that says what it was (`[image: image/png, 1234 bytes of base64]`), so nothing is
//! dropped silently and nothing unbounded is copied.
//!
//! A tool whose outputSchema is the single-`result` wrapper (the Python SDK and FastMCP wrap a
//! non-object return value as `{"result": value}`) hands over the inner value: a string as the
//! text itself, anything else as JSON. `-> str` tools then give `Hello, Ada!`, not
//! `{"result": "Hello, Ada!"}`.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

use crate::bridge::refusal::cap;
use crate::pyjson;

/// Longest URI or name quoted in a bracketed block line, in characters.
const MAX_QUOTED_CHARS: usize = 200;

/// The inner schema when `output_schema` is the single-`result` wrapper: an object schema
/// whose only property is `result`, and which requires it.
pub(crate) fn result_wrapper(output_schema: &Value) -> Option<&Value> {
    let properties = output_schema.get("properties")?.as_object()?;
    let required = output_schema.get("required")?.as_array()?;
    if properties.len() == 1 && required.len() == 1 && required[0] == "result" {
        properties.get("result")
    } else {
        None
    }
}

/// The string handed to the code for a successful result; `unwrap` when the tool's
/// outputSchema is the single-`result` wrapper ([`result_wrapper`]).
pub(crate) fn result_text(result: &CallToolResult, unwrap: bool) -> String {
    if let Some(structured) = &result.structured_content {
        if unwrap
            && let Value::Object(map) = structured
            && map.len() == 1
            && let Some(inner) = map.get("result")
        {
            return match inner {
                Value::String(text) => text.clone(),
                other => pyjson::to_string(other),
            };
        }
        return pyjson::to_string(structured);
    }
    content_text(result)
}

/// The content blocks as text (also used for `isError` messages); when there are none, the
/// `structuredContent` as JSON, so an error that carries only that is not silent.
pub(crate) fn content_text(result: &CallToolResult) -> String {
    if result.content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        return pyjson::to_string(structured);
    }
    result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => format!(
                "[image: {}, {} bytes of base64]",
                cap(&i.mime_type, MAX_QUOTED_CHARS),
                i.data.len()
            ),
            ContentBlock::Audio(a) => format!(
                "[audio: {}, {} bytes of base64]",
                cap(&a.mime_type, MAX_QUOTED_CHARS),
                a.data.len()
            ),
            ContentBlock::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents { text, .. } => text.clone(),
                ResourceContents::BlobResourceContents { uri, blob, .. } => format!(
                    "[resource {}: {} bytes of base64]",
                    cap(uri.as_str(), MAX_QUOTED_CHARS),
                    blob.len()
                ),
                #[allow(unreachable_patterns)]
                _ => "[a resource this bridge cannot read]".to_owned(),
            },
            ContentBlock::ResourceLink(link) => format!(
                "[resource link: {} ({})]",
                cap(&link.uri, MAX_QUOTED_CHARS),
                cap(&link.name, MAX_QUOTED_CHARS)
            ),
            #[allow(unreachable_patterns)]
            _ => "[a content block this bridge cannot read]".to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> CallToolResult {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn structured_content_wins_and_is_written_like_python() {
        let r = parse(
            json!({"content": [{"type": "text", "text": "ignored"}], "structuredContent": {"sum": 5}}),
        );
        assert_eq!(result_text(&r, false), r#"{"sum": 5}"#);
        let r = parse(json!({"structuredContent": {"n": 9007199254740993u64}}));
        assert_eq!(result_text(&r, false), r#"{"n": 9007199254740993}"#);
    }

    #[test]
    fn other_blocks_are_named_not_dropped() {
        let r = parse(json!({"content": [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///x", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///y", "blob": "AAAA"}},
            {"type": "resource_link", "uri": "https://e/x", "name": "x"}
        ]}));
        let t = result_text(&r, false);
        for part in [
            "a\n",
            "[image: image/png, 4 bytes",
            "[audio: audio/wav",
            "inside",
            "[resource file:///y",
            "[resource link: https://e/x (x)]",
        ] {
            assert!(t.contains(part), "{part} in {t}");
        }
    }

    #[test]
    fn the_single_result_wrapper_gives_the_inner_value() {
        let wrapper = json!({"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"], "title": "greetOutput"});
        assert_eq!(result_wrapper(&wrapper), Some(&json!({"type": "string"})));
        assert!(result_wrapper(&json!({"type": "object", "properties": {"result": {}, "x": {}}, "required": ["result"]})).is_none());
        assert!(result_wrapper(&json!({"type": "object", "properties": {"result": {}}})).is_none());
        let r = parse(
            json!({"content": [{"type": "text", "text": "Hello, Ada!"}], "structuredContent": {"result": "Hello, Ada!"}}),
        );
        assert_eq!(result_text(&r, true), "Hello, Ada!");
        assert_eq!(result_text(&r, false), r#"{"result": "Hello, Ada!"}"#);
        let r = parse(json!({"structuredContent": {"result": [1, 2]}}));
        assert_eq!(result_text(&r, true), "[1, 2]");
        let r = parse(json!({"structuredContent": {"result": 1, "extra": 2}}));
        assert_eq!(result_text(&r, true), r#"{"result": 1, "extra": 2}"#);
    }

    #[test]
    fn an_error_with_only_structured_content_says_it() {
        let r = parse(json!({"isError": true, "structuredContent": {"why": "quota"}}));
        assert_eq!(content_text(&r), r#"{"why": "quota"}"#);
    }

    #[test]
    fn empty_results_are_empty_strings() {
        assert_eq!(result_text(&parse(json!({"content": []})), false), "");
    }
}
