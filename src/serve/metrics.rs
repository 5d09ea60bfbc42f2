//! What `serve` counts, served as OpenMetrics text on `GET /metrics` (Streamable HTTP only).
//!
//! Encoded by the `prometheus-client` crate (OpenMetrics 1.0 text, which Prometheus reads);
//! every name starts with `mcp_code_mode_`:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `runs_total` | counter | `outcome`: `ok`, `error` (raised), `stopped`, `cancelled`, `failed_to_start`, `queue_full` (refused: too many runs or too much code waiting for a slot) |
//! | `run_duration_seconds` | histogram | (buckets 0.05 s to 600 s) |
//! | `tool_calls_total` | counter | `server`, `outcome`: `ok`, `tool_error`, `refused`, `host_fault` |
//! | `refusals_total` | counter | `reason`: `unauthorized`, `origin`, `host`, `body_too_large`, `body_timeout`, `session_cap`, or a refused call's kind (`outside_schema`, `private_only`, `budget_spent`, ...) |
//! | `sandboxes_running` | gauge | |
//! | `sandboxes_pooled` | gauge | (idle warm sandboxes, read at each scrape) |
//! | `server_restarts_total` | counter | `server` (read at each scrape) |
//! | `sessions` | gauge | (open MCP sessions) |

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets_range};
use prometheus_client::registry::Registry;

use crate::bridge::Bridge;
use crate::run::pool::Pool;

/// The media type of [`Metrics::encode`]'s text.
pub(super) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How a run ended, as counted.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum RunOutcome {
    /// Finished without error.
    ok,
    /// The code raised.
    error,
    /// Stopped by the host: deadline, output flood, protocol violation, crash.
    stopped,
    /// Cancelled by the client (or by shutdown).
    cancelled,
    /// The sandbox could not be started.
    failed_to_start,
    /// Refused at once: the runs waiting for a slot were at their bound (`--max-queued-runs`,
    /// `--max-queued-bytes`).
    queue_full,
}

/// How a tool call ended, as counted.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum CallOutcome {
    /// The server answered with a result.
    ok,
    /// The server answered with `isError` or a JSON-RPC error.
    tool_error,
    /// The bridge refused the call (or the server timed out or broke).
    refused,
    /// A fault on the host.
    host_fault,
}

/// Why a request or call was refused, as counted.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum RefusalReason {
    /// No or a wrong bearer token (HTTP 401).
    unauthorized,
    /// An `Origin` header that is not allowed (HTTP 403).
    origin,
    /// A `Host` header that is not allowed (HTTP 403), or a `Host` or request target
    /// holding userinfo (HTTP 400).
    host,
    /// A request body over `--http-max-body` (HTTP 413).
    body_too_large,
    /// A request body that did not all arrive within `--http-header-timeout` of its
    /// headers (HTTP 408).
    body_timeout,
    /// A new session while the session cap is reached (HTTP 503).
    session_cap,
}

impl RefusalReason {
    fn label(self) -> &'static str {
        match self {
            Self::unauthorized => "unauthorized",
            Self::origin => "origin",
            Self::host => "host",
            Self::body_too_large => "body_too_large",
            Self::body_timeout => "body_timeout",
            Self::session_cap => "session_cap",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: RunOutcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    server: String,
    outcome: CallOutcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    /// A [`RefusalReason`] of the HTTP layer, or a bridge refusal's
    /// [`crate::bridge::refusal::Refusal::reason`].
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: String,
}

/// The counters of one `serve` process.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    runs: Family<OutcomeLabel, Counter>,
    run_seconds: Histogram,
    calls: Family<CallLabels, Counter>,
    refusals: Family<ReasonLabel, Counter>,
    running: Gauge,
    pooled: Gauge,
    restarts: Family<ServerLabel, Counter>,
    sessions: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("mcp_code_mode");
        let runs = Family::<OutcomeLabel, Counter>::default();
        registry.register("runs", "run_python runs by how they ended", runs.clone());
        let run_seconds = Histogram::new(exponential_buckets_range(0.05, 600.0, 16));
        registry.register(
            "run_duration_seconds",
            "Wall-clock time of a run_python run, queueing included",
            run_seconds.clone(),
        );
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls from sandboxed code by wrapped server and how they ended",
            calls.clone(),
        );
        let refusals = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "refusals",
            "Requests and tool calls refused, by reason",
            refusals.clone(),
        );
        let running = Gauge::default();
        registry.register(
            "sandboxes_running",
            "Sandboxes running code now",
            running.clone(),
        );
        let pooled = Gauge::default();
        registry.register(
            "sandboxes_pooled",
            "Warm sandboxes waiting in the pool",
            pooled.clone(),
        );
        let restarts = Family::<ServerLabel, Counter>::default();
        registry.register(
            "server_restarts",
            "Restarts of each wrapped server after it died",
            restarts.clone(),
        );
        let sessions = Gauge::default();
        registry.register("sessions", "Open MCP sessions", sessions.clone());
        Self {
            registry,
            runs,
            run_seconds,
            calls,
            refusals,
            running,
            pooled,
            restarts,
            sessions,
        }
    }
}

impl Metrics {
    /// Count a run that ended as `outcome` after `took`.
    pub fn run_ended(&self, outcome: RunOutcome, took: Duration) {
        self.runs.get_or_create(&OutcomeLabel { outcome }).inc();
        self.run_seconds.observe(took.as_secs_f64());
    }

    /// Count a tool call to `server` that ended as `outcome` (a refused one is also
    /// counted by its reason: [`Self::call_refused`]).
    pub fn call_ended(&self, server: &str, outcome: CallOutcome) {
        self.calls
            .get_or_create(&CallLabels {
                server: server.to_owned(),
                outcome,
            })
            .inc();
    }

    /// Count a tool call the bridge refused, by its [`crate::bridge::refusal::Refusal::reason`].
    pub fn call_refused(&self, reason: &'static str) {
        self.refusals.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Count a refusal of the HTTP layer for `reason`.
    pub fn refused(&self, reason: RefusalReason) {
        self.refusals
            .get_or_create(&ReasonLabel {
                reason: reason.label(),
            })
            .inc();
    }

    /// A sandbox started running code; the guard counts it as running until dropped.
    pub fn sandbox_running(&self) -> RunningGuard {
        self.running.inc();
        RunningGuard(self.running.clone())
    }

    /// The open-sessions gauge.
    pub fn sessions(&self) -> &Gauge {
        &self.sessions
    }

    /// The text for `GET /metrics`, with the pool's idle sandboxes and each wrapped
    /// server's restarts read now.
    pub fn encode(&self, pool: &Pool, bridge: &Bridge) -> String {
        self.pooled
            .set(i64::try_from(pool.stats().idle).unwrap_or(i64::MAX));
        for (server, restarts) in bridge.restarts() {
            let counter = self.restarts.get_or_create(&ServerLabel { server });
            counter.inc_by(restarts.saturating_sub(counter.get()));
        }
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

/// Counts one sandbox as running while it lives.
#[derive(Debug)]
pub struct RunningGuard(Gauge);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_moves_its_outcome_counter_and_the_histogram() {
        let metrics = Metrics::default();
        metrics.run_ended(RunOutcome::ok, Duration::from_millis(300));
        metrics.call_ended("notes", CallOutcome::refused);
        metrics.call_refused("private_only");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &metrics.registry).unwrap();
        assert!(
            text.contains("mcp_code_mode_runs_total{outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("mcp_code_mode_run_duration_seconds_count 1"),
            "{text}"
        );
        assert!(
            text.contains("mcp_code_mode_tool_calls_total{server=\"notes\",outcome=\"refused\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("mcp_code_mode_refusals_total{reason=\"private_only\"} 1"),
            "{text}"
        );
    }
}
