//! Wrapped servers that misbehave: nothing a server sends may crash the bridge, hang a call
//! past its timeout, grow memory without bound, or mix up calls.
//!
//! Each test starts `scripted_server` (examples/scripted_server.rs) on a scenario from
//! `tests/scenarios/` and drives the bridge directly (`Bridge::open`, `Bridge::call`), so
//! transport, upstream and result handling are exercised without a sandbox; the tests in
//! `through_exec` go through `exec` end to end when the native sandbox can run. Memory in the flood
//! cases is measured in a child process running only that test (`VmHWM` from
//! /proc/self/status).
//!
//! Index: startup failures; framing (junk, CRLF, BOMs, endless lines); servers that die or
//! hang mid-call; floods (stderr, large responses) with bounded memory; result and schema
//! shapes; the server's environment; `through_exec`, the end-to-end cases.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{
    Bridge, BridgeError, CallBudget, CallError, DEFAULT_ENV, RESTART_COOLDOWN, Selection,
    ServerEntry, ServerSpec,
};
use serde_json::{Value, json};

use super::common::{ExecOptions, example, exec_with, native_available, require};

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

/// Run one `#[ignore]`d probe of this file alone in a fresh test process, so its peak memory
/// is its own; returns its output (the probe prints `peak-growth-kib N`).
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

// ---------------------------------------------------------------------------------------
// 1. Schemas

#[tokio::test]
async fn every_schema_shape_a_server_can_send_leaves_a_working_catalog() {
    let scenario = Scenario::load("schemas");
    let bridge = open(&scenario).await;
    let kept = kept_tool_names(&bridge);
    // Too-deep schemas are left out; so is a schema the validator refuses. Everything else
    // is kept, schemas with remote or file references too (nothing is fetched; the part
    // behind the reference is not checked, the rest is).
    for left_out in ["too_deep", "deep_but_parsable", "bad_keyword"] {
        assert!(
            !kept.iter().any(|k| k == left_out),
            "{left_out} kept: {kept:?}"
        );
    }
    for name in [
        "http_ref",
        "file_ref",
        "relative_id_ref",
        "refs",
        "root_ref",
        "definitions_draft7",
        "unknown_meta",
        "no_schema",
        "odd_names",
        "echo",
    ] {
        assert!(kept.iter().any(|k| k == name), "{name} left out: {kept:?}");
    }
    let budget = CallBudget::new(200);
    let ok = |args: Value, tool: &'static str| {
        let bridge = &bridge;
        let budget = &budget;
        async move { bridge.call(budget, tool, &args).await }
    };
    // `$ref` beside other keywords: both apply.
    assert!(ok(json!({"a": 1}), "refs").await.is_ok());
    assert!(ok(json!({}), "refs").await.is_err(), "required beside $ref");
    assert!(
        ok(
            json!({"a": 1, "head": {"v": 1, "next": {"v": "x"}}}),
            "refs"
        )
        .await
        .is_err(),
        "recursive $defs ref"
    );
    // Root-relative recursion.
    assert!(
        ok(json!({"child": {"child": {"n": 2}}}), "root_ref")
            .await
            .is_ok()
    );
    assert!(
        ok(json!({"child": {"child": {"n": "x"}}}), "root_ref")
            .await
            .is_err()
    );
    // https-form draft-07 and an unknown meta-schema both validate.
    assert!(ok(json!({"n": "x"}), "definitions_draft7").await.is_err());
    assert!(ok(json!({"n": 3}), "unknown_meta").await.is_ok());
    assert!(ok(json!({"n": "x"}), "unknown_meta").await.is_err());
    // What a remote or file reference stands for is passed on unchecked; arguments the
    // schema does not name are still refused.
    for tool in ["http_ref", "file_ref", "relative_id_ref"] {
        assert!(ok(json!({"n": ["any", 1]}), tool).await.is_ok(), "{tool}");
        assert!(ok(json!({"other": 1}), tool).await.is_err(), "{tool}");
    }
    // A missing inputSchema means "any object".
    assert!(ok(json!({}), "no_schema").await.is_ok());
    assert!(ok(json!({"x": 1, "y": "z"}), "no_schema").await.is_ok());
    // Property names that are not identifiers pass through.
    assert_eq!(
        ok(json!({"from": "a", "cik-A": 1, "1st": true}), "odd_names")
            .await
            .unwrap(),
        "ok"
    );
    assert!(ok(json!({"from": "a"}), "odd_names").await.is_err());
    // Shapes that loop or backtrack in validators: whatever the verdict, it comes back.
    for (tool, args) in [
        ("ref_loop", json!({"x": 1})),
        ("self_all_of", json!({"n": 1})),
        ("evil_pattern", json!({"s": format!("{}!", "a".repeat(64))})),
    ] {
        if kept.iter().any(|k| k == tool) {
            let started = Instant::now();
            let _ = ok(args, tool).await;
            assert!(started.elapsed() < Duration::from_secs(5), "{tool} is slow");
        }
    }
    bridge.close().await;
}

/// Peak memory growth allowed while a refused argument with many schema errors is described.
const REFUSAL_GROWTH_LIMIT_KIB: u64 = 32 * 1024;

#[test]
fn an_argument_with_a_quarter_million_schema_errors_is_refused_in_bounded_memory() {
    // `wide6`: six levels of `allOf` eight `$ref`s wide, 8^6 = 262144 failing leaves for a
    // non-string `x`; collecting every error grew the peak by 140 MB.
    assert_memory_bounded(
        "probe_many_schema_errors",
        "a refused argument with 262144 schema errors",
        REFUSAL_GROWTH_LIMIT_KIB,
    );
}

#[tokio::test]
#[ignore = "run by an_argument_with_a_quarter_million_schema_errors_is_refused_in_bounded_memory in a process of its own"]
async fn probe_many_schema_errors() {
    let scenario = Scenario::load("costly_schemas");
    let bridge = open(&scenario).await;
    let before = peak_rss_kib();
    let outcome = bridge
        .call(&CallBudget::new(200), "wide6", &json!({"x": 1}))
        .await;
    let text = refusal(outcome);
    eprintln!("probe: {text}");
    assert!(text.contains("outside its schema"), "{text}");
    eprintln!("peak-growth-kib {}", peak_rss_kib().saturating_sub(before));
    bridge.close().await;
}

// ---------------------------------------------------------------------------------------
// 2. Results

#[tokio::test]
async fn every_result_shape_reaches_the_code_as_clear_bounded_text() {
    let scenario = Scenario::load("results");
    let bridge = open(&scenario).await;
    assert_eq!(
        call(&bridge, "structured_only").await.unwrap(),
        r#"{"n": 1, "s": "\u00e9"}"#
    );
    assert_eq!(call(&bridge, "empty_content").await.unwrap(), "");
    assert_eq!(call(&bridge, "empty_object").await.unwrap(), "");
    assert_eq!(
        call(&bridge, "error_text").await,
        Err(CallError::ToolFailed("quota exceeded".into()))
    );
    assert_eq!(
        call(&bridge, "error_structured").await,
        Err(CallError::ToolFailed(r#"{"why": "quota"}"#.into()))
    );
    assert!(
        matches!(call(&bridge, "error_bare").await, Err(CallError::ToolFailed(t)) if t.contains("no message"))
    );

    let text = call(&bridge, "blocks").await.unwrap();
    for part in [
        "first",
        "[image: image/png, 4000 bytes of base64]",
        "[audio: audio/wav, 4 bytes of base64]",
        "embedded text",
        "[resource file:///blob.bin: 4 bytes of base64]",
        "[resource link: https://example.com/doc (doc)]",
        "\"hologram\"",
        "\"image\"",
    ] {
        assert!(text.contains(part), "{part:?} missing from {text:?}");
    }
    assert_eq!(text.lines().count(), 9, "one line per block: {text:?}");
    assert!(text.len() < 2000, "bounded: {} bytes", text.len());

    let text = call(&bridge, "huge_blob").await.unwrap();
    assert!(text.len() < 500, "a 2 MB image is a short line: {text:?}");
    assert!(text.contains("2000000 bytes of base64"), "{text}");

    assert_eq!(
        call(&bridge, "big_ints").await.unwrap(),
        r#"{"above_2_53": 9007199254740993, "u64_max": 18446744073709551615, "i64_min": -9223372036854775808}"#
    );

    for tool in ["nan", "infinity", "lone_surrogate"] {
        let (outcome, took) = timed(&bridge, tool).await;
        let why = match outcome {
            Err(CallError::ToolFailed(t)) => t,
            Err(CallError::Refused(refusal)) => refusal.to_string(),
            other => panic!("{tool}: expected a failure, got {other:?}"),
        };
        assert!(why.contains("not valid JSON"), "{tool}: {why}");
        assert!(took < PROMPTLY, "{tool} took {took:?}");
    }
    // The bad lines did not break the connection.
    assert_eq!(call(&bridge, "empty_content").await.unwrap(), "");
    bridge.close().await;
}

// ---------------------------------------------------------------------------------------
// 3. Transport

#[tokio::test]
async fn junk_lines_crlf_and_byte_order_marks_are_skipped_around_real_messages() {
    let scenario = Scenario::load("transport");
    let bridge = open(&scenario).await;
    for _ in 0..3 {
        assert_eq!(call(&bridge, "echo").await.unwrap(), "echoed");
    }
    bridge.close().await;
}

#[tokio::test]
async fn a_line_of_hundreds_of_megabytes_fails_the_call_with_bounded_memory() {
    assert_memory_bounded(
        "probe_endless_line",
        "endless line (400 MB sent)",
        FLOOD_GROWTH_LIMIT_KIB,
    );
}

#[tokio::test]
#[ignore = "a probe: run alone in its own process by a_line_of_hundreds_of_megabytes_fails_the_call_with_bounded_memory"]
async fn probe_endless_line() {
    measure_flood(|bridge| async move {
        let (outcome, took) = timed(&bridge, "endless_line").await;
        let why = refusal(outcome);
        assert!(why.contains("over 16 MiB"), "{why}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
        eprintln!("probe: the call failed after {took:?}: {why}");
    })
    .await;
}

#[tokio::test]
async fn heavy_stderr_is_drained_without_blocking_the_server_or_growing_memory() {
    assert_memory_bounded(
        "probe_heavy_stderr",
        "heavy stderr (100 MB)",
        FLOOD_GROWTH_LIMIT_KIB,
    );
}

#[tokio::test]
#[ignore = "a probe: run alone in its own process by heavy_stderr_is_drained_without_blocking_the_server_or_growing_memory"]
async fn probe_heavy_stderr() {
    measure_flood(|bridge| async move {
        let (outcome, took) = timed(&bridge, "noisy").await;
        assert_eq!(outcome.unwrap(), "still here");
        eprintln!("probe: 100 MB of stderr, answered after {took:?}");
    })
    .await;
}

#[tokio::test]
async fn many_concurrent_large_responses_are_each_refused_with_bounded_memory() {
    assert_memory_bounded(
        "probe_concurrent_large_responses",
        "16 concurrent 4 MB responses",
        2 * FLOOD_GROWTH_LIMIT_KIB,
    );
}

#[tokio::test]
#[ignore = "a probe: run alone in its own process by many_concurrent_large_responses_are_each_refused_with_bounded_memory"]
async fn probe_concurrent_large_responses() {
    measure_flood(|bridge| async move {
        let budget = CallBudget::new(200);
        let started = Instant::now();
        let args = json!({});
        for _ in 0..3 {
            let calls = (0..16).map(|_| bridge.call(&budget, "big", &args));
            for outcome in futures::future::join_all(calls).await {
                let why = refusal(outcome);
                assert!(why.contains("refused, not cut"), "{why}");
            }
        }
        assert_eq!(call(&bridge, "after").await.unwrap(), "after");
        eprintln!(
            "probe: 48 responses of 4 MB, 16 at a time, refused in {:?}",
            started.elapsed()
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// 4. Process

fn pid_of(text: &str, field: &str) -> u32 {
    let v: Value = serde_json::from_str(text).expect("pid result");
    v[field].as_u64().expect("a pid") as u32
}

fn kill9(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

#[tokio::test]
async fn a_server_that_dies_mid_call_fails_the_call_promptly_and_restarts_later() {
    let scenario = Scenario::load("process");
    let bridge = open(&scenario).await;
    let first = pid_of(&call(&bridge, "pid").await.unwrap(), "pid");
    let (outcome, took) = timed(&bridge, "die").await;
    let why = refusal(outcome);
    assert!(why.contains("exited with status 9"), "{why}");
    assert!(took < PROMPTLY, "took {took:?}");
    // Within the cooldown: a clear error, at once.
    let (outcome, took) = timed(&bridge, "pid").await;
    let why = refusal(outcome);
    assert!(why.contains("restarted by a call"), "{why}");
    assert!(took < PROMPTLY, "took {took:?}");
    // After it: a fresh server answers.
    tokio::time::sleep(RESTART_COOLDOWN).await;
    let second = pid_of(&call(&bridge, "pid").await.unwrap(), "pid");
    assert_ne!(first, second, "the server was restarted");
    bridge.close().await;
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_the_call_promptly() {
    let scenario = Scenario::load("process");
    let bridge = open(&scenario).await;
    let pid = pid_of(&call(&bridge, "pid").await.unwrap(), "pid");
    assert_a_hanging_call_fails_promptly_when_killed(&bridge, pid).await;
    bridge.close().await;
}

/// Call `hang`, SIGKILL `pid` 300 ms later, and check the call fails with the server's death
/// within [`PROMPTLY`] of the kill.
async fn assert_a_hanging_call_fails_promptly_when_killed(bridge: &Bridge, pid: u32) {
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        kill9(pid);
        Instant::now()
    });
    let why = refusal(call(bridge, "hang").await);
    let late = killer.await.unwrap().elapsed();
    assert!(why.contains("killed by signal 9"), "{why}");
    assert!(late < PROMPTLY, "failed {late:?} after the kill");
}

#[tokio::test]
async fn a_server_whose_child_keeps_its_stdout_open_still_fails_the_call_when_it_dies() {
    // `sh` is the server we started; the scripted server, its child, inherits the pipes and
    // lives on after sh is killed, so stdout never reaches end of file.
    let scenario = Scenario::load("process");
    let mut spec = scenario.spec();
    spec.args = vec![
        "-c".into(),
        // A background job's stdin is /dev/null; fd 3 carries the real one across.
        "exec 3<&0; \"$0\" \"$1\" <&3 3<&- & wait".into(),
        spec.command.clone(),
        scenario.path.display().to_string(),
    ];
    spec.command = "sh".into();
    let bridge = open_spec(spec).await;
    let reply = call(&bridge, "pid").await.unwrap();
    let (server, shell) = (pid_of(&reply, "pid"), pid_of(&reply, "ppid"));
    assert_a_hanging_call_fails_promptly_when_killed(&bridge, shell).await;
    bridge.close().await;
    kill9(server);
}

#[tokio::test]
async fn a_server_that_dies_during_initialize_is_a_clear_startup_error() {
    let scenario = Scenario::load("dies_during_initialize");
    let started = Instant::now();
    let Err(e) = Bridge::open(vec![entry(scenario.spec())], false).await else {
        panic!("the bridge opened");
    };
    let text = e.to_string();
    assert!(matches!(e, BridgeError::Upstream(_)), "{text}");
    assert!(
        text.contains("failed to initialize the server \"scripted\""),
        "{text}"
    );
    assert!(
        text.contains("fatal: missing API_KEY"),
        "stderr tail in {text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_hanging_call_times_out_and_the_server_is_sent_notifications_cancelled() {
    let scenario = Scenario::load("process");
    let bridge = open(&scenario)
        .await
        .with_call_timeout(Duration::from_millis(500));
    let (outcome, took) = timed(&bridge, "hang").await;
    let why = refusal(outcome);
    assert!(why.contains("did not answer within 0.5 s"), "{why}");
    assert!(took < PROMPTLY, "took {took:?}");
    let mut received = String::new();
    for _ in 0..50 {
        received = scenario.received();
        if received.contains("notifications/cancelled") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let call_id = received
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["method"] == "tools/call")
        .map(|m| m["id"].clone())
        .expect("the call was received");
    let cancelled = received
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["method"] == "notifications/cancelled")
        .unwrap_or_else(|| panic!("no notifications/cancelled in:\n{received}"));
    assert_eq!(cancelled["params"]["requestId"], call_id, "{cancelled}");
    // The server is still usable.
    assert!(call(&bridge, "pid").await.is_ok());
    bridge.close().await;
}

#[tokio::test]
async fn notifications_and_server_requests_during_a_call_are_answered_never_hung() {
    let scenario = Scenario::load("process");
    let bridge = open(&scenario).await;
    let (outcome, took) = timed(&bridge, "chatty").await;
    let text = outcome.unwrap();
    assert!(took < PROMPTLY, "took {took:?}: {text}");
    let answers: Value = serde_json::from_str(&text).unwrap();
    let answers = answers["answers"].as_array().expect("answers").clone();
    assert_eq!(answers.len(), 6, "{answers:?}");
    let ok = |i: usize| answers[i].get("result").cloned();
    let refused = |i: usize| answers[i].get("error").is_some();
    assert_eq!(ok(0), Some(json!({})), "ping: {}", answers[0]);
    assert_eq!(
        ok(1),
        Some(json!({"roots": []})),
        "roots/list: {}",
        answers[1]
    );
    assert!(refused(2), "sampling is refused: {}", answers[2]);
    assert!(
        refused(3) || ok(3).is_some_and(|r| r["action"] == "decline"),
        "elicitation is refused or declined: {}",
        answers[3]
    );
    assert!(refused(4), "an unknown method is refused: {}", answers[4]);
    assert!(refused(5), "a malformed request is refused: {}", answers[5]);
    bridge.close().await;
}

#[tokio::test]
async fn a_server_answering_an_older_or_unknown_protocol_version_still_works() {
    let old = Scenario::load("old_protocol");
    let bridge = open(&old).await;
    assert_eq!(call(&bridge, "echo").await.unwrap(), "old ok");
    bridge.close().await;

    // Decided: an unknown version is accepted (rmcp keeps speaking its own); the spec's
    // SHOULD-disconnect would turn a cosmetic mismatch into a dead server.
    let odd = Scenario::load("unknown_protocol");
    let bridge = open(&odd).await;
    assert_eq!(call(&bridge, "echo").await.unwrap(), "odd ok");
    bridge.close().await;
}

// ---------------------------------------------------------------------------------------
// 5. Spawning

#[tokio::test]
async fn a_command_not_on_path_is_a_clear_error_naming_it() {
    let mut spec = Scenario::load("env").spec();
    spec.command = "no-such-mcp-server-x7".into();
    let Err(e) = Bridge::open(vec![entry(spec)], false).await else {
        panic!("opened");
    };
    let text = e.to_string();
    assert!(
        text.contains("\"no-such-mcp-server-x7\" was not found"),
        "{text}"
    );
    assert!(text.contains("PATH"), "{text}");
}

#[tokio::test]
async fn a_relative_command_path_is_taken_from_the_working_directory() {
    let scenario = Scenario::load("env");
    let mut spec = scenario.spec();
    let binary = PathBuf::from(&spec.command);
    let dir = binary.parent().unwrap().to_path_buf();
    spec.command = format!("./{}", binary.file_name().unwrap().to_string_lossy());
    spec.cwd = Some(dir);
    let bridge = open_spec(spec.clone()).await;
    assert!(call(&bridge, "env").await.is_ok());
    bridge.close().await;
    spec.cwd = None;
    let Err(e) = Bridge::open(vec![entry(spec)], false).await else {
        panic!("opened from the wrong directory");
    };
    assert!(
        e.to_string().contains("./scripted_server\" was not found"),
        "{e}"
    );
}

#[tokio::test]
async fn the_server_gets_mcps_default_environment_plus_the_variables_passed() {
    let scenario = Scenario::load("env");
    let mut spec = scenario.spec();
    spec.env = vec![
        ("API_TOKEN".into(), "t0k3n".into()),
        ("HOME".into(), "/srv/elsewhere".into()),
    ];
    let bridge = open_spec(spec).await;
    let env: Value = serde_json::from_str(&call(&bridge, "env").await.unwrap()).unwrap();
    let env = env.as_object().expect("an object");
    assert_eq!(env["API_TOKEN"], "t0k3n");
    assert_eq!(env["HOME"], "/srv/elsewhere", "passed values win");
    assert!(env.contains_key("PATH"));
    for key in env.keys() {
        assert!(
            DEFAULT_ENV.contains(&key.as_str()) || key == "API_TOKEN",
            "{key} leaked into the server's environment"
        );
    }
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok() && !env.contains_key("CARGO_MANIFEST_DIR"));
    bridge.close().await;
}

/// End to end, through `exec` and the native sandbox (the module scripts/test-unprivileged
/// selects from this file).
mod through_exec {
    use super::*;

    fn exec_scenario(code: &str, scenario: &Scenario) -> crate::suite::common::Exec {
        exec_with(
            code,
            ExecOptions {
                server: scenario.command(),
                ..Default::default()
            },
        )
    }

    #[test]
    fn exec_reads_a_crlf_server_with_junk_and_boms() {
        if !require(native_available(), "user namespaces are not available") {
            return;
        }
        let scenario = Scenario::load("transport");
        let run = exec_scenario("print(await echo({}))", &scenario);
        assert_eq!(run.printed(), "echoed\n", "{run:?}");
    }

    #[test]
    fn exec_turns_a_dying_server_into_a_tool_error_the_code_can_catch() {
        if !require(native_available(), "user namespaces are not available") {
            return;
        }
        let scenario = Scenario::load("process");
        let code = "try:\n    await die({})\nexcept ToolError as e:\n    print('caught', e)\n";
        let run = exec_scenario(code, &scenario);
        assert!(run.printed().starts_with("caught "), "{run:?}");
        assert!(run.printed().contains("exited with status 9"), "{run:?}");
    }

    #[test]
    fn exec_survives_an_endless_line_with_bounded_memory() {
        if !require(native_available(), "user namespaces are not available") {
            return;
        }
        let scenario = Scenario::load("floods");
        let code =
            "try:\n    await endless_line({})\nexcept ToolError as e:\n    print('caught', e)\n";
        let run = exec_scenario(code, &scenario);
        assert!(run.printed().contains("over 16 MiB"), "{run:?}");
    }
}

/// What a wrapped server writes reaches the operator's terminal only as text: its stderr
/// quoted in a startup error and its tool names in a warning keep no control character
/// (src/stderr_log.rs).
mod terminal {
    use super::*;

    /// A server that retitles the window, clears the screen and colours a fake all-clear on
    /// its stderr, then dies before answering `initialize`.
    const HOSTILE_STDERR: &str = "import sys\nsys.stderr.write('\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[41mFAKE: all good\\x9b0m\\n')\nsys.stderr.flush()\nsys.exit(1)\n";

    #[test]
    fn a_dying_servers_escape_sequences_reach_the_terminal_as_text() {
        let run = exec_with(
            "print(1)",
            ExecOptions {
                server: vec![
                    "/usr/bin/python3".into(),
                    "-c".into(),
                    HOSTILE_STDERR.into(),
                ],
                ..ExecOptions::default()
            },
        );
        assert_eq!(run.code, 2, "{run:?}");
        assert!(
            run.stderr.contains("PWNED"),
            "the stderr tail is quoted: {run:?}"
        );
        let raw: Vec<char> = run
            .stderr
            .chars()
            .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
            .collect();
        assert!(
            raw.is_empty(),
            "raw control characters {raw:?} in {:?}",
            run.stderr
        );
    }
}

/// A wrapped server that ignores the end of its input, SIGTERM and SIGHUP: started through
/// `serve`, it must end with a `serve` that was SIGKILLed (no destructor runs). The server
/// names itself with a marker (`PR_SET_NAME`) so the host can find it; it never answers, so
/// `serve` is still waiting for its handshake when it is killed.
#[test]
fn a_wrapped_server_that_ignores_eof_and_sigterm_dies_with_a_killed_serve() {
    use std::process::{Command, Stdio};
    let marker = format!("tied-{}", std::process::id() % 100_000);
    let server = format!(
        "import ctypes, signal, time\n\
         signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
         signal.signal(signal.SIGHUP, signal.SIG_IGN)\n\
         ctypes.CDLL(None).prctl(15, b'{marker}', 0, 0, 0)\n\
         while True:\n    time.sleep(1)\n"
    );
    let mut serve = Command::new(super::common::bin())
        .args(["serve", "--pool", "0", "--startup-timeout", "120", "--"])
        .args(["/usr/bin/python3", "-c", &server])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start serve");
    let start = Instant::now();
    let pids = loop {
        let pids = super::common::processes_named(&marker);
        if !pids.is_empty() {
            break pids;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = serve.kill();
            panic!("the wrapped server never started");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    serve.kill().expect("SIGKILL serve");
    serve.wait().expect("reap serve");
    let killed = Instant::now();
    while !super::common::processes_named(&marker).is_empty() && killed.elapsed() < PROMPTLY {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = super::common::processes_named(&marker);
    for pid in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "the wrapped server {pids:?} outlived its SIGKILLed serve by {PROMPTLY:?}"
    );
}
