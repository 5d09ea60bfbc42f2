//! run_python's arguments, checked against its inputSchema.

use serde_json::Value;

/// The `code` of run_python's `arguments`, checked against its inputSchema (one required
/// string `code`, `additionalProperties: false`); `Err` is the `-32602` (invalid params)
/// message: no string `code`, or the first argument the schema does not name.
pub(crate) fn run_python_code(
    arguments: Option<&serde_json::Map<String, Value>>,
) -> Result<&str, String> {
    let code = arguments
        .and_then(|a| a.get("code"))
        .and_then(Value::as_str)
        .ok_or_else(|| "run_python needs a string argument \"code\"".to_owned())?;
    if let Some(other) = arguments
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| *k != "code")
    {
        return Err(format!(
            "run_python takes only the argument \"code\"; {:?} is not one of its arguments",
            crate::bridge::refusal::cap(other, 64)
        ));
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code_of(arguments: Value) -> Result<String, String> {
        run_python_code(arguments.as_object()).map(str::to_owned)
    }

    #[test]
    fn only_a_string_code_is_accepted_and_unknown_arguments_are_refused() {
        assert_eq!(code_of(json!({"code": "print(1)"})), Ok("print(1)".into()));
        assert_eq!(
            code_of(json!({"code": "print(1)", "timeout": 5})),
            Err("run_python takes only the argument \"code\"; \"timeout\" is not one of its arguments".into())
        );
        assert!(
            code_of(json!({"code": 1}))
                .unwrap_err()
                .contains("needs a string")
        );
        assert!(code_of(json!({})).unwrap_err().contains("needs a string"));
        assert!(run_python_code(None).is_err());
    }
}
