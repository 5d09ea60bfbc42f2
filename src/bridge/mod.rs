//! The bridge: the host side that holds the wrapped servers and checks every call.
//!
//! Every call from the sandbox passes these checks in order (README "How a call works"):
//! known name (only kept tools exist) → arguments an object of at most
//! 16 KiB → JSON Schema → the run's call budget → the private-data rule; only then does it go
//! to the wrapped server, with its call timeout ([`CallTimeouts`]: `--call-timeout`, default
//! 30 s, or the server entry's own `timeout`). The budget and the private-data rule are
//! decided together, under one lock, at the moment a call is sent: with several calls in
//! flight, the first private call to be sent refuses every non-private call sent after it.
//!
//! The private-data taint belongs to the client's session ([`Taint`], carried by each run's
//! [`CallBudget`]): on stdio the one session is the process; over Streamable HTTP each MCP
//! session has its own, so one client's private call never refuses or allows another's.

mod budget;
pub(crate) mod catalog;
mod check;
mod check_slots;
mod governed;
mod json_len;
mod rebuild;
pub(crate) mod refusal;
mod relist;
mod timeouts;
pub(crate) mod upstream;

pub(crate) use governed::millis;
pub(crate) use json_len::json_len;

/// The audit log [`Bridge::with_audit`] writes to (docs/audit-log.md).
pub use crate::governance::audit::{ArgsMode, AuditLog, AuditOptions};
pub use budget::{CallBudget, Taint};
pub use catalog::names::python_name;
pub use catalog::{
    Catalog, CatalogError, LabelList, MAX_PATTERN_AUTOMATON_BYTES, MAX_SERVER_PATTERN_BYTES,
    Selection, ServerTools,
};
pub use refusal::{CallError, Refusal};
pub use relist::{RELIST_INTERVAL, RELIST_TIMEOUT};
pub use timeouts::CallTimeouts;
pub use upstream::listing::{MAX_LISTED_BYTES, MAX_LISTED_TOOLS};
pub use upstream::{
    DEFAULT_ENV, RESTART_COOLDOWN, RemoteSpec, RemoteTransport, STARTUP_TIMEOUT, ServerSpec,
};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::Tool;

use serde_json::Value;

use crate::limits::{CALL_TIMEOUT, MAX_ARGS_BYTES, MAX_RESULT_BYTES};
use catalog::{CheckError, LabelCheck};
use governed::CallTrace;
use upstream::ticket::WriteTicket;
use upstream::{CallOutcome, ToolsChanged, Upstream, UpstreamError};

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
    /// The server given after `--` on the command line, not a config file's entry: its
    /// internal name is `server`, which messages do not show (see [`Self::shown_name`]).
    pub from_command_line: bool,
}

impl ServerEntry {
    /// The server's name as its user knows it, for messages: the config entry's name, or
    /// for the server given after `--`, its command's file name (`python3`, `npx`).
    pub fn shown_name(&self) -> String {
        if !self.from_command_line {
            return self.spec.name.clone();
        }
        std::path::Path::new(&self.spec.command)
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.spec.command.clone())
    }

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
                startup_timeout: None,
            },
            selection: Selection::default(),
            max_result_bytes: None,
            call_timeout: None,
            from_command_line: false,
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

/// Least time between two attempts to start a server that failed to start.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// How [`Bridge::open_with`] starts the servers.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Name tools `server__tool` (the `--config` form).
    pub prefixed: bool,
    /// Stop when any server fails to start (`--strict`); otherwise the bridge opens with
    /// the servers that started, as long as one did, and retries the others later.
    pub strict: bool,
}

/// One configured server: its entry, and its process and tools when it runs.
struct Slot {
    entry: ServerEntry,
    state: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    upstream: Option<Arc<Upstream>>,
    /// Its tools as last listed (shared with the catalog build, which runs on another
    /// thread).
    tools: Arc<Vec<Tool>>,
    /// Why it is not running (for the run_python description), while it is not.
    failure: Option<String>,
    last_attempt: Option<Instant>,
    retrying: bool,
    /// Its re-lists after `list_changed` (relist.rs).
    relist: relist::RelistState,
}

impl Slot {
    fn state(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn upstream(&self) -> Option<Arc<Upstream>> {
        self.state().upstream.clone()
    }
}

/// What the bridge shares with its background retries.
struct Shared {
    slots: Vec<Slot>,
    prefixed: bool,
    catalog: RwLock<Arc<Catalog>>,
    generation: AtomicU64,
    /// [`Bridge::catalog_version`]: bumped after each change of what a `start` carries.
    catalog_version: tokio::sync::watch::Sender<u64>,
    /// Woken by a server's `list_changed` (relist.rs).
    wake: Arc<tokio::sync::Notify>,
    /// Bumped whenever a server's re-list ends or turns out slow: runs waiting for
    /// re-lists look again (relist.rs).
    relist_changes: tokio::sync::watch::Sender<u64>,
    /// Held while a catalog is built and put in force (rebuild.rs): one build at a time.
    building: tokio::sync::Mutex<()>,
    /// Set by [`Bridge::close`]: the re-list task ends.
    closed: AtomicBool,
}

impl Shared {
    /// The flag a server started for this bridge sets on `list_changed`.
    fn tools_changed(&self) -> Arc<ToolsChanged> {
        Arc::new(ToolsChanged::waking(self.wake.clone()))
    }
}

/// The bridge over one or several wrapped servers.
pub struct Bridge {
    shared: Arc<Shared>,
    send_lock: Mutex<()>,
    call_timeout: Duration,
    max_result_bytes: Option<usize>,
    audit: Option<Arc<AuditLog>>,
}

impl Bridge {
    /// [`Bridge::open_with`] without `--strict`.
    ///
    /// # Errors
    /// [`BridgeError`] naming the server, entry or tools at fault.
    pub async fn open(entries: Vec<ServerEntry>, prefixed: bool) -> Result<Self, BridgeError> {
        Self::open_with(
            entries,
            OpenOptions {
                prefixed,
                strict: false,
            },
        )
        .await
    }

    /// Start every server at once, read their tools and build the catalog.
    ///
    /// A server that fails to start is logged, named with its reason in the catalog
    /// ([`Catalog::unavailable`]) and retried by [`Bridge::refresh`]; with
    /// `options.strict`, or when no server started, the servers that did start are closed
    /// and the first failure (in entry order) is returned. A refused catalog (a name clash,
    /// a label naming no tool of a server that started) closes every server. The labels of a
    /// server that failed to start are checked at its first list, when a later try starts
    /// it: one naming no tool then keeps it out (closed, unavailable with that refusal as
    /// its reason, tried again later) and the others stay.
    ///
    /// # Errors
    /// [`BridgeError`] naming the server, entry or tools at fault.
    pub async fn open_with(
        entries: Vec<ServerEntry>,
        options: OpenOptions,
    ) -> Result<Self, BridgeError> {
        let wake = Arc::new(tokio::sync::Notify::new());
        let started = futures::future::join_all(entries.iter().map(|e| {
            let changed = Arc::new(ToolsChanged::waking(wake.clone()));
            Upstream::start_with(e.spec.clone(), changed)
        }))
        .await;
        let now = Instant::now();
        let mut slots = Vec::new();
        let mut first_error = None;
        for (entry, outcome) in entries.into_iter().zip(started) {
            let mut state = SlotState {
                last_attempt: Some(now),
                ..SlotState::default()
            };
            match outcome {
                Ok((upstream, tools)) => {
                    state.upstream = Some(Arc::new(upstream));
                    state.tools = Arc::new(tools);
                }
                Err(e) => {
                    tracing::warn!("{e}");
                    state.failure = Some(short_failure(&e));
                    first_error.get_or_insert(e);
                }
            }
            slots.push(Slot {
                entry,
                state: Mutex::new(state),
            });
        }
        let shared = Arc::new(Shared {
            slots,
            prefixed: options.prefixed,
            catalog: RwLock::new(Arc::new(Catalog::default())),
            generation: AtomicU64::new(0),
            catalog_version: tokio::sync::watch::Sender::new(0),
            wake,
            relist_changes: tokio::sync::watch::Sender::new(0),
            building: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
        });
        let none_started = shared.slots.iter().all(|s| s.upstream().is_none());
        if let Some(e) = first_error
            && (options.strict || none_started)
        {
            close_all(&shared).await;
            return Err(e.into());
        }
        if let Err(e) = shared.rebuild(None, LabelCheck::Refuse).await {
            close_all(&shared).await;
            return Err(e.into());
        }
        relist::spawn_relister(&shared);
        Ok(Self {
            shared,
            send_lock: Mutex::new(()),
            call_timeout: CALL_TIMEOUT,
            max_result_bytes: None,
            audit: None,
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
                .shared
                .slots
                .iter()
                .filter_map(|s| s.entry.call_timeout.map(|t| (s.entry.spec.name.clone(), t)))
                .collect(),
        }
    }

    fn timeout_of(&self, server: usize) -> Duration {
        self.shared
            .slots
            .get(server)
            .and_then(|s| s.entry.call_timeout)
            .unwrap_or(self.call_timeout)
    }

    /// Refuse results over `bytes` from servers whose entry sets no `maxResultBytes`
    /// (`--max-result-bytes`; default [`MAX_RESULT_BYTES`]).
    pub fn with_max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = Some(bytes);
        self
    }

    /// The current catalog of kept tools (a snapshot: [`Bridge::refresh`] may publish a new
    /// one, with a higher [`Catalog::generation`]).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.shared
            .catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The current catalog's generation: it grows whenever the catalog changes (a server
    /// said its tools changed, a server that had failed started), so whoever keeps
    /// sandboxes started with an older catalog knows to replace them.
    pub fn generation(&self) -> u64 {
        self.catalog().generation()
    }

    /// Bring the catalog up to date before a run. Servers that sent
    /// `notifications/tools/list_changed` have their tools read again (or the re-list already
    /// under way is waited for), so the run sees their current tools: this waits for their
    /// `tools/list` and the catalog build, at most [`RELIST_TIMEOUT`] in all, and not for a
    /// server whose re-list went unanswered that long (relist.rs). Servers that failed
    /// are started again in the background, at most once per [`RETRY_INTERVAL`] each: the run
    /// never waits for them, and when one starts its tools come in a new catalog (a higher
    /// [`Self::catalog_version`]) that later runs see and the warm pool replaces its
    /// sandboxes for.
    pub async fn refresh(&self) {
        // Each re-list is a task of its own: a run cancelled while it waits drops only its
        // wait, never a re-list half done (its servers' flags taken, their new tools not yet
        // in force).
        self.shared.relists_settled().await;
        self.retry_failed();
    }

    /// Start a background retry of each server that failed and was last tried at least
    /// [`RETRY_INTERVAL`] ago, unless one is under way.
    fn retry_failed(&self) {
        if self.shared.closed.load(Ordering::SeqCst) {
            return;
        }
        for (index, slot) in self.shared.slots.iter().enumerate() {
            let mut state = slot.state();
            let due = state.upstream.is_none()
                && !state.retrying
                && state
                    .last_attempt
                    .is_none_or(|t| t.elapsed() >= RETRY_INTERVAL);
            if due {
                state.retrying = true;
                state.last_attempt = Some(Instant::now());
                tokio::spawn(retry(self.shared.clone(), index));
            }
        }
    }

    /// The catalog's version: 0 when the bridge opens, one more each time what a `start`
    /// message carries may have changed (a new catalog after `list_changed` or a retried
    /// server, a wrapped server restarted, [`Self::catalog_changed`]). A sandbox whose
    /// `start` carried an older version holds a stale catalog: the warm pool
    /// ([`crate::run::pool`]) throws such sandboxes away.
    pub fn catalog_version(&self) -> u64 {
        *self.shared.catalog_version.borrow()
    }

    /// A receiver that sees each new [`Self::catalog_version`].
    pub fn watch_catalog(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.catalog_version.subscribe()
    }

    /// Say that what a `start` message carries may have changed. Call it after the new
    /// catalog is in place, so a sandbox that reads the version first and the catalog second
    /// is never newer than it looks.
    pub fn catalog_changed(&self) {
        self.shared.catalog_version.send_modify(|v| *v += 1);
    }

    /// Every stub, for a caller's own prompt, separated by blank lines.
    pub fn stubs(&self) -> String {
        self.catalog()
            .tools()
            .iter()
            .map(|t| t.stub.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// The checks of [`Self::call`], in order, then the call itself; `trace` learns what
    /// its audit record says.
    async fn check_and_send(
        &self,
        budget: &CallBudget,
        py_name: &str,
        args: &Value,
        trace: &mut CallTrace,
    ) -> Result<String, CallError> {
        let refused = |refusal: Refusal| Err(CallError::Refused(refusal));
        let name = || py_name.to_owned();
        let catalog = self.catalog();
        let Some(tool) = catalog.get(py_name) else {
            return refused(Refusal::NoSuchTool { name: name() });
        };
        // A known tool's record names its server, whatever refuses the call below.
        trace.target = Some((tool.server_name.clone(), tool.mcp_name.clone()));
        let Value::Object(map) = args else {
            return refused(Refusal::NotADict { tool: name() });
        };
        let size = json_len(args);
        if size > MAX_ARGS_BYTES {
            return refused(Refusal::ArgumentsTooLarge {
                tool: name(),
                bytes: size,
            });
        }
        // A small check at once, any other off the async runtime, one at a time per run
        // (check.rs).
        match check::check(budget, &tool.validator, args, size).await {
            Ok(Ok(())) => {}
            Ok(Err(CheckError::Outside(why))) => {
                return refused(Refusal::OutsideSchema { tool: name(), why });
            }
            Ok(Err(CheckError::TooCostly(why))) => {
                return refused(Refusal::TooCostlyToCheck { tool: name(), why });
            }
            Err(()) => return Err(CallError::HostFault("InternalError")),
        }
        let gate = || -> Result<(), CallError> {
            if budget.used.load(Ordering::SeqCst) >= budget.max {
                return Err(CallError::Refused(Refusal::BudgetSpent {
                    tool: name(),
                    max: budget.max,
                }));
            }
            if budget.taint.is_set() && !tool.private {
                return Err(CallError::Refused(Refusal::PrivateOnly { tool: name() }));
            }
            if let Some(Err(e)) = self.audit.as_ref().map(|log| log.check_required()) {
                return Err(CallError::Refused(Refusal::AuditFailed {
                    tool: name(),
                    why: e.to_string(),
                }));
            }
            Ok(())
        };
        if tool.approve {
            // Nobody is asked about a call the budget or the private-data rule refuses.
            gate()?;
            // The person is shown the server's name as they know it (`python3`, not `server`).
            let entry = &self.shared.slots[tool.server].entry;
            let shown = entry.shown_name();
            let asked = governed::Asked {
                py_name,
                server: &shown,
                tool: &tool.mcp_name,
                set_by: entry.selection.approve_sources.describe(&shown),
                several_servers: self.shared.slots.len() > 1,
            };
            self.ask_approval(budget, asked, args, trace).await?;
        }
        {
            // The budget and the private-data rule are decided when the call is sent.
            let _sending = self.send_lock.lock().unwrap_or_else(|p| p.into_inner());
            gate()?;
            budget.used.fetch_add(1, Ordering::SeqCst);
            if tool.private {
                budget.taint.set();
            }
        }
        let slot = &self.shared.slots[tool.server];
        let Some(upstream) = slot.upstream() else {
            return refused(Refusal::ServerDown {
                tool: name(),
                server: slot.entry.shown_name(),
            });
        };
        let max_result_bytes = slot
            .entry
            .max_result_bytes
            .or(self.max_result_bytes)
            .unwrap_or(MAX_RESULT_BYTES);
        let timeout = self.timeout_of(tool.server);
        let restarts = upstream.restarts();
        trace.sent = true;
        // Only the audit record reads the ticket (sent or withdrawn).
        if self.audit.is_some() {
            trace.ticket = Some(WriteTicket::default());
        }
        let outcome = upstream
            .call(&tool.mcp_name, map, timeout, trace.ticket.as_ref())
            .await;
        if upstream.restarts() != restarts {
            // A restarted server is a new process: what sandboxes were started with is stale.
            self.catalog_changed();
        }
        match outcome {
            CallOutcome::Result(result) => {
                if result.is_error == Some(true) {
                    let text = upstream::result::content_text(&result);
                    trace.result = Some((text.len(), true));
                    let text = if text.trim().is_empty() {
                        format!("{py_name} failed (the server gave no message)")
                    } else {
                        text
                    };
                    return Err(CallError::ToolFailed(text));
                }
                let text = upstream::result::result_text(&result, tool.unwrap_result);
                trace.result = Some((text.len(), false));
                if text.len() > max_result_bytes {
                    return refused(Refusal::ResultTooLarge {
                        tool: name(),
                        bytes: text.len(),
                        limit: max_result_bytes,
                        config_entry: (!slot.entry.from_command_line)
                            .then(|| slot.entry.spec.name.clone()),
                    });
                }
                Ok(text)
            }
            CallOutcome::TimedOut => refused(Refusal::TimedOut {
                tool: name(),
                timeout,
            }),
            CallOutcome::Rejected(text) => Err(CallError::ToolFailed(format!(
                "{py_name} failed: the server answered with an error: {text}"
            ))),
            CallOutcome::NotAToolResult(why) => {
                Err(CallError::ToolFailed(format!("{py_name} failed: {why}")))
            }
            CallOutcome::Broken(why) => refused(Refusal::Broken { tool: name(), why }),
        }
    }

    /// Each wrapped server's name and how many times it was restarted after it died.
    pub fn restarts(&self) -> Vec<(String, u64)> {
        self.shared
            .slots
            .iter()
            .map(|s| {
                let restarts = s.upstream().map_or(0, |u| u.restarts());
                (s.entry.spec.name.clone(), restarts)
            })
            .collect()
    }

    /// Close every server (their processes end).
    pub async fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
        close_all(&self.shared).await;
    }
}

/// Start a server that failed again; on success publish a catalog with its tools. A server
/// that starts after the bridge was closed is closed at once.
async fn retry(shared: Arc<Shared>, index: usize) {
    let slot = &shared.slots[index];
    let name = slot.entry.spec.name.clone();
    match Upstream::start_with(slot.entry.spec.clone(), shared.tools_changed()).await {
        Ok((upstream, tools)) => {
            let upstream = Arc::new(upstream);
            {
                let mut state = slot.state();
                state.upstream = Some(upstream.clone());
                state.failure = None;
            }
            // Read after the server is in its slot: a close that sets the flag later finds it
            // there and closes it itself.
            if shared.closed.load(Ordering::SeqCst) {
                slot.state().upstream = None;
                upstream.close().await;
                slot.state().retrying = false;
                return;
            }
            // The server's first list: a label naming no tool is refused, as at startup.
            match shared
                .rebuild(Some((index, Arc::new(tools))), LabelCheck::Refuse)
                .await
            {
                Ok(()) => {
                    tracing::info!(server = %name, "started on a later try; its tools are in the catalog")
                }
                Err(e) => {
                    tracing::warn!(server = %name, "started on a later try, but its tools are refused: {e}");
                    {
                        let mut state = slot.state();
                        state.upstream = None;
                        state.tools = Arc::default();
                        state.failure = Some(refusal::cap(&e.to_string(), 300));
                    }
                    upstream.close().await;
                    let _ = shared.rebuild(None, LabelCheck::Quiet).await;
                }
            }
        }
        Err(e) => {
            tracing::warn!("{e}");
            slot.state().failure = Some(short_failure(&e));
        }
    }
    slot.state().retrying = false;
}

/// Why a server is not running, as the run_python description says it: the step and the
/// reason, without the stderr tail (it is in our log) and at most 300 characters.
fn short_failure(e: &UpstreamError) -> String {
    let text = match e {
        UpstreamError::Spawn { why, .. } => format!("failed to start: {why}"),
        UpstreamError::Session { step, why, .. } => format!("failed to {step} it: {why}"),
    };
    refusal::cap(&text, 300)
}

async fn close_all(shared: &Shared) {
    let upstreams: Vec<Arc<Upstream>> = shared.slots.iter().filter_map(Slot::upstream).collect();
    futures::future::join_all(upstreams.iter().map(|u| u.close())).await;
}
