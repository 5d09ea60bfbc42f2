//! Whether a call's request reached its wrapped server: the audit log's `sent` and
//! `withdrawn` (docs/audit-log.md).
//!
//! A [`WriteTicket`] travels with a `tools/call` request (in its rmcp extensions, which are
//! never serialized) from the bridge to the server's connection. Whoever hands the request
//! to the server marks it first ([`WriteTicket::mark_written`]): on a stdio server, the task
//! sending the line when it writes it at once, or the write queue's writer when it takes the
//! line out of the queue to write it; the HTTP client when it starts the POST. The call's audit record settles it when the call is over
//! ([`WriteTicket::settle`]). Both are one compare-and-swap on the same atomic, so exactly
//! one wins: a request the writer has not taken by then is withdrawn for good (the writer
//! then skips it), and a request it took is `sent`, whatever the server did with it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};

/// Not handed to the server yet.
const WAITING: u8 = 0;
/// Handed to the server (its line is being or was written, its POST started).
const WRITTEN: u8 = 1;
/// Given up by its call before it was handed to the server: it never will be.
const WITHDRAWN: u8 = 2;

/// One call's request on its way to its server; clones share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteTicket(Arc<AtomicU8>);

impl WriteTicket {
    /// For the writer, just before it hands the request to the server: `true` to write it
    /// (from now on the call is `sent`), `false` when its call already gave it up (then it
    /// must not be written). Marking twice (an HTTP POST sent again) keeps it written.
    pub(crate) fn mark_written(&self) -> bool {
        match self
            .0
            .compare_exchange(WAITING, WRITTEN, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(state) => state == WRITTEN,
        }
    }

    /// For the call's audit record, once the call is over: whether the request was handed
    /// to the server. A request not handed over by now never will be.
    pub(crate) fn settle(&self) -> bool {
        match self
            .0
            .compare_exchange(WAITING, WITHDRAWN, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => false,
            Err(state) => state == WRITTEN,
        }
    }

    /// Whether the call already gave the request up (the writer skips it).
    pub(crate) fn is_withdrawn(&self) -> bool {
        self.0.load(Ordering::Acquire) == WITHDRAWN
    }
}

/// rmcp's `Peer::call_tool`, with `ticket` in the request's extensions, where the
/// connection finds it: the same request on the wire, the same answers, and the same
/// `notifications/cancelled` when the call is dropped before its answer.
///
/// # Errors
/// rmcp's [`ServiceError`]; an answer that is not a tool's result (an `input_required`
/// or task answer, which `call_tool` refuses too) is [`ServiceError::UnexpectedResponse`].
pub(super) async fn call_tool(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
    ticket: &WriteTicket,
) -> Result<CallToolResult, ServiceError> {
    let mut request = CallToolRequest::new(params);
    request.extensions.insert(ticket.clone());
    let handle = peer
        .send_request_with_option(
            ClientRequest::CallToolRequest(request),
            PeerRequestOptions::no_options(),
        )
        .await?;
    let mut guard = CancelOnDrop {
        peer,
        id: Some(handle.id.clone()),
    };
    let answer = handle.await_response().await;
    guard.id = None;
    match answer? {
        ServerResult::CallToolResult(result) => Ok(result),
        ServerResult::InputRequiredResult(_) | ServerResult::CreateTaskResult(_) => {
            Err(ServiceError::UnexpectedResponse)
        }
        // A result without `content` that rmcp read as another shape, as `call_tool` takes it.
        other => serde_json::to_value(&other)
            .ok()
            .and_then(|value| crate::exact_json::typed(value).ok())
            .ok_or(ServiceError::UnexpectedResponse),
    }
}

/// Sends `notifications/cancelled` for `id` when dropped before its answer came (a timeout,
/// an ended run), as rmcp's `call_tool` does.
struct CancelOnDrop<'a> {
    peer: &'a Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let (Some(id), Ok(runtime)) = (self.id.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let peer = self.peer.clone();
        // Nothing can wait in a drop; this runs only for a call given up.
        runtime.spawn(async move {
            let reason = "request abandoned by the caller".to_owned();
            let cancel = CancelledNotificationParam::new(Some(id), Some(reason));
            let _ = peer.notify_cancelled(cancel).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::WriteTicket;

    #[test]
    fn a_request_written_before_its_call_ends_is_sent() {
        let ticket = WriteTicket::default();
        assert!(ticket.mark_written());
        assert!(
            ticket.mark_written(),
            "a second POST of it is still allowed"
        );
        assert!(ticket.settle());
        assert!(ticket.settle(), "settling again changes nothing");
    }

    #[test]
    fn a_request_whose_call_ended_first_is_withdrawn_and_never_written() {
        let ticket = WriteTicket::default();
        assert!(!ticket.settle());
        assert!(ticket.is_withdrawn());
        assert!(!ticket.mark_written(), "the writer must skip it");
        assert!(!ticket.settle());
    }
}
