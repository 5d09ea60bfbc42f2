//! One server entry of a config file.
//!
//! A local server: `command` (required), `args`, `env` (merged over MCP's default
//! environment), `envFile` (a dotenv file read first, `env` wins), `cwd`. A remote one:
//! `url` (Windsurf's `serverUrl` too) and `headers`, reached over Streamable HTTP. `type`
//! (or Cline's `transportType`) is `stdio`, `http` (also `streamable-http`,
//! `streamableHttp`) or `sse`; without it an entry with `url` is remote. Ours: `allow`,
//! `private` (`true`, `false` or a list of tool names), `maxResultBytes`, and `timeout`: the
//! time one call to this server may take, in seconds (Cline's unit), overriding
//! `--call-timeout`; a value of 1000 or more is read as milliseconds (the unit Claude Code's
//! configs use). `startupTimeout`, in the same units, overrides `--startup-timeout`: the
//! time the server may take to start and answer `initialize` and `tools/list`. Windsurf's and Roo's
//! `disabledTools` leaves those tools out; `"disabled": true` skips the entry. `readOnly` and
//! `approve` are governance's ([`super::governance`]).
//!
//! `${VAR}`, `${VAR:-default}` and `${env:VAR}` expand in `command`, `args`, `env`, `envFile`,
//! `cwd`, `url` and `headers` ([`super::vars`]); an unset variable without a default stops
//! startup naming the entry, the key and the variable.
//!
//! Keys other clients define for their own use ([`ACCEPTED_KEYS`]: approval lists, UI text,
//! timeouts) are accepted silently; those that would change how the server is reached but
//! are not supported here (OAuth settings, a headers helper) get a warning, as does any other
//! unknown key. Relative `cwd` and `envFile` paths are taken from the config file's directory.

use serde_json::{Map, Value};

use super::vars::expand;
use super::{ConfigError, Context};
use crate::bridge::ServerEntry;
use crate::bridge::catalog::{PrivateLabels, Selection};
use crate::bridge::upstream::{RemoteSpec, RemoteTransport, ServerSpec};
use crate::governance::policy::{ApprovalRule, ApprovalSources};
use crate::limits::MAX_SERVER_MESSAGE_BYTES;

/// Keys this program reads from an entry.
pub(super) const ENTRY_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "envFile",
    "cwd",
    "type",
    "transportType",
    "url",
    "serverUrl",
    "headers",
    "disabled",
    "disabledTools",
    "allow",
    "private",
    "maxResultBytes",
    "timeout",
    "startupTimeout",
    "readOnly",
    "approve",
];

/// Keys other MCP clients define that have no meaning here; accepted without a warning.
/// Sources: Cline (`autoApprove`, `networkTimeout`), Roo Code and Kilo Code (`alwaysAllow`, `watchPaths`), VS Code (`dev`,
/// `gallery`, `version`, `sandboxEnabled`, `sandbox`), Cursor and many registries
/// (`description`, `name`, `icon`).
pub(super) const ACCEPTED_KEYS: &[&str] = &[
    "autoApprove",
    "alwaysAllow",
    "networkTimeout",
    "description",
    "name",
    "icon",
    "watchPaths",
    "dev",
    "gallery",
    "version",
    "sandboxEnabled",
    "sandbox",
];

/// Keys other clients define that change how a server is reached, which this program does
/// not do; accepted with a warning that says so.
const UNSUPPORTED_KEYS: &[(&str, &str)] = &[
    (
        "oauth",
        "OAuth sign-in is not supported; pass a token in \"headers\" instead",
    ),
    (
        "auth",
        "OAuth sign-in is not supported; pass a token in \"headers\" instead",
    ),
    (
        "headersHelper",
        "a headers helper command is not run; put the headers in \"headers\" (with ${VAR} for secrets)",
    ),
];

fn invalid(place: &str, what: impl std::fmt::Display) -> ConfigError {
    ConfigError::Invalid(format!("{place}: {what}"))
}

/// Parse one entry; `None` when it is disabled.
///
/// # Errors
/// [`ConfigError::Invalid`] naming `place` (`mcpServers.NAME`) and the key at fault.
pub(super) fn parse_entry(
    place: &str,
    name: &str,
    entry: &Value,
    context: &Context<'_>,
    warnings: &mut Vec<String>,
) -> Result<Option<ServerEntry>, ConfigError> {
    check_name(name)?;
    let Value::Object(map) = entry else {
        return Err(invalid(place, "an entry must be an object"));
    };
    match map.get("disabled") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            tracing::info!("config: {place} is disabled; skipped");
            return Ok(None);
        }
        Some(_) => return Err(invalid(place, "\"disabled\" must be true or false")),
    }
    for key in map.keys() {
        if ENTRY_KEYS.contains(&key.as_str()) || ACCEPTED_KEYS.contains(&key.as_str()) {
            continue;
        }
        match UNSUPPORTED_KEYS.iter().find(|(k, _)| k == key) {
            Some((_, why)) => warnings.push(format!("{place}: {key:?} ignored: {why}")),
            None => warnings.push(format!("{place}: unknown key {key:?} ignored")),
        }
    }
    let field = |key: &str, text: &str| -> Result<String, ConfigError> {
        expand(text, context.lookup).map_err(|e| invalid(place, format!("{key:?}: {e}")))
    };
    let remote = match transport_kind(place, map)? {
        Kind::Stdio => None,
        kind => Some(remote(place, map, kind, &field)?),
    };
    let mut spec = ServerSpec {
        name: name.to_owned(),
        remote,
        ..ServerSpec::default()
    };
    if spec.remote.is_none() {
        spec.command = match map.get("command") {
            Some(Value::String(c)) if !c.is_empty() => field("command", c)?,
            Some(_) => return Err(invalid(place, "\"command\" must be a non-empty string")),
            None => return Err(invalid(place, "\"command\" is required (or \"url\")")),
        };
        spec.args = string_list(place, map, "args")?
            .unwrap_or_default()
            .iter()
            .map(|a| field("args", a))
            .collect::<Result<_, _>>()?;
        if let Some(file) = map.get("envFile") {
            let Value::String(file) = file else {
                return Err(invalid(place, "\"envFile\" must be a path"));
            };
            let path = context.base.join(field("envFile", file)?);
            spec.env = env_file(place, &path)?;
        }
        for (k, v) in string_map(place, map, "env")? {
            let value = field(&format!("env.{k}"), &v)?;
            spec.env.retain(|(existing, _)| *existing != k);
            spec.env.push((k, value));
        }
        if let Some(cwd) = map.get("cwd") {
            let Value::String(cwd) = cwd else {
                return Err(invalid(place, "\"cwd\" must be a path"));
            };
            spec.cwd = Some(context.base.join(field("cwd", cwd)?));
        }
    } else {
        for key in ["command", "args", "env", "envFile", "cwd"] {
            if map.contains_key(key) {
                return Err(invalid(
                    place,
                    format!(
                        "{key:?} belongs to a local server, but this entry is remote (\"url\")"
                    ),
                ));
            }
        }
    }
    let allow = string_list(place, map, "allow")?;
    let deny = string_list(place, map, "disabledTools")?.unwrap_or_default();
    let private = match map.get("private") {
        None | Some(Value::Bool(false)) => PrivateLabels::None,
        Some(Value::Bool(true)) => PrivateLabels::All,
        Some(Value::Array(_)) => {
            PrivateLabels::Some(string_list(place, map, "private")?.unwrap_or_default())
        }
        Some(_) => {
            return Err(invalid(
                place,
                "\"private\" must be true, false or a list of tool names",
            ));
        }
    };
    let max_result_bytes = match map.get("maxResultBytes") {
        None => None,
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 && n <= MAX_SERVER_MESSAGE_BYTES as u64 => {
                Some(usize::try_from(n).unwrap_or(usize::MAX))
            }
            _ => {
                return Err(invalid(
                    place,
                    "\"maxResultBytes\" must be a whole number of bytes from 1 to 16777216 \
(16 MiB, the longest message a server may send)",
                ));
            }
        },
    };
    let call_timeout = timeout_field(place, map, "timeout")?;
    spec.startup_timeout = timeout_field(place, map, "startupTimeout")?;
    let approve = super::governance::approve(place, map)?;
    Ok(Some(ServerEntry {
        spec,
        selection: Selection {
            allow,
            private,
            deny,
            read_only: super::governance::read_only(place, map)?,
            approve_sources: ApprovalSources {
                config_entry: approve != ApprovalRule::None,
                ..ApprovalSources::default()
            },
            approve,
        },
        max_result_bytes,
        call_timeout,
        from_command_line: false,
    }))
}

/// Values of `timeout` from this one on are milliseconds.
pub(super) const TIMEOUT_MILLIS_FROM: f64 = 1000.0;
/// Longest call timeout, seconds (the longest deadline).
pub(super) const MAX_CALL_TIMEOUT_SECS: f64 = 3600.0;

/// The entry's `key` (`timeout`, `startupTimeout`): seconds, or milliseconds from
/// [`TIMEOUT_MILLIS_FROM`] on; above 0 and at most [`MAX_CALL_TIMEOUT_SECS`] seconds.
fn timeout_field(
    place: &str,
    map: &Map<String, Value>,
    key: &str,
) -> Result<Option<std::time::Duration>, ConfigError> {
    let Some(value) = map.get(key) else {
        return Ok(None);
    };
    let bad = || {
        invalid(
            place,
            format!(
                "{key:?} must be a number of seconds above 0 and at most {MAX_CALL_TIMEOUT_SECS}"
            ),
        )
    };
    let number = value
        .as_f64()
        .filter(|n| n.is_finite() && *n > 0.0)
        .ok_or_else(bad)?;
    let secs = if number >= TIMEOUT_MILLIS_FROM {
        tracing::info!("config: {place}: {key:?} {number} read as milliseconds");
        number / 1000.0
    } else {
        number
    };
    if secs > MAX_CALL_TIMEOUT_SECS {
        return Err(bad());
    }
    Ok(Some(std::time::Duration::from_secs_f64(secs)))
}

fn check_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::Invalid("a server name is empty".into()));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(ConfigError::Invalid(format!(
            "server name {name:?} may hold only ASCII letters, digits, _ and -"
        )));
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Stdio,
    Http,
    Sse,
}

fn transport_kind(place: &str, map: &Map<String, Value>) -> Result<Kind, ConfigError> {
    let has_url = map.contains_key("url") || map.contains_key("serverUrl");
    let declared = match (map.get("type"), map.get("transportType")) {
        (Some(t), _) => Some(("type", t)),
        (None, Some(t)) => Some(("transportType", t)),
        (None, None) => None,
    };
    let Some((key, value)) = declared else {
        return Ok(if has_url && !map.contains_key("command") {
            Kind::Http
        } else {
            Kind::Stdio
        });
    };
    match value.as_str() {
        Some("stdio") => Ok(Kind::Stdio),
        Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => Ok(Kind::Http),
        Some("sse") => Ok(Kind::Sse),
        _ => Err(invalid(
            place,
            format!("{key} {value} is not one of \"stdio\", \"http\", \"sse\""),
        )),
    }
}

fn remote(
    place: &str,
    map: &Map<String, Value>,
    kind: Kind,
    field: &dyn Fn(&str, &str) -> Result<String, ConfigError>,
) -> Result<RemoteSpec, ConfigError> {
    let (key, url) = match (map.get("url"), map.get("serverUrl")) {
        (Some(u), _) => ("url", u),
        (None, Some(u)) => ("serverUrl", u),
        (None, None) => return Err(invalid(place, "a remote server needs \"url\"")),
    };
    let Value::String(url) = url else {
        return Err(invalid(place, format!("\"{key}\" must be a string")));
    };
    let url = field(key, url)?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(invalid(
            place,
            format!("\"{key}\" must be an http:// or https:// URL"),
        ));
    }
    let headers = string_map(place, map, "headers")?
        .into_iter()
        .map(|(k, v)| Ok((k.clone(), field(&format!("headers.{k}"), &v)?)))
        .collect::<Result<Vec<_>, ConfigError>>()?;
    Ok(RemoteSpec {
        url,
        headers,
        transport: if kind == Kind::Sse {
            RemoteTransport::Sse
        } else {
            RemoteTransport::StreamableHttp
        },
    })
}

/// Variables of a dotenv file (`KEY=VALUE` lines, `#` comments, quotes), in file order; a
/// line that cannot be read is named by its number, never its text (`env_file.rs`).
fn env_file(place: &str, path: &std::path::Path) -> Result<Vec<(String, String)>, ConfigError> {
    super::env_file::read(path)
        .map_err(|e| invalid(place, format!("\"envFile\" {}: {e}", path.display())))
}

fn string_map(
    place: &str,
    map: &Map<String, Value>,
    key: &str,
) -> Result<Vec<(String, String)>, ConfigError> {
    match map.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Object(vars)) => vars
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(invalid(place, format!("\"{key}\".{k} must be a string"))),
            })
            .collect(),
        Some(_) => Err(invalid(
            place,
            format!("\"{key}\" must be an object of strings"),
        )),
    }
}

fn string_list(
    place: &str,
    map: &Map<String, Value>,
    key: &str,
) -> Result<Option<Vec<String>>, ConfigError> {
    let wrong = || invalid(place, format!("\"{key}\" must be a list of strings"));
    match map.get(key) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or_else(wrong))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(wrong()),
    }
}
