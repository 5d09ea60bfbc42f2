//! The `--config FILE` format: the server maps MCP clients already write.
//!
//! ```json
//! {"mcpServers": {
//!   "notes":   {"command": "uv", "args": ["run", "notes-server"], "allow": ["search"], "private": true},
//!   "tracker": {"command": "tracker-mcp", "env": {"TOKEN": "${TRACKER_TOKEN}"}, "private": ["create_issue"]},
//!   "docs":    {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
//! }}
//! ```
//! The servers sit under `mcpServers` (Claude Desktop, Claude Code, Cursor, Cline, Windsurf)
//! or `servers` (VS Code's `mcp.json`); other top-level keys (VS Code's `inputs`, a Claude
//! Desktop file's own settings) are ignored, but for `audit` (`governance`). Entries are described in `entry`, variables
//! in `vars`. Server names are unique (duplicate keys are detected while parsing, RFC 8259
//! leaves them undefined), non-empty, and made of letters, digits, `_` and `-`. Servers are
//! listed in file order; entries with `"disabled": true` are skipped.

mod entry;
/// A config entry's `envFile`, read with its bad lines named by number only.
mod env_file;
mod governance;
mod strict_json;
mod vars;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::bridge::ServerEntry;

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

/// A parsed config: the enabled servers in file order, and warnings about keys that were
/// accepted but not understood.
#[derive(Debug, Default)]
pub struct Config {
    /// The servers to start.
    pub servers: Vec<ServerEntry>,
    /// One line per unknown key or unsupported setting (`mcpServers.x: unknown key "foo"
    /// ignored`); the caller logs them.
    pub warnings: Vec<String>,
    /// The top-level `audit`, if any (`governance::audit`).
    pub audit: Option<crate::governance::audit::AuditOptions>,
}

/// Where a config's values come from: the variables of `${…}` references, and the
/// directory that relative `cwd` and `envFile` paths are taken from.
pub struct Context<'a> {
    /// Reads one environment variable (`serve`'s own environment in the product).
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
    /// The config file's directory.
    pub base: PathBuf,
}

impl Context<'_> {
    /// Variables from this process's environment; relative paths from `base`.
    pub fn process(base: PathBuf) -> Context<'static> {
        Context {
            lookup: &|name| std::env::var(name).ok(),
            base,
        }
    }
}

/// Read and check a config file; its enabled servers in file order. Warnings are logged.
///
/// # Errors
/// [`ConfigError`] naming the entry and key at fault.
pub fn load_config(path: &Path) -> Result<Vec<ServerEntry>, ConfigError> {
    let config = load(path)?;
    for warning in &config.warnings {
        tracing::warn!("config: {warning}");
    }
    Ok(config.servers)
}

/// Read and check a config file, returning its warnings too.
///
/// # Errors
/// [`ConfigError`] naming the entry and key at fault.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    parse(&text, &Context::process(base)).map_err(|e| match e {
        ConfigError::Json { why, .. } => ConfigError::Json {
            path: path.display().to_string(),
            why,
        },
        other => other,
    })
}

/// Check config text against this process's environment (relative paths from the current
/// directory); its enabled servers in file order.
///
/// # Errors
/// [`ConfigError`] naming the entry and key at fault.
pub fn parse_config(text: &str) -> Result<Vec<ServerEntry>, ConfigError> {
    Ok(parse(text, &Context::process(PathBuf::from(".")))?.servers)
}

/// Check config text in `context`.
///
/// # Errors
/// [`ConfigError`] naming the entry and key at fault.
pub fn parse(text: &str, context: &Context<'_>) -> Result<Config, ConfigError> {
    let value = strict_json::parse(text).map_err(|why| {
        for key in ["mcpServers", "servers"] {
            if let Some(rest) = why.strip_prefix(&format!("duplicate key at {key}.")) {
                let name = rest.split(" at line").next().unwrap_or(rest);
                if !name.contains('.') {
                    return ConfigError::DuplicateServer(name.to_owned());
                }
            }
        }
        ConfigError::Json {
            path: "<text>".into(),
            why,
        }
    })?;
    let Value::Object(top) = &value else {
        return Err(ConfigError::Invalid(
            "the file must hold a JSON object with \"mcpServers\" (or VS Code's \"servers\")"
                .into(),
        ));
    };
    let (key, servers) = match (top.get("mcpServers"), top.get("servers")) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::Invalid(
                "both \"mcpServers\" and \"servers\" are present; keep one".into(),
            ));
        }
        (Some(s), None) => ("mcpServers", s),
        (None, Some(s)) => ("servers", s),
        (None, None) => {
            return Err(ConfigError::Invalid(
                "no \"mcpServers\" object (nor VS Code's \"servers\")".into(),
            ));
        }
    };
    let Value::Object(servers) = servers else {
        return Err(ConfigError::Invalid(format!("\"{key}\" must be an object")));
    };
    if servers.is_empty() {
        return Err(ConfigError::Invalid(format!("\"{key}\" names no server")));
    }
    let mut config = Config {
        audit: governance::audit(top, &context.base)?,
        ..Config::default()
    };
    let mut disabled = 0;
    for (name, value) in servers {
        let place = format!("{key}.{name}");
        match entry::parse_entry(&place, name, value, context, &mut config.warnings)? {
            Some(server) => config.servers.push(server),
            None => disabled += 1,
        }
    }
    if config.servers.is_empty() {
        return Err(ConfigError::Invalid(format!(
            "every server in \"{key}\" is disabled ({disabled})"
        )));
    }
    Ok(config)
}

#[cfg(test)]
mod tests;
