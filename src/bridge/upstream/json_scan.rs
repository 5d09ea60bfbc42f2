//! A byte-level scanner for JSON text that serde_json cannot read (invalid values, nesting
//! deeper than its recursion limit): it follows only strings and brackets.

use serde_json::Value;

/// The value of the top-level `"id"` member of a JSON object's text, read without parsing
/// the rest (which may be invalid or too deep).
pub(crate) fn top_level_id(bytes: &[u8]) -> Option<Value> {
    crate::exact_json::from_slice(top_level_id_text(bytes)?).ok()
}

/// The text of the top-level `"id"` member's value in a JSON object's text, as written (a
/// string with its quotes, a number's digits, or up to the next `,`, `}`, `]` or blank).
pub(crate) fn top_level_id_text(bytes: &[u8]) -> Option<&[u8]> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let end = string_end(bytes, i)?;
                if depth == 1 && &bytes[i..=end] == b"\"id\"" {
                    let rest = bytes[end + 1..].trim_ascii_start();
                    let rest = rest.strip_prefix(b":")?.trim_ascii_start();
                    let len = if rest.first() == Some(&b'"') {
                        string_end(rest, 0)? + 1
                    } else {
                        rest.iter()
                            .position(|b| b",}] \t\r\n".contains(b))
                            .unwrap_or(rest.len())
                    };
                    return Some(&rest[..len]);
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Index of the quote that closes the string opening at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// `bytes` with every array or object nested deeper than `max` replaced by `null`.
pub(super) fn cap_depth(bytes: &[u8], max: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' if depth == max => {
                // Skip the whole deep value.
                let mut inner = 0usize;
                while i < bytes.len() {
                    match bytes[i] {
                        b'{' | b'[' => inner += 1,
                        b'}' | b']' => inner -= 1,
                        b'"' => i = string_end(bytes, i).unwrap_or(bytes.len()),
                        _ => {}
                    }
                    i += 1;
                    if inner == 0 {
                        break;
                    }
                }
                out.extend_from_slice(b"null");
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let end = string_end(bytes, i).unwrap_or(bytes.len() - 1);
                out.extend_from_slice(&bytes[i..=end]);
                i = end + 1;
                continue;
            }
            _ => {}
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(
            top_level_id(br#"{"a":{"id":1},"id":"x\"y"}"#),
            Some(json!("x\"y"))
        );
        assert_eq!(top_level_id(br#"{"id" : 12 ,"b":NaN}"#), Some(json!(12)));
        assert_eq!(top_level_id(br#"{"b":[{"id":1}]}"#), None);
    }

    #[test]
    fn values_nested_deeper_than_the_bound_become_null() {
        assert_eq!(cap_depth(b"[[[1]],[2]]", 2), b"[[null],[2]]");
        assert_eq!(cap_depth(br#"[["[[",{"a":[1]}]]"#, 2), br#"[["[[",null]]"#);
    }
}
