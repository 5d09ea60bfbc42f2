//! `/healthz` and the `Host` and `Origin` checks of the routes rmcp does not serve
//! (`/healthz`, `/healthz/live`, `/metrics`).
//!
//! A web page whose name rebinds to this address reads any route same-origin, so every route
//! gets the checks `/mcp` gets against DNS rebinding. They are rmcp's own: [`SameChecks`]
//! hands rmcp a bodiless `OPTIONS` request with the request's `Host` and `Origin`, which
//! rmcp checks before anything else and, when they pass, answers `405` (it serves no
//! `OPTIONS`). So `/healthz` and `/mcp` can never disagree on which `Host` or `Origin` passes.
//! The probe is the only way to rmcp's check: rmcp 3.11 keeps the check itself private
//! (`validate_dns_rebinding_headers` in its streamable HTTP `tower.rs`, reached only from
//! `StreamableHttpService::handle`), and a copy of it here would be a second check that
//! could drift from the one `/mcp` makes (rmcp's host and origin matching has its own
//! normalization, port rules and `:*` patterns). The probe carries no body and ends at
//! rmcp's `405`: nothing of the session machinery runs for it.
//!
//! `/healthz` needs no token (load balancers probe it without one) and then answers the
//! overall status only (`live`, `ready`, `servers_started`, `sandbox_started`,
//! `shutting_down`); the details (which server is down and why, which may name its URL, and
//! `runs_in_flight`) come only with the token, or when serving without one (`--http-no-auth`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};

use super::Shared;
use super::auth::{self, Verdict};
use crate::serve::CodeModeServer;
use crate::serve::metrics::{Metrics, RefusalReason};

/// rmcp's `Host` and `Origin` checks for routes rmcp does not serve, with refusals counted.
#[derive(Clone)]
pub(super) struct SameChecks {
    /// The `/mcp` service itself, configured with `--http-allow-host`/`--http-allow-origin`.
    mcp: StreamableHttpService<CodeModeServer, LocalSessionManager>,
    metrics: Arc<Metrics>,
}

impl SameChecks {
    /// The checks `mcp` makes; refusals counted in `metrics`.
    pub(super) fn new(
        mcp: StreamableHttpService<CodeModeServer, LocalSessionManager>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self { mcp, metrics }
    }
}

/// Middleware: pass the request on only when its `Host` and `Origin` pass `/mcp`'s checks;
/// otherwise rmcp's refusal (`403`, or `400` for a `Host` that cannot be read).
pub(super) async fn host_and_origin(
    State(checks): State<SameChecks>,
    request: Request,
    next: Next,
) -> Response {
    let mut probe = axum::http::Request::builder()
        .method(Method::OPTIONS)
        .uri(request.uri().clone());
    for name in [header::HOST, header::ORIGIN] {
        for value in request.headers().get_all(&name) {
            probe = probe.header(&name, value);
        }
    }
    let Ok(probe) = probe.body(axum::body::Body::empty()) else {
        return (StatusCode::BAD_REQUEST, "Bad Request\n").into_response();
    };
    let answer = checks.mcp.handle(probe).await.map(axum::body::Body::new);
    if answer.status() == StatusCode::METHOD_NOT_ALLOWED {
        return next.run(request).await;
    }
    // Anything else is a refusal (and an unexpected answer fails closed).
    counted_refusal(&checks.metrics, answer).await
}

/// Count rmcp's `403` under `host` or `origin`, from the header its text names ("Host
/// header is not allowed"), and give the response back unchanged.
pub(super) async fn counted_refusal(metrics: &Metrics, response: Response) -> Response {
    if response.status() != StatusCode::FORBIDDEN {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let host = text.windows(4).any(|w| w == b"Host");
    metrics.refused(if host {
        RefusalReason::host
    } else {
        RefusalReason::origin
    });
    Response::from_parts(parts, axum::body::Body::from(text))
}

/// `GET /healthz`: `200` when ready, `503` when live but not ready, with a JSON body (see the
/// module documentation for what it holds without the token).
pub(super) async fn healthz(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let stopping = shared.stopping.load(Ordering::SeqCst);
    let sandbox = shared.ready.load(Ordering::SeqCst);
    let bridge = shared.server.bridge().clone();
    let unavailable: Vec<Value> = bridge
        .catalog()
        .unavailable()
        .iter()
        .map(|(name, why)| json!({ "name": name, "why": why }))
        .collect();
    if !unavailable.is_empty() {
        // A server that failed is started again by runs; a replica held out of rotation
        // gets none, so the health check itself retries (at most every 5 s per server).
        tokio::spawn(async move { bridge.refresh().await });
    }
    let servers_started = unavailable.is_empty();
    let ready = sandbox && servers_started && !stopping;
    let mut body = json!({
        "live": true,
        "ready": ready,
        "servers_started": servers_started,
        "sandbox_started": sandbox,
        "shutting_down": stopping,
    });
    let details = shared.token.as_ref().is_none_or(|token| {
        let presented = headers
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        auth::check(token, presented) == Verdict::Allowed
    });
    if details {
        body["servers_unavailable"] = Value::Array(unavailable);
        body["runs_in_flight"] = json!(shared.server.runs_in_flight());
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{body}\n"),
    )
        .into_response()
}
