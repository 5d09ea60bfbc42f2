//! A tool's result as the string the code receives (README "How a call works", step 4).
//!
//! `structuredContent` when present, as Python's `json.dumps` writes it (integers exact up
//! to 64 bits); otherwise the content blocks: text as is, joined by `\n`, and every other block as a short bracketed
//! line that says what it was (`[image: image/png, 1234 bytes of base64]`), so nothing is
//! dropped silently and nothing unbounded is copied.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use crate::bridge::refusal::cap;
use crate::pyjson;

/// Longest URI or name quoted in a bracketed block line, in characters.
const MAX_QUOTED_CHARS: usize = 200;

/// The string handed to the code for a successful result.
pub fn result_text(result: &CallToolResult) -> String {
    if let Some(structured) = &result.structured_content {
        return pyjson::to_string(structured);
    }
    content_text(result)
}

/// The content blocks as text (also used for `isError` messages); when there are none, the
/// `structuredContent` as JSON, so an error that carries only that is not silent.
pub fn content_text(result: &CallToolResult) -> String {
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
        assert_eq!(result_text(&r), r#"{"sum": 5}"#);
        let r = parse(json!({"structuredContent": {"n": 9007199254740993u64}}));
        assert_eq!(result_text(&r), r#"{"n": 9007199254740993}"#);
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
        let t = result_text(&r);
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
    fn an_error_with_only_structured_content_says_it() {
        let r = parse(json!({"isError": true, "structuredContent": {"why": "quota"}}));
        assert_eq!(content_text(&r), r#"{"why": "quota"}"#);
    }

    #[test]
    fn empty_results_are_empty_strings() {
        assert_eq!(result_text(&parse(json!({"content": []}))), "");
    }
}
