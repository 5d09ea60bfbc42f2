use std::path::{Path, PathBuf};

use super::*;
use crate::bridge::catalog::PrivateLabels;
use crate::bridge::upstream::RemoteTransport;

fn env(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/home/ada".into()),
        "PATH" => Some("/usr/local/bin:/usr/bin".into()),
        "API_TOKEN" => Some("t0k3n".into()),
        _ => None,
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config")
}

fn parse_with(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    parse(
        text,
        &Context {
            lookup,
            base: fixtures(),
        },
    )
}

fn fixture(name: &str) -> Config {
    let text = std::fs::read_to_string(fixtures().join(name)).unwrap();
    parse_with(&text, &env).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn server<'a>(config: &'a Config, name: &str) -> &'a ServerEntry {
    config
        .servers
        .iter()
        .find(|s| s.spec.name == name)
        .unwrap_or_else(|| panic!("no server {name}"))
}

#[test]
fn a_claude_desktop_config_parses_with_its_own_settings_ignored() {
    let c = fixture("claude-desktop.json");
    let fs = server(&c, "filesystem");
    assert_eq!(fs.spec.command, "npx");
    assert_eq!(fs.spec.args[2], "/home/ada/Desktop");
    assert_eq!(fs.spec.env, vec![("NODE_ENV".into(), "production".into())]);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn a_claude_code_config_expands_variables_everywhere() {
    let c = fixture("claude-code.json");
    let tracker = server(&c, "tracker");
    assert_eq!(tracker.spec.command, "/opt/tools/tracker-mcp");
    assert_eq!(tracker.spec.args, vec!["--token", "t0k3n"]);
    assert!(
        tracker
            .spec
            .env
            .contains(&("PATH".into(), "/usr/local/bin:/usr/bin".into()))
    );
    let docs = server(&c, "docs").spec.remote.as_ref().unwrap();
    assert_eq!(docs.url, "https://docs.example.com/mcp");
    assert_eq!(docs.transport, RemoteTransport::StreamableHttp);
    assert_eq!(
        docs.headers,
        vec![("Authorization".into(), "Bearer t0k3n".into())]
    );
    assert!(
        c.warnings.is_empty(),
        "timeout is a known key: {:?}",
        c.warnings
    );
    // Claude Code writes milliseconds.
    assert_eq!(
        server(&c, "tracker").call_timeout,
        Some(std::time::Duration::from_secs(30))
    );
}

#[test]
fn timeout_is_seconds_below_a_thousand_and_milliseconds_from_there() {
    let c = fixture("cline.json");
    assert_eq!(
        server(&c, "fetch").call_timeout,
        Some(std::time::Duration::from_secs(60))
    );
    let parsed = |timeout: &str| {
        let text =
            format!(r#"{{"mcpServers": {{"s": {{"command": "x", "timeout": {timeout}}}}}}}"#);
        parse_with(&text, &env).map(|c| c.servers[0].call_timeout)
    };
    assert_eq!(
        parsed("2.5").unwrap(),
        Some(std::time::Duration::from_millis(2500))
    );
    assert_eq!(
        parsed("999").unwrap(),
        Some(std::time::Duration::from_secs(999))
    );
    assert_eq!(
        parsed("1500").unwrap(),
        Some(std::time::Duration::from_millis(1500))
    );
    for bad in ["0", "-1", "\"30\"", "true", "3600001"] {
        let error = parsed(bad).unwrap_err().to_string();
        assert!(
            error.contains("\"timeout\" must be a number of seconds"),
            "{bad}: {error}"
        );
    }
}

#[test]
fn start_up_timeout_is_read_like_timeout_and_is_unset_without_the_key() {
    let parsed = |entry: &str| {
        let text = format!(r#"{{"mcpServers": {{"s": {{"command": "x"{entry}}}}}}}"#);
        parse_with(&text, &env).map(|c| c.servers[0].spec.startup_timeout)
    };
    assert_eq!(parsed("").unwrap(), None);
    assert_eq!(
        parsed(r#", "startupTimeout": 5"#).unwrap(),
        Some(std::time::Duration::from_secs(5))
    );
    assert_eq!(
        parsed(r#", "startupTimeout": 1500"#).unwrap(),
        Some(std::time::Duration::from_millis(1500))
    );
    let error = parsed(r#", "startupTimeout": 0"#).unwrap_err().to_string();
    assert!(
        error.contains("\"startupTimeout\" must be a number of seconds"),
        "{error}"
    );
}

#[test]
fn a_cursor_config_reads_its_env_file_and_a_url_without_type() {
    let c = fixture("cursor.json");
    let memory = server(&c, "memory");
    assert_eq!(
        memory.spec.env,
        vec![
            ("MEMORY_FILE_PATH".into(), "/tmp/memory.json".into()),
            ("API_TOKEN".into(), "from-the-file".into()),
        ]
    );
    let remote = server(&c, "remote").spec.remote.as_ref().unwrap();
    assert_eq!(remote.url, "https://mcp.example.com/mcp");
    assert_eq!(remote.headers[0].1, "Bearer t0k3n");
}

#[test]
fn a_vscode_config_uses_servers_and_cwd() {
    let c = fixture("vscode.json");
    assert_eq!(c.servers.len(), 2);
    let time = server(&c, "time");
    assert_eq!(
        time.spec.cwd.as_deref(),
        Some(fixtures().join("servers").as_path())
    );
    assert!(server(&c, "github").spec.remote.is_some());
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn a_cline_config_skips_disabled_entries_and_accepts_its_keys() {
    let c = fixture("cline.json");
    let names: Vec<&str> = c.servers.iter().map(|s| s.spec.name.as_str()).collect();
    assert_eq!(names, vec!["fetch", "hosted"]);
    assert_eq!(
        server(&c, "hosted").spec.remote.as_ref().unwrap().transport,
        RemoteTransport::StreamableHttp
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn a_windsurf_config_uses_server_url_and_disabled_tools() {
    let c = fixture("windsurf.json");
    assert_eq!(server(&c, "git").selection.deny, vec!["git_reset"]);
    let linear = server(&c, "linear").spec.remote.as_ref().unwrap();
    assert_eq!(linear.url, "https://mcp.example.com/linear");
    assert_eq!(
        server(&c, "legacy").spec.remote.as_ref().unwrap().transport,
        RemoteTransport::Sse
    );
}

#[test]
fn an_unset_variable_stops_startup_naming_the_entry_key_and_variable() {
    let no_token = |name: &str| if name == "API_TOKEN" { None } else { env(name) };
    let text = std::fs::read_to_string(fixtures().join("claude-code.json")).unwrap();
    let e = parse_with(&text, &no_token).unwrap_err().to_string();
    assert!(e.contains("mcpServers.tracker"), "{e}");
    assert!(e.contains("\"args\""), "{e}");
    assert!(e.contains("API_TOKEN is not set"), "{e}");
    let e = parse_with(
        r#"{"servers": {"gh": {"url": "https://x/mcp", "headers": {"Authorization": "Bearer ${env:GH}"}}}}"#,
        &env,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("servers.gh") && e.contains("headers.Authorization") && e.contains("GH"),
        "{e}"
    );
}

#[test]
fn env_is_merged_over_the_env_file() {
    let c = parse_with(
        r#"{"mcpServers": {"m": {"command": "x", "envFile": "cursor.env", "env": {"API_TOKEN": "mine"}}}}"#,
        &env,
    )
    .unwrap();
    let env = &c.servers[0].spec.env;
    assert_eq!(env.len(), 2);
    assert_eq!(env[1], ("API_TOKEN".into(), "mine".into()));
}

#[test]
fn unknown_keys_warn_and_unsupported_auth_says_so() {
    let c = parse_with(
        r#"{"mcpServers": {"s": {"command": "x", "colour": "red", "oauth": {"clientId": "a"}, "autoApprove": []}}}"#,
        &env,
    )
    .unwrap();
    assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
    assert!(c.warnings[0].contains("unknown key \"colour\""));
    assert!(c.warnings[1].contains("OAuth"));
}

#[test]
fn a_config_with_allow_private_type_and_max_result_bytes_parses_into_its_entries() {
    let entries = parse_config(
        r#"{"mcpServers": {
            "notes":   {"command": "uv", "args": ["run", "notes-server"], "allow": ["search"], "private": true},
            "tracker": {"command": "tracker-mcp", "allow": ["create_issue", "find_issue"], "private": ["create_issue"], "type": "stdio", "maxResultBytes": 200000}
        }}"#,
    )
    .unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].spec.name, "notes");
    assert_eq!(entries[0].selection.private, PrivateLabels::All);
    assert_eq!(
        entries[1].selection.private,
        PrivateLabels::Some(vec!["create_issue".into()])
    );
    assert_eq!(entries[1].max_result_bytes, Some(200_000));
}

#[test]
fn config_errors_name_the_entry_and_key() {
    for (text, want) in [
        (
            r#"{"mcpServers": {"web": {"url": "ftp://x"}}}"#,
            "mcpServers.web: \"url\" must be an http",
        ),
        (
            r#"{"mcpServers": {"web": {"url": "http://x", "command": "y", "type": "http"}}}"#,
            "mcpServers.web: \"command\" belongs to a local server",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "type": "websocket"}}}"#,
            "mcpServers.s: type",
        ),
        (
            r#"{"mcpServers": {"s": {"args": []}}}"#,
            "mcpServers.s: \"command\" is required",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "args": "a b"}}}"#,
            "mcpServers.s: \"args\"",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "private": "yes"}}}"#,
            "mcpServers.s: \"private\"",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "maxResultBytes": -1}}}"#,
            "mcpServers.s: \"maxResultBytes\"",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "maxResultBytes": 16777217}}}"#,
            "from 1 to 16777216",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "disabled": "yes"}}}"#,
            "mcpServers.s: \"disabled\"",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "envFile": "missing.env"}}}"#,
            "mcpServers.s: \"envFile\"",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "${input:k}"}}}"#,
            "VS Code input",
        ),
        (
            r#"{"mcpServers": {"s": {"command": "x", "disabled": true}}}"#,
            "disabled",
        ),
        (r#"{"mcpServers": {}, "servers": {}}"#, "keep one"),
        (r#"{"other": {}}"#, "no \"mcpServers\""),
        (r#"[]"#, "JSON object"),
    ] {
        let e = parse_with(text, &env).unwrap_err().to_string();
        assert!(e.contains(want), "{e} should contain {want}");
    }
}

#[test]
fn server_names_must_be_unique_words() {
    let e = parse_config(r#"{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#)
        .unwrap_err();
    assert_eq!(e, ConfigError::DuplicateServer("a".into()));
    let e =
        parse_config(r#"{"servers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#).unwrap_err();
    assert_eq!(e, ConfigError::DuplicateServer("a".into()));
    assert!(
        parse_config(r#"{"mcpServers": {"": {"command": "x"}}}"#)
            .unwrap_err()
            .to_string()
            .contains("empty")
    );
    assert!(
        parse_config(r#"{"mcpServers": {"a b": {"command": "x"}}}"#)
            .unwrap_err()
            .to_string()
            .contains("letters, digits")
    );
    assert!(parse_config(r#"{"mcpServers": {"a.b": {"command": "x"}}}"#).is_err());
    assert!(parse_config(r#"{"mcpServers": {"ok_name-2": {"command": "x"}}}"#).is_ok());
}

#[test]
fn a_bad_env_file_line_stops_startup_naming_its_number_but_not_its_text() {
    let e = parse_with(
        r#"{"mcpServers": {"m": {"command": "x", "envFile": "bad_line.env"}}}"#,
        &env,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("mcpServers.m: \"envFile\"")
            && e.contains("bad_line.env: line 5 cannot be read"),
        "{e}"
    );
    assert!(
        !e.contains("SECRET_TOKEN"),
        "the line's text is echoed: {e}"
    );
}
