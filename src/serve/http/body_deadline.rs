//! A deadline on each request's body: the whole body must arrive within the header read
//! timeout (`--http-header-timeout`), counted from when its headers were read. Without it a
//! client that sends its headers and then one byte of body every few seconds holds its
//! connection (one of `--http-max-connections`) for as long as it likes, which the header
//! timeout alone does not stop. Past the deadline the body ends with an error, and the
//! request is answered `408 Request Timeout` (whatever the layer reading the body made of
//! the error: rmcp answers any body error `413`), with `Connection: close`, and counted as
//! `body_timeout` in `mcp_code_mode_refusals_total`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use crate::serve::metrics::{Metrics, RefusalReason};

/// Set, in a request's extensions, once its body missed its deadline: the layers inside
/// see that an error reading the body was this one.
#[derive(Clone, Debug, Default)]
pub(super) struct BodyTimedOut(Arc<AtomicBool>);

impl BodyTimedOut {
    /// Whether the body of the request holding this missed its deadline.
    pub(super) fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Middleware (`axum::middleware::from_fn_with_state`; state: the time a body may take,
/// and the metrics that count the refusal) that makes the request's body fail once `limit`
/// has passed since this request reached it, and then answers `408`.
pub(super) async fn limit_body_time(
    State((limit, metrics)): State<(Duration, Arc<Metrics>)>,
    request: Request,
    next: Next,
) -> Response {
    let deadline = tokio::time::Instant::now() + limit;
    let timed_out = BodyTimedOut::default();
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(timed_out.clone());
    // The state is (the body's data, whether the deadline already passed): after the
    // timeout error the stream ends.
    let flag = timed_out.clone();
    let timed = futures::stream::unfold(
        (body.into_data_stream(), false),
        move |(mut data, expired)| {
            let flag = flag.clone();
            async move {
                if expired {
                    return None;
                }
                match tokio::time::timeout_at(deadline, data.next()).await {
                    Ok(Some(chunk)) => Some((chunk.map_err(std::io::Error::other), (data, false))),
                    Ok(None) => None,
                    Err(_) => {
                        flag.0.store(true, Ordering::SeqCst);
                        Some((
                            Err(std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                too_slow(limit),
                            )),
                            (data, true),
                        ))
                    }
                }
            }
        },
    );
    let response = next
        .run(Request::from_parts(parts, Body::from_stream(timed)))
        .await;
    if !timed_out.is_set() {
        return response;
    }
    metrics.refused(RefusalReason::body_timeout);
    tracing::debug!("a request was refused: {}", too_slow(limit));
    (
        StatusCode::REQUEST_TIMEOUT,
        [(header::CONNECTION, "close")],
        format!("Request Timeout: {}\n", too_slow(limit)),
    )
        .into_response()
}

fn too_slow(limit: Duration) -> String {
    format!(
        "the request body was sent too slowly: it did not all arrive within {} s of its \
         headers (--http-header-timeout)",
        limit.as_secs()
    )
}
