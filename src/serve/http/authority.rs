//! Exact `Origin` entries and the request's authority, ahead of rmcp's `Host` and `Origin`
//! checks (module documentation of [`super`], step 3).
//!
//! - `--http-allow-origin` entries are made exact before rmcp gets them
//!   ([`exact_origins`]): an entry without a port names its scheme's default port (`443`
//!   for `https`, `80` for `http`), as browsers define an origin (RFC 6454 section 4), so
//!   `https://app.example.com` does not admit `https://app.example.com:9999` (rmcp 3.11
//!   lets a portless entry match any port). `:*` still asks for any port.
//! - The authority a request names ([`checked_authority`]): a `Host` holding userinfo
//!   (`evil.com@127.0.0.1`, which rmcp would read as `127.0.0.1`) is refused with `400`
//!   (RFC 9110 section 7.2: `Host` is `uri-host [":" port]`), and so is an absolute-form
//!   target with userinfo; an absolute-form target's authority replaces the `Host` header
//!   before the checks (RFC 9112 section 3.2.2: the server must then ignore `Host`), so
//!   `POST http://evil.com/mcp` is judged as `Host: evil.com`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::serve::metrics::{Metrics, RefusalReason};

/// The `--http-allow-origin` entries `entries` (`scheme://host[:port]`, `scheme://host:*`
/// or `null`), each without a port given its scheme's default one.
///
/// # Errors
/// An entry that is not an origin (no scheme or host, a path, a query, userinfo), or one
/// without a port whose scheme is neither `http` nor `https`; the message names it.
pub(super) fn exact_origins(entries: &[String]) -> Result<Vec<String>, String> {
    entries.iter().map(|entry| exact_origin(entry)).collect()
}

fn exact_origin(entry: &str) -> Result<String, String> {
    let refused = |why: &str| {
        format!(
            "--http-allow-origin {entry:?} is not an origin: {why} (give scheme://host:port, \
             scheme://host for its default port, or scheme://host:* for any port)"
        )
    };
    let entry = entry.trim();
    if entry.eq_ignore_ascii_case("null") {
        return Ok("null".into());
    }
    let (base, any_port) = match entry.strip_suffix(":*") {
        Some(base) => (base, true),
        None => (entry, false),
    };
    let uri: Uri = base.parse().map_err(|_| refused("it cannot be read"))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(refused("it has no scheme or no host"));
    };
    if authority.as_str().contains('@') {
        return Err(refused("it holds userinfo"));
    }
    if uri.query().is_some() || !matches!(uri.path(), "" | "/") || base.ends_with('/') {
        return Err(refused("it holds a path or a query"));
    }
    let scheme = scheme.to_ascii_lowercase();
    let host = authority.host().to_ascii_lowercase();
    match (authority.port_u16(), any_port) {
        (Some(_), true) => Err(refused("it has a port and `:*`")),
        (None, true) => Ok(format!("{scheme}://{host}:*")),
        (Some(port), false) => Ok(format!("{scheme}://{host}:{port}")),
        (None, false) => match scheme.as_str() {
            "https" => Ok(format!("{scheme}://{host}:443")),
            "http" => Ok(format!("{scheme}://{host}:80")),
            _ => Err(refused("its scheme has no default port; give the port")),
        },
    }
}

/// Middleware on every route: refuse a `Host` or absolute-form target holding userinfo
/// (`400`, counted as a `host` refusal in `metrics`), and make an absolute-form target's
/// authority the `Host` that the checks after it judge.
pub(super) async fn checked_authority(
    State(metrics): State<Arc<Metrics>>,
    mut request: Request,
    next: Next,
) -> Response {
    let userinfo = request
        .headers()
        .get_all(header::HOST)
        .iter()
        .any(|host| host.as_bytes().contains(&b'@'))
        || request
            .uri()
            .authority()
            .is_some_and(|authority| authority.as_str().contains('@'));
    if userinfo {
        metrics.refused(RefusalReason::host);
        return (
            StatusCode::BAD_REQUEST,
            "Bad Request: the Host (or the request target's authority) holds userinfo; \
             send host[:port] only\n",
        )
            .into_response();
    }
    if let Some(authority) = request.uri().authority().cloned() {
        let Ok(value) = HeaderValue::from_str(authority.as_str()) else {
            return (StatusCode::BAD_REQUEST, "Bad Request: invalid target\n").into_response();
        };
        request.headers_mut().insert(header::HOST, value);
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(entry: &str) -> Result<String, String> {
        exact_origins(&[entry.to_owned()]).map(|mut v| v.remove(0))
    }

    #[test]
    fn an_origin_without_a_port_names_its_schemes_default_port() {
        assert_eq!(
            exact("https://app.example.com").unwrap(),
            "https://app.example.com:443"
        );
        assert_eq!(exact("HTTP://Localhost").unwrap(), "http://localhost:80");
        assert_eq!(exact("http://[::1]").unwrap(), "http://[::1]:80");
        assert_eq!(
            exact("http://localhost:3000").unwrap(),
            "http://localhost:3000"
        );
        assert_eq!(exact("http://localhost:*").unwrap(), "http://localhost:*");
        assert_eq!(exact("null").unwrap(), "null");
    }

    #[test]
    fn an_entry_that_is_not_an_origin_is_refused_naming_it() {
        for entry in [
            "app.example.com",
            "https://user@app.example.com",
            "https://app.example.com/path",
            "https://app.example.com/",
            "https://app.example.com?q=1",
            "https://app.example.com:443:*",
            "ftp://files.example.com",
        ] {
            let refused = exact(entry).unwrap_err();
            assert!(refused.contains(entry), "{refused}");
        }
    }
}
