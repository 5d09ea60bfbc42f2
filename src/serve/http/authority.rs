//! Exact `Origin` entries, ahead of rmcp's `Origin` check (module documentation of
//! [`super`], step 3).
//!
//! - `--http-allow-origin` entries are made exact before rmcp gets them
//!   ([`exact_origins`]): an entry without a port names its scheme's default port (`443`
//!   for `https`, `80` for `http`), as browsers define an origin (RFC 6454 section 4), so
//!   `https://app.example.com` does not admit `https://app.example.com:9999` (rmcp 3.11
//!   lets a portless entry match any port). `:*` still asks for any port.

use axum::http::Uri;

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
