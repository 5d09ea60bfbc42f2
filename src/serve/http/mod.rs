//! `serve --http ADDR:PORT`: the run_python server over MCP's Streamable HTTP transport
//! (MCP 2025-11-25 basic/transports), with rmcp's server doing the transport and axum the
//! routing.
//!
//! Routes:
//! - `POST/GET/DELETE /mcp`: MCP. Each `initialize` opens a session (`Mcp-Session-Id`) with its
//!   own taint and run slots ([`super::session`]). run_python may be called as a task; task
//!   requests are answered by [`tasks`], after rmcp's checks, and a session's task runs end
//!   with it.
//! - `GET /healthz`: `200` when ready (every wrapped server running and a sandbox started),
//!   `503` when live but not ready (starting, a wrapped server down, or shutting down); the
//!   JSON body says which, naming each server that is down with why (`servers_unavailable`).
//!   A check that finds a server down starts it again in the background (at most every
//!   5 s per server), since a replica out of rotation gets no runs to retry it. Without the
//!   token it gives the overall status only ([`health`]).
//!   `GET /healthz/live` answers `200` while the process serves.
//! - `GET /metrics`: OpenMetrics text ([`super::metrics`]).
//!
//! `/healthz`, `/healthz/live` and `/metrics` get the same `Host` and `Origin` checks as
//! `/mcp` (step 3 below, [`health::host_and_origin`]), against DNS rebinding.
//!
//! Checks, in order, on `/mcp` and `/metrics` (`/healthz` needs no token):
//! 1. the bearer token, when one is set ([`auth`]): `401` with `WWW-Authenticate: Bearer`
//!    and `Connection: close`; a connection none of whose requests passed this check is
//!    closed one header read timeout after it was accepted ([`listen`]), so clients without
//!    the token cannot keep the connection slots from those with it;
//! 2. a new session (a `POST` without `Mcp-Session-Id`) while shutting down, or at the
//!    session cap when no session can be closed to make room (every one has a run in flight
//!    or was used within `--session-evict-idle`, [`idle`]): `503` with `Retry-After`;
//! 3. rmcp: the `Host` header (loopback names by default, or `--http-allow-host`) and the
//!    `Origin` header: any `Origin` not listed with `--http-allow-origin` is `403` (the
//!    transport spec's rule against DNS rebinding); a body over the cap is `413`, a body
//!    that does not all arrive within the header read timeout `408` ([`body_deadline`]).
//!    Before every route, [`authority`] refuses a `Host` (or absolute-form target)
//!    holding userinfo with `400` and makes an absolute-form target's authority the
//!    `Host`; the origins rmcp gets are exact (an entry without a port names the default
//!    port).
//!
//! Sessions end when the client sends `DELETE`, after `--session-idle` without a request
//! and without a run in flight ([`idle`]), or at shutdown. Protocol versions that have no sessions (2026-07-28) are not offered:
//! the taint needs a session to live in.
//!
//! Shutdown ([`serve_http`]'s `shutdown` future, SIGTERM in `serve`): report not ready,
//! refuse new sessions (`503`) and new runs (a tool error saying so), let the runs in flight
//! finish for up to the grace period, then cancel what is left, close every session and
//! stop accepting connections. Connections stay open until then, so a client can still
//! fetch its result or send its cancel on a new one.

pub(crate) mod args;
mod auth;
mod authority;
mod body_deadline;
mod health;
mod idle;
mod listen;
mod reused_ids;
pub(crate) mod tasks;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use self::auth::{BearerToken, Verdict};
use self::health::SameChecks;
use self::idle::IdleSessions;
pub(crate) use self::listen::{
    ConnectionLimits, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};
use self::tasks::SessionTasks;
use super::CodeModeServer;
use super::metrics::{CONTENT_TYPE, RefusalReason};
use super::session::Seats;

/// The MCP endpoint's path.
pub(crate) const MCP_PATH: &str = "/mcp";
/// Largest request body, in bytes, by default (`--http-max-body`); larger ones get `413`.
pub(crate) const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Time a session may go without a request before it is closed, by default.
pub(crate) const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(600);
/// Time a session must have gone without a request and without a run before a new session
/// at the cap may close it, by default (`--session-evict-idle`): long enough that clients
/// in use do not close each other's sessions in turn, short enough that crashed clients
/// free their seats soon.
pub(crate) const DEFAULT_SESSION_EVICT_IDLE: Duration = Duration::from_secs(30);
/// How long a new session waits for the seat of the session it closed to be freed (rmcp
/// ends the closed session's service a moment after the close).
const EVICTED_SEAT_WAIT: Duration = Duration::from_secs(5);
/// Time runs in flight get to finish after SIGTERM, by default.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// How `serve --http` serves.
#[derive(Debug, Clone)]
pub(crate) struct HttpOptions {
    /// Address and port to listen on (port 0: any free port, logged at startup).
    pub addr: SocketAddr,
    /// The bearer token every request must carry; `None` only on a loopback address and
    /// only when the operator chose `--http-no-auth` (every local user may then connect).
    pub token: Option<BearerToken>,
    /// Browser origins allowed in an `Origin` header (`scheme://host:port`, `scheme://host:*`
    /// for any port, or `null`; made exact by [`authority::exact_origins`]: an entry
    /// without a port would match every port in rmcp); a request with any other `Origin`
    /// gets `403`. Empty: every `Origin` is refused.
    pub allowed_origins: Vec<String>,
    /// `Host` header values allowed (`host` or `host:port`); empty: `localhost`,
    /// `127.0.0.1` and `::1` on a loopback address, any host otherwise (a token is then
    /// required, and the token is what keeps a rebinding page out).
    pub allowed_hosts: Vec<String>,
    /// Sessions open at once; a new one past this gets `503`.
    pub max_sessions: usize,
    /// Runs one session may have going at once.
    pub session_runs: usize,
    /// Time a session may go without a request before it is closed.
    pub session_idle: Duration,
    /// At the session cap, the least time the session idle longest (no request, no run in
    /// flight) must have been idle for a new session to close it and take its seat.
    pub session_evict_idle: Duration,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Time runs in flight get to finish at shutdown before they are cancelled.
    pub grace: Duration,
    /// Header read timeout and connection cap ([`listen`]).
    pub connections: ConnectionLimits,
}

struct Shared {
    server: CodeModeServer,
    token: Option<BearerToken>,
    seats: Seats,
    /// Run slots of each session (`--session-runs`).
    session_runs: usize,
    ready: AtomicBool,
    stopping: AtomicBool,
    /// Each open session's activity, for `--session-idle`.
    idle: Arc<IdleSessions>,
    session_idle: Duration,
    session_evict_idle: Duration,
    manager: Arc<LocalSessionManager>,
}

/// Serve `server` over Streamable HTTP until `shutdown` resolves, then shut down
/// gracefully (see the module documentation).
///
/// # Errors
/// The address cannot be bound, or a non-loopback address has no token.
pub(crate) async fn serve_http(
    server: CodeModeServer,
    options: HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // `HttpArgs::options` already refused a missing token without `--http-no-auth`; here
    // `None` means that choice was made, and only the address is checked again.
    auth::require_token(&options.addr, options.token.as_ref(), true).map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("failed to listen on {}", options.addr))?;
    let local = listener.local_addr()?;
    let seats = Seats::new(options.max_sessions, server.metrics().clone());
    let manager = Arc::new(session_manager());
    let shared = Arc::new(Shared {
        server: server.clone(),
        token: options.token.clone(),
        seats: seats.clone(),
        session_runs: options.session_runs,
        ready: AtomicBool::new(false),
        stopping: AtomicBool::new(false),
        idle: Arc::default(),
        session_idle: options.session_idle,
        session_evict_idle: options.session_evict_idle,
        manager: manager.clone(),
    });
    let sessions = CancellationToken::new();
    let tasks = Arc::new(SessionTasks::new(manager.clone(), options.max_body_bytes));
    let mcp = mcp_service(&server, &options, &local, seats, manager, sessions.clone());
    let same_checks = axum::middleware::from_fn_with_state(
        SameChecks::new(mcp.clone(), server.metrics().clone()),
        health::host_and_origin,
    );
    // The tasks layer is inside the guard: a task request passes the token and session
    // checks first.
    let guarded = Router::new()
        .route_service(MCP_PATH, mcp)
        .route("/metrics", get(metrics).layer(same_checks.clone()))
        .layer(axum::middleware::from_fn_with_state(
            tasks,
            self::tasks::route,
        ))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard));
    let app = Router::new()
        .route("/healthz", get(health::healthz).layer(same_checks.clone()))
        .route(
            "/healthz/live",
            get(|| async { "live\n" }).layer(same_checks),
        )
        .merge(guarded)
        .with_state(shared.clone())
        .layer(axum::middleware::from_fn_with_state(
            server.metrics().clone(),
            authority::checked_authority,
        ));
    tokio::spawn(probe_readiness(shared.clone()));
    tracing::info!(
        "serving MCP over Streamable HTTP on http://{local}{MCP_PATH} ({})",
        if options.token.is_some() {
            "bearer token required"
        } else {
            "no token (--http-no-auth): every local user and process may connect"
        }
    );

    let (stop_accepting, accepting_stopped) = tokio::sync::oneshot::channel::<()>();
    let drained = {
        let shared = shared.clone();
        let grace = options.grace;
        async move {
            shutdown.await;
            // Existing sessions keep their connections (a client may open a new one for
            // its next request or its cancel); new sessions and runs are refused.
            shared.stopping.store(true, Ordering::SeqCst);
            shared.server.stop_taking_runs();
            tracing::info!(
                "shutting down: no new sessions or runs; {} run(s) in flight get up to {} s",
                shared.server.runs_in_flight(),
                grace.as_secs()
            );
            let deadline = tokio::time::Instant::now() + grace;
            while shared.server.runs_in_flight() > 0 && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let left = shared.server.runs_in_flight();
            if left > 0 {
                tracing::warn!("the grace period is over; cancelling {left} run(s)");
                shared.server.cancel_all_runs();
                let until = tokio::time::Instant::now() + Duration::from_secs(2);
                while shared.server.runs_in_flight() > 0 && tokio::time::Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            // Let the last results leave their streams, then end every session and stop
            // accepting connections.
            tokio::time::sleep(Duration::from_millis(200)).await;
            sessions.cancel();
            let _ = stop_accepting.send(());
        }
    };
    // Outermost, so no layer reads a body before its deadline is set.
    let app = app.layer(axum::middleware::from_fn_with_state(
        (
            options.connections.header_read_timeout,
            server.metrics().clone(),
        ),
        body_deadline::limit_body_time,
    ));
    let serving = listen::serve_connections(
        listener,
        app,
        options.connections,
        options.token.is_some(),
        async move {
            let _ = accepting_stopped.await;
        },
    );
    tokio::join!(serving, drained);
    tracing::info!("shut down");
    Ok(())
}

/// rmcp's session store, without rmcp's idle timeout: [`idle`] closes idle sessions.
fn session_manager() -> LocalSessionManager {
    let mut manager = LocalSessionManager::default();
    manager.session_config = {
        let mut c = SessionConfig::default();
        c.keep_alive = None;
        c
    };
    manager
}

fn mcp_service(
    server: &CodeModeServer,
    options: &HttpOptions,
    local: &SocketAddr,
    seats: Seats,
    manager: Arc<LocalSessionManager>,
    sessions: CancellationToken,
) -> StreamableHttpService<CodeModeServer, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(sessions)
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_allowed_origins(options.allowed_origins.clone())
        .enforce_origin_validation();
    if !options.allowed_hosts.is_empty() {
        config = config.with_allowed_hosts(options.allowed_hosts.clone());
    } else if !local.ip().is_loopback() {
        config = config.disable_allowed_hosts();
    }
    let base = server.clone();
    let runs = options.session_runs;
    StreamableHttpService::new(
        move || {
            // The seat the guard took for this request; a seat of its own when rmcp asks
            // outside a request that opens a session (e.g. for a tool's schema).
            let reserved = RESERVED_SEAT
                .try_with(|seat| seat.borrow_mut().take())
                .ok()
                .flatten();
            let session = reserved.or_else(|| seats.seat(runs)).ok_or_else(|| {
                std::io::Error::other(format!("the session cap ({}) is reached", seats.max()))
            })?;
            let server = base.for_http_session(session);
            self::tasks::note_created(&server);
            Ok(server)
        },
        manager,
        config,
    )
}

/// The token, then the session cap, then the MCP service (which checks Host and Origin).
async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let metrics = shared.server.metrics();
    if let Some(token) = &shared.token {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        match auth::check(token, presented) {
            Verdict::Allowed => {
                if let Some(connection) = request.extensions().get::<listen::Authenticated>() {
                    connection.note();
                }
            }
            verdict => {
                metrics.refused(RefusalReason::unauthorized);
                return unauthorized(verdict);
            }
        }
    }
    let opens_session = request.method() == Method::POST
        && !request.headers().contains_key("mcp-session-id")
        && request.uri().path() == MCP_PATH;
    if opens_session {
        if shared.stopping.load(Ordering::SeqCst) {
            return unavailable("shutting down; open the session on another replica");
        }
        // The seat is taken here, not only checked: requests opening sessions at once would
        // otherwise all pass a check and the last ones be refused inside rmcp, as a 500 that
        // rmcp logs at ERROR.
        let Some(seat) = take_seat(&shared).await else {
            metrics.refused(RefusalReason::session_cap);
            tracing::warn!(
                "a new session was refused: the session cap ({}) is reached (--max-sessions) \
                 and every session has a run in flight or was used within {} s \
                 (--session-evict-idle)",
                shared.seats.max(),
                shared.session_evict_idle.as_secs()
            );
            return unavailable(&format!(
                "the session cap ({}) is reached; close a session or try later",
                shared.seats.max()
            ));
        };
        // rmcp's service factory, called while this request is handled, takes the seat; a
        // request that opens no session after all (refused by rmcp) frees it at the end.
        // Without its seat: this copy must not keep the seat taken.
        let session = seat.unseat();
        let seat = std::cell::RefCell::new(Some(seat));
        let response = RESERVED_SEAT
            .scope(seat, finish(shared.clone(), request, next))
            .await;
        if let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|id| id.to_str().ok())
        {
            shared.idle.watch(
                id.to_owned(),
                &session,
                shared.manager.clone(),
                shared.session_idle,
            );
        }
        return response;
    }
    if let Some(id) = request
        .headers()
        .get("mcp-session-id")
        .and_then(|id| id.to_str().ok())
    {
        shared.idle.touch(id);
    }
    finish(shared, request, next).await
}

/// A seat for a new session: a free one, else the seat of the session idle longest, closed
/// to make room when it has no run in flight and has been idle `--session-evict-idle` (a
/// `WARN` names it by its audit id); `None` when no session may be closed, or its seat was
/// not freed within [`EVICTED_SEAT_WAIT`].
async fn take_seat(shared: &Shared) -> Option<super::session::Session> {
    if let Some(seat) = shared.seats.seat(shared.session_runs) {
        return Some(seat);
    }
    let evicted = shared
        .idle
        .evict(&shared.manager, shared.session_evict_idle)
        .await?;
    tracing::warn!(
        "session {} was closed to make room for a new session at the session cap ({}): \
         no request and no run for {} s, the longest of all sessions (--session-evict-idle {})",
        evicted.audit_id,
        shared.seats.max(),
        evicted.idle.as_secs(),
        shared.session_evict_idle.as_secs()
    );
    shared
        .seats
        .seat_within(shared.session_runs, EVICTED_SEAT_WAIT)
        .await
}

tokio::task_local! {
    /// The seat [`guard`] took for the request that opens a session, until rmcp's service
    /// factory takes it (in the request's own task).
    static RESERVED_SEAT: std::cell::RefCell<Option<super::session::Session>>;
}

/// The guard's part after the token and session checks: rmcp's service, with its refusals
/// counted and its `202` for a closed session made `204`.
async fn finish(shared: Arc<Shared>, request: Request, next: Next) -> Response {
    let metrics = shared.server.metrics();
    let mcp = request.uri().path() == MCP_PATH;
    let closes_session = mcp && request.method() == Method::DELETE;
    let body_timed_out = request
        .extensions()
        .get::<body_deadline::BodyTimedOut>()
        .cloned()
        .unwrap_or_default();
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|id| id.to_str().ok())
        .map(str::to_owned);
    let response = next.run(request).await;
    let response = match response.status() {
        // `/metrics`' refusals were counted by its own Host and Origin checks.
        StatusCode::FORBIDDEN if mcp => health::counted_refusal(metrics, response).await,
        // rmcp's `413` for any body error: a body that was too slow is answered `408` and
        // counted as such by `body_deadline`.
        StatusCode::PAYLOAD_TOO_LARGE if !body_timed_out.is_set() => {
            metrics.refused(RefusalReason::body_too_large);
            response
        }
        _ => response,
    };
    if closes_session && response.status().is_success() {
        // rmcp has closed the session; its runs stop now, not when rmcp ends its service.
        if let Some(id) = &session {
            shared.idle.closed(id);
        }
    }
    if closes_session && response.status() == StatusCode::ACCEPTED {
        // rmcp 3.11 answers a closed session with a hard-coded `202 Accepted`; the MCP
        // Python SDK takes only 200 or 204 as success. The session is closed by then, so
        // the answer is `204 No Content` (spec 2025-11-25, "Session Management").
        return StatusCode::NO_CONTENT.into_response();
    }
    response
}

/// `401` with the RFC 6750 challenge (`invalid_token` when a wrong token was sent), and
/// `Connection: close`: a connection without the token is not kept for further requests.
fn unauthorized(verdict: Verdict) -> Response {
    let challenge = match verdict {
        Verdict::Wrong => {
            r#"Bearer realm="mcp-code-mode", error="invalid_token", error_description="the token is not valid""#
        }
        _ => r#"Bearer realm="mcp-code-mode""#,
    };
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, challenge),
            (header::CONNECTION, "close"),
        ],
        "Unauthorized: send Authorization: Bearer <token>\n",
    )
        .into_response()
}

fn unavailable(why: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "5")],
        format!("Service Unavailable: {why}\n"),
    )
        .into_response()
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let server = &shared.server;
    let text = server.metrics().encode(server.pool(), server.bridge());
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
}

/// Ready once one sandbox has started and run code (tried again every 5 s until then).
/// The wrapped servers started before serving began.
async fn probe_readiness(shared: Arc<Shared>) {
    loop {
        let server = &shared.server;
        let probe = server
            .pool()
            .run_steered("pass", server.options(), &crate::run::Steering::default())
            .await;
        match probe {
            Ok(report) if report.result.succeeded() => {
                shared.ready.store(true, Ordering::SeqCst);
                tracing::info!("ready: a sandbox started and ran code");
                return;
            }
            Ok(report) => tracing::warn!("not ready: the probe run failed: {:?}", report.result),
            Err(e) => tracing::warn!("not ready: a sandbox failed to start: {e}"),
        }
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}
