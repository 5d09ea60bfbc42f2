//! JSON text from outside (a client, a wrapped server, the sandbox) read into a [`Value`]
//! whose numbers are exactly the numbers written.
//!
//! serde_json's `arbitrary_precision` feature (Cargo.toml) holds every number as its text,
//! so an integer beyond 64 bits (`18446744073709551616`, a 30-digit id) passes from a
//! server to the code, and from the code to a server, digit for digit instead of rounded
//! to the nearest f64 (README "How a call works", step 4). The feature also reads a number
//! written in float form that no f64 holds (`1e400`), which serde_json refuses without it;
//! [`from_slice`] refuses it still, so such a text stays what it was, no JSON the host
//! takes (README "Limits": `-32700`; a server's answer or a runner line that holds one is
//! not valid JSON). An integer is never out of range: it is kept as written.
//!
//! [`typed`], [`typed_ref`] and [`typed_object`] read such a value into a typed message
//! (rmcp's, whose `Value` fields keep every number as written). serde reads an untagged or
//! internally tagged enum, and a struct with a flattened field (rmcp's JSON-RPC message,
//! its results, content blocks, `_meta` holders), through a buffer of its own that holds
//! no 128-bit integer. Read from a [`Value`], serde_json hands that buffer an integer
//! from 2^64 to 2^128-1 (or -2^127 to -2^63-1) as a u128 (i128), which the read refuses
//! ("invalid type: integer `18446744073709551616` as u128, expected any value"), and a
//! longer integer that an f64 prints alike (`10^40`) as that f64 (back as `1e40`). Read
//! from JSON text, serde_json hands the buffer every integer outside i64 and u64 as its
//! text, which a `Value` field gets back digit for digit. So a value holding such an
//! integer is read from its text; any other is read in place, as serde_json reads it.

use serde::Serialize;
use serde::de::{DeserializeOwned, Error as _};
use serde_json::{Map, Number, Value};

/// `bytes` as one JSON value, or serde_json's error; a number in float form (`.`, `e` or
/// `E` in it) beyond f64's range is refused as `number out of range`, as serde_json does
/// without `arbitrary_precision`.
pub(crate) fn from_slice(bytes: &[u8]) -> serde_json::Result<Value> {
    let value = serde_json::from_slice(bytes)?;
    check_range(&value)?;
    Ok(value)
}

/// `Ok` when every number in `value` is an integer or a float f64 holds (`1e-400` reads as
/// 0, as serde_json reads it without `arbitrary_precision`), else the error
/// [`from_slice`] gives.
pub(crate) fn check_range(value: &Value) -> serde_json::Result<()> {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Number(n) => {
                let text = n.as_str();
                if text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) && n.as_f64().is_none() {
                    return Err(serde_json::Error::custom("number out of range"));
                }
            }
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => pending.extend(map.values()),
            Value::Null | Value::Bool(_) | Value::String(_) => {}
        }
    }
    Ok(())
}

/// `value` read as a `T`, as from its JSON text (see the module documentation): every
/// integer reaches `T`'s `Value` fields exactly as written.
///
/// # Errors
/// serde_json's, when `T` does not read `value`; the error names no line or column.
pub(crate) fn typed<T: DeserializeOwned>(value: Value) -> serde_json::Result<T> {
    if holds_wide_integer([&value]) {
        via_text(&value)
    } else {
        serde_json::from_value(value)
    }
}

/// [`typed`] of a borrowed `value` (read in place when it holds no wide integer).
///
/// # Errors
/// As [`typed`].
pub(crate) fn typed_ref<T: DeserializeOwned>(value: &Value) -> serde_json::Result<T> {
    if holds_wide_integer([value]) {
        via_text(value)
    } else {
        T::deserialize(value)
    }
}

/// [`typed`] of the JSON object `obj`.
///
/// # Errors
/// As [`typed`].
pub(crate) fn typed_object<T: DeserializeOwned>(obj: &Map<String, Value>) -> serde_json::Result<T> {
    if holds_wide_integer(obj.values()) {
        via_text(obj)
    } else {
        T::deserialize(obj)
    }
}

/// `value` written as JSON text and read back as a `T`; an error's position (in that text,
/// which nobody sent) is left out of its message.
fn via_text<T: DeserializeOwned>(value: &impl Serialize) -> serde_json::Result<T> {
    let text = serde_json::to_vec(value)?;
    serde_json::from_slice(&text).map_err(|e| {
        let message = e.to_string();
        let place = format!(" at line {} column {}", e.line(), e.column());
        serde_json::Error::custom(message.strip_suffix(&place).unwrap_or(&message))
    })
}

/// Whether some number in `values` (at any depth) is an integer that serde_json reads from
/// a [`Value`] otherwise than from text: outside both i64 and u64, or `-0`.
fn holds_wide_integer<'a>(values: impl IntoIterator<Item = &'a Value>) -> bool {
    let mut pending: Vec<&Value> = values.into_iter().collect();
    while let Some(value) = pending.pop() {
        match value {
            Value::Number(n) if is_wide_integer(n) => return true,
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => pending.extend(map.values()),
            _ => {}
        }
    }
    false
}

/// Whether `n` is written as an integer that neither i64 nor u64 holds as written.
fn is_wide_integer(n: &Number) -> bool {
    let text = n.as_str();
    !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'))
        && ((n.as_u64().is_none() && n.as_i64().is_none()) || text == "-0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_of_any_length_are_kept_as_written() {
        let text = br#"{"a":18446744073709551616,"b":-123456789012345678901234567890,"c":[9007199254740993]}"#;
        let value = from_slice(text).unwrap();
        assert_eq!(value.to_string().as_bytes(), text);
        let long = format!("[{}]", "9".repeat(400));
        assert_eq!(from_slice(long.as_bytes()).unwrap().to_string(), long);
    }

    #[test]
    fn a_float_beyond_f64_is_refused_as_without_the_feature() {
        for text in ["1e400", "[1.5,{\"x\":-1E309}]", "{\"n\":[[1e999]]}"] {
            let e = from_slice(text.as_bytes()).unwrap_err();
            assert!(e.to_string().contains("number out of range"), "{text}: {e}");
        }
        // A float too small for f64 reads as zero, a finite float as itself.
        assert!(from_slice(b"[1e-400, 0.30000000000000004, 1e308]").is_ok());
        assert!(from_slice(b"{not json").is_err());
    }

    /// Integers that no 64 bits hold, each at the edge of a band serde_json reads from a
    /// `Value` in its own way: u128, i128, beyond 128 bits yet printed alike by an f64,
    /// beyond 128 bits and not; and `-0`.
    const WIDE: [&str; 8] = [
        "18446744073709551616",
        "340282366920938463463374607431768211455",
        "-9223372036854775809",
        "-170141183460469231731687303715884105728",
        "340282366920938463463374607431768211456",
        "10000000000000000000000000000000000000000",
        "-123456789012345678901234567890123456789012345678901234567890",
        "-0",
    ];

    /// `messages` (JSON texts with `N` where the number goes) read by `typed` as a `T`
    /// with each of [`WIDE`] and written back: the same text.
    fn assert_kept<T: DeserializeOwned + Serialize>(messages: &[&str]) {
        for n in WIDE {
            for message in messages {
                let text = message.replace('N', n);
                let value = from_slice(text.as_bytes()).unwrap();
                let read: T = typed(value.clone()).unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(serde_json::to_value(&read).unwrap(), value, "{text}");
                assert!(serde_json::to_string(&read).unwrap().contains(n), "{text}");
                let read: T = typed_ref(&value).unwrap();
                assert_eq!(serde_json::to_value(&read).unwrap(), value, "{text}");
            }
        }
    }

    #[test]
    fn a_servers_messages_holding_integers_beyond_64_bits_read_into_rmcps_types_as_written() {
        use rmcp::model::ServerJsonRpcMessage;
        assert_kept::<ServerJsonRpcMessage>(&[
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"store","inputSchema":{"type":"object","properties":{"key":{"type":"integer","minimum":0,"exclusiveMaximum":N}}},"_meta":{"n":N}}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"experimental":{"x":{"n":N}}},"serverInfo":{"name":"s","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"bad","data":{"n":N}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"t","_meta":{"n":N}}],"structuredContent":{"n":[N]},"_meta":{"n":N}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"n":N}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"n":N}}}"#,
            r#"{"jsonrpc":"2.0","id":"s1","method":"ping","params":{"_meta":{"n":N}}}"#,
        ]);
    }

    #[test]
    fn a_clients_messages_holding_integers_beyond_64_bits_read_into_rmcps_types_as_written() {
        use rmcp::model::ClientJsonRpcMessage;
        assert_kept::<ClientJsonRpcMessage>(&[
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"experimental":{"x":{"n":N}}},"clientInfo":{"name":"c","version":"1"},"_meta":{"n":N}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"n":N}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"1","n":N},"_meta":{"n":N}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"r","_meta":{"n":N}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":{"_meta":{"n":N}}}"#,
        ]);
    }

    #[test]
    fn serde_json_alone_refuses_such_an_integer_in_an_untagged_message() {
        // The reason for `typed`: should serde or serde_json take it one day, this fails
        // and `typed` can go.
        let value = from_slice(br#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"n":18446744073709551616}}}"#).unwrap();
        let e = serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(value).unwrap_err();
        assert!(e.to_string().contains("as u128"), "{e}");
    }

    #[test]
    fn what_typed_refuses_it_refuses_for_serde_jsons_reason_with_no_position() {
        let value = from_slice(br#"{"jsonrpc":"2.0","id":1,"result":{"content":5,"_meta":{"n":18446744073709551616}}}"#).unwrap();
        let wide = typed_ref::<rmcp::model::CallToolResult>(&value["result"]).unwrap_err();
        let narrow = from_slice(br#"{"content":5,"_meta":{"n":1}}"#).unwrap();
        let narrow = typed::<rmcp::model::CallToolResult>(narrow).unwrap_err();
        // The same reason (serde names the number a little differently when read from
        // text), and no position in a text nobody sent.
        for e in [&wide, &narrow] {
            assert!(e.to_string().ends_with("expected a sequence"), "{e}");
        }
        assert!(!wide.to_string().contains("line"), "{wide}");
        // An integer within 64 bits is read in place, as serde_json reads it.
        assert!(!holds_wide_integer([&serde_json::json!([
            1,
            -1,
            u64::MAX,
            i64::MIN,
            1.5
        ])]));
        assert!(holds_wide_integer([
            &from_slice(b"[1,{\"a\":[-0]}]").unwrap()
        ]));
    }
}
