//! `--session-idle`: a session is closed once it has gone that long without a request and
//! without a run in flight. rmcp's own session keep-alive counts only messages, so it would
//! close a session whose run is still going (and cancel the run) when the run sends nothing,
//! e.g. for a client that asked for no progress; it is switched off and this watch replaces it.
//!
//! [`IdleSessions`] maps each open session's `Mcp-Session-Id` to its [`Activity`]: every
//! request presenting the id counts as use ([`IdleSessions::touch`]), each run holds the
//! session busy ([`Activity::run`]), and one watch task per session ([`IdleSessions::watch`])
//! closes it through rmcp's session manager when it is idle for the whole period.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

use crate::serve::session::Activity;

/// How often a watch looks at its session at most: the closing comes at most this late.
const TICK: Duration = Duration::from_secs(1);

/// The [`Activity`] of each open session, by `Mcp-Session-Id`.
#[derive(Default)]
pub(super) struct IdleSessions {
    sessions: Mutex<HashMap<String, Arc<Activity>>>,
}

impl IdleSessions {
    /// Note a request presenting session `id` (unknown ids are ignored: rmcp refuses them).
    pub(super) fn touch(&self, id: &str) {
        if let Some(activity) = self.lock().get(id) {
            activity.touch();
        }
    }

    /// Watch the session `id` that has just opened: close it in `manager` once it has been
    /// idle for `idle`; stop watching when it ends otherwise (`DELETE`, shutdown).
    pub(super) fn watch(
        self: &Arc<Self>,
        id: String,
        activity: Arc<Activity>,
        manager: Arc<LocalSessionManager>,
        idle: Duration,
    ) {
        activity.touch();
        self.lock().insert(id.clone(), activity.clone());
        let sessions = self.clone();
        tokio::spawn(async move {
            let key: SessionId = Arc::from(id.as_str());
            loop {
                let wait = match activity.idle_since() {
                    Some(since) if since.elapsed() >= idle => {
                        tracing::info!(
                            "a session was closed: no request and no run for {} s (--session-idle)",
                            idle.as_secs()
                        );
                        let _ = manager.close_session(&key).await;
                        break;
                    }
                    Some(since) => idle.saturating_sub(since.elapsed()).min(TICK),
                    None => TICK,
                };
                tokio::time::sleep(wait).await;
                if !manager.has_session(&key).await.unwrap_or(false) {
                    break;
                }
            }
            sessions.lock().remove(&id);
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Activity>>> {
        // A map of ids; whole after any panic.
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
