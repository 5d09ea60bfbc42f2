//! Reading a wrapped server's whole tool list (`tools/list`, every page).
//!
//! The whole listing has one deadline (set by the caller: at a start it also covers
//! `initialize`), and the whole catalog of one server is capped: at most [`MAX_LISTED_TOOLS`]
//! tools and [`MAX_LISTED_BYTES`] bytes of tools (their JSON, summed over pages). A server
//! that pages past either cap or past the deadline fails its listing with a reason that
//! names it and the cap, and what it sent is dropped: at a start the server is unavailable,
//! on a re-list its old tools stay.

use rmcp::model::Tool;
use tokio::time::Instant;

use super::tasks::{self, TaskTools};
use super::transport::CloseReason;
use super::{CLOSE_GRACE, Live, MAX_TOOL_PAGES, ServerSpec, UpstreamError};

/// What a listing uses of a server's connection, taken out of it (handles, cheap to clone)
/// so a re-list holds no lock on the connection while the server takes its time: calls,
/// a restart and the close go on meanwhile.
pub(super) struct Connection {
    peer: rmcp::Peer<rmcp::RoleClient>,
    reason: CloseReason,
    raw: tasks::RawRequests,
}

impl Connection {
    /// The handles of `live`.
    pub(super) fn of(live: &Live) -> Self {
        Self {
            peer: live.session.peer().clone(),
            reason: live.reason.clone(),
            raw: live.raw.clone(),
        }
    }
}

/// Most tools one server may list (all pages together). Real servers list tens to a few
/// hundred (GitHub's about 100, the reference servers under 20); past this the catalog
/// build, the stubs and the run_python description stop being useful anyway.
pub const MAX_LISTED_TOOLS: usize = 10_000;

/// Most bytes of tools one server may list: the JSON of its tools, summed over pages.
pub const MAX_LISTED_BYTES: usize = 16 * 1024 * 1024;

/// The server's whole tool list, read by rmcp before `deadline`; for a remote server, the
/// task support of its tools is then read from the raw list (rmcp's `Tool` drops it;
/// `tasks.rs`), before the same deadline, which a local server's reader records as the
/// list passes.
///
/// # Errors
/// [`UpstreamError::Session`] when the server does not answer before `deadline`, fails the
/// request, or lists more than [`MAX_LISTED_TOOLS`] tools or [`MAX_LISTED_BYTES`] bytes.
pub(super) async fn list_all(
    spec: &ServerSpec,
    live: &Connection,
    task_tools: &TaskTools,
    deadline: Instant,
) -> Result<Vec<Tool>, UpstreamError> {
    let tools = list_pages(spec, live, deadline).await?;
    if spec.remote.is_some() {
        let discover = tasks::discover_task_support(&live.raw, task_tools, &spec.name);
        if tokio::time::timeout_at(deadline, discover).await.is_err() {
            tracing::warn!(server = %spec.name, "no answer in time to the tools/list that reads which tools require tasks");
        }
    }
    Ok(tools)
}

fn failed(spec: &ServerSpec, why: String) -> UpstreamError {
    UpstreamError::Session {
        name: spec.name.clone(),
        step: "list the tools of",
        why,
        tail: String::new(),
    }
}

async fn list_pages(
    spec: &ServerSpec,
    live: &Connection,
    deadline: Instant,
) -> Result<Vec<Tool>, UpstreamError> {
    let peer = &live.peer;
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursor: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..MAX_TOOL_PAGES {
        let params = cursor
            .clone()
            .map(|c| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(c)));
        let listed = tokio::time::timeout_at(deadline, peer.list_tools(params));
        let died = async {
            live.reason.closed().await;
            tokio::time::sleep(CLOSE_GRACE).await;
        };
        let page = tokio::select! {
            biased;
            page = listed => page,
            () = died => Ok(Err(rmcp::ServiceError::TransportClosed)),
        };
        let page = page.map_err(|_| {
            // Every page read so far named the next one.
            let pages = seen.len();
            failed(
                spec,
                format!(
                    "no answer in time (the whole listing must end within its startup timeout of {} s; {} tools in {pages} pages read by then)",
                    spec.startup_wait().as_secs_f64(),
                    tools.len(),
                ),
            )
        })?;
        let page = match page {
            Ok(page) => page,
            // A server with no tools (only resources or prompts) may not know the method.
            Err(rmcp::ServiceError::McpError(e))
                if e.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND && tools.is_empty() =>
            {
                tracing::info!(server = %spec.name, "it has no tools (tools/list: method not found)");
                return Ok(Vec::new());
            }
            Err(e) => {
                tracing::info!(server = %spec.name, "tools/list failed: {e}");
                let url = spec.remote.as_ref().map(|r| r.url.as_str());
                return Err(failed(
                    spec,
                    live.reason
                        .get()
                        .unwrap_or_else(|| super::plain::request(&e, url)),
                ));
            }
        };
        if tools.len() + page.tools.len() > MAX_LISTED_TOOLS {
            return Err(failed(
                spec,
                format!(
                    "it lists more than {MAX_LISTED_TOOLS} tools, the most one server may list"
                ),
            ));
        }
        bytes += crate::bridge::json_len(&page.tools);
        if bytes > MAX_LISTED_BYTES {
            return Err(failed(
                spec,
                format!(
                    "its tools take more than {} MiB of JSON, the most one server may list",
                    MAX_LISTED_BYTES >> 20
                ),
            ));
        }
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) if !next.is_empty() && seen.insert(next.clone()) => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
    tracing::warn!(server = %spec.name, "stopped reading tools/list after {MAX_TOOL_PAGES} pages");
    Ok(tools)
}
