//! Accepting and serving the TCP connections of `serve --http`, with hyper's HTTP/1.1
//! server and two bounds that `axum::serve` does not set:
//!
//! - a header read timeout ([`ConnectionLimits::header_read_timeout`], hyper's
//!   `http1::Builder::header_read_timeout`): a connection that has not sent a request's whole
//!   header block within it is closed. The clock starts when hyper begins reading a request
//!   head, so it also ends a keep-alive connection that sits idle between requests. Without
//!   it, a client that sends half a header and waits holds its connection (and a file
//!   descriptor) for ever, and ~1,000 of them exhaust the process's descriptors and lock
//!   every client out ("slowloris");
//! - the same time for a request's whole body, counted from its headers
//!   (`super::body_deadline`), so a client cannot hold a connection by trickling a body;
//! - a cap on open connections ([`ConnectionLimits::max_connections`]): past it, the
//!   listener stops accepting, so further connections wait in the kernel's accept queue
//!   until one closes, instead of each taking a descriptor the process may need for its
//!   sandboxes and wrapped servers;
//! - when a token is required, a connection that has not presented it (no request of its
//!   own passed the token check, [`Authenticated`]) is shut down gracefully one header
//!   read timeout after it was accepted: the request in flight is answered, then the
//!   connection closes. Without it, a client without the token could keep every slot of
//!   the cap busy for ever with keep-alive requests that need no token (`/healthz/live`)
//!   or that are refused (`401`, which also closes its connection), and lock every token
//!   holder out.
//!
//! Shutdown: when `stop` resolves, no more connections are accepted, each open one is shut
//! down gracefully (hyper finishes the request in flight, then closes), and the function
//! returns once all are closed.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Time a client gets to send a request's whole header block, by default
/// (`--http-header-timeout`).
pub(crate) const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections open at once, by default (`--http-max-connections`): room for every session
/// of the default cap (64) with its standalone stream and its runs, well under the usual
/// 1,024 descriptors of `ulimit -n`.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// The bounds on connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    /// Time from the start of a request head (or of an idle keep-alive wait) to its end,
    /// and again from the end of the head to the end of the request's body.
    pub header_read_timeout: Duration,
    /// Connections open at once; more wait in the accept queue.
    pub max_connections: usize,
}

/// Whether a connection has presented the bearer token: found in the extensions of each
/// request on it. The token check ([`super::guard`]) calls [`Authenticated::note`] when a
/// request passes it; a connection without it is closed one header read timeout after it
/// was accepted (see the module documentation).
#[derive(Clone, Debug, Default)]
pub(super) struct Authenticated(Arc<AtomicBool>);

impl Authenticated {
    /// Note that a request on this connection presented the token.
    pub(super) fn note(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A connection's service: `inner`, with the connection's [`Authenticated`] put in each
/// request's extensions.
struct Tagged<S> {
    inner: S,
    authenticated: Authenticated,
}

impl<S: hyper::service::Service<http::Request<Incoming>>>
    hyper::service::Service<http::Request<Incoming>> for Tagged<S>
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, mut request: http::Request<Incoming>) -> Self::Future {
        request.extensions_mut().insert(self.authenticated.clone());
        self.inner.call(request)
    }
}

/// Serve `app` on the connections `listener` accepts, within `limits`, until `stop`
/// resolves and every connection has closed (see the module documentation).
/// `token_required`: whether requests need the bearer token, so that a connection which
/// never presented it is closed after one header read timeout (`false`: no connection is).
pub(super) async fn serve_connections(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    token_required: bool,
    stop: impl Future<Output = ()>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections = TaskTracker::new();
    let closing = CancellationToken::new();
    let mut stop = pin!(stop);
    let mut warned_full = false;
    loop {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if !warned_full {
                    warned_full = true;
                    tracing::warn!(
                        "{} connections are open (--http-max-connections); new ones wait until one closes",
                        limits.max_connections
                    );
                }
                tokio::select! {
                    () = &mut stop => break,
                    permit = permits.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                }
            }
        };
        let accepted = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(e) => {
                // Out of descriptors (EMFILE/ENFILE) or a connection reset before accept:
                // wait a moment rather than spin on the error.
                tracing::warn!("failed to accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if permits.available_permits() > 0 {
            warned_full = false;
        }
        let _ = stream.set_nodelay(true);
        let authenticated = Authenticated::default();
        if !token_required {
            authenticated.note();
        }
        let service = Tagged {
            inner: TowerToHyperService::new(app.clone()),
            authenticated: authenticated.clone(),
        };
        let builder = builder.clone();
        let closing = closing.clone();
        let unauthenticated_for = limits.header_read_timeout;
        connections.spawn(async move {
            let _permit = permit;
            let mut connection = pin!(builder.serve_connection(TokioIo::new(stream), service));
            // Resolves at shutdown, or one header read timeout after the accept when no
            // request on this connection has presented the token by then.
            let end = async {
                tokio::select! {
                    () = closing.cancelled() => {}
                    () = async {
                        tokio::time::sleep(unauthenticated_for).await;
                        if authenticated.is_set() {
                            std::future::pending::<()>().await;
                        }
                        tracing::debug!(
                            "a connection that never presented the token was closed after {} s",
                            unauthenticated_for.as_secs()
                        );
                    } => {}
                }
            };
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = end => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = served {
                tracing::debug!("connection closed: {e}");
            }
        });
    }
    drop(listener);
    closing.cancel();
    connections.close();
    connections.wait().await;
}
