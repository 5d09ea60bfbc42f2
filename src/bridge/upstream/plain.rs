//! Why a server's handshake or listing failed, in plain words for the model and `/healthz`
//! (README "Several servers": the run_python description names a server that is down and
//! says why).
//!
//! rmcp's own error texts name Rust types (`Transport [LineTransport<ChildStdout, …>]`) and,
//! for a remote server, carry the whole request URL, query string and userinfo included
//! (`?api_key=…`). Neither belongs in text the model reads or an unauthenticated endpoint
//! serves, so these texts say what happened ("could not write to its stdin", "could not
//! connect to http://host:port/path") and show a URL only through [`shown_url`]. serve's log
//! keeps rmcp's full text (logged where the error is met), its URLs cut to [`shown_url`] by
//! the log writer (`crate::stderr_log`).

use rmcp::ServiceError;
use rmcp::service::ClientInitializeError;
use rmcp::transport::DynamicTransportError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// Longest server-chosen text (a JSON-RPC error message) kept in a plain description, in
/// characters.
const MAX_SERVER_TEXT_CHARS: usize = 200;

/// `url` without its userinfo (`user:password@`), query (`?…`) and fragment (`#…`):
/// `https://u:p@host:8443/mcp?api_key=k` is shown as `https://host:8443/mcp`. A text with
/// no `scheme://` loses only its query and fragment.
pub(crate) fn shown_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}")
}

/// What failed in the handshake with a local (stdio) server, when its process has not (yet)
/// told more (an exit status, the end of its stdout).
pub(super) fn stdio_initialize(e: &ClientInitializeError) -> String {
    match e {
        ClientInitializeError::TransportError { error, .. } => stdio_transport(error),
        other => initialize(other),
    }
}

/// What failed in the handshake with the remote server at `url`.
pub(super) fn remote_initialize(e: &ClientInitializeError, url: &str) -> String {
    match e {
        ClientInitializeError::TransportError { error, .. } => remote_transport(error, url),
        other => initialize(other),
    }
}

/// What failed in a request to a server after the handshake (`tools/list`); `url` is a
/// remote server's.
pub(super) fn request(e: &ServiceError, url: Option<&str>) -> String {
    match e {
        ServiceError::McpError(data) => format!(
            "it answered with an error: {}",
            crate::bridge::refusal::cap(&data.message, MAX_SERVER_TEXT_CHARS)
        ),
        ServiceError::TransportSend(error) => match url {
            Some(url) => remote_transport(error, url),
            None => stdio_transport(error),
        },
        ServiceError::TransportClosed => "the connection closed".to_owned(),
        ServiceError::UnexpectedResponse => "its answer was not the one asked for".to_owned(),
        ServiceError::Cancelled { .. } => "the request was cancelled".to_owned(),
        ServiceError::Timeout { .. } => "no answer in time".to_owned(),
        _ => "the request failed".to_owned(),
    }
}

/// The handshake failures that do not depend on the transport.
fn initialize(e: &ClientInitializeError) -> String {
    match e {
        ClientInitializeError::JsonRpcError(data) => format!(
            "it answered initialize with an error: {}",
            crate::bridge::refusal::cap(&data.message, MAX_SERVER_TEXT_CHARS)
        ),
        ClientInitializeError::ConnectionClosed(_) => {
            "the connection closed before it answered initialize".to_owned()
        }
        ClientInitializeError::ExpectedInitResponse(_)
        | ClientInitializeError::ExpectedInitResult(_)
        | ClientInitializeError::ConflictInitResponseId(..)
        | ClientInitializeError::UncorrelatedErrorResponse { .. } => {
            "its answer to initialize was not an initialize result".to_owned()
        }
        ClientInitializeError::NoCompatibleProtocolVersion { .. } => {
            "it supports no MCP protocol version serve knows".to_owned()
        }
        ClientInitializeError::Cancelled => "initialize was cancelled".to_owned(),
        _ => "initialize failed".to_owned(),
    }
}

/// A write to a local server's stdin that failed (the only transport error it has).
fn stdio_transport(error: &DynamicTransportError) -> String {
    match error.error.downcast_ref::<std::io::Error>() {
        Some(io) => format!("could not write to its stdin ({io})"),
        None => "could not write to its stdin".to_owned(),
    }
}

/// A request to the remote server at `url` that failed, naming the URL only as
/// [`shown_url`] does.
fn remote_transport(error: &DynamicTransportError, url: &str) -> String {
    let url = shown_url(url);
    let Some(http) = error
        .error
        .downcast_ref::<StreamableHttpError<reqwest::Error>>()
    else {
        return format!("the request to {url} failed");
    };
    match http {
        StreamableHttpError::Client(e) => {
            // reqwest's own text repeats the whole URL; the innermost cause does not.
            let cause = innermost_cause(e).map_or_else(String::new, |c| format!(" ({c})"));
            if e.is_connect() {
                format!("could not connect to {url}{cause}")
            } else if e.is_timeout() {
                format!("the request to {url} timed out")
            } else if let Some(status) = e.status() {
                format!("{url} answered HTTP {}", status.as_u16())
            } else {
                format!("the request to {url} failed{cause}")
            }
        }
        StreamableHttpError::HttpStatus(status) => format!("{url} answered HTTP {}", status.status),
        StreamableHttpError::AuthRequired(_) => {
            format!("{url} requires authorization (HTTP 401): check the entry's headers")
        }
        StreamableHttpError::InsufficientScope(_) => {
            format!("{url} refused the credentials' scope (HTTP 403)")
        }
        StreamableHttpError::UnexpectedContentType(kind) => format!(
            "{url} answered with content type {:?}, neither JSON nor an event stream",
            kind.as_deref().unwrap_or("none")
        ),
        StreamableHttpError::ResponseBodyTooLarge { max_size } => {
            format!("{url} sent a response over {max_size} bytes")
        }
        StreamableHttpError::Deserialize(_) => format!("{url} answered with invalid JSON"),
        StreamableHttpError::Sse(_) | StreamableHttpError::UnexpectedEndOfStream => {
            format!("{url} sent a broken event stream")
        }
        _ => format!("the request to {url} failed"),
    }
}

/// The last error in `e`'s source chain, when it has one (an OS error such as
/// `Connection refused (os error 111)`).
fn innermost_cause(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause = e.source()?;
    while let Some(next) = cause.source() {
        cause = next;
    }
    Some(crate::bridge::refusal::cap(
        &cause.to_string(),
        MAX_SERVER_TEXT_CHARS,
    ))
}

#[cfg(test)]
mod tests {
    use super::shown_url;

    #[test]
    fn a_shown_url_loses_its_userinfo_query_and_fragment() {
        assert_eq!(
            shown_url("https://user:pw@example.com:8443/mcp?api_key=SECRET#x"),
            "https://example.com:8443/mcp"
        );
        assert_eq!(
            shown_url("http://127.0.0.1:1/mcp?api_key=SECRET"),
            "http://127.0.0.1:1/mcp"
        );
        assert_eq!(
            shown_url("http://a@b@host?k=v"),
            "http://host",
            "userinfo ends at the last @ before the path"
        );
        assert_eq!(shown_url("http://host/p@th"), "http://host/p@th");
    }
}
