//! The main job, end to end: `exec` and `serve` over the toy server.
//!
//! Index: the README's quick start through `exec`; structured results; a real MCP client
//! (the Python SDK) against `serve`, with the toy server and the third-party
//! `mcp-server-time`; serve's limit on concurrent sandboxes.

use super::common::{
    QUICK_START, assert_prints_the_quick_start_result, bin, exec, native_available, python_client,
    require, toy, venv_python,
};
use super::common::{native_client_ready, serve_command};

#[test]
fn the_quick_start_prints_exactly_the_result_the_readme_shows() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let run = exec(QUICK_START, &["--allow", "add"]);
    assert_prints_the_quick_start_result(&run);
}

#[test]
fn a_structured_result_reaches_the_code_as_json() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let run = exec("print(await add({'a': 2, 'b': 3}))", &[]);
    assert_eq!(run.printed(), "{\"sum\": 5}\n", "{run:?}");
}

#[test]
fn a_real_mcp_client_sees_one_tool_and_gets_the_result_object() {
    if !native_client_ready() {
        return;
    }
    let serve = serve_command(&["--allow", "add"]);
    let out = python_client(&[QUICK_START], &serve);
    assert_eq!(out["tools"], serde_json::json!(["run_python"]), "{out}");
    let call = &out["calls"][0];
    assert_eq!(
        call["structured"],
        serde_json::json!({"stdout": "[10, 11, 12]\n", "error": null, "truncated": false, "stopped": false}),
        "{out}"
    );
    assert_eq!(
        call["text"],
        r#"{"stdout": "[10, 11, 12]\n", "error": null, "truncated": false, "stopped": false}"#
    );
    assert_eq!(call["is_error"], false);
    let description = out["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("async def add(params: dict) -> str:"),
        "{description}"
    );
    assert!(!description.contains("async def echo"), "{description}");
}

#[test]
fn a_third_party_server_works_behind_serve() {
    if !require(native_available(), "user namespaces are not available")
        || !require(
            venv_python().is_some(),
            "could not install mcp-server-time from PyPI",
        )
    {
        return;
    }
    let venv_bin = venv_python().unwrap().parent().unwrap().to_path_buf();
    let serve = vec![
        bin().display().to_string(),
        "serve".into(),
        "--".into(),
        venv_bin.join("mcp-server-time").display().to_string(),
        "--local-timezone".into(),
        "UTC".into(),
    ];
    let code = "import json\nr = await get_current_time({'timezone': 'Europe/Paris'})\nprint(json.loads(r)['timezone'])";
    let out = python_client(&[code], &serve);
    assert_eq!(out["tools"], serde_json::json!(["run_python"]));
    assert_eq!(
        out["calls"][0]["structured"]["stdout"], "Europe/Paris\n",
        "{out}"
    );
}

#[test]
fn serve_runs_at_most_four_sandboxes_at_once() {
    if !native_client_ready() {
        return;
    }
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients/run_concurrently.py");
    let mut cmd = std::process::Command::new(venv_python().unwrap());
    cmd.arg(script)
        .arg("8")
        .arg("import time\nt0 = time.time()\ntime.sleep(4)\nprint(t0, time.time())")
        .arg("--");
    cmd.arg(bin()).arg("serve").arg("--").args(toy());
    let out = cmd.output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    // Each run printed when its code started and ended (the host's clock: no time
    // namespace). The peak is the most runs whose code was running at one moment.
    let spans: Vec<(f64, f64)> = v["stdout"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|s| {
            let mut t = s
                .as_str()
                .unwrap_or("")
                .split_whitespace()
                .map(|x| x.parse::<f64>());
            match (t.next(), t.next()) {
                (Some(Ok(a)), Some(Ok(b))) => (a, b),
                _ => panic!("not a start and an end: {v}"),
            }
        })
        .collect();
    assert_eq!(spans.len(), 8, "{v}");
    let peak = spans
        .iter()
        .map(|(start, _)| {
            spans
                .iter()
                .filter(|(a, b)| a <= start && start < b)
                .count()
        })
        .max()
        .unwrap_or(0);
    eprintln!("peak concurrency: {peak} of 8 runs");
    assert!(
        peak <= 4,
        "{peak} runs at once: more than the 4 slots; {spans:?}"
    );
    assert_eq!(peak, 4, "the four slots were not used at once: {spans:?}");
}
