//! Features beyond the main job: private data (the taint rule), discovery, tool names and
//! schemas, and several servers behind one sandbox.
//!
//! Index:
//! - private data: after a private call only private tools work, on every later run too, and
//!   in every later cell of a library's held sandbox (a fresh one starts untainted);
//! - discovery and catalog: descriptions cut, discovery answered by the host, schemas too deep
//!   or hostile left out or bounded, a held-back server validated by its schemas;
//! - several servers: a config file, their environments stay on the host, name clashes and
//!   config errors stop startup, one failing entry closes the others;
//! - labels (`--allow`, `--approve`, `--private`) that name no tool stop startup with the
//!   reasons that fit their own flag.
//!
//! Tests that run code use both backends; startup checks need no sandbox.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use mcp_code_mode::bridge::{Bridge, ServerEntry};
use mcp_code_mode::run::HeldSandbox;

use super::common::{bin, exec_wrapping, python_client, require, toy, venv_python};
use super::common::{native_client_ready, serve_command};
use super::runner_edge_cases::{calls_seen, journalled_toy, library_backend};

fn run(backend: &str, code: &str, args: &[&str], server: Vec<String>) -> super::common::Exec {
    exec_wrapping(backend, code, args, server)
}

/// Write a config file for this test and return its path.
fn config(name: &str, body: &str) -> String {
    let dir = std::env::temp_dir().join(format!("mcp-code-mode-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

fn toy_json() -> String {
    serde_json::to_string(&toy()[0]).unwrap()
}

crate::on_both_backends!(
    only_private_tools_after_a_private_call,
    a_private_read_in_one_cell_refuses_public_calls_in_later_cells,
    a_refused_private_call_does_not_taint,
    a_failed_private_call_still_taints,
    private_on_one_server_refuses_another,
    long_descriptions_are_cut,
    discovery_never_reaches_the_server,
    a_schema_too_deep_to_check_is_left_out_not_fatal,
    hostile_schemas_still_render_bounded,
    config_serves_two_servers_and_their_env_stays_on_the_host,
    a_held_back_style_server_validates_exactly_as_its_schemas_say,
);

fn only_private_tools_after_a_private_call(backend: &str) {
    let code = "print(await secret({}))\ntry:\n    await add({'a': 1, 'b': 2})\nexcept ToolError as e:\n    print('refused:', 'private' in str(e))\nprint(await secret({}))";
    let r = run(backend, code, &["--private", "secret"], toy());
    assert_eq!(r.printed(), "s3cr3t\nrefused: True\ns3cr3t\n", "{r:?}");
}

/// The library's [`HeldSandbox`] keeps variables across cells, so a private tool's answer
/// read in one cell could go out in a later one: the cells share the sandbox's taint. A
/// fresh held sandbox starts untainted, and one started in the first one's session shares it.
fn a_private_read_in_one_cell_refuses_public_calls_in_later_cells(backend: &str) {
    const REFUSED: &str = "refused: echo refused: a private tool was called earlier in this session, so only private tools can be called until the session ends\n";
    let journal = std::env::temp_dir().join(format!(
        "mcp-code-mode-held-taint-{backend}-{}.journal",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&journal);
    let sandboxes = library_backend(backend);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let server = journalled_toy(&journal);
        let entry = ServerEntry::stdio("toy", server[0].clone(), server[1..].to_vec())
            .private(["secret"]);
        let bridge = Arc::new(Bridge::open(vec![entry], false).await.expect("the toy"));
        let cell = async |held: &mut HeldSandbox, code: &str| {
            let r = held
                .cell(code, 10, Duration::from_secs(30))
                .await
                .expect("the sandbox started");
            assert!(r.result.succeeded(), "{r:?}");
            r.result.stdout
        };
        let leak = "try:\n    print(await echo({'text': s}))\nexcept ToolError as e:\n    print('refused:', e)";
        let mut held = HeldSandbox::start(bridge.clone(), sandboxes.as_ref())
            .await
            .expect("a sandbox");
        assert!(!held.taint().is_set());
        assert_eq!(cell(&mut held, "s = await secret({})\nprint(s)").await, "s3cr3t\n");
        assert_eq!(cell(&mut held, leak).await, REFUSED);
        assert!(held.taint().is_set());
        // Private tools still answer in the later cell.
        assert_eq!(cell(&mut held, "print(await secret({}))").await, "s3cr3t\n");

        let mut joined =
            HeldSandbox::start_in_session(bridge.clone(), sandboxes.as_ref(), held.taint())
                .await
                .expect("a sandbox");
        assert_eq!(cell(&mut joined, &format!("s = 'x'\n{leak}")).await, REFUSED);
        joined.close().await;
        held.close().await;

        let mut fresh = HeldSandbox::start(bridge.clone(), sandboxes.as_ref())
            .await
            .expect("a sandbox");
        assert!(!fresh.taint().is_set());
        assert_eq!(cell(&mut fresh, &format!("s = 'fresh'\n{leak}")).await, "fresh\n");
        fresh.close().await;
        bridge.close().await;
    });
    assert_eq!(
        calls_seen(&journal),
        [
            "call secret {}",
            "call secret {}",
            r#"call echo {"text":"fresh"}"#
        ],
        "no refused echo reached the server"
    );
    let _ = std::fs::remove_file(&journal);
}

fn a_refused_private_call_does_not_taint(backend: &str) {
    let code = "try:\n    await echo({'nope': 1})\nexcept ToolError:\n    print('refused')\nprint(await add({'a': 1, 'b': 2}))";
    let r = run(backend, code, &["--private", "echo"], toy());
    assert_eq!(r.printed(), "refused\n{\"sum\": 3}\n", "{r:?}");
}

fn a_failed_private_call_still_taints(backend: &str) {
    let code = "try:\n    await fail({})\nexcept ToolError as e:\n    print(e)\ntry:\n    await add({'a': 1, 'b': 2})\nexcept ToolError as e:\n    print('refused')";
    let r = run(backend, code, &["--private", "fail"], toy());
    assert_eq!(r.printed(), "boom\nrefused\n", "{r:?}");
}

fn private_on_one_server_refuses_another(backend: &str) {
    let path = config(
        &format!("private-{backend}"),
        &format!(
            r#"{{"mcpServers": {{"notes": {{"command": {t}, "private": true}}, "tracker": {{"command": {t}}}}}}}"#,
            t = toy_json()
        ),
    );
    let code = "print(await notes__secret({}))\ntry:\n    await tracker__add({'a': 1, 'b': 2})\nexcept ToolError as e:\n    print('refused:', 'private' in str(e))\nprint(await notes__add({'a': 1, 'b': 2}))";
    let r = run(backend, code, &["--config", &path], vec![]);
    assert_eq!(
        r.printed(),
        "s3cr3t\nrefused: True\n{\"sum\": 3}\n",
        "{r:?}"
    );
}

fn long_descriptions_are_cut(backend: &str) {
    let r = run(
        backend,
        "print(len(TOOLS['long_doc'].encode()) < 2048 + 200, TOOLS['long_doc'].count('A very long description.'))",
        &[],
        toy(),
    );
    // 2,048 bytes hold 81 whole repeats of the 25-byte sentence (5,000 characters were sent).
    assert_eq!(r.printed(), "True 81\n", "{r:?}");
}

fn discovery_never_reaches_the_server(backend: &str) {
    let code = "s = search_tools('add integers')\nprint(s.splitlines()[0])\nx = TOOLS['echo']\nprint(search_tools('zzzz') == '')\nprint(await calls({}))";
    let r = run(backend, code, &["--max-calls", "1"], toy());
    assert_eq!(
        r.printed(),
        "add(a, b): Add two integers.\nTrue\n1\n",
        "{r:?}"
    );
}

fn a_schema_too_deep_to_check_is_left_out_not_fatal(backend: &str) {
    let mut server = toy();
    server.push("--hostile".into());
    let r = run(
        backend,
        "print('too_deep' in TOOLS, 'get_weather' in TOOLS)\nprint(await add({'a': 2, 'b': 2}))",
        &[],
        server,
    );
    assert_eq!(r.printed(), "False True\n{\"sum\": 4}\n", "{r:?}");
}

fn hostile_schemas_still_render_bounded(backend: &str) {
    let mut server = toy();
    server.push("--hostile".into());
    let code = "s = TOOLS['get_weather']\nprint(len(s) < 3000)\nprint('\"from\"?: str' in s, '\"cik-A\"?: int' in s, '\"1st\"?: bool' in s)\nprint(('\"' + 'n' * 64 + '\"?: str') in s, 'n' * 65 not in s)\nprint('list[list[list[list[list[Any]]]]]' in s)\nprint('print_' in TOOLS, 'print' not in TOOLS)";
    let r = run(backend, code, &[], server);
    assert_eq!(
        r.printed(),
        "True\nTrue True True\nTrue True\nTrue\nTrue True\n",
        "{r:?}"
    );
}

fn config_serves_two_servers_and_their_env_stays_on_the_host(backend: &str) {
    let path = config(
        &format!("env-{backend}"),
        &format!(
            r#"{{"mcpServers": {{"a": {{"command": {t}, "env": {{"ONLY_FOR_A": "a-value-${{HOME}}"}}}}, "b": {{"command": {t}, "type": "stdio"}}}}}}"#,
            t = toy_json()
        ),
    );
    let code = "import os\nprint(await a__getenv({'name': 'ONLY_FOR_A'}))\nprint(repr(await b__getenv({'name': 'ONLY_FOR_A'})))\nprint('ONLY_FOR_A' in os.environ)\nprint(json := await b__add({'a': 1, 'b': 1}))";
    let r = run(backend, code, &["--config", &path], vec![]);
    // `${HOME}` is expanded from serve's own environment (this test's).
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        r.printed(),
        format!("a-value-{home}\n''\nFalse\n{{\"sum\": 2}}\n"),
        "{r:?}"
    );
}

fn a_held_back_style_server_validates_exactly_as_its_schemas_say(backend: &str) {
    let mut server = toy();
    server.push("--hostile".into());
    let code = "for args in ({'point': {'x': 1}}, {'point': {'x': 'no'}}, {'point': {}}, {}, {'point': {'x': 1}, 'extra': 1}):\n    try:\n        await refs(args)\n        print('ok')\n    except ToolError:\n        print('refused')";
    let r = run(backend, code, &[], server);
    assert_eq!(
        r.printed(),
        "ok\nrefused\nrefused\nrefused\nrefused\n",
        "{r:?}"
    );
}

/// Run `mcp-code-mode exec` expecting a startup failure; its stderr.
fn startup_error(args: &[&str]) -> String {
    let out = Command::new(bin())
        .arg("exec")
        .arg("--code")
        .arg("print(1)")
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn labels_must_name_kept_tools() {
    let mut args = vec!["--private", "nope", "--"];
    let t = toy();
    args.push(&t[0]);
    let e = startup_error(&args);
    assert!(e.contains("private label \"nope\""), "{e}");
    let e = startup_error(&["--allow", "add", "--private", "echo", "--", &t[0]]);
    assert!(e.contains("private label \"echo\""), "{e}");
}

#[test]
fn a_label_that_names_no_tool_gets_the_reasons_of_its_own_flag() {
    let t = toy();
    let e = startup_error(&["--allow", "nosuch", "--", &t[0]]);
    assert!(
        e.contains("allowlist entry \"nosuch\"") && e.contains("names no tool the server lists"),
        "{e}"
    );
    assert!(!e.contains("not on the allowlist"), "{e}");
    let e = startup_error(&["--approve", "ad", "--", &t[0]]);
    assert!(
        e.contains("approval entry \"ad\"")
            && e.contains("names no tool the server lists")
            && e.contains("did you mean \"add\"?"),
        "{e}"
    );
    // A private label may not name a tool the allowlist leaves out, and says so.
    let e = startup_error(&["--allow", "add", "--private", "echo", "--", &t[0]]);
    assert!(
        e.contains("a tool the allowlist or disabledTools leaves out"),
        "{e}"
    );
}

#[test]
fn config_errors_name_the_entry_and_key() {
    let path = config(
        "bad-url",
        r#"{"mcpServers": {"web": {"url": "ftp://127.0.0.1:9/mcp"}}}"#,
    );
    let e = startup_error(&["--config", &path]);
    assert!(e.contains("mcpServers.web") && e.contains("\"url\""), "{e}");
    let path = config(
        "bad-key",
        &format!(
            r#"{{"mcpServers": {{"s": {{"command": {}, "args": "--only add"}}}}}}"#,
            toy_json()
        ),
    );
    let e = startup_error(&["--config", &path]);
    assert!(e.contains("mcpServers.s") && e.contains("\"args\""), "{e}");
    let path = config(
        "unset",
        &format!(
            r#"{{"servers": {{"s": {{"command": {}, "env": {{"T": "${{MCP_CODE_MODE_UNSET_X7}}"}}}}}}}}"#,
            toy_json()
        ),
    );
    let e = startup_error(&["--config", &path]);
    assert!(
        e.contains("servers.s") && e.contains("MCP_CODE_MODE_UNSET_X7 is not set"),
        "{e}"
    );
}

#[test]
fn server_names_must_be_unique_words() {
    let t = toy_json();
    for (body, want) in [
        (
            format!(r#"{{"mcpServers": {{"a": {{"command": {t}}}, "a": {{"command": {t}}}}}}}"#),
            "appears twice",
        ),
        (
            format!(r#"{{"mcpServers": {{"": {{"command": {t}}}}}}}"#),
            "empty",
        ),
        (
            format!(r#"{{"mcpServers": {{"a b": {{"command": {t}}}}}}}"#),
            "letters, digits",
        ),
    ] {
        let path = config("names", &body);
        let e = startup_error(&["--config", &path]);
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn config_excludes_single_server_options() {
    let path = config(
        "excl",
        &format!(
            r#"{{"mcpServers": {{"a": {{"command": {}}}}}}}"#,
            toy_json()
        ),
    );
    for extra in [
        vec!["--allow", "add"],
        vec!["--private", "add"],
        vec!["--env", "HOME"],
        vec!["--", "true"],
    ] {
        let mut args = vec!["--config", path.as_str()];
        args.extend(extra);
        let e = startup_error(&args);
        assert!(e.contains("--config cannot be combined"), "{e}");
    }
}

#[test]
fn a_name_clash_across_servers_stops_startup() {
    let t = toy_json();
    let path = config(
        "clash",
        &format!(
            r#"{{"mcpServers": {{"a-b": {{"command": {t}, "allow": ["add"]}}, "a_b": {{"command": {t}, "allow": ["add"]}}}}}}"#
        ),
    );
    let e = startup_error(&["--config", &path]);
    assert!(
        e.contains("a-b:add") && e.contains("a_b:add") && e.contains("a_b__add"),
        "{e}"
    );
}

#[test]
fn a_clash_through_the_separator_stops_startup() {
    let t = toy_json();
    let path = config(
        "sep",
        &format!(
            r#"{{"mcpServers": {{"a": {{"command": {t}, "args": ["--name-prefix", "b__", "--only", "add"]}}, "a__b": {{"command": {t}, "args": ["--only", "add"]}}}}}}"#
        ),
    );
    let e = startup_error(&["--config", &path]);
    assert!(e.contains("a__b__add"), "{e}");
}

#[test]
fn with_strict_a_failing_entry_closes_the_others() {
    let t = toy_json();
    let marker = format!("marker{}_", std::process::id());
    let path = config(
        "failing",
        &format!(
            r#"{{"mcpServers": {{"good": {{"command": {t}, "args": ["--name-prefix", "{marker}"]}}, "bad": {{"command": "/nonexistent/mcp-server"}}}}}}"#
        ),
    );
    let e = startup_error(&["--strict", "--config", &path]);
    assert!(
        e.contains("bad") && e.contains("/nonexistent/mcp-server"),
        "{e}"
    );
    let left = Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "the good server is still running: {left:?}"
    );
}

#[test]
fn the_description_falls_back_to_summaries() {
    if !require(
        venv_python().is_some(),
        "could not install the Python MCP SDK from PyPI",
    ) {
        return;
    }
    let mut serve = serve_command(&[]);
    serve.extend(["--many".into(), "100".into()]);
    let out = python_client(&[], &serve);
    let d = out["description"].as_str().unwrap();
    assert!(d.contains("add(a, b): Add two integers."), "{d}");
    assert!(d.contains(" of 110 tools shown in one line each; search_tools(query) finds the rest and TOOLS[name] shows a stub."), "{d}");
    assert!(!d.contains("async def"), "{d}");
}

#[test]
fn after_a_private_call_only_private_tools_work_in_any_later_run() {
    if !native_client_ready() {
        return;
    }
    let serve = serve_command(&["--private", "secret"]);
    let out = python_client(
        &[
            "print(await add({'a': 1, 'b': 1}))",
            "print(await secret({}))",
            "try:\n    await add({'a': 1, 'b': 1})\nexcept ToolError as e:\n    print('refused')",
        ],
        &serve,
    );
    let printed: Vec<&str> = (0..3)
        .map(|i| {
            out["calls"][i]["structured"]["stdout"]
                .as_str()
                .unwrap_or("?")
        })
        .collect();
    assert_eq!(
        printed,
        ["{\"sum\": 2}\n", "s3cr3t\n", "refused\n"],
        "{out}"
    );
}

#[tokio::test]
async fn the_taint_lasts_for_the_session_across_runs_and_restarts() {
    use mcp_code_mode::bridge::{Bridge, CallBudget, ServerEntry, Taint};
    let entry = ServerEntry::stdio("server", toy()[0].clone(), Vec::<String>::new())
        .private(["secret", "exit"]);
    let bridge = Bridge::open(vec![entry], false)
        .await
        .expect("open the toy server");
    let session = Taint::default();
    let first_run = CallBudget::in_session(10, session.clone());
    assert_eq!(
        bridge
            .call(&first_run, "secret", &serde_json::json!({}))
            .await
            .unwrap(),
        "s3cr3t"
    );
    // The server dies; the next private call restarts it, and the rule still holds.
    assert!(
        bridge
            .call(&first_run, "exit", &serde_json::json!({}))
            .await
            .is_err()
    );
    tokio::time::sleep(std::time::Duration::from_millis(2200)).await;
    let later_run = CallBudget::in_session(10, session.clone());
    assert_eq!(
        bridge
            .call(&later_run, "secret", &serde_json::json!({}))
            .await
            .unwrap(),
        "s3cr3t"
    );
    let refused = bridge
        .call(&later_run, "add", &serde_json::json!({"a": 1, "b": 1}))
        .await
        .unwrap_err();
    assert!(
        refused
            .message()
            .contains("private tool was called earlier"),
        "{refused:?}"
    );
    assert!(session.is_set());
    // Another session's run is not refused: the taint is the session's, not the bridge's.
    let other_session = CallBudget::new(10);
    assert!(
        bridge
            .call(&other_session, "add", &serde_json::json!({"a": 1, "b": 1}))
            .await
            .is_ok()
    );
    bridge.close().await;
}
