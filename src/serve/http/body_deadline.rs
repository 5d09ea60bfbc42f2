//! A deadline on each request's body: the whole body must arrive within the header read
//! timeout (`--http-header-timeout`), counted from when its headers were read. Without it a
//! client that sends its headers and then one byte of body every few seconds holds its
//! connection (one of `--http-max-connections`) for as long as it likes, which the header
//! timeout alone does not stop. Past the deadline the body ends with an error, the layer
//! reading it answers with an error status, and hyper closes the connection (its body was
//! not read to the end).

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;

/// Middleware (`axum::middleware::from_fn_with_state`, state: the time a body may take)
/// that makes the request's body fail once `limit` has passed since this request reached it.
pub(super) async fn limit_body_time(
    State(limit): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    let deadline = tokio::time::Instant::now() + limit;
    let (parts, body) = request.into_parts();
    // The state is (the body's data, whether the deadline already passed): after the
    // timeout error the stream ends.
    let timed = futures::stream::unfold(
        (body.into_data_stream(), false),
        move |(mut data, expired)| async move {
            if expired {
                return None;
            }
            match tokio::time::timeout_at(deadline, data.next()).await {
                Ok(Some(chunk)) => Some((chunk.map_err(std::io::Error::other), (data, false))),
                Ok(None) => None,
                Err(_) => Some((
                    Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "the request body did not arrive within {} s of its headers",
                            limit.as_secs()
                        ),
                    )),
                    (data, true),
                )),
            }
        },
    );
    next.run(Request::from_parts(parts, Body::from_stream(timed)))
        .await
}
