//! The `--config FILE` format: the `mcpServers` shape MCP clients already use, stdio only.
//!
//! ```json
//! {"mcpServers": {
//!   "notes":   {"command": "uv", "args": ["run", "notes-server"], "allow": ["search"], "private": true},
//!   "tracker": {"command": "tracker-mcp", "allow": ["create_issue", "find_issue"], "private": ["create_issue"]}
//! }}
//! ```
//! An entry takes `command` (required), `args`, `env` (values passed as written: `${VAR}` is
//! not expanded), `allow`, `private` (`true`, `false` or a list of tool names) and
//! `type: "stdio"`. `url`, `headers` and any other key stop startup naming the entry and the
//! key, rather than being half supported (seed README "Several servers"). Server names are
//! unique (duplicate keys are detected while parsing), non-empty, and made of letters,
//! digits, `_` and `-`. Servers start in file order.

mod strict_json;

use std::path::Path;

use serde_json::{Map, Value};

use crate::bridge::ServerEntry;
use crate::bridge::catalog::{PrivateLabels, Selection};
use crate::bridge::upstream::ServerSpec;

/// Keys an entry may have.
pub const ENTRY_KEYS: &[&str] = &["command", "args", "env", "allow", "private", "type"];

/// Why a config file was refused; every message names the entry and key at fault.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config: failed to read {path}: {why}")]
    Read {
        /// The path.
        path: String,
        /// The OS error.
        why: String,
    },
    /// Not JSON, or a key twice.
    #[error("config: {path}: not valid JSON ({why})")]
    Json {
        /// The path.
        path: String,
        /// The parser's message.
        why: String,
    },
    /// A server name appears twice.
    #[error("config: server name {0:?} appears twice")]
    DuplicateServer(String),
    /// Something else, with its place.
    #[error("config: {0}")]
    Invalid(String),
}

/// Read and check a config file; its servers in file order.
///
/// # Errors
/// [`ConfigError`] naming the entry and key at fault.
pub fn load_config(path: &Path) -> Result<Vec<ServerEntry>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    parse_config(&text).map_err(|e| match e {
        ConfigError::Json { why, .. } => ConfigError::Json {
            path: path.display().to_string(),
            why,
        },
        other => other,
    })
}

/// Check config text; its servers in file order.
///
/// # Errors
/// [`ConfigError`] naming the entry and key at fault.
pub fn parse_config(text: &str) -> Result<Vec<ServerEntry>, ConfigError> {
    let value = strict_json::parse(text).map_err(|why| {
        if let Some(rest) = why.strip_prefix("duplicate key at mcpServers.") {
            let name = rest.split(" at line").next().unwrap_or(rest);
            if !name.contains('.') {
                return ConfigError::DuplicateServer(name.to_owned());
            }
        }
        ConfigError::Json {
            path: "<text>".into(),
            why,
        }
    })?;
    let Some(servers) = value.get("mcpServers") else {
        return Err(ConfigError::Invalid("no \"mcpServers\" object".into()));
    };
    let Value::Object(servers) = servers else {
        return Err(ConfigError::Invalid(
            "\"mcpServers\" must be an object".into(),
        ));
    };
    if servers.is_empty() {
        return Err(ConfigError::Invalid(
            "\"mcpServers\" names no server".into(),
        ));
    }
    servers
        .iter()
        .map(|(name, entry)| parse_entry(name, entry))
        .collect()
}

fn invalid(name: &str, what: String) -> ConfigError {
    ConfigError::Invalid(format!("mcpServers.{name}: {what}"))
}

fn parse_entry(name: &str, entry: &Value) -> Result<ServerEntry, ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::Invalid("a server name is empty".into()));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(ConfigError::Invalid(format!(
            "server name {name:?} may hold only letters, digits, _ and -"
        )));
    }
    let Value::Object(map) = entry else {
        return Err(invalid(name, "an entry must be an object".into()));
    };
    for key in map.keys() {
        if !ENTRY_KEYS.contains(&key.as_str()) {
            let why = match key.as_str() {
                "url" | "headers" => "only stdio servers are supported",
                _ => "unknown key",
            };
            return Err(invalid(
                name,
                format!(
                    "{key:?} is not supported ({why}; stdio entries take {})",
                    ENTRY_KEYS.join(", ")
                ),
            ));
        }
    }
    if let Some(kind) = map.get("type")
        && kind.as_str() != Some("stdio")
    {
        return Err(invalid(
            name,
            format!("type {kind} is not supported; only \"stdio\""),
        ));
    }
    let command = match map.get("command") {
        Some(Value::String(c)) if !c.is_empty() => c.clone(),
        Some(_) => {
            return Err(invalid(
                name,
                "\"command\" must be a non-empty string".into(),
            ));
        }
        None => return Err(invalid(name, "\"command\" is required".into())),
    };
    let args = string_list(name, map, "args")?.unwrap_or_default();
    let env = match map.get("env") {
        None => Vec::new(),
        Some(Value::Object(vars)) => vars
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(invalid(name, format!("\"env\".{k} must be a string"))),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid(name, "\"env\" must be an object of strings".into())),
    };
    let allow = string_list(name, map, "allow")?;
    let private = match map.get("private") {
        None | Some(Value::Bool(false)) => PrivateLabels::None,
        Some(Value::Bool(true)) => PrivateLabels::All,
        Some(Value::Array(_)) => {
            PrivateLabels::Some(string_list(name, map, "private")?.unwrap_or_default())
        }
        Some(_) => {
            return Err(invalid(
                name,
                "\"private\" must be true, false or a list of tool names".into(),
            ));
        }
    };
    Ok(ServerEntry {
        spec: ServerSpec {
            name: name.to_owned(),
            command,
            args,
            env,
            cwd: None,
        },
        selection: Selection { allow, private },
    })
}

fn string_list(
    name: &str,
    map: &Map<String, Value>,
    key: &str,
) -> Result<Option<Vec<String>>, ConfigError> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid(name, format!("\"{key}\" must be a list of strings")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(invalid(
            name,
            format!("\"{key}\" must be a list of strings"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_example_parses() {
        let entries = parse_config(
            r#"{"mcpServers": {
                "notes":   {"command": "uv", "args": ["run", "notes-server"], "allow": ["search"], "private": true},
                "tracker": {"command": "tracker-mcp", "allow": ["create_issue", "find_issue"], "private": ["create_issue"], "type": "stdio", "env": {"TOKEN": "${TOKEN}"}}
            }}"#,
        )
        .unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].spec.name, "notes");
        assert_eq!(entries[0].selection.private, PrivateLabels::All);
        assert_eq!(
            entries[1].spec.env,
            vec![("TOKEN".to_owned(), "${TOKEN}".to_owned())]
        );
        assert_eq!(
            entries[1].selection.private,
            PrivateLabels::Some(vec!["create_issue".into()])
        );
    }

    #[test]
    fn config_errors_name_the_entry_and_key() {
        for (text, want) in [
            (
                r#"{"mcpServers": {"web": {"url": "http://x"}}}"#,
                "mcpServers.web: \"url\"",
            ),
            (
                r#"{"mcpServers": {"web": {"command": "x", "headers": {}}}}"#,
                "mcpServers.web: \"headers\"",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "x", "cwd": "/"}}}"#,
                "mcpServers.s: \"cwd\"",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "x", "type": "sse"}}}"#,
                "mcpServers.s: type",
            ),
            (
                r#"{"mcpServers": {"s": {"args": []}}}"#,
                "mcpServers.s: \"command\" is required",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "x", "args": "a b"}}}"#,
                "mcpServers.s: \"args\"",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "x", "private": "yes"}}}"#,
                "mcpServers.s: \"private\"",
            ),
            (r#"{"servers": {}}"#, "no \"mcpServers\""),
        ] {
            let e = parse_config(text).unwrap_err().to_string();
            assert!(e.contains(want), "{e} should contain {want}");
        }
    }

    #[test]
    fn server_names_must_be_unique_words() {
        let e = parse_config(r#"{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#)
            .unwrap_err();
        assert_eq!(e, ConfigError::DuplicateServer("a".into()));
        assert!(
            parse_config(r#"{"mcpServers": {"": {"command": "x"}}}"#)
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert!(
            parse_config(r#"{"mcpServers": {"a b": {"command": "x"}}}"#)
                .unwrap_err()
                .to_string()
                .contains("letters, digits")
        );
        assert!(parse_config(r#"{"mcpServers": {"a.b": {"command": "x"}}}"#).is_err());
        assert!(parse_config(r#"{"mcpServers": {"ok_name-2": {"command": "x"}}}"#).is_ok());
    }
}
