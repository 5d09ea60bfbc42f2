//! Answers to client messages that cannot be read, on both transports.
//!
//! rmcp 3.11 drops a stdio line it cannot parse (a debug log, no answer) and answers such a
//! POST body `415 Unsupported Media Type`, so a client waited for ever on its request, or was
//! told its media type was wrong. JSON-RPC 2.0 section 5 asks for an error response instead:
//! `-32700 Parse error` for invalid JSON, `-32600 Invalid Request` for a message that is not
//! a valid request (here: one over the size cap). Section 5 gives `id: null` when the id
//! cannot be detected; when the byte scanner of the wrapped-server side
//! ([`top_level_id`]) reads a string or number id from the text, the answer carries it, so
//! the client's pending request ends.
//!
//! A message is unreadable when serde_json cannot parse it: bad syntax, or a string holding
//! a lone UTF-16 surrogate escape (`"\ud800"`: valid JSON grammar, but no Unicode text; RFC
//! 8259 section 8.2).

use serde::de::IgnoredAny;
use serde_json::{Value, json};

use crate::bridge::upstream::json_scan::top_level_id;

/// JSON-RPC 2.0 `Parse error`: invalid JSON was received.
pub(super) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0 `Invalid Request`: the JSON sent is not a valid request object.
pub(super) const INVALID_REQUEST: i64 = -32600;

/// Why serde_json cannot read the message `text` (a UTF-8 byte order mark at its start is
/// allowed, as rmcp allows it), or `None` when it can.
pub(super) fn unreadable(text: &[u8]) -> Option<String> {
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    // A syntax check skips escapes without decoding them; a text with a `\uD...` escape is
    // decoded in full, where a lone surrogate is an error.
    let read = if may_hold_surrogate(text) {
        serde_json::from_slice::<Value>(text).map(drop)
    } else {
        serde_json::from_slice::<IgnoredAny>(text).map(drop)
    };
    read.err().map(|e| e.to_string())
}

fn may_hold_surrogate(text: &[u8]) -> bool {
    text.windows(3)
        .any(|w| w[0] == b'\\' && w[1] == b'u' && (w[2] | 0x20) == b'd')
}

/// The JSON-RPC error response to the message `text` (or its first part, when it was too
/// long to keep): `code` and `message`, with the message's id when the scanner reads a
/// string or number id from `text`, else `null`.
pub(super) fn error_answer(text: &[u8], code: i64, message: &str) -> Value {
    let id = top_level_id(text)
        .filter(|id| id.is_string() || id.is_number())
        .unwrap_or(Value::Null);
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_json_is_readable_and_bad_syntax_or_a_lone_surrogate_is_not() {
        assert_eq!(
            unreadable(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            None
        );
        assert_eq!(unreadable(b"\xEF\xBB\xBF{\"a\":\"\\ud83d\\ude00\"}"), None);
        assert!(unreadable(b"{not json").is_some());
        assert!(unreadable(br#"{"a":"\ud800"}"#).is_some());
        assert!(unreadable(br#"{"a":"\uDC00x"}"#).is_some());
    }

    #[test]
    fn the_answer_carries_the_id_when_it_can_be_read() {
        let answer = error_answer(br#"{"id":7,"method":"x","params":{"a":"\ud800"}}"#, -1, "m");
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["error"]["code"], -1);
        assert_eq!(error_answer(b"{oops", -1, "m")["id"], Value::Null);
        assert_eq!(
            error_answer(br#"{"id":{"x":1}}"#, -1, "m")["id"],
            Value::Null
        );
    }
}
