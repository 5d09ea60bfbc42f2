//! The governance keys of a config file: per entry `readOnly` (`true` or `false`) and
//! `approve` (a list of tool names, or `"destructive"` for every tool not annotated
//! read-only); at the top level `audit`, a file name or an object
//! `{"file", "args": "full"|"digest"|"off", "code": bool, "required": bool}` (README
//! "Governance"; the command line's `--audit*` options win over it).

use std::path::Path;

use serde_json::{Map, Value};

use super::ConfigError;
use crate::governance::audit::{ArgsMode, AuditOptions};
use crate::governance::policy::ApprovalRule;

fn invalid(place: &str, what: impl std::fmt::Display) -> ConfigError {
    ConfigError::Invalid(format!("{place}: {what}"))
}

/// An entry's `readOnly`.
///
/// # Errors
/// [`ConfigError::Invalid`] when it is not a boolean.
pub(super) fn read_only(place: &str, map: &Map<String, Value>) -> Result<bool, ConfigError> {
    match map.get("readOnly") {
        None => Ok(false),
        Some(Value::Bool(on)) => Ok(*on),
        Some(_) => Err(invalid(place, "\"readOnly\" must be true or false")),
    }
}

/// An entry's `approve`.
///
/// # Errors
/// [`ConfigError::Invalid`] when it is neither a list of names nor `"destructive"`.
pub(super) fn approve(place: &str, map: &Map<String, Value>) -> Result<ApprovalRule, ConfigError> {
    let wrong = || {
        invalid(
            place,
            "\"approve\" must be a list of tool names or \"destructive\"",
        )
    };
    match map.get("approve") {
        None => Ok(ApprovalRule::None),
        Some(Value::String(s)) if s == "destructive" => Ok(ApprovalRule::Destructive),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or_else(wrong))
            .collect::<Result<_, _>>()
            .map(ApprovalRule::Tools),
        Some(_) => Err(wrong()),
    }
}

/// The top-level `audit`, with a relative file taken from the config file's directory.
///
/// # Errors
/// [`ConfigError::Invalid`] naming the field at fault.
pub(super) fn audit(
    top: &Map<String, Value>,
    base: &Path,
) -> Result<Option<AuditOptions>, ConfigError> {
    let place = "audit";
    let (file, fields) = match top.get("audit") {
        None => return Ok(None),
        Some(Value::String(file)) => (file.clone(), None),
        Some(Value::Object(fields)) => match fields.get("file") {
            Some(Value::String(file)) => (file.clone(), Some(fields)),
            _ => return Err(invalid(place, "\"file\" must be the log's path")),
        },
        Some(_) => {
            return Err(invalid(
                place,
                "must be a file name or an object with \"file\"",
            ));
        }
    };
    if file.is_empty() {
        return Err(invalid(place, "the file name is empty"));
    }
    let mut options = AuditOptions::new(base.join(file));
    let Some(fields) = fields else {
        return Ok(Some(options));
    };
    for (key, value) in fields {
        match (key.as_str(), value) {
            ("file", _) => {}
            ("args", Value::String(mode)) => {
                options.args = match mode.as_str() {
                    "full" => ArgsMode::Full,
                    "digest" => ArgsMode::Digest,
                    "off" => ArgsMode::Off,
                    _ => return Err(invalid(place, "\"args\" must be full, digest or off")),
                }
            }
            ("code", Value::Bool(on)) => options.code = *on,
            ("required", Value::Bool(on)) => options.required = *on,
            (key, _) => {
                return Err(invalid(
                    place,
                    format!(
                        "{key:?}: the keys are file, args (full, digest or off), code and required (true or false)"
                    ),
                ));
            }
        }
    }
    Ok(Some(options))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn approve_takes_a_list_or_destructive_and_nothing_else() {
        let m = object(json!({"approve": ["a", "b"]}));
        assert_eq!(
            approve("x", &m).unwrap(),
            ApprovalRule::Tools(["a".to_owned(), "b".to_owned()].into())
        );
        let m = object(json!({"approve": "destructive"}));
        assert_eq!(approve("x", &m).unwrap(), ApprovalRule::Destructive);
        for bad in [json!("all"), json!(true), json!([1])] {
            let m = object(json!({ "approve": bad }));
            assert!(approve("x", &m).is_err(), "{m:?}");
        }
        assert!(read_only("x", &object(json!({"readOnly": "yes"}))).is_err());
        assert!(read_only("x", &object(json!({"readOnly": true}))).unwrap());
    }

    #[test]
    fn audit_is_a_file_name_or_an_object_relative_to_the_config() {
        let base = Path::new("/etc/mcp");
        let top = object(json!({"audit": "audit.jsonl"}));
        let options = audit(&top, base).unwrap().unwrap();
        assert_eq!(options.path, Path::new("/etc/mcp/audit.jsonl"));
        assert_eq!(options.args, ArgsMode::Digest);
        let top = object(
            json!({"audit": {"file": "/var/log/a", "args": "off", "code": false, "required": true}}),
        );
        let options = audit(&top, base).unwrap().unwrap();
        assert_eq!(options.path, Path::new("/var/log/a"));
        assert_eq!(
            (options.args, options.code, options.required),
            (ArgsMode::Off, false, true)
        );
        for bad in [
            json!({"audit": {"file": "a", "args": "some"}}),
            json!({"audit": {"file": "a", "rotate": true}}),
            json!({"audit": {"args": "off"}}),
            json!({"audit": 3}),
        ] {
            assert!(audit(&object(bad.clone()), base).is_err(), "{bad}");
        }
        assert!(audit(&Map::new(), base).unwrap().is_none());
    }
}
