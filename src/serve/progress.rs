//! Progress of a run_python request, sent as MCP `notifications/progress` (MCP 2025-11-25,
//! basic/utilities/progress) when the request carried a `progressToken` in its `_meta`.
//!
//! What is sent, in order: `progress` 0 with the message `the sandbox started`; after each
//! finished tool call (answered, refused or failed), `progress` = calls finished so far and
//! the message = the tool's Python name; and when nothing was sent for [`HEARTBEAT`], a
//! heartbeat whose message says how long the run has been going. The spec requires
//! `progress` to increase with every notification, so a heartbeat adds the share of the
//! deadline used so far (below 1) to the calls finished: with N calls finished it lies
//! strictly between N and N + 1. Heartbeats count from the request's arrival, so a run that
//! waits for a slot or a slow sandbox start gets them before `the sandbox started`, whose
//! value is then nudged above the last heartbeat's (still below 1). `total` is never sent
//! (a run's call count is not known in advance). A client that resets its request timeout on progress (the TypeScript SDK's
//! `resetTimeoutOnProgress`) therefore keeps a run alive however long its deadline is.
//!
//! A run_python task of the 2026-07-28 tasks extension (SEP-2663) has no request left to
//! send progress under (its `tools/call` was answered with the task); the extension's
//! channel for how a task is going is the task's `statusMessage`, which `tasks/get` answers
//! and rmcp's [`TaskContext::set_status_message`] sets. The same messages go there
//! ([`ProgressSink::TaskStatus`]), in the same order and at the same times.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::task_manager::TaskContext;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::run::RunEvent;

/// Longest time between two progress notifications of a run.
pub(super) const HEARTBEAT: Duration = Duration::from_secs(4);

/// Where a run's progress goes.
pub(super) enum ProgressSink {
    /// `notifications/progress` to the client under the request's token.
    Client {
        /// The client.
        peer: Peer<RoleServer>,
        /// The request's `progressToken`.
        token: ProgressToken,
    },
    /// `notifications/progress` under the token of a 2025-11-25 task-augmented call, to the
    /// session's client as soon as it has one: the call can reach serve before rmcp has
    /// handled the client's `notifications/initialized`, so the client is looked up for each
    /// notification, not when the run starts.
    SessionClient {
        /// The session's client, set once it has initialized.
        peer: Arc<OnceLock<Peer<RoleServer>>>,
        /// The call's `progressToken`.
        token: ProgressToken,
    },
    /// The `statusMessage` of an extension task (SEP-2663).
    TaskStatus(TaskContext),
}

impl ProgressSink {
    async fn send(&self, progress: f64, message: String) {
        match self {
            Self::Client { peer, token } => notify(peer, token, progress, message).await,
            Self::SessionClient { peer, token } => match peer.get() {
                Some(peer) => notify(peer, token, progress, message).await,
                None => tracing::debug!("no progress notification: the client has not initialized"),
            },
            Self::TaskStatus(context) => context.set_status_message(message),
        }
    }
}

async fn notify(peer: &Peer<RoleServer>, token: &ProgressToken, progress: f64, message: String) {
    let param = ProgressNotificationParam::new(token.clone(), progress).with_message(message);
    if let Err(e) = peer.notify_progress(param).await {
        tracing::debug!("failed to send a progress notification: {e}");
    }
}

/// Sends one request's progress notifications from a background task.
pub(super) struct ProgressReporter {
    events: mpsc::UnboundedSender<RunEvent>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl ProgressReporter {
    /// Start reporting for the request of `context`, whose run has `deadline`; `None` when
    /// the request carries no progress token.
    pub(super) fn start(context: &RequestContext<RoleServer>, deadline: Duration) -> Option<Self> {
        let token = context.meta.get_progress_token()?;
        let peer = context.peer.clone();
        Some(Self::to_sink(
            ProgressSink::Client { peer, token },
            deadline,
        ))
    }

    /// Start reporting to `sink` (a 2025-11-25 task run: the token of the task-augmented
    /// `tools/call` stays valid for the task's whole life, MCP 2025-11-25
    /// basic/utilities/tasks "Progress"; an extension task run: its status message).
    pub(super) fn to_sink(sink: ProgressSink, deadline: Duration) -> Self {
        let (events, rx) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(report(sink, deadline, rx, stopped));
        Self { events, stop, task }
    }

    /// Where the run sends its events.
    pub(super) fn events(&self) -> mpsc::UnboundedSender<RunEvent> {
        self.events.clone()
    }

    /// Send what the run reported until now, then stop (before the response is sent, so
    /// every notification of a request comes before its result).
    pub(super) async fn finish(self) {
        let _ = self.stop.send(());
        let mut task = self.task;
        if tokio::time::timeout(Duration::from_secs(1), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}

async fn report(
    sink: ProgressSink,
    deadline: Duration,
    mut events: mpsc::UnboundedReceiver<RunEvent>,
    mut stopped: oneshot::Receiver<()>,
) {
    let begun = Instant::now();
    let mut state = Progress::default();
    let mut next_heartbeat = begun + HEARTBEAT;
    loop {
        let (progress, message) = tokio::select! {
            biased;
            event = events.recv() => match event {
                Some(event) => state.event(event),
                None => return,
            },
            _ = &mut stopped => {
                while let Ok(event) = events.try_recv() {
                    let (progress, message) = state.event(event);
                    sink.send(progress, message).await;
                }
                return;
            }
            () = tokio::time::sleep_until(next_heartbeat) => {
                let used = begun.elapsed();
                state.heartbeat(used, deadline)
            }
        };
        sink.send(progress, message).await;
        next_heartbeat = Instant::now() + HEARTBEAT;
    }
}

/// The numbers of one request's notifications: strictly increasing `progress`.
#[derive(Debug, Default)]
struct Progress {
    calls: u32,
    last: Option<f64>,
}

impl Progress {
    fn event(&mut self, event: RunEvent) -> (f64, String) {
        match event {
            RunEvent::Started => (
                self.next(f64::from(self.calls)),
                "the sandbox started".into(),
            ),
            RunEvent::CallFinished { tool, .. } => {
                self.calls += 1;
                (self.next(f64::from(self.calls)), tool)
            }
        }
    }

    fn heartbeat(&mut self, used: Duration, deadline: Duration) -> (f64, String) {
        let share = (used.as_secs_f64() / deadline.as_secs_f64().max(1e-3)).clamp(0.0, 0.999);
        let progress = self.next(f64::from(self.calls) + share);
        (
            progress,
            format!(
                "running for {} s of the {} s deadline",
                used.as_secs(),
                deadline.as_secs()
            ),
        )
    }

    /// `wanted`, nudged above the last value sent when it would not increase.
    fn next(&mut self, wanted: f64) -> f64 {
        let value = match self.last {
            Some(last) if wanted <= last => last + (f64::from(self.calls) + 1.0 - last) / 2.0,
            _ => wanted,
        };
        self.last = Some(value);
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_counts_calls_and_heartbeats_stay_between_them() {
        let mut p = Progress::default();
        let deadline = Duration::from_secs(10);
        assert_eq!(
            p.event(RunEvent::Started),
            (0.0, "the sandbox started".into())
        );
        let (beat, message) = p.heartbeat(Duration::from_secs(4), deadline);
        assert!((beat - 0.4).abs() < 1e-9, "{beat}");
        assert_eq!(message, "running for 4 s of the 10 s deadline");
        let call = |tool: &str| RunEvent::CallFinished {
            calls: 0,
            tool: tool.into(),
            end: crate::run::CallEnd::Answered,
        };
        assert_eq!(p.event(call("add")), (1.0, "add".into()));
        assert_eq!(p.event(call("echo")), (2.0, "echo".into()));
        let (beat, _) = p.heartbeat(Duration::from_secs(8), deadline);
        assert!(beat > 2.0 && beat < 3.0, "{beat}");
    }

    #[test]
    fn progress_always_increases_even_past_the_deadline() {
        let mut p = Progress::default();
        let deadline = Duration::from_secs(1);
        let mut last = p.event(RunEvent::Started).0;
        for secs in [5, 5, 6, 100] {
            let (now, _) = p.heartbeat(Duration::from_secs(secs), deadline);
            assert!(now > last && now < 1.0, "{now} after {last}");
            last = now;
        }
    }
}
