//! The bridge: the host side that holds the wrapped servers and checks every call.
//!
//! Every call from the sandbox passes these checks in order (README "How a call works",
//! step 3): known name (only kept tools exist) → arguments an object of at most
//! 16 KiB → JSON Schema → the run's call budget → the private-data rule; only then does it go
//! to the wrapped server, with its call timeout ([`CallTimeouts`]: `--call-timeout`, default
//! 30 s, or the server entry's own `timeout`). The budget and the private-data rule are
//! decided together, under one lock, at the moment a call is sent: with several calls in
//! flight, the first private call to be sent refuses every non-private call sent after it.
//!
//! The private-data taint belongs to the client's session ([`Taint`], carried by each run's
//! [`CallBudget`]): on stdio the one session is the process; over Streamable HTTP each MCP
//! session has its own, so one client's private call never refuses or allows another's.

pub mod catalog;
pub mod refusal;
pub mod upstream;

pub use catalog::names;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::limits::{CALL_TIMEOUT, MAX_ARGS_BYTES, MAX_RESULT_BYTES};
use catalog::{Catalog, CatalogError, Selection, ServerTools};
use refusal::CallError;
use upstream::{CallOutcome, ServerSpec, Upstream, UpstreamError};

/// One wrapped server to open: how to start it and which of its tools to keep.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerEntry {
    /// How to start it.
    pub spec: ServerSpec,
    /// Its allowlist and private labels.
    pub selection: Selection,
    /// Largest result handed to the code from this server, in bytes (default
    /// [`MAX_RESULT_BYTES`] or the bridge's own, `--max-result-bytes`).
    pub max_result_bytes: Option<usize>,
    /// Time one call to this server may take (default: the bridge's, `--call-timeout`).
    pub call_timeout: Option<Duration>,
}

impl ServerEntry {
    /// A stdio server `name` started as `command args…`, keeping all its tools.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            spec: ServerSpec {
                name: name.into(),
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: Vec::new(),
                cwd: None,
                remote: None,
            },
            selection: Selection::default(),
            max_result_bytes: None,
            call_timeout: None,
        }
    }

    /// Keep only these tools (by their MCP names).
    pub fn allow(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.selection.allow = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Label these tools private (by their MCP names).
    pub fn private(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.selection.private =
            catalog::PrivateLabels::Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Set a variable for the server's process, on top of MCP's default environment.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.spec.env.push((name.into(), value.into()));
        self
    }
}

/// Why the bridge could not open.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// A server failed to start (those already started were closed).
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The catalog was refused (all servers were closed).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

/// The private-data taint of one client session: set by the first private call sent in
/// the session, never cleared while it lasts. Clones share the state.
#[derive(Debug, Clone, Default)]
pub struct Taint(Arc<AtomicBool>);

impl Taint {
    /// Whether a private tool has been called in this session.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The calls one run may still send, and the taint of the session the run belongs to;
/// shared by every server of the bridge.
#[derive(Debug)]
pub struct CallBudget {
    max: u32,
    used: AtomicU32,
    taint: Taint,
}

impl CallBudget {
    /// A budget of `max` calls for a run in a session of its own (a fresh [`Taint`]).
    pub fn new(max: u32) -> Self {
        Self::in_session(max, Taint::default())
    }

    /// A budget of `max` calls for a run of the session whose taint is `taint`.
    pub fn in_session(max: u32, taint: Taint) -> Self {
        Self {
            max,
            used: AtomicU32::new(0),
            taint,
        }
    }

    /// Calls sent so far.
    pub fn used(&self) -> u32 {
        self.used.load(Ordering::SeqCst)
    }
}

/// The time one call may take on its wrapped server: a default, and the servers whose
/// entry sets its own. Shown as `30 s per call` or `30 s per call (120 s for slow)`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallTimeouts {
    /// The default (`--call-timeout`).
    pub default: Duration,
    /// Servers with their own timeout: (server name, timeout).
    pub servers: Vec<(String, Duration)>,
}

impl std::fmt::Display for CallTimeouts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |d: &Duration| {
            let s = d.as_secs_f64();
            if s.fract() == 0.0 {
                format!("{s:.0}")
            } else {
                format!("{s}")
            }
        };
        write!(f, "{} s per call", secs(&self.default))?;
        let own: Vec<String> = self
            .servers
            .iter()
            .filter(|(_, t)| *t != self.default)
            .map(|(name, t)| format!("{} s for {name}", secs(t)))
            .collect();
        if !own.is_empty() {
            write!(f, " ({})", own.join(", "))?;
        }
        Ok(())
    }
}

/// The bridge over one or several wrapped servers.
pub struct Bridge {
    upstreams: Vec<Upstream>,
    catalog: Catalog,
    send_lock: Mutex<()>,
    call_timeout: Duration,
    /// Each server's own call timeout, by server index (from its entry).
    server_timeouts: Vec<Option<Duration>>,
    catalog_version: tokio::sync::watch::Sender<u64>,
}

impl Bridge {
    /// Start every server in order, read their tools and build the catalog. When one fails,
    /// the servers already started are closed before the error is returned.
    ///
    /// `prefixed` names tools `server__tool` (the `--config` form).
    ///
    /// # Errors
    /// [`BridgeError`] naming the server, entry or tools at fault.
    pub async fn open(entries: Vec<ServerEntry>, prefixed: bool) -> Result<Self, BridgeError> {
        let mut upstreams = Vec::new();
        let mut listed = Vec::new();
        for entry in &entries {
            match Upstream::start(entry.spec.clone()).await {
                Ok((upstream, tools)) => {
                    upstreams.push(upstream);
                    listed.push(tools);
                }
                Err(e) => {
                    close_all(&upstreams).await;
                    return Err(e.into());
                }
            }
        }
        let servers: Vec<ServerTools<'_>> = entries
            .iter()
            .zip(&listed)
            .map(|(entry, tools)| ServerTools {
                name: &entry.spec.name,
                prefixed,
                tools,
                selection: &entry.selection,
            })
            .collect();
        let catalog = match Catalog::build(&servers) {
            Ok(c) => c,
            Err(e) => {
                close_all(&upstreams).await;
                return Err(e.into());
            }
        };
        Ok(Self {
            upstreams,
            catalog,
            send_lock: Mutex::new(()),
            call_timeout: CALL_TIMEOUT,
            server_timeouts: entries.iter().map(|e| e.call_timeout).collect(),
            catalog_version: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Use another default per-call timeout (`--call-timeout`; default [`CALL_TIMEOUT`]);
    /// servers whose entry sets its own keep theirs.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The per-call timeouts in force: the default and each server's own.
    pub fn call_timeouts(&self) -> CallTimeouts {
        CallTimeouts {
            default: self.call_timeout,
            servers: self
                .upstreams
                .iter()
                .zip(&self.server_timeouts)
                .filter_map(|(u, t)| t.map(|t| (u.name().to_owned(), t)))
                .collect(),
        }
    }

    fn timeout_of(&self, server: usize) -> Duration {
        self.server_timeouts
            .get(server)
            .copied()
            .flatten()
            .unwrap_or(self.call_timeout)
    }

    /// The catalog of kept tools.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The catalog's version: 0 when the bridge opens, one more each time
    /// [`Self::catalog_changed`] is called. A sandbox whose `start` carried an older version
    /// holds a stale catalog: the warm pool ([`crate::run::pool`]) throws such sandboxes away.
    pub fn catalog_version(&self) -> u64 {
        *self.catalog_version.borrow()
    }

    /// A receiver that sees each new [`Self::catalog_version`].
    pub fn watch_catalog(&self) -> tokio::sync::watch::Receiver<u64> {
        self.catalog_version.subscribe()
    }

    /// Say that what a `start` message carries may have changed: the catalog was replaced
    /// (a server's tools re-listed after `notifications/tools/list_changed`) or a wrapped
    /// server was restarted. Call it after the new catalog is in place, so a sandbox that
    /// reads the version first and the catalog second is never newer than it looks.
    pub fn catalog_changed(&self) {
        self.catalog_version.send_modify(|v| *v += 1);
    }

    /// Every stub, for a caller's own prompt, separated by blank lines.
    pub fn stubs(&self) -> String {
        self.catalog
            .tools()
            .iter()
            .map(|t| t.stub.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Check one call from the code and, if it passes, send it. Returns the string for the
    /// code, or the `ToolError` to raise.
    pub async fn call(
        &self,
        budget: &CallBudget,
        py_name: &str,
        args: &Value,
    ) -> Result<String, CallError> {
        let refused = |text: String| Err(CallError::Refused(text));
        let Some(tool) = self.catalog.get(py_name) else {
            return refused(format!(
                "there is no tool called {}; TOOLS lists the tools",
                refusal::cap(py_name, 64)
            ));
        };
        let Value::Object(map) = args else {
            return refused(format!("{py_name} refused: the arguments must be a dict"));
        };
        let size = serde_json::to_vec(args)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_ARGS_BYTES {
            return refused(format!(
                "{py_name} refused: the arguments are {size} bytes, over the {} KiB limit",
                MAX_ARGS_BYTES / 1024
            ));
        }
        if let Err(why) = tool.validator.check(args) {
            return refused(format!(
                "{py_name} refused: arguments outside its schema: {why}"
            ));
        }
        {
            // The budget and the private-data rule are decided when the call is sent.
            let _sending = self.send_lock.lock().unwrap_or_else(|p| p.into_inner());
            if budget.used.load(Ordering::SeqCst) >= budget.max {
                return refused(format!(
                    "{py_name} refused: this run's budget of {} tool calls is spent",
                    budget.max
                ));
            }
            if budget.taint.is_set() && !tool.private {
                return refused(format!(
                    "{py_name} refused: a private tool was called earlier in this session, so only private tools can be called until the session ends"
                ));
            }
            budget.used.fetch_add(1, Ordering::SeqCst);
            if tool.private {
                budget.taint.set();
            }
        }
        let upstream = &self.upstreams[tool.server];
        let timeout = self.timeout_of(tool.server);
        let restarts = upstream.restarts();
        let outcome = upstream.call(&tool.mcp_name, map.clone(), timeout).await;
        if upstream.restarts() != restarts {
            // A restarted server is a new process: what sandboxes were started with is stale.
            self.catalog_changed();
        }
        match outcome {
            CallOutcome::Result(result) => {
                if result.is_error == Some(true) {
                    let text = upstream::result::content_text(&result);
                    let text = if text.trim().is_empty() {
                        format!("{py_name} failed (the server gave no message)")
                    } else {
                        text
                    };
                    return Err(CallError::ToolFailed(text));
                }
                let text = upstream::result::result_text(&result);
                if text.len() > MAX_RESULT_BYTES {
                    return refused(format!(
                        "{py_name}'s result is {} bytes, over the {} KiB limit; it was refused, not cut",
                        text.len(),
                        MAX_RESULT_BYTES / 1024
                    ));
                }
                Ok(text)
            }
            CallOutcome::TimedOut => refused(format!(
                "{py_name} did not answer within {} s; the call was cancelled",
                timeout.as_secs_f64()
            )),
            CallOutcome::Rejected(text) => Err(CallError::ToolFailed(format!(
                "{py_name} failed: the server answered with an error: {text}"
            ))),
            CallOutcome::Broken(text) => refused(format!("{py_name} failed: {text}")),
        }
    }

    /// Each wrapped server's name and how many times it was restarted after it died.
    pub fn restarts(&self) -> Vec<(String, u64)> {
        self.upstreams
            .iter()
            .map(|u| (u.name().to_owned(), u.restarts()))
            .collect()
    }

    /// Close every server (their processes end).
    pub async fn close(&self) {
        close_all(&self.upstreams).await;
    }
}

async fn close_all(upstreams: &[Upstream]) {
    for upstream in upstreams {
        upstream.close().await;
    }
}
