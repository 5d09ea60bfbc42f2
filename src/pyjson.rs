//! JSON text in the form Python's `json.dumps` writes by default.
//!
//! Structured results reach the code, and the result object is printed, written this way
//! (`{"sum": 5}`, `{"stdout": "…", "error": null, …}`): separators `", "` and `": "`,
//! non-ASCII escaped as `\uXXXX` (surrogate pairs above U+FFFF), keys in their given order.
//! Python writes floats with `repr`; integral floats keep a `.0` here too.

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

fn write_number(out: &mut String, n: &serde_json::Number) {
    if n.is_f64() {
        let f = n.as_f64().unwrap_or(f64::NAN);
        if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 {
            out.push_str(&format!("{f:.1}"));
            return;
        }
    }
    out.push_str(&n.to_string());
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
}
