//! Remote servers: an MCP session over Streamable HTTP (spec "Transports § Streamable HTTP"),
//! with rmcp's client on reqwest (rustls with the ring provider, system roots).
//!
//! The entry's `headers` go with every request (an `Authorization: Bearer …` token, an API
//! key). The bridge checks, the call budget and the private-data rule are the same as for a
//! local server: only the transport differs. What the server sends is repaired as a local
//! server's lines are (`lenient_http.rs`), so a malformed optional field costs nothing here
//! either. rmcp's client, which reads what the server sends, runs on a thread of its own
//! (`http_thread.rs`), never on `serve`'s runtime thread. Responses are bounded by rmcp:
//! one JSON body or SSE event at most [`MAX_RESPONSE_BYTES`]. The HTTP+SSE transport of
//! protocol 2024-11-05 (`"type": "sse"`) has no client in rmcp 3.11, so such an entry fails
//! to start with a reason that says so (and, unless `--strict`, the other servers start).

use std::collections::HashMap;

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::http_thread::OwnThread;
use super::lenient_http::LenientHttpClient;
use super::tasks::RawRequests;
use super::{BridgeClient, RemoteSpec, RemoteTransport, ServerSpec, UpstreamError};
use crate::bridge::upstream::transport::MAX_SERVER_LINE_BYTES;

/// Largest response body or SSE event read from a remote server, in bytes (the same bound
/// as one line from a local server).
pub(super) const MAX_RESPONSE_BYTES: usize = MAX_SERVER_LINE_BYTES;

fn failed(spec: &ServerSpec, why: String) -> UpstreamError {
    UpstreamError::Session {
        name: spec.name.clone(),
        step: "connect to",
        why,
        tail: String::new(),
    }
}

/// Open a session with the remote server `remote` and complete the MCP handshake; also
/// the [`RawRequests`] sent on that session beside rmcp's (task requests).
///
/// # Errors
/// [`UpstreamError::Session`] naming the server and why (a refused header, a legacy SSE
/// endpoint, no answer before `deadline`, an HTTP or protocol error).
pub(super) async fn connect(
    spec: &ServerSpec,
    remote: &RemoteSpec,
    client: BridgeClient,
    deadline: tokio::time::Instant,
) -> Result<(RunningService<RoleClient, BridgeClient>, RawRequests), UpstreamError> {
    if remote.transport == RemoteTransport::Sse {
        return Err(failed(
            spec,
            "the legacy HTTP+SSE transport (\"type\": \"sse\") is not supported (rmcp 3.11 has no client for it); most such servers also serve Streamable HTTP, often at /mcp: use that URL with \"type\": \"http\"".into(),
        ));
    }
    // Several servers may race to install it; every install after the first is a no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = HashMap::new();
    for (name, value) in &remote.headers {
        let header = http::HeaderName::try_from(name.as_str())
            .map_err(|_| failed(spec, format!("{name:?} is not a valid HTTP header name")))?;
        let value = http::HeaderValue::try_from(value.as_str()).map_err(|_| {
            failed(
                spec,
                format!("the value of header {name:?} is not valid in HTTP"),
            )
        })?;
        headers.insert(header, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(remote.url.as_str());
    config.custom_headers = headers.clone();
    config.max_json_response_size = MAX_RESPONSE_BYTES;
    config.max_sse_event_size = MAX_RESPONSE_BYTES;
    let client_http = LenientHttpClient::new()
        .map_err(|e| failed(spec, format!("cannot set up an HTTP client: {e}")))?;
    let raw = RawRequests::over_http(client_http.raw(headers));
    // rmcp's worker reads every body and event: on a thread of its own (http_thread.rs).
    let transport =
        OwnThread::start(|| StreamableHttpClientTransport::with_client(client_http, config))
            .map_err(|e| failed(spec, format!("cannot start its HTTP client thread: {e}")))?;
    let startup = spec.startup_wait();
    match tokio::time::timeout_at(deadline, client.serve(transport)).await {
        Ok(Ok(session)) => Ok((session, raw)),
        Ok(Err(e)) => {
            tracing::info!(server = %spec.name, "initialize failed: {e}");
            Err(failed(
                spec,
                super::plain::remote_initialize(&e, &remote.url),
            ))
        }
        Err(_) => Err(failed(
            spec,
            format!("no answer within {} s", startup.as_secs_f64()),
        )),
    }
}
