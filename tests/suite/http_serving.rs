//! `serve --http`: the Python SDK's Streamable HTTP client end to end, and the transport's
//! controls judged from raw HTTP requests.
//!
//! - the Python SDK client and the TypeScript SDK client each initialize, list, call, and
//!   cancel a run;
//! - requests without the right bearer token get 401 with a challenge; a public address
//!   without a token, or a short token, is refused at startup;
//! - a foreign `Origin` gets 403; an allowed one passes;
//! - two sessions in one process each have their own private-data taint, their own run
//!   slots, and their own session id in the audit log;
//! - the session cap answers 503 past it, and a closed session frees its seat;
//! - an idle session expires (404 after), and frees its seat;
//! - a body over the cap gets 413;
//! - `/metrics` counters move after a run; `/healthz` tells live from ready;
//! - SIGTERM lets a run in flight finish, or cancels it after the grace period; SIGTERM,
//!   SIGINT and SIGHUP end serve with 128 + the signal's number.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::common::{bin, example, native_client_ready, venv_python};

const TOKEN: &str = "test-token-0123456789abcdef";

/// One `serve --http 127.0.0.1:0` process wrapping the toy server.
pub(super) struct Served {
    child: Child,
    addr: String,
    log: Arc<Mutex<String>>,
    pub(super) journal: PathBuf,
    token: Option<String>,
    _dir: tempfile::TempDir,
}

impl Served {
    pub(super) fn start(args: &[&str], token: Option<&str>) -> Self {
        Self::launch(args, token, |command, journal| {
            command
                .arg("--")
                .arg(example("toy_server"))
                .arg("--journal")
                .arg(journal);
        })
    }

    /// `serve --http` with `args`, the wrapped servers given by `servers` (which gets the
    /// command and a journal path it may hand to the toy server).
    pub(super) fn launch(
        args: &[&str],
        token: Option<&str>,
        servers: impl FnOnce(&mut Command, &std::path::Path),
    ) -> Self {
        Self::launch_as(Command::new(bin()), args, token, servers)
    }

    /// [`Served::launch`] with `command` (the binary, or a wrapper given the binary as an
    /// argument) in place of the bare binary.
    pub(super) fn launch_as(
        mut command: Command,
        args: &[&str],
        token: Option<&str>,
        servers: impl FnOnce(&mut Command, &std::path::Path),
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal");
        command.args(["serve", "--http", "127.0.0.1:0"]).args(args);
        if let Some(token) = token {
            let file = dir.path().join("token");
            std::fs::write(&file, format!("{token}\n")).unwrap();
            command.arg("--http-token-file").arg(file);
        } else {
            command.arg("--http-no-auth");
        }
        servers(&mut command, &journal);
        command
            .env("MCP_CODE_MODE_LOG", "info")
            .env_remove("MCP_CODE_MODE_HTTP_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start serve --http");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Some(rest) = line.split("on http://").nth(1) {
                        let _ = tx.send(rest.split('/').next().unwrap_or("").to_owned());
                    }
                    let mut log = log.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
            });
        }
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!("serve never said where it listens: {}", log.lock().unwrap())
            });
        Self {
            child,
            addr,
            log,
            journal,
            token: token.map(str::to_owned),
            _dir: dir,
        }
    }

    /// `host:port` it listens on.
    pub(super) fn addr(&self) -> &str {
        &self.addr
    }

    pub(super) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub(super) fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Run `http_client.py SCENARIO` against this server.
    fn client(&self, scenario: &str, args: &[&str]) -> Value {
        let out = self.client_command(scenario, args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
            panic!(
                "http_client.py {scenario} printed no JSON ({e}): {stdout}\nstderr: {}\nserve: {}",
                String::from_utf8_lossy(&out.stderr),
                self.log()
            )
        })
    }

    fn client_command(&self, scenario: &str, args: &[&str]) -> Command {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/http_client.py");
        let mut command = Command::new(venv_python().expect("venv python"));
        command
            .arg(script)
            .arg(scenario)
            .arg(self.url())
            .arg(&self.journal)
            .args(args);
        match &self.token {
            Some(token) => command.env("MCP_TOKEN", token),
            None => command.env_remove("MCP_TOKEN"),
        };
        command
    }

    /// One raw HTTP/1.1 request; the status and the whole response text.
    pub(super) fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let mut stream = match TcpStream::connect(&self.addr) {
            Ok(stream) => stream,
            Err(e) => return (0, e.to_string()),
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut text = format!(
            "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("host"))
        {
            text.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (name, value) in headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("\r\n");
        stream.write_all(text.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, response)
    }

    /// A raw `initialize` POST with `extra` headers (the token added when set).
    pub(super) fn initialize(&self, extra: &[(&str, &str)]) -> (u16, String) {
        let bearer = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(bearer) = &bearer {
            headers.push(("Authorization", bearer));
        }
        headers.extend_from_slice(extra);
        self.request("POST", "/mcp", &headers, INITIALIZE)
    }

    fn metrics(&self) -> String {
        let bearer = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer
            .as_deref()
            .map(|b| vec![("Authorization", b)])
            .unwrap_or_default();
        let (status, text) = self.request("GET", "/metrics", &headers, "");
        assert_eq!(status, 200, "{text}");
        text
    }

    fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
    }

    fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

pub(super) fn session_id(response: &str) -> Option<String> {
    response.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    })
}

/// The value of the sample `name` (with its labels) in OpenMetrics `text`.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn a_python_sdk_client_initializes_lists_and_calls_over_http() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&[], Some(TOKEN));
    let out = served.client(
        "calls",
        &[
            "print(await add({'a': 2, 'b': 3}))",
            "raise ValueError('boom')",
        ],
    );
    assert_eq!(out["tools"], serde_json::json!(["run_python"]), "{out}");
    assert_eq!(out["calls"][0]["stdout"], "{\"sum\": 5}\n", "{out}");
    assert_eq!(out["calls"][0]["is_error"], false, "{out}");
    assert_eq!(out["calls"][1]["is_error"], true, "{out}");
    assert!(
        out["calls"][1]["error"]
            .as_str()
            .unwrap_or("")
            .contains("boom"),
        "{out}"
    );
}

#[test]
fn a_python_sdk_client_cancels_a_run_over_http() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&[], None);
    let out = served.client("cancel", &[]);
    assert_eq!(out["next_stdout"], "next\n", "{out}");
    assert!(out["cancel_returned_s"].as_f64().unwrap() < 5.0, "{out}");
    // The server saw the cancel: the run ended as cancelled, and its next call never left.
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let metrics = served.metrics();
        if sample(&metrics, "mcp_code_mode_runs_total{outcome=\"cancelled\"}") == Some(1.0)
            || Instant::now() > deadline
        {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        sample(&metrics, "mcp_code_mode_runs_total{outcome=\"cancelled\"}"),
        Some(1.0),
        "{metrics}\n{}",
        served.log()
    );
    let journal = std::fs::read_to_string(&served.journal).unwrap_or_default();
    assert!(!journal.contains("after-cancel"), "{journal}");
}

/// What `tests/clients/ts/http.mjs SCENARIO` printed against `served`.
fn ts_client(served: &Served, scenario: &str) -> Option<Value> {
    let ready = super::common::require(
        super::ts_client::client_dir().is_some(),
        "node and npm could not install the TypeScript MCP SDK (tests/clients/ts)",
    );
    if !ready {
        return None;
    }
    let dir = super::ts_client::client_dir()?;
    let mut command = Command::new("node");
    command
        .arg(dir.join("http.mjs"))
        .arg(scenario)
        .arg(served.url())
        .arg(&served.journal);
    match &served.token {
        Some(token) => command.env("MCP_TOKEN", token),
        None => command.env_remove("MCP_TOKEN"),
    };
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    Some(
        serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
            panic!(
                "http.mjs {scenario} printed no JSON ({e}): {stdout}\nstderr: {}\nserve: {}",
                String::from_utf8_lossy(&out.stderr),
                served.log()
            )
        }),
    )
}

#[test]
fn a_typescript_sdk_client_initializes_lists_and_calls_over_http() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&[], Some(TOKEN));
    let Some(out) = ts_client(&served, "calls") else {
        return;
    };
    assert_eq!(out["tools"], serde_json::json!(["run_python"]), "{out}");
    assert_eq!(out["stdout"], "{\"sum\": 42}\n", "{out}");
    assert_eq!(out["isError"], false, "{out}");
}

#[test]
fn a_typescript_sdk_client_cancels_a_run_over_http() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&[], None);
    let Some(out) = ts_client(&served, "cancel") else {
        return;
    };
    assert!(
        out["outcome"]
            .as_str()
            .unwrap_or("")
            .starts_with("rejected"),
        "{out}"
    );
    assert_eq!(out["next_stdout"], "next\n", "{out}");
    let end = Instant::now() + Duration::from_secs(10);
    while sample(
        &served.metrics(),
        "mcp_code_mode_runs_total{outcome=\"cancelled\"}",
    ) != Some(1.0)
    {
        assert!(
            Instant::now() < end,
            "the run was not cancelled: {}",
            served.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let journal = std::fs::read_to_string(&served.journal).unwrap_or_default();
    assert!(!journal.contains("after-cancel"), "{journal}");
}

#[test]
fn requests_without_the_right_token_get_401_with_a_bearer_challenge() {
    let served = Served::start(&[], Some(TOKEN));
    let json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let (status, text) = served.request("POST", "/mcp", &json, INITIALIZE);
    assert_eq!(status, 401, "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("www-authenticate: bearer realm=\"mcp-code-mode\""),
        "{text}"
    );
    let wrong = [
        json[0],
        json[1],
        ("Authorization", "Bearer test-token-0123456789abcdeX"),
    ];
    let (status, text) = served.request("POST", "/mcp", &wrong, INITIALIZE);
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("error=\"invalid_token\""), "{text}");
    let (status, text) = served.request("GET", "/metrics", &[], "");
    assert_eq!(status, 401, "{text}");
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 200, "{text}");
    assert!(session_id(&text).is_some(), "{text}");
    // /healthz needs no token: load balancers probe it.
    let (status, text) = served.request("GET", "/healthz/live", &[], "");
    assert_eq!(status, 200, "{text}");
    let metrics = served.metrics();
    assert_eq!(
        sample(
            &metrics,
            "mcp_code_mode_refusals_total{reason=\"unauthorized\"}"
        ),
        Some(3.0),
        "{metrics}"
    );
}

#[test]
fn serve_refuses_http_without_a_token_unless_no_auth_is_chosen_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(bin())
            .arg("serve")
            .args(args)
            .arg("--")
            .arg(example("toy_server"))
            .env_remove("MCP_CODE_MODE_HTTP_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Loopback is no boundary between a host's users: no token, no serving, unless asked.
    let (code, stderr) = run(&["--http", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("without a token"), "{stderr}");
    assert!(stderr.contains("--http-token-file"), "{stderr}");
    assert!(stderr.contains("--http-no-auth"), "{stderr}");
    let (code, stderr) = run(&["--http", "0.0.0.0:0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("without a token"), "{stderr}");
    let (code, stderr) = run(&["--http", "0.0.0.0:0", "--http-no-auth"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    let short = dir.path().join("short");
    std::fs::write(&short, "abc\n").unwrap();
    let (code, stderr) = run(&[
        "--http",
        "127.0.0.1:0",
        "--http-token-file",
        short.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("at least 16"), "{stderr}");
}

#[test]
fn a_foreign_origin_gets_403_and_an_allowed_origin_passes() {
    let served = Served::start(
        &["--http-allow-origin", "http://localhost:3000"],
        Some(TOKEN),
    );
    let (status, text) = served.initialize(&[("Origin", "http://evil.example")]);
    assert_eq!(status, 403, "{text}");
    let (status, text) = served.initialize(&[("Origin", "http://localhost:3001")]);
    assert_eq!(status, 403, "{text}");
    let (status, text) = served.initialize(&[("Origin", "http://localhost:3000")]);
    assert_eq!(status, 200, "{text}");
    // A rebinding page names its own host in Host, too.
    let (status, text) = served.initialize(&[("Host", "evil.example")]);
    assert!(status == 403 || status == 400, "{text}");
    let metrics = served.metrics();
    assert_eq!(
        sample(&metrics, "mcp_code_mode_refusals_total{reason=\"origin\"}"),
        Some(2.0),
        "{metrics}"
    );
}

#[test]
fn host_header_and_oversized_body_refusals_are_counted_under_their_own_reasons() {
    let served = Served::start(&["--http-max-body", "2048"], Some(TOKEN));
    let (status, text) = served.initialize(&[("Host", "evil.example")]);
    assert_eq!(status, 403, "{text}");
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", bearer.as_str()),
    ];
    let (status, text) = served.request("POST", "/mcp", &headers, &"x".repeat(4096));
    assert_eq!(status, 413, "{text}");
    let metrics = served.metrics();
    let count = |reason: &str| {
        sample(
            &metrics,
            &format!("mcp_code_mode_refusals_total{{reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(count("host"), Some(1.0), "{metrics}");
    assert_eq!(count("body_too_large"), Some(1.0), "{metrics}");
    assert_eq!(count("origin").unwrap_or(0.0), 0.0, "{metrics}");
}

#[test]
fn two_sessions_in_one_process_each_have_their_own_taint() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&["--private", "secret"], None);
    let out = served.client("taint", &[]);
    assert_eq!(out["a_secret"], "s3cr3t\n", "{out}");
    let a_add = out["a_add"].as_str().unwrap_or("");
    assert!(
        a_add.starts_with("refused:") && a_add.contains("private"),
        "{out}"
    );
    assert_eq!(out["b_add"], "{\"sum\": 3}\n", "{out}");
}

#[test]
fn each_http_session_has_its_own_session_id_in_the_audit_log() {
    if !native_client_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let served = Served::start(&["--private", "secret", "--audit", &audit_arg], None);
    // Session A runs `secret` then `add`; session B runs `add`.
    let out = served.client("taint", &[]);
    assert_eq!(out["a_secret"], "s3cr3t\n", "{out}");
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let starts: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "run_start")
        .collect();
    let session_of = |code: &str| {
        starts
            .iter()
            .filter(|r| r["code"].as_str().unwrap_or_default().contains(code))
            .map(|r| r["session"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let secret = session_of("secret");
    let add = session_of("add(");
    assert_eq!(secret.len(), 1, "{records:?}");
    assert_eq!(add.len(), 2, "{records:?}");
    // A's two runs share its session; B's run has another.
    assert!(add.contains(&secret[0]), "{records:?}");
    assert!(add.iter().any(|s| *s != secret[0]), "{records:?}");
    // Every record of a run carries the session of its run_start.
    for record in &records {
        let start = starts.iter().find(|s| s["run"] == record["run"]).unwrap();
        assert_eq!(record["session"], start["session"], "{record}");
    }
}

#[test]
fn a_session_waits_for_its_own_run_slots_and_never_holds_another_sessions() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&["--session-runs", "1"], None);
    let out = served.client("slots", &[]);
    let ends: Vec<f64> = out["a"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    // A's second run waited for A's first (each sleeps 3 s); B's run did not wait for A's.
    assert!(ends[1] - ends[0] >= 2.5, "{out}");
    assert!(out["b"].as_f64().unwrap() < ends[1], "{out}");
}

#[test]
fn the_session_cap_answers_503_past_it_and_a_session_closed_with_204_frees_its_seat() {
    let served = Served::start(&["--max-sessions", "2"], None);
    let (status, first) = served.initialize(&[]);
    assert_eq!(status, 200, "{first}");
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 200, "{text}");
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("session cap (2)"), "{text}");
    let metrics = served.metrics();
    assert_eq!(
        sample(
            &metrics,
            "mcp_code_mode_refusals_total{reason=\"session_cap\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
    let id = session_id(&first).expect("a session id");
    let (status, text) = served.request("DELETE", "/mcp", &[("Mcp-Session-Id", &id)], "");
    // 204, not rmcp's 202: the Python SDK logs "Session termination failed: 202" otherwise.
    assert_eq!(status, 204, "{text}");
    // The seat is freed once the session's handler has ended (a moment after the DELETE).
    let end = Instant::now() + Duration::from_secs(10);
    let status = loop {
        let (status, _) = served.initialize(&[]);
        if status == 200 || Instant::now() > end {
            break status;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 200, "{}", served.log());
    let metrics = served.metrics();
    assert_eq!(
        sample(&metrics, "mcp_code_mode_sessions"),
        Some(2.0),
        "{metrics}"
    );
}

#[test]
fn an_idle_session_expires_and_frees_its_seat() {
    let served = Served::start(&["--session-idle", "1", "--max-sessions", "1"], None);
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 200, "{text}");
    let id = session_id(&text).expect("a session id");
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", id.as_str()),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ];
    let (status, text) = served.request("POST", "/mcp", &headers, ping);
    assert_eq!(status, 200, "the session answers while it is used: {text}");
    std::thread::sleep(Duration::from_millis(2500));
    let (status, text) = served.request("POST", "/mcp", &headers, ping);
    assert_eq!(status, 404, "{text}");
    let metrics = served.metrics();
    assert_eq!(
        sample(&metrics, "mcp_code_mode_sessions"),
        Some(0.0),
        "{metrics}"
    );
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 200, "{text}");
}

#[test]
fn a_body_over_the_cap_gets_413() {
    let served = Served::start(&["--http-max-body", "2048"], None);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"{}","version":"0"}}}}}}"#,
        "x".repeat(4096)
    );
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let (status, text) = served.request("POST", "/mcp", &headers, &big);
    assert_eq!(status, 413, "{text}");
}

#[test]
fn metrics_counters_move_after_a_run() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&["--private", "secret"], Some(TOKEN));
    let before = served.metrics();
    assert_eq!(
        sample(&before, "mcp_code_mode_run_duration_seconds_count"),
        Some(0.0),
        "{before}"
    );
    let out = served.client(
        "calls",
        &["print(await add({'a': 1, 'b': 1}))\nprint(await secret({}))\ntry:\n    await add({'a': 1, 'b': 1})\nexcept ToolError:\n    print('refused')"],
    );
    assert_eq!(
        out["calls"][0]["stdout"], "{\"sum\": 2}\ns3cr3t\nrefused\n",
        "{out}"
    );
    let after = served.metrics();
    let get = |name: &str| sample(&after, name);
    assert_eq!(
        get("mcp_code_mode_runs_total{outcome=\"ok\"}"),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        get("mcp_code_mode_run_duration_seconds_count"),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        get("mcp_code_mode_tool_calls_total{server=\"server\",outcome=\"ok\"}"),
        Some(2.0),
        "{after}"
    );
    assert_eq!(
        get("mcp_code_mode_tool_calls_total{server=\"server\",outcome=\"refused\"}"),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        get("mcp_code_mode_refusals_total{reason=\"private_only\"}"),
        Some(1.0),
        "{after}"
    );
    assert_eq!(get("mcp_code_mode_sandboxes_running"), Some(0.0), "{after}");
    assert!(
        after.contains("mcp_code_mode_server_restarts_total{server=\"server\"} 0"),
        "{after}"
    );
    assert!(after.contains("mcp_code_mode_sandboxes_pooled "), "{after}");
}

#[test]
fn healthz_tells_live_from_ready() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&[], None);
    let (status, _) = served.request("GET", "/healthz/live", &[], "");
    assert_eq!(status, 200);
    let end = Instant::now() + Duration::from_secs(60);
    let (status, text) = loop {
        let (status, text) = served.request("GET", "/healthz", &[], "");
        if status == 200 || Instant::now() > end {
            break (status, text);
        }
        assert_eq!(status, 503, "not ready must be 503: {text}");
        assert!(text.contains("\"live\":true"), "{text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 200, "{text}\n{}", served.log());
    assert!(
        text.contains("\"ready\":true") && text.contains("\"sandbox_started\":true"),
        "{text}"
    );
}

#[test]
fn healthz_is_not_ready_while_a_wrapped_server_is_down_and_names_it() {
    if !native_client_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.json");
    let toy = example("toy_server");
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "toy": {"command": toy.display().to_string()},
            "broken": {"command": "/bin/false"},
        }})
        .to_string(),
    )
    .unwrap();
    let config = config.display().to_string();
    let served = Served::launch(&["--config", &config], None, |_, _| {});
    // The sandbox starts; the broken server keeps the replica out of rotation, named.
    let end = Instant::now() + Duration::from_secs(60);
    let text = loop {
        let (status, text) = served.request("GET", "/healthz", &[], "");
        assert_eq!(
            status, 503,
            "a replica with a server down is not ready: {text}"
        );
        if text.contains("\"sandbox_started\":true") || Instant::now() > end {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let json = text.split("\r\n\r\n").nth(1).unwrap_or("").trim();
    let body: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(body["ready"], false, "{text}\n{}", served.log());
    assert_eq!(body["sandbox_started"], true, "{text}\n{}", served.log());
    assert_eq!(body["servers_started"], false, "{text}");
    assert_eq!(body["servers_unavailable"][0]["name"], "broken", "{text}");
    // The check starts it again (it fails again), at most every 5 s.
    let logged = |log: &str| log.matches("broken").count();
    let before = logged(&served.log());
    std::thread::sleep(Duration::from_secs(6));
    let _ = served.request("GET", "/healthz", &[], "");
    let end = Instant::now() + Duration::from_secs(10);
    while logged(&served.log()) == before && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        logged(&served.log()) > before,
        "the health check did not retry the broken server: {}",
        served.log()
    );
}

/// Start `slow SECONDS` in the Python client and wait until its run was sent.
fn slow_client(served: &Served, seconds: &str) -> std::process::Child {
    let mut child = served
        .client_command("slow", &[seconds])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("started") {
        line.clear();
    }
    assert!(line.contains("started"), "the client never started its run");
    // The run is in its sandbox once serve counts it.
    let end = Instant::now() + Duration::from_secs(30);
    while sample(&served.metrics(), "mcp_code_mode_sandboxes_running") != Some(1.0) {
        assert!(
            Instant::now() < end,
            "the run never started: {}",
            served.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn output_json(child: std::process::Child) -> Value {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or(Value::Null)
}

#[test]
fn sigterm_lets_a_run_in_flight_finish_then_exits() {
    if !native_client_ready() {
        return;
    }
    let mut served = Served::start(&["--shutdown-grace", "30"], None);
    let client = slow_client(&served, "3");
    served.terminate();
    std::thread::sleep(Duration::from_millis(300));
    // No new sessions once shutting down.
    let (status, _) = served.initialize(&[]);
    assert!(
        status == 503 || status == 0,
        "a new session during shutdown got {status}"
    );
    let out = output_json(client);
    assert_eq!(out["stdout"], "slept\n", "{out}\n{}", served.log());
    let status = served.wait_exit(Duration::from_secs(20));
    // 128 + SIGTERM's 15, as a shell reports a process SIGTERM ended.
    assert_eq!(status.and_then(|s| s.code()), Some(143), "{}", served.log());
}

#[test]
fn a_run_cancelled_at_the_end_of_the_shutdown_grace_says_serve_is_shutting_down() {
    if !native_client_ready() {
        return;
    }
    let mut served = Served::start(&["--shutdown-grace", "1"], None);
    let client = slow_client(&served, "60");
    served.terminate();
    assert!(served.wait_exit(Duration::from_secs(20)).is_some());
    let out = output_json(client);
    let error = out["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("shutting down") && !error.contains("by the client"),
        "{out}\n{}",
        served.log()
    );
}

#[test]
fn sigterm_cancels_a_run_still_going_after_the_grace_period() {
    if !native_client_ready() {
        return;
    }
    let mut served = Served::start(&["--shutdown-grace", "1"], None);
    let client = slow_client(&served, "60");
    let began = Instant::now();
    served.terminate();
    let status = served.wait_exit(Duration::from_secs(20));
    // 128 + SIGTERM's 15, as a shell reports a process SIGTERM ended.
    assert_eq!(status.and_then(|s| s.code()), Some(143), "{}", served.log());
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "{:?}",
        began.elapsed()
    );
    let out = output_json(client);
    assert_ne!(out["stdout"], "slept\n", "{out}");
    assert!(
        served.log().contains("cancelling 1 run"),
        "{}",
        served.log()
    );
}

#[test]
fn a_signal_ends_serve_over_http_with_128_plus_its_number() {
    if !native_client_ready() {
        return;
    }
    for (name, expected) in [("INT", 130), ("HUP", 129), ("TERM", 143)] {
        let mut served = Served::start(&["--pool", "0"], None);
        let _ = Command::new("kill")
            .args([format!("-{name}"), served.child.id().to_string()])
            .status();
        let status = served.wait_exit(Duration::from_secs(20));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(expected),
            "SIG{name}: {}",
            served.log()
        );
    }
}
