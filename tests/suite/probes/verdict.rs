//! One probe's run through `exec`, judged: its outcome against the tables, its positive
//! control, what exec printed, how long it took, and what of it survived on the host.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::expect::{SENTINEL, SENTINEL_ERRNO, UNDER_SENTINEL, expectation, probes_dir};
use super::host_facts::SECRET;
use crate::suite::common::{Exec, ExecOptions, exec_with, processes_named, unprivileged};

/// How long after a LIFE probe's run ended a process of it may still be dying; other classes
/// get [`SURVIVOR_GRACE`] (their probes are judged on containment, not on timing).
const LIFE_GRACE: Duration = Duration::from_secs(1);
const SURVIVOR_GRACE: Duration = Duration::from_secs(10);

/// Most bytes `exec` may print on the host, stdout and stderr each, whatever the probe did.
const HOST_OUTPUT_LIMIT: usize = 64 * 1024;

/// A process name (comm, at most 15 bytes) unique to one probe run.
fn marker() -> String {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    format!(
        "pm{}-{}",
        std::process::id() % 1_000_000,
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

/// The cell: the probe's name, the host facts, the prelude, the probe.
fn cell(probe: &str, facts: &Value) -> String {
    let dir = probes_dir();
    let prelude = std::fs::read_to_string(dir.join("prelude.py")).expect("prelude.py");
    let body = std::fs::read_to_string(dir.join(format!("{probe}.py"))).expect("probe file");
    let quoted = |v: &str| serde_json::to_string(v).expect("a JSON string is a Python string");
    // The started marker, printed before the probe's body: a run stopped by its deadline
    // counts only when the probe itself ran (the deadline includes the sandbox's start).
    format!(
        "PROBE = {}\nimport json\nHOST = json.loads({})\nPRELUDE_SOURCE = {}\n{prelude}\n\
         print({}, flush=True)\n{body}",
        quoted(probe),
        quoted(&facts.to_string()),
        quoted(&prelude),
        quoted(&started_marker(probe)),
    )
}

/// The line a probe prints before its body runs.
fn started_marker(probe: &str) -> String {
    format!("probe-started {probe}")
}

/// One probe's run, as judged.
pub(super) struct Verdict {
    pub(super) probe: String,
    pub(super) observed: String,
    pub(super) took: Duration,
    pub(super) failures: Vec<String>,
}

/// The outcome of a run: the probe's own line, or what the result says.
fn observe(probe: &str, r: &Exec) -> (String, Vec<String>, Option<Value>) {
    let Some(result) = r.result.as_ref() else {
        return ("no-result".into(), Vec::new(), None);
    };
    let printed = result["stdout"].as_str().unwrap_or_default();
    let line = printed
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|v| v["probe"] == probe);
    if let Some(line) = line {
        let outcome = line["outcome"].as_str().unwrap_or("?").to_owned();
        let errnos = line["errno"]
            .as_str()
            .map(|s| s.split('|').map(str::to_owned).collect())
            .unwrap_or_default();
        return (outcome, errnos, Some(line));
    }
    let error = result["error"].as_str().unwrap_or_default();
    if result["stopped"].as_bool() == Some(true) {
        let reason = if error.contains("deadline") {
            "deadline"
        } else if error.contains("ran out of memory") {
            "memory"
        } else if error.contains("output limit") {
            "output"
        } else if error.starts_with("protocol violation") {
            "protocol"
        } else if error.contains("exited with status") {
            "status"
        } else if error.contains("without a result") {
            "ended"
        } else {
            "other"
        };
        return ("stopped".into(), vec![reason.into()], None);
    }
    if !error.is_empty() {
        // The last traceback line: "MemoryError" or "OSError: [Errno 1] ...".
        let last = error.lines().last().unwrap_or_default();
        let name = last.split(':').next().unwrap_or(last).trim().to_owned();
        return ("raised".into(), vec![name], None);
    }
    ("silent".into(), Vec::new(), None)
}

/// Whether `value` (an accepted entry, maybe prefixed) holds on `backend`.
fn applies<'a>(value: &'a str, backend: &str) -> Option<&'a str> {
    match value.split_once('=') {
        None => Some(value),
        Some(("rlimit", v)) if backend == "native" && unprivileged() => Some(v),
        Some((b, v)) if b == backend => Some(v),
        Some(_) => None,
    }
}

/// How the probe table is run: as shipped, or with seccomp answering [`SENTINEL_ERRNO`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Errno {
    Shipped,
    Sentinel,
}

/// The outcomes `probe` may end as in a run of `errno`, as the tables say.
fn accepted_outcomes(probe: &str, errno: Errno) -> &'static [&'static str] {
    let sentinel = UNDER_SENTINEL.iter().find(|(p, _)| *p == probe);
    match (errno, sentinel) {
        (Errno::Sentinel, Some((_, accept))) => accept,
        _ => expectation(probe).accept,
    }
}

pub(super) fn run_probe(backend: &str, probe: &str, facts: &Value, errno: Errno) -> Verdict {
    let expect = expectation(probe);
    let marker = marker();
    let mut facts = facts.clone();
    facts["marker"] = json!(marker);
    let started = Instant::now();
    let r = exec_with(
        &cell(probe, &facts),
        ExecOptions {
            backend,
            args: vec!["--deadline".into(), expect.deadline.to_string()],
            env: [("MCP_CODE_MODE_PROBE_SECRET", SECRET)]
                .into_iter()
                .chain(match errno {
                    Errno::Shipped => vec![],
                    Errno::Sentinel => vec![
                        ("MCP_CODE_MODE_LAUNCHER_TEST_KNOBS", "1"),
                        ("MCP_CODE_MODE_TEST_SECCOMP_ERRNO", SENTINEL_ERRNO),
                    ],
                })
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            ..Default::default()
        },
    );
    let took = started.elapsed();
    let (outcome, errnos, line) = observe(probe, &r);
    let observed = if errnos.is_empty() {
        outcome.clone()
    } else {
        format!("{outcome}:{}", errnos.join("|"))
    };
    let accepted: Vec<&str> = accepted_outcomes(probe, errno)
        .iter()
        .filter_map(|a| applies(a, backend))
        .collect();
    let mut failures = Vec::new();
    let fits = if errnos.is_empty() {
        accepted.contains(&outcome.as_str())
    } else {
        errnos
            .iter()
            .all(|e| accepted.contains(&format!("{outcome}:{e}").as_str()))
    };
    if !fits {
        failures.push(format!("{observed} is not one of {accepted:?}"));
    }
    // The sentinel run: a probe listed as seccomp's shows the sentinel, any other never.
    let listed = UNDER_SENTINEL.iter().any(|(p, _)| *p == probe);
    if errno == Errno::Sentinel && listed != errnos.iter().any(|e| e == SENTINEL) {
        failures.push(format!(
            "{observed}: listed as refused by seccomp: {listed}, but the sentinel {} there",
            if listed { "is not" } else { "is" }
        ));
    }
    // Every denial carries its positive control, and a control that ran must have passed.
    if let Some(line) = &line {
        let control = line.get("control").and_then(Value::as_str);
        if !errnos.is_empty() && ["denied", "killed"].contains(&outcome.as_str()) {
            if control != Some("ok") {
                failures.push(format!("positive control: {control:?}"));
            }
        } else if control.is_some_and(|c| c != "ok") {
            failures.push(format!("positive control: {control:?}"));
        }
    }
    if outcome == "no-result" || outcome == "silent" {
        failures.push(format!(
            "exit {}; stdout {:?}; stderr {:?}",
            r.code,
            r.stdout.chars().take(300).collect::<String>(),
            r.stderr.chars().take(300).collect::<String>()
        ));
    }
    // A deadline stop counts only if the probe had started: a slow sandbox start must not
    // pass for a probe that was stopped in time.
    if observed == "stopped:deadline"
        && !r
            .result()
            .get("stdout")
            .and_then(Value::as_str)
            .is_some_and(|s| s.lines().any(|l| l == started_marker(probe)))
    {
        failures.push("stopped by the deadline before the probe started".into());
    }
    // A daemon that started must not keep the run from ending with the cell's result.
    if outcome == "started" && r.result().get("stopped").and_then(Value::as_bool) != Some(false) {
        failures.push(format!(
            "the run did not end with the cell's result: {:?}",
            r.result().get("error")
        ));
    }
    if outcome == "stopped" && r.result().get("error").and_then(Value::as_str) == Some("") {
        failures.push("a stop without an error reads as a success".into());
    }
    // Host-side checks: bounded output, bounded time, nothing of the run left alive.
    if r.stdout.len() > HOST_OUTPUT_LIMIT || r.stderr.len() > HOST_OUTPUT_LIMIT {
        failures.push(format!(
            "exec printed {} bytes on stdout and {} on stderr",
            r.stdout.len(),
            r.stderr.len()
        ));
    }
    if took > Duration::from_secs(expect.deadline + 30) {
        failures.push(format!("took {took:?}"));
    }
    // Nothing a sandbox wrote may reach the operator's terminal raw: no control character
    // but newline and tab in what exec printed.
    for (stream, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        if let Some(c) = text
            .chars()
            .find(|c| c.is_control() && *c != '\n' && *c != '\t')
        {
            failures.push(format!(
                "exec printed the control character {c:?} on {stream}"
            ));
        }
    }
    if r.code == 2 {
        failures.push(format!(
            "exec reported a startup failure of its own: {:?}",
            r.stderr.chars().take(300).collect::<String>()
        ));
    }
    let grace = if probe.starts_with("life/") {
        LIFE_GRACE
    } else {
        SURVIVOR_GRACE
    };
    let mut survivors = processes_named(&marker);
    let waited = Instant::now();
    while !survivors.is_empty() && waited.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(100));
        survivors = processes_named(&marker);
    }
    if !survivors.is_empty() {
        failures.push(format!(
            "host processes {survivors:?} named {marker} were alive {grace:?} after the run"
        ));
    }
    Verdict {
        probe: probe.into(),
        observed,
        took,
        failures,
    }
}
