//! JSON text in the form Python's `json.dumps` writes by default.
//!
//! Structured results reach the code, and the result object is printed, written this way
//! (`{"sum": 5}`, `{"stdout": "…", "error": null, …}`): separators `", "` and `": "`,
//! non-ASCII escaped as `\uXXXX` (surrogate pairs above U+FFFF), keys in their given order.
//! Integers are written exactly, of any length, as Python writes an `int`. Python writes
//! floats with `repr`; integral floats keep a `.0` here too.

use serde_json::Value;

/// Write `value` as `json.dumps(value)` would (default arguments).
pub(crate) fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, key);
                out.push_str(": ");
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// An integer as written, whatever its length (serde_json keeps its text: Cargo.toml's
/// `arbitrary_precision`), as Python writes an `int`; a float as the shortest text that
/// reads back as the same f64, which Python's `json.loads` reads as that very float.
fn write_number(out: &mut String, n: &serde_json::Number) {
    if n.is_f64()
        && let Some(f) = n.as_f64()
    {
        if f.fract() == 0.0 && f.abs() < 1e16 {
            out.push_str(&format!("{f:.1}"));
        } else if let Some(shortest) = serde_json::Number::from_f64(f) {
            out.push_str(shortest.as_str());
        }
        return;
    }
    out.push_str(n.as_str());
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn it_writes_what_python_writes() {
        assert_eq!(to_string(&json!({"sum": 5})), r#"{"sum": 5}"#);
        assert_eq!(
            to_string(
                &json!({"stdout": "[10, 11, 12]\n", "error": null, "truncated": false, "stopped": false})
            ),
            r#"{"stdout": "[10, 11, 12]\n", "error": null, "truncated": false, "stopped": false}"#
        );
        assert_eq!(
            to_string(&json!(["é", "😀", 1.5, 2.0])),
            r#"["\u00e9", "\ud83d\ude00", 1.5, 2.0]"#
        );
        assert_eq!(to_string(&json!("\u{7f}\u{1}")), r#""\u007f\u0001""#);
    }

    #[test]
    fn large_integers_stay_exact() {
        let v: Value =
            serde_json::from_str("[18446744073709551615, -9223372036854775808]").unwrap();
        assert_eq!(
            to_string(&v),
            "[18446744073709551615, -9223372036854775808]"
        );
    }

    #[test]
    fn integers_beyond_64_bits_are_written_digit_for_digit_and_floats_as_before() {
        let v: Value = serde_json::from_str(
            r#"{"c": 18446744073709551616, "d": -123456789012345678901234567890,
                "e": 1E2, "f": 1.50, "g": 12345678901234567890.5, "h": 1e-7, "i": -0.0}"#,
        )
        .unwrap();
        assert_eq!(
            to_string(&v),
            r#"{"c": 18446744073709551616, "d": -123456789012345678901234567890, "e": 100.0, "f": 1.5, "g": 1.2345678901234567e+19, "h": 1e-7, "i": -0.0}"#
        );
    }
}
