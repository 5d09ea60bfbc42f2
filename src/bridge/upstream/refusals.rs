//! The log of a wrapped server's requests that serve refuses: `sampling/createMessage` or a
//! method MCP does not define (answered "method not found" by the transport itself), and
//! requests that cannot be read (answered "invalid params"). A
//! server may send thousands in a burst, so only the first [`LOGGED_ONE_BY_ONE`] are
//! logged one by one; after them one line every [`SUMMARY_EVERY`] at most counts those
//! refused since (README "What wrapped servers send").

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Refused requests of one connection logged one line each.
pub(super) const LOGGED_ONE_BY_ONE: u64 = 5;
/// How often at most the count of the further refused requests is logged.
pub(super) const SUMMARY_EVERY: Duration = Duration::from_secs(1);

/// The refused requests of one server's connection, counted for the log.
pub(super) struct Refusals {
    server: String,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Refused so far on this connection.
    refused: u64,
    /// Refused past the first few and not in a logged count yet.
    uncounted: u64,
    /// Whether a task logs the count at the end of the current interval.
    summing: bool,
}

impl Refusals {
    pub(super) fn new(server: &str) -> Self {
        Self {
            server: server.to_owned(),
            state: Arc::default(),
        }
    }

    /// Log (or count for a later line) one refused request, refused for `why`. Call it inside the
    /// tokio runtime: the count is logged by a task at the end of its interval.
    pub(super) fn refused(&self, why: &str) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.refused += 1;
        let server = &self.server;
        if state.refused <= LOGGED_ONE_BY_ONE {
            let more = if state.refused == LOGGED_ONE_BY_ONE {
                "; further ones are counted, one line a second"
            } else {
                ""
            };
            tracing::warn!(
                server = %server,
                "refused a request of the server: {why}{more}"
            );
            return;
        }
        state.uncounted += 1;
        if std::mem::replace(&mut state.summing, true) {
            return;
        }
        let (server, state) = (self.server.clone(), self.state.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SUMMARY_EVERY).await;
                let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
                let count = std::mem::take(&mut state.uncounted);
                if count == 0 {
                    state.summing = false;
                    return;
                }
                tracing::warn!(
                    server = %server,
                    "{count} more requests of the server refused in the last {} s",
                    SUMMARY_EVERY.as_secs()
                );
            }
        });
    }
}

impl Drop for Refusals {
    /// The connection ended: a count not logged yet is logged now.
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let count = std::mem::take(&mut state.uncounted);
        if count > 0 {
            tracing::warn!(
                server = %self.server,
                "{count} more requests of the server refused before its connection ended"
            );
        }
    }
}
