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

use serde::de::Error as _;
use serde_json::Value;

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
}
