//! Remote servers over Streamable HTTP: a Python SDK server on 127.0.0.1
//! (`tests/clients/http_server.py`) that wants a bearer token, configured as a client writes
//! it (`url`, `headers` with `${VAR}`), behind the same bridge checks as a local server
//! (and recorded in the audit log the same way).

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{AuditLog, AuditOptions, Bridge, CallBudget, CallError};
use mcp_code_mode::config::{Context, parse};
use serde_json::json;

use super::common::{require, venv_python};

const TOKEN: &str = "t0k3n-for-tests";

/// The server process; killed on drop.
struct HttpServer {
    child: Child,
    port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server() -> Option<HttpServer> {
    let python = venv_python()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/http_server.py");
    let child = Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .arg(TOKEN)
        .stdin(Stdio::null())
        .spawn()
        .ok()?;
    let server = HttpServer { child, port };
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(30) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(server)
}

async fn open(port: u16, token: Option<&str>, extra: &str) -> Result<Bridge, String> {
    let text = format!(
        r#"{{"servers": {{"web": {{"type": "http", "url": "http://127.0.0.1:${{WEB_PORT}}/mcp",
            "headers": {{"Authorization": "Bearer ${{env:WEB_TOKEN}}"}}{extra}}}}}}}"#
    );
    let port = port.to_string();
    let token = token.map(str::to_owned);
    let lookup = move |name: &str| match name {
        "WEB_PORT" => Some(port.clone()),
        "WEB_TOKEN" => token.clone(),
        _ => None,
    };
    let config = parse(
        &text,
        &Context {
            lookup: &lookup,
            base: PathBuf::from("."),
        },
    )
    .map_err(|e| e.to_string())?;
    Bridge::open(config.servers, true)
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_remote_server_is_called_through_the_same_checks() {
    let Some(server) = start_server() else {
        require(
            false,
            "the Python MCP SDK venv or its HTTP server is not available",
        );
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let audit = dir.path().join("audit.jsonl");
    let log = AuditLog::open(AuditOptions::new(&audit)).expect("the audit log opens");
    let bridge = open(server.port, Some(TOKEN), r#", "private": ["greet"]"#)
        .await
        .expect("the remote server opens")
        .with_audit(std::sync::Arc::new(log));
    let budget = CallBudget::new(10);
    // Schema checks happen before the server sees the call.
    let Err(CallError::Refused(why)) = bridge
        .call(&budget, "web__add_one", &json!({"n": "one"}))
        .await
    else {
        panic!("a wrong argument type went out");
    };
    let why = why.to_string();
    assert!(why.contains("outside its schema"), "{why}");
    assert_eq!(
        bridge
            .call(&budget, "web__add_one", &json!({"n": 41}))
            .await
            .unwrap(),
        "42"
    );
    // `-> str` arrives as the text itself.
    assert_eq!(
        bridge
            .call(&budget, "web__greet", &json!({"name": "Ada"}))
            .await
            .unwrap(),
        "Hello, Ada!"
    );
    // The private-data rule holds across transports.
    let Err(CallError::Refused(why)) = bridge.call(&budget, "web__add_one", &json!({"n": 1})).await
    else {
        panic!("a non-private call went out after a private one");
    };
    let why = why.to_string();
    assert!(why.contains("private tool was called"), "{why}");
    assert_eq!(budget.used(), 2, "refused calls spend nothing");
    // The calls the server answered were POSTed: the audit log says sent, not withdrawn.
    let verdicts: Vec<String> = std::fs::read_to_string(&audit)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|r| r["verdict"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(verdicts, ["refused", "sent", "sent", "refused"]);
    bridge.close().await;
}

#[tokio::test]
async fn a_wrong_token_is_a_startup_failure_naming_the_server() {
    let Some(server) = start_server() else {
        require(
            false,
            "the Python MCP SDK venv or its HTTP server is not available",
        );
        return;
    };
    let e = open(server.port, Some("wrong"), "")
        .await
        .err()
        .expect("opened with a wrong token");
    assert!(e.contains("\"web\""), "{e}");
    let e = open(server.port, None, "")
        .await
        .err()
        .expect("opened with the token unset");
    assert!(e.contains("WEB_TOKEN is not set"), "{e}");
}

#[tokio::test]
async fn a_legacy_sse_entry_fails_with_a_reason() {
    let text = r#"{"mcpServers": {"old": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}}"#;
    let config = parse(
        text,
        &Context {
            lookup: &|_| None,
            base: PathBuf::from("."),
        },
    )
    .unwrap();
    let Err(e) = Bridge::open(config.servers, true).await else {
        panic!("opened a legacy SSE server");
    };
    assert!(e.to_string().contains("legacy HTTP+SSE"), "{e}");
}

#[test]
fn a_remote_servers_key_in_its_url_query_never_reaches_the_log() {
    // A port nothing listens on: rmcp's own ERROR line quotes reqwest's error, whose URL
    // carries the query and userinfo.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.json");
    let url = format!("http://user:PASSWORD@127.0.0.1:{port}/mcp?key=SECRET#frag");
    let entry = json!({"mcpServers": {"remote": {"type": "http", "url": url, "timeout": 10}}});
    std::fs::write(&config, entry.to_string()).unwrap();
    let out = Command::new(super::common::bin())
        .args(["exec", "--config"])
        .arg(&config)
        .args(["--code", "print(1)"])
        .env("MCP_CODE_MODE_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("http://127.0.0.1:{port}/mcp")),
        "the server's URL is named: {stderr}"
    );
    assert!(!stderr.contains("SECRET"), "{stderr}");
    assert!(!stderr.contains("PASSWORD"), "{stderr}");
    assert!(!stderr.contains("frag"), "{stderr}");
}
