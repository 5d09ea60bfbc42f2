//! `--session-idle`: a session is closed once it has gone that long without a request and
//! without a run in flight. rmcp's own session keep-alive counts only messages, so it would
//! close a session whose run is still going (and cancel the run) when the run sends nothing,
//! e.g. for a client that asked for no progress; it is switched off and this watch replaces it.
//!
//! [`IdleSessions`] maps each open session's `Mcp-Session-Id` to its [`Activity`]: every
//! request presenting the id counts as use ([`IdleSessions::touch`]), each run holds the
//! session busy ([`Activity::run`]), and one watch task per session ([`IdleSessions::watch`])
//! closes it through rmcp's session manager when it is idle for the whole period.
//!
//! Closing a session (here, at eviction, or by the client's `DELETE`, [`IdleSessions::closed`])
//! cancels its runs at once through [`Session::closed`]: rmcp ends the closed session's
//! service only after up to 5 s spent draining its answers in flight, and a run must not go
//! on calling wrapped tools for a session already reported closed.
//!
//! At the session cap a new session makes room ([`IdleSessions::evict`]): the session idle
//! longest is closed, if it has no run in flight and has been idle at least
//! `--session-evict-idle` (so a client that crashed or never sent `DELETE` holds its seat
//! for that long, not for `--session-idle`). The minimum keeps two active clients from
//! closing each other's sessions in turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

use crate::serve::session::{Activity, Session};

/// How often a watch looks at its session at most: the closing comes at most this late.
const TICK: Duration = Duration::from_secs(1);

/// The [`Activity`] of each open session, by `Mcp-Session-Id`.
#[derive(Default)]
pub(super) struct IdleSessions {
    sessions: Mutex<HashMap<String, Watched>>,
}

/// One open session: its id in the audit log (what the log may name; the `Mcp-Session-Id`
/// is a credential), its activity, and the token that cancels its runs when it is closed.
struct Watched {
    audit_id: String,
    activity: Arc<Activity>,
    closed: CancellationToken,
}

/// A session [`IdleSessions::evict`] closed.
pub(super) struct Evicted {
    /// Its id in the audit log.
    pub audit_id: String,
    /// How long it had gone without a request and without a run.
    pub idle: Duration,
}

impl IdleSessions {
    /// Note a request presenting session `id` (unknown ids are ignored: rmcp refuses them).
    pub(super) fn touch(&self, id: &str) {
        if let Some(watched) = self.lock().get(id) {
            watched.activity.touch();
        }
    }

    /// The session `id` was closed by its client (`DELETE` answered): cancel its runs now,
    /// before rmcp's end of the session's service (up to 5 s later) would. Unknown ids are
    /// ignored.
    pub(super) fn closed(&self, id: &str) {
        if let Some(watched) = self.lock().remove(id) {
            watched.closed.cancel();
        }
    }

    /// Close, in `manager`, the session that has gone longest without a request and without
    /// a run in flight, if that is at least `min`; `None` when every session is busy or was
    /// used within `min`. The session leaves the map first, so requests making room at
    /// once close different sessions.
    pub(super) async fn evict(
        &self,
        manager: &LocalSessionManager,
        min: Duration,
    ) -> Option<Evicted> {
        let (id, watched, idle) = {
            let mut sessions = self.lock();
            let (id, idle) = sessions
                .iter()
                .filter_map(|(id, watched)| {
                    let idle = watched.activity.idle_since()?.elapsed();
                    (idle >= min).then_some((id, idle))
                })
                .max_by_key(|(_, idle)| *idle)
                .map(|(id, idle)| (id.clone(), idle))?;
            let watched = sessions.remove(&id)?;
            (id, watched, idle)
        };
        let key: SessionId = Arc::from(id.as_str());
        // A session that ended meanwhile (DELETE, --session-idle) made room already.
        watched.closed.cancel();
        let _ = manager.close_session(&key).await;
        Some(Evicted {
            audit_id: watched.audit_id,
            idle,
        })
    }

    /// Watch the session `id` that has just opened (`session`: its audit id, activity and
    /// closing token): close it in `manager`, its runs cancelled, once it has been idle for
    /// `idle`; stop watching when it ends otherwise (`DELETE`, eviction, shutdown).
    pub(super) fn watch(
        self: &Arc<Self>,
        id: String,
        session: &Session,
        manager: Arc<LocalSessionManager>,
        idle: Duration,
    ) {
        let activity = session.activity.clone();
        let closed = session.closed.clone();
        activity.touch();
        self.lock().insert(
            id.clone(),
            Watched {
                audit_id: session.id.clone(),
                activity: activity.clone(),
                closed: closed.clone(),
            },
        );
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
                        closed.cancel();
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watched>> {
        // A map of ids; whole after any panic.
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
