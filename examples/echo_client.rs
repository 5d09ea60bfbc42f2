//! An MCP client in Rust (rmcp, the client the bridge itself uses) calling a server's `echo`
//! tool directly, with no sandbox and no bridge: the baseline `scripts/bench` sets beside a
//! run's own calls, so the bridge's share of a call shows.
//!
//! Usage: `echo_client SERVER [CALLS]` (default 1,000). Starts SERVER over stdio, makes 20
//! warm-up calls, then CALLS sequential `echo` calls, then CALLS at once, and prints one JSON
//! line: `{"calls": CALLS, "sequential_s": seconds, "gathered_s": seconds}`.

use std::process::Stdio;
use std::time::Instant;

use anyhow::Context;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let server = args.next().context("usage: echo_client SERVER [CALLS]")?;
    let calls: usize = args.next().map(|c| c.parse()).transpose()?.unwrap_or(1000);
    let mut child = tokio::process::Command::new(&server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {server}"))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let stdin = child.stdin.take().context("no stdin")?;
    let client = ().serve((stdout, stdin)).await?;
    let arguments = json!({"text": "x"})
        .as_object()
        .cloned()
        .context("an object")?;
    let echo =
        || client.call_tool(CallToolRequestParams::new("echo").with_arguments(arguments.clone()));
    for _ in 0..20 {
        echo().await?;
    }
    let start = Instant::now();
    for _ in 0..calls {
        echo().await?;
    }
    let sequential = start.elapsed().as_secs_f64();
    let start = Instant::now();
    futures::future::try_join_all((0..calls).map(|_| echo())).await?;
    let gathered = start.elapsed().as_secs_f64();
    #[allow(clippy::print_stdout)]
    {
        println!(
            "{}",
            json!({"calls": calls, "sequential_s": sequential, "gathered_s": gathered})
        );
    }
    client.cancel().await?;
    Ok(())
}
