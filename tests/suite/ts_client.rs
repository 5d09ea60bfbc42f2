//! The TypeScript MCP SDK as a real client of `serve` (`tests/clients/ts/steer.mjs`, the SDK
//! pinned by `tests/clients/ts/package-lock.json`, installed with `npm ci` into the target
//! directory on first use): cancelling a running and a queued run through an AbortSignal,
//! leaving mid-run, progress, and a run longer than the client's request timeout that
//! completes because progress resets the timeout.
//!
//! The case to cover is a 65 s run under the SDK's default 60 s timeout. The test keeps the
//! same relation at a CI-friendly length: a 12 s run under a 5 s timeout (above the 4 s
//! heartbeat, as 60 s is), and the same run without `resetTimeoutOnProgress` fails at 5 s,
//! so the test can tell the two apart.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use super::common::{bin, example, last_json_line, native_available, require, target_dir};

/// A directory holding steer.mjs, tasks.mjs, task_server.mjs, approve_task.mjs (for
/// tests/suite/governance/) and http.mjs (for tests/suite/http_serving/), with
/// common.mjs they share and the pinned SDK installed beside them; `None` when node or npm
/// is missing or the install failed.
pub(super) fn client_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/ts");
        let dir = target_dir().join("ts-client");
        let files = [
            "package.json",
            "package-lock.json",
            "common.mjs",
            "steer.mjs",
            "http.mjs",
            "tasks.mjs",
            "task_server.mjs",
            "approve_task.mjs",
        ];
        let same = |file: &str| {
            std::fs::read(source.join(file)).ok() == std::fs::read(dir.join(file)).ok()
        };
        let sdk = dir.join("node_modules/@modelcontextprotocol/sdk/package.json");
        // Prepared already (the unprivileged run reuses what the privileged one made).
        if sdk.exists() && files.iter().all(|f| same(f)) {
            return Some(dir);
        }
        let stale = !same("package-lock.json");
        std::fs::create_dir_all(&dir).ok()?;
        for file in files {
            std::fs::copy(source.join(file), dir.join(file)).ok()?;
        }
        if !sdk.exists() || stale {
            let installed = Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&dir)
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !installed {
                return None;
            }
        }
        Some(dir)
    })
    .clone()
}

pub(super) fn ready() -> bool {
    require(native_available(), "user namespaces are not available here")
        && require(
            client_dir().is_some(),
            "node and npm could not install the TypeScript MCP SDK (tests/clients/ts)",
        )
}

/// What `steer.mjs SCENARIO` printed, and the toy server's journal.
fn steer(scenario: &str) -> (Value, String) {
    let dir = client_dir().expect("the TypeScript client");
    let temp = tempfile::tempdir().unwrap();
    let journal = temp.path().join("journal");
    let out = Command::new("node")
        .arg(dir.join("steer.mjs"))
        .arg(scenario)
        .arg(&journal)
        .arg("--")
        .arg(bin())
        .args(["serve", "--"])
        .arg(example("toy_server"))
        .arg("--journal")
        .arg(&journal)
        .output()
        .expect("run node");
    let parsed = last_json_line(&out, &format!("steer.mjs {scenario}"));
    (
        parsed,
        std::fs::read_to_string(&journal).unwrap_or_default(),
    )
}

#[test]
fn an_abort_signal_cancels_the_run_and_its_call_upstream() {
    if !ready() {
        return;
    }
    let (out, journal) = steer("cancel");
    assert_eq!(out["outcome"], "rejected: McpError", "{out}");
    assert!(journal.contains("call slow"), "{journal}");
    assert!(
        journal.contains("cancelled "),
        "the server heard of the cancel: {journal}"
    );
    assert!(
        !journal.contains("after-cancel"),
        "nothing after the cancel: {journal}"
    );
    assert_eq!(out["next_stdout"], "next\n", "{out}");
}

#[test]
fn progress_reaches_the_typescript_client() {
    if !ready() {
        return;
    }
    let (out, _) = steer("progress");
    assert_eq!(out["stdout"], "slept\n", "{out}");
    let seen = out["progress"].as_array().expect("progress");
    let messages: Vec<&str> = seen.iter().filter_map(|p| p["message"].as_str()).collect();
    assert_eq!(
        &messages[..4],
        ["the sandbox started", "add", "add", "add"],
        "{out}"
    );
    assert!(
        messages[4..].iter().any(|m| m.starts_with("running for ")),
        "{out}"
    );
}

#[test]
fn reset_timeout_on_progress_completes_a_run_longer_than_the_request_timeout() {
    if !ready() {
        return;
    }
    let (kept, _) = steer("long");
    assert_eq!(kept["stdout"], "slept\n", "{kept}");
    assert!(kept["seconds"].as_f64().unwrap_or(0.0) >= 12.0, "{kept}");
    let (dropped, _) = steer("long-no-reset");
    assert!(
        dropped["error"]
            .as_str()
            .unwrap_or_default()
            .contains("Request timed out"),
        "without resetTimeoutOnProgress the client gives up: {dropped}"
    );
}

#[test]
fn an_aborted_queued_run_never_starts() {
    if !ready() {
        return;
    }
    let (out, journal) = steer("queue");
    assert_eq!(out["queued"], "rejected: McpError", "{out}");
    assert_eq!(
        out["busy"],
        serde_json::json!(["busy\n", "busy\n", "busy\n", "busy\n"]),
        "{out}"
    );
    assert_eq!(journal.matches("call slow").count(), 4, "{journal}");
    assert!(
        !journal.contains("queued-side-effect"),
        "the aborted run's call never happened: {journal}"
    );
}

#[test]
fn a_typescript_client_that_leaves_mid_run_leaves_nothing_behind() {
    if !ready() {
        return;
    }
    let (out, _) = steer("leave");
    let pid = out["serve_pid"].as_u64().expect("serve's pid") as u32;
    // The SDK's close waits 2 s for serve to exit before it sends SIGTERM.
    let left = out["leave_s"].as_f64().unwrap_or(f64::MAX);
    assert!(left < 2.0, "serve took {left} s to exit: {out}");
    assert_eq!(
        super::cleanup::cgroups_of(pid),
        Vec::<PathBuf>::new(),
        "run cgroups left"
    );
    let marker = out["marker"].as_str().expect("marker");
    let sleeping = Command::new("pgrep").args(["-f", marker]).output().unwrap();
    assert!(
        sleeping.stdout.is_empty(),
        "sandbox processes left: {}",
        String::from_utf8_lossy(&sleeping.stdout)
    );
}
