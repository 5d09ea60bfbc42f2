//! `serve --http`: the Python SDK's Streamable HTTP client end to end, and the transport's
//! controls judged from raw HTTP requests. Here: one served process ([`Served`]) and its raw
//! requests.
//!
//! Index: `sdk_clients` (the Python and TypeScript SDK clients initialize, list, call and
//! cancel); `refusals` (401 with a challenge, 403 for a foreign `Origin` or `Host`, 413 for a
//! body over the cap, no token refused at startup); `reused_ids` (a request id in flight in
//! its session is refused); `sessions` (taint, run slots and audit
//! session id per session, the session cap, expiry); `eviction` (a new session at the cap
//! closes the session idle longest, never one with a run in flight); `health` (`/metrics` counters,
//! `/healthz`); `shutdown` (SIGTERM's grace, 128 + the signal's number).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{bin, example, venv_python};

mod eviction;
mod health;
mod refusals;
mod reused_ids;
mod sdk_clients;
mod sessions;
mod shutdown;

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

    /// A new session, initialized (`initialize` answered, `notifications/initialized`
    /// accepted): its `Mcp-Session-Id`.
    pub(super) fn open_session(&self) -> String {
        let (status, text) = self.initialize(&[]);
        assert_eq!(status, 200, "{text}");
        let session = session_id(&text).expect("a session id");
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let (status, text) = self.post_in(&session, initialized);
        assert_eq!(status, 202, "{text}");
        session
    }

    /// A raw POST of `body` to `/mcp` in session `session` (protocol 2025-11-25, the token
    /// added when set): the status and the whole response text.
    pub(super) fn post_in(&self, session: &str, body: &str) -> (u16, String) {
        let bearer = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        if let Some(bearer) = &bearer {
            headers.push(("Authorization", bearer));
        }
        self.request("POST", "/mcp", &headers, body)
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
