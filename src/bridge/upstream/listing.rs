//! Reading a wrapped server's whole tool list (`tools/list`, every page).

use rmcp::model::Tool;

use super::tasks::{self, TaskTools};
use super::{CLOSE_GRACE, Live, MAX_TOOL_PAGES, ServerSpec, UpstreamError};

/// The server's whole tool list, read by rmcp; for a remote server, the task support of its
/// tools is then read from the raw list (rmcp's `Tool` drops it; `tasks.rs`), which a
/// local server's reader records as the list passes.
pub(super) async fn list_all(
    spec: &ServerSpec,
    live: &Live,
    task_tools: &TaskTools,
) -> Result<Vec<Tool>, UpstreamError> {
    let tools = list_pages(spec, live).await?;
    if spec.remote.is_some() {
        let discover = tasks::discover_task_support(&live.raw, task_tools, &spec.name);
        if tokio::time::timeout(spec.startup_wait(), discover)
            .await
            .is_err()
        {
            tracing::warn!(server = %spec.name, "no answer in time to the tools/list that reads which tools require tasks");
        }
    }
    Ok(tools)
}

async fn list_pages(spec: &ServerSpec, live: &Live) -> Result<Vec<Tool>, UpstreamError> {
    let peer = live.session.peer();
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..MAX_TOOL_PAGES {
        let params = cursor
            .clone()
            .map(|c| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(c)));
        let listed = tokio::time::timeout(spec.startup_wait(), peer.list_tools(params));
        let died = async {
            live.reason.closed().await;
            tokio::time::sleep(CLOSE_GRACE).await;
        };
        let page = tokio::select! {
            biased;
            page = listed => page,
            () = died => Ok(Err(rmcp::ServiceError::TransportClosed)),
        };
        let page = page.map_err(|_| UpstreamError::Session {
            name: spec.name.clone(),
            step: "list the tools of",
            why: "no answer in time".into(),
            tail: String::new(),
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
                return Err(UpstreamError::Session {
                    name: spec.name.clone(),
                    step: "list the tools of",
                    why: live.reason.get().unwrap_or_else(|| e.to_string()),
                    tail: String::new(),
                });
            }
        };
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) if !next.is_empty() && seen.insert(next.clone()) => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
    tracing::warn!(server = %spec.name, "stopped reading tools/list after {MAX_TOOL_PAGES} pages");
    Ok(tools)
}
