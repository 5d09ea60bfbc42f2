//! The wrapped server's own requests (`roots/list`, `sampling/createMessage`, ...) handed to
//! rmcp and not answered yet, bounded (README "What wrapped servers send").
//!
//! rmcp answers each on a task of its own, and its answer waits in the write queue when the
//! server does not read. A server that sends requests faster than they are answered (a
//! flood, often without reading) would grow those tasks without bound, so past
//! [`MAX_UNANSWERED`] (or while the write queue is full) a further request is dropped
//! unanswered before rmcp sees it, with one warning until the backlog is gone.

use std::collections::HashSet;
use std::sync::Mutex;

use rmcp::model::RequestId;

/// Most requests of one server waiting for serve's answer at once (serve answers each at
/// once: ping, no roots, sampling refused, elicitation declined).
pub(super) const MAX_UNANSWERED: usize = 256;

/// The ids of the server's requests rmcp is answering.
#[derive(Default)]
pub(super) struct Unanswered {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    ids: HashSet<RequestId>,
    /// Whether a dropped request was logged since the backlog was last empty.
    logged: bool,
}

impl Unanswered {
    /// Whether the request `id` may go to rmcp: `false` (it is dropped, logged once per
    /// backlog) past [`MAX_UNANSWERED`] or when `writes_full` (nothing could carry its
    /// answer).
    pub(super) fn admit(&self, server: &str, id: &RequestId, writes_full: bool) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let count = state.ids.len();
        if count < MAX_UNANSWERED && !writes_full {
            state.ids.insert(id.clone());
            return true;
        }
        if !std::mem::replace(&mut state.logged, true) {
            tracing::warn!(
                server = %server,
                "it sends requests faster than they are answered ({count} wait, its input full: {writes_full}); further requests of it are dropped unanswered until they are"
            );
        }
        false
    }

    /// The request `id` was answered, or the server cancelled it (rmcp then sends no answer).
    pub(super) fn done(&self, id: &RequestId) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.ids.remove(id);
        if state.ids.is_empty() {
            state.logged = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_past_the_bound_are_dropped_until_answers_free_room() {
        let unanswered = Unanswered::default();
        for n in 0..MAX_UNANSWERED as i64 {
            assert!(unanswered.admit("s", &RequestId::Number(n), false));
        }
        let next = RequestId::Number(-1);
        assert!(!unanswered.admit("s", &next, false), "past the bound");
        unanswered.done(&RequestId::Number(0));
        assert!(unanswered.admit("s", &next, false), "an answer frees room");
        unanswered.done(&next);
        assert!(
            !unanswered.admit("s", &RequestId::Number(-2), true),
            "dropped while the write queue is full"
        );
    }
}
