//! Wrapped servers that misbehave: nothing a server sends may crash the bridge, hang a call
//! past its timeout, grow memory without bound, or mix up calls. Here: the scenarios and the
//! bridge helpers the suite shares ([`Scenario`], [`entry`], [`open_spec`]), and the memory
//! measurement of a probe in a process of its own.
//!
//! Each test starts `scripted_server` (examples/scripted_server.rs) on a scenario from
//! `tests/scenarios/` and drives the bridge directly (`Bridge::open`, `Bridge::call`), so
//! transport, upstream and result handling are exercised without a sandbox; the tests in
//! `through_exec` go through `exec` end to end when the native sandbox can run. Memory in the flood
//! cases is measured in a child process running only that test (`VmHWM` from
//! /proc/self/status).
//!
//! Index: `schemas`; `results` (result shapes); `transport` (framing: junk, CRLF, BOMs,
//! endless lines; floods: stderr, large responses, with bounded memory); `process` (servers
//! that die or hang mid-call); `spawning` (commands, the server's environment);
//! `through_exec`, the end-to-end cases; `terminal` (a server's escape sequences).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{Bridge, CallBudget, CallError, Selection, ServerEntry, ServerSpec};
use serde_json::{Value, json};

use super::common::example;

mod process;
mod results;
mod schemas;
mod spawning;
mod terminal;
mod through_exec;
mod transport;

/// How soon a call must fail after the event that ends it (a death, a kill, a short timeout):
/// far below the 20 s call timeout the bridges here use, so a failure this soon came from the
/// event and not from the timeout, yet wide enough for a loaded 2-core host, where a process
/// can stall for a second or more.
const PROMPTLY: Duration = Duration::from_secs(5);

/// A scenario file, with its `log` pointed into a fresh temp dir.
pub(super) struct Scenario {
    path: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Scenario {
    pub(super) fn load(name: &str) -> Self {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/scenarios")
            .join(format!("{name}.json"));
        let text = std::fs::read_to_string(&source).expect("read the scenario");
        Self::from_value(
            name,
            serde_json::from_str(&text).expect("parse the scenario"),
        )
    }

    /// The scenario `scenario`, written to a file named after `name`.
    pub(super) fn from_value(name: &str, mut scenario: Value) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("received.log");
        scenario["log"] = json!(log);
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, scenario.to_string()).expect("write the scenario");
        Self {
            path,
            log,
            _dir: dir,
        }
    }

    /// What the server received so far, one message per line.
    pub(super) fn received(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The command line of the scripted server playing this scenario (`exec --` style).
    pub(super) fn command(&self) -> Vec<String> {
        vec![
            example("scripted_server").display().to_string(),
            self.path.display().to_string(),
        ]
    }

    pub(super) fn spec(&self) -> ServerSpec {
        ServerSpec {
            name: "scripted".into(),
            command: example("scripted_server").display().to_string(),
            args: vec![self.path.display().to_string()],
            env: Vec::new(),
            cwd: None,
            remote: None,
            startup_timeout: None,
        }
    }
}

/// The MCP names of the tools an open bridge's catalog keeps, in catalog order.
pub(super) fn kept_tool_names(bridge: &Bridge) -> Vec<String> {
    bridge
        .catalog()
        .tools()
        .iter()
        .map(|t| t.mcp_name.clone())
        .collect()
}

pub(super) fn entry(spec: ServerSpec) -> ServerEntry {
    ServerEntry {
        spec,
        selection: Selection::default(),
        max_result_bytes: None,
        call_timeout: None,
        from_command_line: false,
    }
}

async fn open(scenario: &Scenario) -> Bridge {
    open_spec(scenario.spec()).await
}

pub(super) async fn open_spec(spec: ServerSpec) -> Bridge {
    Bridge::open(vec![entry(spec)], false)
        .await
        .unwrap_or_else(|e| panic!("the bridge did not open: {e}"))
        .with_call_timeout(Duration::from_secs(20))
}

async fn call(bridge: &Bridge, tool: &str) -> Result<String, CallError> {
    bridge.call(&CallBudget::new(200), tool, &json!({})).await
}

/// Call and also return how long it took.
async fn timed(bridge: &Bridge, tool: &str) -> (Result<String, CallError>, Duration) {
    let started = Instant::now();
    let outcome = call(bridge, tool).await;
    (outcome, started.elapsed())
}

fn refusal(outcome: Result<String, CallError>) -> String {
    match outcome {
        Err(CallError::Refused(refusal)) => refusal.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn kb_field(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// This process's peak resident memory, in KiB.
pub(super) fn peak_rss_kib() -> u64 {
    kb_field(
        &std::fs::read_to_string("/proc/self/status").unwrap_or_default(),
        "VmHWM:",
    )
}

/// Run one `#[ignore]`d probe of this module (`probe` as `file::name`) alone in a fresh test
/// process, so its peak memory is its own; returns its output (the probe prints
/// `peak-growth-kib N`).
fn in_own_process(probe: &str) -> (String, u64) {
    in_own_process_of("misbehaving_servers", probe)
}

/// [`in_own_process`] for a probe of the suite's file `module`.
pub(super) fn in_own_process_of(module: &str, probe: &str) -> (String, u64) {
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            &format!("suite::{module}::{probe}"),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .expect("run the probe");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "the probe failed:\n{text}");
    assert!(text.contains("1 passed"), "the probe did not run:\n{text}");
    let growth = text
        .lines()
        .find_map(|l| l.strip_prefix("peak-growth-kib "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no measurement in:\n{text}"));
    (text, growth)
}

/// Print the probe's own report lines.
pub(super) fn report(output: &str) {
    for line in output
        .lines()
        .filter_map(|l| l.find("probe:").map(|at| &l[at..]))
    {
        eprintln!("{line}");
    }
}

/// Peak memory growth allowed in a flood case: well under what the server sends.
const FLOOD_GROWTH_LIMIT_KIB: u64 = 96 * 1024;

/// Run `probe` in a process of its own, show its report, and check that the host's peak
/// memory grew by less than `limit_kib` while `flood` was sent.
fn assert_memory_bounded(probe: &str, flood: &str, limit_kib: u64) {
    let (output, growth) = in_own_process(probe);
    report(&output);
    eprintln!("{flood}: peak memory grew {growth} KiB");
    assert!(growth < limit_kib, "grew {growth} KiB");
}

/// In a probe: open the floods scenario, run `flood` on its bridge, then print the peak
/// memory growth for [`in_own_process`] to read.
async fn measure_flood<F: std::future::Future<Output = ()>>(
    flood: impl FnOnce(std::sync::Arc<Bridge>) -> F,
) {
    let scenario = Scenario::load("floods");
    let bridge = std::sync::Arc::new(open(&scenario).await);
    let before = peak_rss_kib();
    flood(bridge.clone()).await;
    eprintln!("peak-growth-kib {}", peak_rss_kib().saturating_sub(before));
    bridge.close().await;
}
