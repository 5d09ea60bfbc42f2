//! Requests the transport refuses: without the right bearer token (401 with a challenge), a
//! foreign `Origin` or `Host` (403), a body over the cap (413); serve refuses to start on a
//! public address without a token, or with a short one. Each refusal is counted under its reason.
//! `/healthz`, `/healthz/live` and `/metrics` get the same `Host` and `Origin` checks as `/mcp`.

use std::process::{Command, Stdio};
use std::time::Duration;

use super::{INITIALIZE, Served, TOKEN, sample, session_id};
use crate::suite::common::{bin, example, exits_within};

/// The count of refusals for `reason` in the text of `/metrics` (`None`: no such sample).
fn refusals(metrics: &str, reason: &str) -> Option<f64> {
    sample(
        metrics,
        &format!("mcp_code_mode_refusals_total{{reason=\"{reason}\"}}"),
    )
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
    assert_eq!(refusals(&metrics, "unauthorized"), Some(3.0), "{metrics}");
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
    assert_eq!(refusals(&metrics, "origin"), Some(2.0), "{metrics}");
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
    let count = |reason: &str| refusals(&metrics, reason);
    assert_eq!(count("host"), Some(1.0), "{metrics}");
    assert_eq!(count("body_too_large"), Some(1.0), "{metrics}");
    assert_eq!(count("origin").unwrap_or(0.0), 0.0, "{metrics}");
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
fn health_and_metrics_refuse_a_foreign_host_or_origin_as_mcp_does() {
    let served = Served::start(
        &["--http-allow-origin", "http://localhost:3000"],
        Some(TOKEN),
    );
    let bearer = format!("Bearer {TOKEN}");
    let token = ("Authorization", bearer.as_str());
    // A rebinding page sends its own name as Host, or its own Origin.
    for path in ["/healthz", "/healthz/live", "/metrics"] {
        for foreign in [("Host", "evil.example"), ("Origin", "http://evil.example")] {
            let (status, text) = served.request("GET", path, &[token, foreign], "");
            assert_eq!(status, 403, "{path} with {foreign:?}: {text}");
            assert!(!text.contains("\"live\""), "{text}");
        }
    }
    let (status, text) = served.request(
        "GET",
        "/healthz",
        &[("Origin", "http://localhost:3000")],
        "",
    );
    assert!(status == 200 || status == 503, "{text}");
    assert!(text.contains("\"live\":true"), "{text}");
    let (status, text) = served.request("GET", "/healthz/live", &[], "");
    assert_eq!(status, 200, "{text}");
    let metrics = served.metrics();
    let count = |reason: &str| refusals(&metrics, reason);
    assert_eq!(count("host"), Some(3.0), "{metrics}");
    assert_eq!(count("origin"), Some(3.0), "{metrics}");
}

/// An allowed origin is one scheme, host and port (README "Origin and Host"): an entry
/// without a port names its scheme's default port, so another port of the same host (another
/// app) is refused; `:*` asks for any port. rmcp alone let a portless entry match every port.
#[test]
fn an_allowed_origin_without_a_port_admits_its_default_port_and_no_other() {
    let served = Served::start(
        &[
            "--http-allow-origin",
            "https://app.example.com",
            "--http-allow-origin",
            "http://localhost:4000",
            "--http-allow-origin",
            "http://127.0.0.1:*",
        ],
        Some(TOKEN),
    );
    for (origin, expected) in [
        ("https://app.example.com", 200),
        ("https://app.example.com:443", 200),
        ("https://app.example.com:9999", 403),
        ("https://app.example.com:8443", 403),
        ("http://app.example.com", 403),
        ("http://localhost:4000", 200),
        ("http://localhost:3000", 403),
        ("http://localhost", 403),
        ("http://127.0.0.1:5173", 200),
    ] {
        let (status, text) = served.initialize(&[("Origin", origin)]);
        assert_eq!(status, expected, "Origin {origin}: {text}");
    }
    // The other routes judge the same way.
    let (status, text) = served.request(
        "GET",
        "/healthz/live",
        &[("Origin", "https://app.example.com:9999")],
        "",
    );
    assert_eq!(status, 403, "{text}");
    let (status, text) = served.request(
        "GET",
        "/healthz/live",
        &[("Origin", "https://app.example.com")],
        "",
    );
    assert_eq!(status, 200, "{text}");
}

#[test]
fn an_allow_origin_entry_that_is_not_an_origin_stops_startup_naming_it() {
    for entry in ["https://app.example.com/app", "ftp://files.example.com"] {
        // Bounded: a serve that takes the entry starts and would never exit by itself.
        let mut serve = Command::new(bin())
            .args(["serve", "--http", "127.0.0.1:0", "--http-no-auth"])
            .args(["--http-allow-origin", entry, "--"])
            .arg(example("toy_server"))
            .env_remove("MCP_CODE_MODE_HTTP_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let code = exits_within(&mut serve, Duration::from_secs(60), "serve (a bad origin)");
        let mut stderr = String::new();
        let mut pipe = serve.stderr.take().expect("stderr");
        std::io::Read::read_to_string(&mut pipe, &mut stderr).expect("read stderr");
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(entry), "{stderr}");
    }
}

/// The `Host` must name an allowed host and nothing else (README "Origin and Host"): a
/// `Host` with userinfo (`evil.com@127.0.0.1`, which reads as host `127.0.0.1`) gets `400`,
/// and an absolute-form target's authority, which replaces `Host` (RFC 9112 section 3.2.2),
/// is checked as the `Host` is; both passed before.
#[test]
fn a_host_with_userinfo_or_a_foreign_absolute_form_target_is_refused() {
    let served = Served::start(&[], Some(TOKEN));
    let port = served.addr().rsplit(':').next().unwrap().to_owned();
    let with_userinfo = format!("evil.com@127.0.0.1:{port}");
    let (status, text) = served.initialize(&[("Host", with_userinfo.as_str())]);
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("userinfo"), "{text}");
    let (status, text) = served.request("GET", "/healthz/live", &[("Host", &with_userinfo)], "");
    assert_eq!(status, 400, "{text}");
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", bearer.as_str()),
    ];
    let (status, text) = served.request("POST", "http://evil.com/mcp", &headers, INITIALIZE);
    assert_eq!(status, 403, "{text}");
    let target = format!("http://user@127.0.0.1:{port}/mcp");
    let (status, text) = served.request("POST", &target, &headers, INITIALIZE);
    assert_eq!(status, 400, "{text}");
    let (status, text) = served.request("GET", "http://evil.com/healthz/live", &[], "");
    assert_eq!(status, 403, "{text}");
    // An absolute-form target naming this server is served as any request is.
    let target = format!("http://127.0.0.1:{port}/mcp");
    let (status, text) = served.request("POST", &target, &headers, INITIALIZE);
    assert_eq!(status, 200, "{text}");
    let metrics = served.metrics();
    assert_eq!(refusals(&metrics, "host"), Some(5.0), "{metrics}");
}
