//! Starting wrapped servers: servers start at once, one that fails leaves the
//! others working and is retried in the background by later runs (which never wait for it), `--strict` keeps all or nothing, a server
//! without tools starts with none, `list_changed` is read again (a server sending it in a
//! loop at most once a second), and `serve`/`exec` take the
//! server command without `--`.

use std::path::Path;
use std::time::Duration;

use mcp_code_mode::bridge::{
    Bridge, CallBudget, CallError, OpenOptions, RETRY_INTERVAL, RemoteSpec, RemoteTransport,
    ServerSpec,
};
use mcp_code_mode::description::describe;
use serde_json::json;

use super::common::{
    bin, example, exec, last_json_line, native_available, native_client_ready, require,
    spawn_serve, venv_python,
};
use super::misbehaving_servers::{Scenario, entry};
use super::relisting::{LIST_CHANGED, open_and_call, relisted};

fn named(mut spec: ServerSpec, name: &str) -> ServerSpec {
    spec.name = name.into();
    spec
}

fn missing(name: &str) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        command: "/nonexistent/mcp-server-x7".into(),
        ..ServerSpec::default()
    }
}

/// A server that counts its starts in `dir/attempts` and fails to start until `dir/ok`
/// exists; then it is the scripted server on `scenario`.
fn flaky(name: &str, dir: &Path, scenario: &Scenario) -> ServerSpec {
    let good = scenario.spec();
    let script = format!(
        "echo start >> {dir}/attempts; [ -f {dir}/ok ] || exit 3; exec {cmd} {arg}",
        dir = dir.display(),
        cmd = good.command,
        arg = good.args[0],
    );
    ServerSpec {
        name: name.into(),
        command: "sh".into(),
        args: vec!["-c".into(), script],
        ..ServerSpec::default()
    }
}

fn attempts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("attempts"))
        .unwrap_or_default()
        .lines()
        .count()
}

fn prefixed() -> OpenOptions {
    OpenOptions {
        prefixed: true,
        strict: false,
    }
}

/// `tool` answers a call with `{}`, not an error.
async fn assert_answers(bridge: &Bridge, tool: &str) {
    let out = bridge.call(&CallBudget::new(5), tool, &json!({})).await;
    assert!(out.is_ok(), "{out:?}");
}

#[tokio::test]
async fn a_failed_server_among_good_ones_leaves_the_rest_working() {
    let env = Scenario::load("env");
    let entries = vec![entry(named(env.spec(), "good")), entry(missing("broken"))];
    let bridge = Bridge::open_with(entries, prefixed()).await.expect("opens");
    let catalog = bridge.catalog();
    assert!(catalog.get("good__env").is_some());
    let (name, why) = &catalog.unavailable()[0];
    assert_eq!(name, "broken");
    assert!(why.contains("was not found"), "{why}");
    let description = describe(&catalog, 90, 200, &bridge.call_timeouts());
    assert!(
        description.contains("server \"broken\": failed to start"),
        "{description}"
    );
    assert_answers(&bridge, "good__env").await;
    bridge.close().await;
}

#[tokio::test]
async fn servers_that_fail_at_start_are_described_in_plain_words_without_url_secrets() {
    // One closes its stdin at once (the initialize write fails with a broken pipe before
    // the process ends); one is a remote URL nothing listens on, with a key in its query
    // and a password in its userinfo.
    let env = Scenario::load("env");
    let deaf = ServerSpec {
        name: "deaf".into(),
        command: "sh".into(),
        args: vec!["-c".into(), "exec 0<&-; sleep 5".into()],
        ..ServerSpec::default()
    };
    let remote = ServerSpec {
        name: "remote".into(),
        remote: Some(RemoteSpec {
            url: "http://user:hunter2@127.0.0.1:1/mcp?api_key=SECRETKEY".into(),
            headers: Vec::new(),
            transport: RemoteTransport::StreamableHttp,
        }),
        ..ServerSpec::default()
    };
    let entries = vec![entry(named(env.spec(), "good")), entry(deaf), entry(remote)];
    let bridge = Bridge::open_with(entries, prefixed()).await.expect("opens");
    let catalog = bridge.catalog();
    let why = |name: &str| {
        let (_, why) = catalog
            .unavailable()
            .iter()
            .find(|(n, _)| n == name)
            .unwrap();
        why.clone()
    };
    assert!(
        why("deaf").contains("could not write to its stdin"),
        "{}",
        why("deaf")
    );
    assert!(
        why("remote").contains("could not connect to http://127.0.0.1:1/mcp"),
        "{}",
        why("remote")
    );
    // The description and /healthz show these texts: no Rust type names, no URL secrets.
    let description = describe(&catalog, 90, 200, &bridge.call_timeouts());
    for leak in ["::", "Transport [", "SECRETKEY", "hunter2", "api_key"] {
        assert!(!description.contains(leak), "{leak:?} in {description}");
    }
    bridge.close().await;
}

#[tokio::test]
async fn strict_keeps_all_or_nothing() {
    let env = Scenario::load("env");
    let entries = vec![entry(named(env.spec(), "good")), entry(missing("broken"))];
    let options = OpenOptions {
        prefixed: true,
        strict: true,
    };
    let Err(e) = Bridge::open_with(entries, options).await else {
        panic!("opened with a broken server under --strict");
    };
    assert!(e.to_string().contains("broken"), "{e}");
}

#[tokio::test]
async fn when_no_server_starts_startup_fails_with_the_reason() {
    let Err(e) = Bridge::open_with(vec![entry(missing("only"))], prefixed()).await else {
        panic!("opened with no server");
    };
    assert!(e.to_string().contains("was not found"), "{e}");
}

#[tokio::test]
async fn a_failed_server_is_retried_by_later_runs_at_most_every_few_seconds() {
    let env = Scenario::load("env");
    let dir = tempfile::tempdir().unwrap();
    let entries = vec![
        entry(named(env.spec(), "good")),
        entry(flaky("flaky", dir.path(), &env)),
    ];
    let bridge = Bridge::open_with(entries, prefixed()).await.expect("opens");
    let first = bridge.generation();
    assert_eq!(attempts(dir.path()), 1);
    assert!(bridge.catalog().get("flaky__env").is_none());
    // A run right away does not start it again.
    bridge.refresh().await;
    assert_eq!(attempts(dir.path()), 1, "retried before the interval");
    tokio::time::sleep(RETRY_INTERVAL).await;
    bridge.refresh().await;
    // The retry goes on in the background.
    let retried = async {
        while attempts(dir.path()) < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(10), retried)
            .await
            .is_ok(),
        "not retried after the interval"
    );
    assert!(bridge.catalog().get("flaky__env").is_none());
    // Once it can start, the next due retry brings its tools in, in a new catalog version.
    std::fs::write(dir.path().join("ok"), "").unwrap();
    tokio::time::sleep(RETRY_INTERVAL).await;
    let mut versions = bridge.watch_catalog();
    versions.borrow_and_update();
    bridge.refresh().await;
    let changed = tokio::time::timeout(Duration::from_secs(10), versions.changed()).await;
    assert!(
        matches!(changed, Ok(Ok(()))),
        "no new catalog after the retry"
    );
    assert_eq!(attempts(dir.path()), 3);
    let catalog = bridge.catalog();
    assert!(catalog.get("flaky__env").is_some(), "not in the catalog");
    assert!(catalog.unavailable().is_empty());
    assert!(bridge.generation() > first);
    assert_answers(&bridge, "flaky__env").await;
    bridge.close().await;
}

#[tokio::test]
async fn a_run_does_not_wait_for_the_retry_of_a_server_that_never_answers() {
    let env = Scenario::load("env");
    // It starts and never answers `initialize`: each try takes its whole startup timeout.
    let silent = ServerSpec {
        name: "silent".into(),
        command: "sleep".into(),
        args: vec!["1000".into()],
        startup_timeout: Some(Duration::from_secs(3)),
        ..ServerSpec::default()
    };
    let entries = vec![entry(named(env.spec(), "good")), entry(silent)];
    let bridge = Bridge::open_with(entries, prefixed()).await.expect("opens");
    assert!(bridge.catalog().get("silent__env").is_none());
    tokio::time::sleep(RETRY_INTERVAL).await;
    // The retry is due: the run's refresh starts it and goes on at once.
    let refreshed = tokio::time::timeout(Duration::from_secs(1), bridge.refresh()).await;
    assert!(refreshed.is_ok(), "the run waited for the retry");
    assert_answers(&bridge, "good__env").await;
    bridge.close().await;
}

#[tokio::test]
async fn a_server_without_tools_starts_with_zero_tools() {
    let resources_only = Scenario::load("no_tools");
    let env = Scenario::load("env");
    let entries = vec![
        entry(named(resources_only.spec(), "docs")),
        entry(named(env.spec(), "good")),
    ];
    let bridge = Bridge::open_with(entries, prefixed()).await.expect("opens");
    let catalog = bridge.catalog();
    assert!(
        catalog.unavailable().is_empty(),
        "{:?}",
        catalog.unavailable()
    );
    assert_eq!(catalog.tools().len(), 1);
    assert!(resources_only.received().contains("tools/list"));
    bridge.close().await;
    // Alone, too.
    let alone = Bridge::open(vec![entry(resources_only.spec())], false)
        .await
        .expect("a server without tools opens");
    assert!(alone.catalog().tools().is_empty());
    alone.close().await;
}

#[tokio::test]
async fn list_changed_is_read_again_and_the_next_run_sees_the_new_catalog() {
    let scenario = Scenario::load("list_changed");
    let (bridge, before) = open_and_call(&scenario, "change", "changed").await;
    assert_eq!(before.tools, ["change", "old_tool"]);
    // The notification arrives with the answer; the next run's refresh reads the list.
    relisted(&bridge).await;
    let catalog = bridge.catalog();
    assert!(catalog.get("old_tool").is_none());
    assert!(catalog.get("new_tool").is_some());
    assert!(bridge.generation() > before.generation);
    assert_eq!(
        bridge
            .call(&CallBudget::new(10), "new_tool", &json!({}))
            .await
            .unwrap(),
        "new"
    );
    bridge.close().await;
}

#[tokio::test]
async fn a_server_spamming_list_changed_is_read_again_rarely_and_the_next_run_sees_its_last_tools()
{
    // `spam` sends `list_changed` every 2 ms for about 3 s, each time with a new tool list,
    // then settles on `final_tool`.
    let tools = |name: &str| {
        json!([
            {"name": "spam", "inputSchema": {"type": "object"}},
            {"name": name, "inputSchema": {"type": "object"}}
        ])
    };
    let mut steps = Vec::new();
    for n in 0..1200 {
        steps.push(json!({"set_tools": tools(&format!("tool_{n}"))}));
        steps.push(json!({"raw": LIST_CHANGED}));
        steps.push(json!({"sleep_ms": 2}));
    }
    steps.push(json!({"set_tools": tools("final_tool")}));
    steps.push(json!({"raw": LIST_CHANGED}));
    steps.push(json!({"reply": {"content": [{"type": "text", "text": "spammed"}]}}));
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("received.log");
    let scenario = json!({
        "tools": tools("tool_start"),
        "log": log,
        "on": {
            "tools/call:spam": steps,
            "tools/call:final_tool": [{"reply": {"content": [{"type": "text", "text": "final"}]}}]
        }
    });
    let path = dir.path().join("spam.json");
    std::fs::write(&path, scenario.to_string()).expect("write the scenario");
    let spec = ServerSpec {
        name: "spam".into(),
        command: example("scripted_server").display().to_string(),
        args: vec![path.display().to_string()],
        ..ServerSpec::default()
    };
    let bridge = Bridge::open(vec![entry(spec)], false).await.expect("opens");
    let before = bridge.generation();
    let budget = CallBudget::new(10);
    let started = std::time::Instant::now();
    assert_eq!(
        bridge.call(&budget, "spam", &json!({})).await.unwrap(),
        "spammed"
    );
    let spam_seconds = started.elapsed().as_secs();
    tokio::time::sleep(Duration::from_millis(200)).await;
    bridge.refresh().await;
    let received = std::fs::read_to_string(&log).expect("read the log");
    let relists = received.matches("\"tools/list\"").count();
    // One read at the start, one per RELIST_INTERVAL (1 s) while it spammed, the refresh.
    assert!(
        relists <= spam_seconds as usize + 4,
        "{relists} tools/list in {spam_seconds} s of spam"
    );
    assert!(
        bridge.generation() - before <= spam_seconds + 3,
        "{} catalogs in {spam_seconds} s of spam",
        bridge.generation() - before
    );
    assert!(bridge.catalog().get("final_tool").is_some());
    assert_eq!(
        bridge
            .call(&budget, "final_tool", &json!({}))
            .await
            .unwrap(),
        "final"
    );
    bridge.close().await;
}

#[tokio::test]
async fn serve_answers_initialize_within_its_startup_timeout_when_a_wrapped_server_hangs() {
    use rmcp::ServiceExt;
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    let toy = super::common::toy();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("servers.json");
    let text = json!({"mcpServers": {
        "good": {"command": toy[0], "args": &toy[1..]},
        "hangs": {"command": "/bin/sleep", "args": ["1000"]},
    }});
    std::fs::write(&config, text.to_string()).expect("write the config");
    let config = config.display().to_string();
    let mut serve = spawn_serve([
        "serve",
        "--pool",
        "0",
        "--startup-timeout",
        "2",
        "--config",
        &config,
    ]);
    let pipes = (
        serve.stdout.take().expect("stdout"),
        serve.stdin.take().expect("stdin"),
    );
    let started = std::time::Instant::now();
    let client = tokio::time::timeout(Duration::from_secs(30), ().serve(pipes))
        .await
        .expect("initialize answered within 30 s, not after the default 60 s")
        .expect("initialize");
    let waited = started.elapsed();
    // 2 s of startup timeout, plus the toy server's start on a loaded machine.
    assert!(
        waited < Duration::from_secs(20),
        "initialize took {waited:?}"
    );
    let tools = client.list_all_tools().await.expect("tools/list");
    let description = tools
        .first()
        .and_then(|t| t.description.clone())
        .unwrap_or_default();
    assert!(description.contains("good__add"), "{description}");
    client.cancel().await.expect("close the client");
}

#[test]
fn an_env_option_naming_an_unset_variable_stops_startup_naming_it() {
    let out = std::process::Command::new(bin())
        .args([
            "exec",
            "--env",
            "MCP_CODE_MODE_TEST_NEVER_SET",
            "--code",
            "print(1)",
        ])
        .arg("--")
        .args(super::common::toy())
        .env_remove("MCP_CODE_MODE_TEST_NEVER_SET")
        .output()
        .expect("run exec");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("MCP_CODE_MODE_TEST_NEVER_SET is not set"),
        "{stderr}"
    );
}

#[test]
fn serve_tells_its_client_when_the_wrapped_tools_change() {
    if !native_client_ready() {
        return;
    }
    let scenario = Scenario::load("list_changed");
    let spec = scenario.spec();
    let mut serve = vec![
        bin().display().to_string(),
        "serve".to_owned(),
        "--pool".to_owned(),
        "0".to_owned(),
        "--".to_owned(),
    ];
    serve.push(spec.command);
    serve.extend(spec.args);
    let python = venv_python().expect("venv python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/list_changed.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg("print(await change({}))")
        .arg("--")
        .args(&serve)
        .output()
        .expect("run the python client");
    let seen = last_json_line(&out, "list_changed.py");
    assert_eq!(seen["list_changed_capability"], true, "{seen}");
    assert!(
        seen["text"].as_str().unwrap_or("").contains("changed"),
        "{seen}"
    );
    assert_eq!(seen["notified"], true, "{seen}");
    let (before, after) = (
        seen["before"].as_str().unwrap_or(""),
        seen["after"].as_str().unwrap_or(""),
    );
    assert!(
        before.contains("old_tool") && !before.contains("new_tool"),
        "{before}"
    );
    assert!(
        after.contains("new_tool") && !after.contains("old_tool"),
        "{after}"
    );
}

#[tokio::test]
async fn a_client_on_protocol_2026_07_28_hears_of_changed_tools_through_subscriptions_listen() {
    // Clients of protocol 2026-07-28 have no session to be told in: they ask with
    // `subscriptions/listen`, and serve sends `notifications/tools/list_changed` on that
    // subscription when a wrapped server's tools change (the run_python description lists
    // them).
    use rmcp::ClientServiceExt;
    use rmcp::model::{
        CallToolRequestParams, ProtocolVersion, ServerNotification, SubscriptionFilter,
    };
    if !native_client_ready() {
        return;
    }
    let scenario = Scenario::load("list_changed");
    let spec = scenario.spec();
    let mut serve = spawn_serve(
        ["serve", "--pool", "0", "--", &spec.command]
            .into_iter()
            .chain(spec.args.iter().map(String::as_str)),
    );
    let pipes = (
        serve.stdout.take().expect("stdout"),
        serve.stdin.take().expect("stdin"),
    );
    let client = ()
        .serve_with_lifecycle(
            pipes,
            rmcp::ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover on protocol 2026-07-28");
    let tools_changed = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = client
        .listen(tools_changed.clone())
        .await
        .expect("subscriptions/listen");
    assert_eq!(subscription.acknowledged(), &tools_changed);
    let description = |tools: Vec<rmcp::model::Tool>| {
        tools
            .first()
            .and_then(|t| t.description.clone())
            .unwrap_or_default()
            .to_string()
    };
    let before = description(client.list_all_tools().await.expect("tools/list"));
    assert!(before.contains("old_tool"), "{before}");
    let code = json!({"code": "print(await change({}))"});
    let call = CallToolRequestParams::new("run_python")
        .with_arguments(code.as_object().cloned().unwrap_or_default());
    client.call_tool(call).await.expect("run_python");
    let heard = tokio::time::timeout(Duration::from_secs(20), subscription.next())
        .await
        .expect("notified within 20 s")
        .expect("the subscription is readable")
        .expect("a notification, not the end of the subscription");
    assert!(
        matches!(heard, ServerNotification::ToolListChangedNotification(_)),
        "{heard:?}"
    );
    let after = description(client.list_all_tools().await.expect("tools/list"));
    assert!(
        after.contains("new_tool") && !after.contains("old_tool"),
        "{after}"
    );
    let _ = client.cancel().await;
}

#[test]
fn exec_takes_the_server_command_without_a_double_dash() {
    // The MCP Inspector CLI drops `--`: everything from the first positional argument on is
    // the server's command, its own options included.
    let out = std::process::Command::new(bin())
        .args(["exec", "--code", "print(1)", "--max-calls", "3"])
        .arg(example("toy_server"))
        .args(["--only", "add"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("unexpected argument") && !stderr.contains("no server command"),
        "{stderr}"
    );
}

#[tokio::test]
async fn serve_takes_the_server_command_without_a_double_dash() {
    // As with exec: everything from the first positional argument on is the server's
    // command, its own options (`--only add`) included, so serve wraps only `add`.
    use rmcp::ServiceExt;
    let mut serve = spawn_serve([
        "serve".as_ref(),
        "--pool".as_ref(),
        "0".as_ref(),
        example("toy_server").as_os_str(),
        "--only".as_ref(),
        "add".as_ref(),
    ]);
    let pipes = (
        serve.stdout.take().expect("stdout"),
        serve.stdin.take().expect("stdin"),
    );
    let client = ().serve(pipes).await.expect("initialize");
    let tools = client.list_all_tools().await.expect("tools/list");
    let description = tools
        .first()
        .and_then(|t| t.description.clone())
        .unwrap_or_default()
        .to_string();
    assert!(description.contains("add"), "{description}");
    assert!(!description.contains("echo"), "{description}");
    let _ = client.cancel().await;
}

#[tokio::test]
async fn the_single_result_wrapper_gives_the_inner_value_and_the_stub_says_so() {
    let scenario = Scenario::load("wrapped_results");
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens");
    let budget = CallBudget::new(10);
    assert_eq!(
        bridge.call(&budget, "greet", &json!({})).await.unwrap(),
        "Hello, Ada!"
    );
    assert_eq!(
        bridge.call(&budget, "count", &json!({})).await.unwrap(),
        "3"
    );
    let catalog = bridge.catalog();
    let greet = &catalog.get("greet").unwrap().stub;
    assert!(greet.contains("returns: the text itself (str)"), "{greet}");
    assert!(
        catalog
            .get("count")
            .unwrap()
            .stub
            .contains("returns: JSON int")
    );
    bridge.close().await;
}

#[tokio::test]
async fn the_result_limit_is_raised_per_server_or_for_all_and_the_refusal_says_how() {
    let scenario = Scenario::load("wrapped_results");
    let budget = CallBudget::new(10);
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens");
    let Err(CallError::Refused(why)) = bridge.call(&budget, "big", &json!({})).await else {
        panic!("a 100 KB result was not refused under the default 64 KiB");
    };
    let why = why.to_string();
    assert!(
        why.contains("100000 bytes") && why.contains("65536"),
        "{why}"
    );
    assert!(
        why.contains("--max-result-bytes") && why.contains("maxResultBytes"),
        "{why}"
    );
    bridge.close().await;
    let mut raised = entry(scenario.spec());
    raised.max_result_bytes = Some(200_000);
    let bridge = Bridge::open(vec![raised], false).await.expect("opens");
    let text = bridge.call(&budget, "big", &json!({})).await.unwrap();
    assert_eq!(text.len(), 100_000);
    bridge.close().await;
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens")
        .with_max_result_bytes(150_000);
    assert!(bridge.call(&budget, "big", &json!({})).await.is_ok());
    let small = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens")
        .with_max_result_bytes(10);
    assert!(small.call(&budget, "greet", &json!({})).await.is_err());
    bridge.close().await;
    small.close().await;
}

#[test]
fn tools_take_one_dict_or_keywords_and_a_wrong_shape_shows_both() {
    if !require(native_available(), "the native sandbox cannot run here") {
        return;
    }
    let code = "print(await add({'a': 1, 'b': 2}))\nprint(await add(a=3, b=4))\nfor bad in ((1, 2), ({'a': 1}, {'b': 2})):\n    try:\n        await add(*bad)\n    except TypeError as e:\n        print(e)\ntry:\n    await add({'a': 1}, b=2)\nexcept TypeError as e:\n    print('both:', e)";
    let r = exec(code, &[]);
    let right = "add() takes its arguments as one dict or as keywords: await add({\"a\": ..., \"b\": ...}) or await add(a=..., b=...)";
    assert_eq!(
        r.printed(),
        format!("{{\"sum\": 3}}\n{{\"sum\": 7}}\n{right}\n{right}\nboth: {right}\n"),
        "{r:?}"
    );
}
