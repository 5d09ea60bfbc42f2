//! The command-line options of `serve --http`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use clap::builder::TypedValueParser;

use super::auth::{BearerToken, TOKEN_ENV};
use super::{
    ConnectionLimits, DEFAULT_GRACE, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_SESSION_EVICT_IDLE, DEFAULT_SESSION_IDLE, HttpOptions,
};
use crate::serve::session::{DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_RUNS};

/// `serve`'s Streamable HTTP options (all but `--http` need `--http`).
#[derive(Args, Debug)]
pub(crate) struct HttpArgs {
    /// Serve MCP over Streamable HTTP on this address and port (for example
    /// 127.0.0.1:8765; the endpoint is /mcp) instead of stdio. Needs a token
    /// (--http-token-file or MCP_CODE_MODE_HTTP_TOKEN), or --http-no-auth on a loopback
    /// address.
    #[arg(long, value_name = "ADDR:PORT")]
    http: Option<SocketAddr>,
    /// File holding the bearer token every HTTP request must carry (at least 16 bytes;
    /// default: the MCP_CODE_MODE_HTTP_TOKEN variable, if set).
    #[arg(long, value_name = "FILE", requires = "http")]
    http_token_file: Option<PathBuf>,
    /// Serve a loopback address without a token: any local user and process on this host
    /// can then run code and call the wrapped tools as you.
    #[arg(long, requires = "http", conflicts_with = "http_token_file")]
    http_no_auth: bool,
    /// A browser origin (scheme://host:port; without a port, the scheme's default one: 443
    /// for https, 80 for http; `:*` for any port) allowed in the Origin header
    /// (repeatable); requests with any other Origin get 403.
    #[arg(long = "http-allow-origin", value_name = "ORIGIN", requires = "http")]
    http_allow_origin: Vec<String>,
    /// A Host header value (host or host:port) allowed (repeatable; default: loopback
    /// names on a loopback address, any host otherwise).
    #[arg(long = "http-allow-host", value_name = "HOST", requires = "http")]
    http_allow_host: Vec<String>,
    /// MCP sessions open at once; a new one past this gets 503.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SESSIONS, value_parser = clap::value_parser!(u32).range(1..=100_000).map(|n| n as usize))]
    max_sessions: usize,
    /// Runs one session may have going at once (the process's limit still applies).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SESSION_RUNS, value_parser = clap::value_parser!(u32).range(1..=64).map(|n| n as usize))]
    session_runs: usize,
    /// Seconds a session may go without a request before it is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_SESSION_IDLE.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    session_idle: u64,
    /// At --max-sessions, a new session closes the session idle longest (no request and no
    /// run in flight) if that one has been idle at least this many seconds; otherwise the
    /// new session gets 503.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_SESSION_EVICT_IDLE.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    session_evict_idle: u64,
    /// Largest HTTP request body, in bytes (larger ones get 413).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES, value_parser = clap::value_parser!(u32).range(1024..=(64 << 20)).map(|n| n as usize))]
    http_max_body: usize,
    /// Seconds runs in flight get to finish after SIGTERM before they are cancelled.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_GRACE.as_secs(), value_parser = clap::value_parser!(u64).range(0..=3600))]
    shutdown_grace: u64,
    /// Seconds a client gets to send a request's whole header block (and that a keep-alive
    /// connection may sit idle between requests, and again to send the request's body after
    /// its headers) before its connection is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_HEADER_READ_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=600))]
    http_header_timeout: u64,
    /// TCP connections open at once; more wait in the accept queue until one closes. Keep
    /// it under the process's descriptor limit (ulimit -n).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..=1_000_000).map(|n| n as usize))]
    http_max_connections: usize,
}

impl HttpArgs {
    /// The HTTP options, or `None` for stdio.
    ///
    /// # Errors
    /// The token file cannot be read, the token is too short, no token is given without
    /// `--http-no-auth` (or a token is given with it), `--http-no-auth` names a
    /// non-loopback address, or an `--http-allow-origin` entry is not an origin.
    pub(crate) fn options(&self) -> anyhow::Result<Option<HttpOptions>> {
        let Some(addr) = self.http else {
            return Ok(None);
        };
        let token = token(
            self.http_token_file.as_deref(),
            std::env::var(TOKEN_ENV).ok(),
            self.http_no_auth,
        )?;
        super::auth::require_token(&addr, token.as_ref(), self.http_no_auth)
            .map_err(anyhow::Error::msg)?;
        Ok(Some(HttpOptions {
            addr,
            token,
            allowed_origins: super::authority::exact_origins(&self.http_allow_origin)
                .map_err(anyhow::Error::msg)?,
            allowed_hosts: self.http_allow_host.clone(),
            max_sessions: self.max_sessions,
            session_runs: self.session_runs,
            session_idle: Duration::from_secs(self.session_idle),
            session_evict_idle: Duration::from_secs(self.session_evict_idle),
            max_body_bytes: self.http_max_body,
            grace: Duration::from_secs(self.shutdown_grace),
            connections: ConnectionLimits {
                header_read_timeout: Duration::from_secs(self.http_header_timeout),
                max_connections: self.http_max_connections,
            },
        }))
    }
}

/// The token from `file`, else from `env` (the [`TOKEN_ENV`] variable's value; one that is
/// empty or only white space counts as unset, so `--http-no-auth` takes it), else `None`.
///
/// # Errors
/// The file cannot be read or its token is too short or unprintable; the variable's token
/// is, or it is given with `--http-no-auth`.
fn token(
    file: Option<&std::path::Path>,
    env: Option<String>,
    no_auth: bool,
) -> anyhow::Result<Option<BearerToken>> {
    let env = env.filter(|text| !text.trim().is_empty());
    Ok(match (file, env) {
        (Some(path), _) => Some(BearerToken::from_file(path)?),
        (None, Some(_)) if no_auth => {
            anyhow::bail!("--http-no-auth and a token in {TOKEN_ENV}: give one or the other")
        }
        (None, Some(text)) => {
            Some(BearerToken::new(&text).with_context(|| format!("the {TOKEN_ENV} variable"))?)
        }
        (None, None) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_token_variable_counts_as_unset() {
        for empty in ["", " ", "\n"] {
            // With --http-no-auth: no token, and no clash with one.
            let with_no_auth = token(None, Some(empty.to_owned()), true).unwrap();
            assert!(with_no_auth.is_none(), "{empty:?}");
            // Without it: still no token, so serving is refused as without one.
            let without = token(None, Some(empty.to_owned()), false).unwrap();
            let addr: SocketAddr = "127.0.0.1:8765".parse().unwrap();
            let refusal = super::super::auth::require_token(&addr, without.as_ref(), false);
            assert!(refusal.unwrap_err().contains("without a token"));
        }
        let given = Some("0123456789abcdef0123".to_owned());
        let clash = token(None, given.clone(), true).unwrap_err().to_string();
        assert!(clash.contains("give one or the other"), "{clash}");
        assert!(token(None, given, false).unwrap().is_some());
        let short = token(None, Some("abc".to_owned()), false).unwrap_err();
        assert!(format!("{short:#}").contains("at least 16"), "{short:#}");
    }
}
