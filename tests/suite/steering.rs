//! The client steers its runs: cancelling a run (running or queued) stops it, progress is
//! reported while it runs, and a client that goes away takes every run with it.
//! Driven by the Python MCP SDK (`tests/clients/steer.py`) against `serve` over the toy
//! server, whose `--journal` shows what reached it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::common::{backend_ready, bin, example, require, venv_python};

/// What `steer.py SCENARIO` saw, with the toy server's journal and serve's log.
struct Steered {
    out: Value,
    journal: String,
    log: String,
    serve_pid: u32,
    /// The last argument of the child the disconnect scenario's run starts.
    marker: String,
}

fn steer(scenario: &str, backend: &str) -> Steered {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let log = dir.path().join("serve.log");
    let pid_file = dir.path().join("serve.pid");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/steer.py");
    // sh records serve's pid and its log, then becomes serve.
    let out = Command::new(venv_python().expect("venv python"))
        .arg(script)
        .arg(scenario)
        .arg(&journal)
        .arg(&log)
        .arg("--")
        .args(["sh", "-c"])
        .arg(format!(
            "echo $$ > '{}'; exec \"$@\" 2> '{}'",
            pid_file.display(),
            log.display()
        ))
        .arg("sh")
        .arg(bin())
        .args(["serve", "--backend", backend, "--"])
        .arg(example("toy_server"))
        .arg("--journal")
        .arg(&journal)
        .env("MCP_CODE_MODE_LOG", "info")
        .output()
        .expect("run steer.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let log = read(&log);
    let out = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "steer.py {scenario} printed no JSON ({e}): {stdout}\nstderr: {}\nserve log:\n{log}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Steered {
        out,
        journal: read(&journal),
        serve_pid: read(&pid_file).trim().parse().unwrap_or(0),
        log,
        marker: format!(
            "steer-{}",
            dir.path().file_name().unwrap_or_default().to_string_lossy()
        ),
    }
}

fn ready(backend: &str) -> bool {
    backend_ready(backend)
        && require(
            venv_python().is_some(),
            "could not install the Python MCP SDK from PyPI",
        )
}

/// The milliseconds serve logged between a run's cancel and its slot coming free.
fn freed_ms(log: &str) -> Vec<u64> {
    log.lines()
        .filter_map(|l| l.split("its slot was free ").nth(1))
        .filter_map(|rest| rest.split(' ').next()?.parse().ok())
        .collect()
}

fn a_cancelled_run_is_killed_and_its_call_in_flight_is_cancelled_upstream(backend: &str) {
    if !ready(backend) {
        return;
    }
    let s = steer("cancel", backend);
    assert!(
        s.journal.contains("call slow"),
        "the run reached its call before the cancel: {}\n{}",
        s.journal,
        s.log
    );
    assert!(
        s.journal.contains("cancelled "),
        "the server was told its call was cancelled: {}",
        s.journal
    );
    assert!(
        !s.journal.contains("after-cancel"),
        "nothing after the cancel reached the server: {}",
        s.journal
    );
    assert_eq!(s.out["next_stdout"], "next\n", "{}", s.out);
    let freed = freed_ms(&s.log);
    assert_eq!(freed.len(), 1, "one cancelled run: {}", s.log);
    // The line names the request by the id the client gave it (the SDK's are integers),
    // not by serve's own id for it on rmcp's side ("N ID").
    let named = s
        .log
        .split("run_python request ")
        .nth(1)
        .and_then(|rest| rest.split(" was cancelled").next());
    assert!(
        named.is_some_and(|id| id.parse::<u64>().is_ok()),
        "the cancelled run is named {named:?}: {}",
        s.log
    );
    // Without the cancel the slot would be held for the rest of the 30 s call. How soon it
    // comes free is a speed target (scripts/bench); this bound only leaves room for a
    // loaded machine.
    assert!(
        freed[0] < 5000,
        "slot freed {} ms after the cancel",
        freed[0]
    );
}

fn a_run_cancelled_while_queued_never_starts(backend: &str) {
    if !ready(backend) {
        return;
    }
    let s = steer("queue", backend);
    // The four runs hold their slots until the scenario cancels them, which it does only
    // after the fifth run's cancel: no slot comes free while the fifth waits.
    assert_eq!(s.out["busy_cancelled"], 4, "{}", s.out);
    assert_eq!(
        s.out["after_stdout"], "after\n",
        "a run queued after the cancelled one ran once the slots came free: {}",
        s.out
    );
    assert!(
        s.log
            .contains("a queued run was cancelled before it started"),
        "{}",
        s.log
    );
    assert_eq!(
        s.journal.matches("call slow").count(),
        4,
        "the four runs that held the slots made their calls: {}",
        s.journal
    );
    assert!(
        !s.journal.contains("queued-side-effect"),
        "the cancelled run's call never happened: {}",
        s.journal
    );
}

fn progress_is_reported_at_the_start_after_each_call_and_while_it_runs(backend: &str) {
    if !ready(backend) {
        return;
    }
    let s = steer("progress", backend);
    assert_eq!(s.out["stdout"], "slept\n", "{}", s.out);
    let seen = s.out["progress"].as_array().expect("progress list");
    let beat = |p: &&Value| {
        p["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("running for ")
    };
    // Heartbeats count from the request's arrival, so they may come before the sandbox
    // started (a loaded machine, a cold Docker start) or between events; apart from them
    // the notifications are the start and one per call, in order, counting the calls.
    let events: Vec<(&str, f64)> = seen
        .iter()
        .filter(|p| !beat(p))
        .map(|p| {
            let message = p["message"].as_str().unwrap_or("");
            (message, p["progress"].as_f64().unwrap_or(f64::NAN))
        })
        .collect();
    let messages: Vec<&str> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        messages,
        ["the sandbox started", "add", "add", "add"],
        "{}",
        s.out
    );
    assert!(
        (0.0..1.0).contains(&events[0].1),
        "no call finished before the sandbox started: {}",
        s.out
    );
    let counts: Vec<f64> = events[1..].iter().map(|e| e.1).collect();
    assert_eq!(
        counts,
        [1.0, 2.0, 3.0],
        "progress counts the calls: {}",
        s.out
    );
    let values: Vec<f64> = seen.iter().filter_map(|p| p["progress"].as_f64()).collect();
    assert_eq!(values.len(), seen.len(), "{}", s.out);
    assert!(
        values.windows(2).all(|w| w[1] > w[0]),
        "progress increases with every notification: {values:?}"
    );
    let last_call = seen
        .iter()
        .rposition(|p| p["message"] == "add")
        .unwrap_or(seen.len());
    assert!(
        seen[last_call..].iter().any(|p| beat(&p)),
        "heartbeats while the code sleeps: {}",
        s.out
    );
    // Nine seconds of sleep with no call: still a notification every 4 s, give or take what
    // a loaded machine adds to a timer and to the client reading it.
    let times: Vec<f64> = seen.iter().filter_map(|p| p["t"].as_f64()).collect();
    let longest = times.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    assert!(
        longest <= 6.5,
        "a gap of {longest} s between notifications: {times:?}"
    );
}

fn a_client_that_goes_away_ends_every_run_and_leaves_nothing(backend: &str) {
    if !ready(backend) {
        return;
    }
    let s = steer("disconnect", backend);
    assert!(
        s.log
            .contains("the client closed its input; cancelling every run"),
        "{}",
        s.log
    );
    assert!(
        s.log.contains("a run was cancelled; its sandbox is killed"),
        "{}",
        s.log
    );
    // rmcp alone waits up to 5 s for running requests after the input ends.
    let left = s.out["leave_s"].as_f64().unwrap_or(f64::MAX);
    assert!(
        left < 4.0,
        "serve took {left} s to exit after the client left"
    );
    assert!(s.serve_pid > 0);
    match backend {
        "docker" => {
            let ps = Command::new("docker")
                .args(["ps", "-a", "--format", "{{.Names}}"])
                .output()
                .unwrap();
            let prefix = format!("mcp-code-mode-{}-", s.serve_pid);
            let names = String::from_utf8_lossy(&ps.stdout);
            assert!(
                !names.lines().any(|n| n.starts_with(&prefix)),
                "containers left: {names}"
            );
        }
        _ => {
            assert_eq!(
                super::cleanup::cgroups_of(s.serve_pid),
                Vec::<PathBuf>::new(),
                "run cgroups left"
            );
            let sleeping = Command::new("pgrep")
                .args(["-f", &s.marker])
                .output()
                .unwrap();
            assert!(
                sleeping.stdout.is_empty(),
                "sandbox processes left: {}",
                String::from_utf8_lossy(&sleeping.stdout)
            );
        }
    }
}

crate::on_both_backends!(
    a_cancelled_run_is_killed_and_its_call_in_flight_is_cancelled_upstream,
    a_run_cancelled_while_queued_never_starts,
    progress_is_reported_at_the_start_after_each_call_and_while_it_runs,
    a_client_that_goes_away_ends_every_run_and_leaves_nothing,
);
