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
//!   sandboxes and wrapped servers.
//!
//! Shutdown: when `stop` resolves, no more connections are accepted, each open one is shut
//! down gracefully (hyper finishes the request in flight, then closes), and the function
//! returns once all are closed.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
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

/// Serve `app` on the connections `listener` accepts, within `limits`, until `stop`
/// resolves and every connection has closed (see the module documentation).
pub(super) async fn serve_connections(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()>,
) {
    // Outermost, so no layer reads a body before its deadline is set.
    let app = app.layer(axum::middleware::from_fn_with_state(
        limits.header_read_timeout,
        super::body_deadline::limit_body_time,
    ));
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
        let service = TowerToHyperService::new(app.clone());
        let builder = builder.clone();
        let closing = closing.clone();
        connections.spawn(async move {
            let _permit = permit;
            let mut connection = pin!(builder.serve_connection(TokioIo::new(stream), service));
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = closing.cancelled() => {
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
