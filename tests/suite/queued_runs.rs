//! The bound on runs waiting for a run slot (`serve --max-queued-runs`, `--max-queued-bytes`):
//! with the 4 slots busy, calls past either bound get a tool error naming it as soon as they
//! arrive (a run's result object whose `error` says why), and every other call, running or
//! waiting, still runs.
//!
//! Each test fails with the bound taken out (src/serve/queue.rs): every call then waits and
//! runs, and none is refused.

use serde_json::Value;

use super::common::{bin, native_client_ready, toy, venv_python};

/// Code that holds its slot for 3 s, then prints `ran`.
const SLOW: &str = "import time\ntime.sleep(3)\nprint('ran')";

/// Fire `calls` runs of `code` at once at `serve --pool 0 ARGS`; the client's report
/// (tests/clients/run_concurrently.py).
fn fire(calls: usize, code: &str, args: &[&str]) -> Value {
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients/run_concurrently.py");
    let out = std::process::Command::new(venv_python().expect("venv python"))
        .arg(script)
        .arg(calls.to_string())
        .arg(code)
        .arg("--")
        .arg(bin())
        .args(["serve", "--pool", "0"])
        .args(args)
        .arg("--")
        .args(toy())
        .output()
        .expect("run the client");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// Every call that ran printed `ran`; `refused` calls were refused naming `option`, each in
/// the shape of every run's result (README: `{"stdout", "error", "truncated", "stopped"}` as
/// JSON text and as `structuredContent`, `isError`) and answered before any run finished.
fn assert_ran_and_refused(report: &Value, ran: usize, refused: usize, option: &str) {
    let printed = vec![Value::from("ran\n"); ran];
    assert_eq!(report["stdout"], Value::from(printed), "{report}");
    let refusals = report["refused"].as_array().expect("refused results");
    assert_eq!(refusals.len(), refused, "{report}");
    for refusal in refusals {
        let structured = &refusal["structured"];
        let text = refusal["text"].as_str().unwrap_or_default();
        let parsed: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("the refusal's text is not JSON ({e}): {text}"));
        assert_eq!(&parsed, structured, "{refusal}");
        assert_eq!(refusal["isError"], true, "{refusal}");
        let mut keys: Vec<&String> = structured.as_object().expect("an object").keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            ["error", "stdout", "stopped", "truncated"],
            "{refusal}"
        );
        assert_eq!(structured["stdout"], "", "{refusal}");
        assert_eq!(structured["stopped"], true, "{refusal}");
        let error = structured["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(option) && error.contains("was not started"),
            "{refusal}"
        );
    }
    let first_run = report["ran_after"]
        .as_array()
        .expect("times")
        .iter()
        .filter_map(Value::as_f64)
        .fold(f64::INFINITY, f64::min);
    for after in report["refused_after"].as_array().expect("times") {
        assert!(
            after.as_f64().unwrap_or(f64::INFINITY) < first_run,
            "a refusal came after a run had finished: {report}"
        );
    }
}

#[test]
fn calls_past_the_queued_runs_bound_are_refused_and_every_other_call_runs() {
    if !native_client_ready() {
        return;
    }
    // 4 run, 2 wait, 2 are refused.
    let report = fire(8, SLOW, &["--max-queued-runs", "2"]);
    assert_ran_and_refused(&report, 6, 2, "--max-queued-runs");
}

#[test]
fn a_call_whose_code_would_take_the_queue_past_its_bytes_bound_is_refused() {
    if !native_client_ready() {
        return;
    }
    // 4 run, 1 waits (its code is exactly the bound), 1 is refused.
    let bound = SLOW.len().to_string();
    let report = fire(6, SLOW, &["--max-queued-bytes", &bound]);
    assert_ran_and_refused(&report, 5, 1, "--max-queued-bytes");
}
