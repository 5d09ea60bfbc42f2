//! A config entry's `allow`, `private`, `approve` and `disabledTools` lists name tools of
//! its server, so they are checked against the tools that server lists. A server that fails
//! to start lists nothing: its lists do not stop the others (README, "Several servers") and
//! are checked, and applied, when a later try starts it.

use std::path::Path;
use std::time::Duration;

use mcp_code_mode::bridge::{Bridge, CallBudget, OpenOptions, RETRY_INTERVAL};
use mcp_code_mode::config::parse_config;
use mcp_code_mode::description::describe;
use serde_json::{Value, json};

use super::common::{ExecOptions, example, exec_with, native_available, require};
use super::misbehaving_servers::Scenario;

/// A command that does not exist: its server fails to start.
const MISSING: &str = "/nonexistent/mcp-server-x7";

fn prefixed() -> OpenOptions {
    OpenOptions {
        prefixed: true,
        strict: false,
    }
}

/// A config entry for `scenario`'s server.
fn server(scenario: &Scenario) -> Value {
    let command = scenario.command();
    json!({"command": command[0], "args": command[1..]})
}

/// A config entry for a server that fails to start until `dir/ok` exists, then is
/// `scenario`'s server.
fn late(dir: &Path, scenario: &Scenario) -> Value {
    let command = scenario.command();
    let script = format!(
        "[ -f {dir}/ok ] || exit 3; exec {cmd} {arg}",
        dir = dir.display(),
        cmd = command[0],
        arg = command[1],
    );
    json!({"command": "sh", "args": ["-c", script]})
}

async fn open(config: Value) -> Bridge {
    let entries = parse_config(&config.to_string()).expect("the config reads");
    Bridge::open_with(entries, prefixed())
        .await
        .expect("the bridge opens")
}

/// The names of the servers that are not running, sorted.
fn unavailable(bridge: &Bridge) -> Vec<String> {
    let mut names: Vec<String> = bridge
        .catalog()
        .unavailable()
        .iter()
        .map(|(name, _)| name.clone())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn servers_that_fail_to_start_with_tools_named_in_allow_private_approve_or_disabled_tools_do_not_stop_the_others()
 {
    let env = Scenario::load("env");
    let bridge = open(json!({"mcpServers": {
        "good": server(&env),
        "allows": {"command": MISSING, "allow": ["add"]},
        "hides": {"url": "http://127.0.0.1:1/mcp", "private": ["add"]},
        "approves": {"command": MISSING, "approve": ["add"]},
        "disables": {"command": MISSING, "disabledTools": ["add"]}
    }}))
    .await;
    assert_eq!(
        unavailable(&bridge),
        ["allows", "approves", "disables", "hides"]
    );
    let catalog = bridge.catalog();
    let kept: Vec<&str> = catalog.tools().iter().map(|t| t.py_name.as_str()).collect();
    assert_eq!(kept, ["good__env"]);
    let description = describe(&catalog, 90, 200, &bridge.call_timeouts());
    for name in ["allows", "approves", "disables"] {
        let down = format!("server \"{name}\": failed to start");
        assert!(description.contains(&down), "{down:?} in {description}");
    }
    assert!(
        description.contains("server \"hides\": failed to connect to it: could not connect"),
        "{description}"
    );
    let answer = bridge
        .call(&CallBudget::new(5), "good__env", &json!({}))
        .await;
    assert!(answer.is_ok(), "{answer:?}");
    bridge.close().await;
}

#[tokio::test]
async fn the_lists_of_a_server_that_failed_to_start_apply_when_a_later_try_starts_it_and_a_typo_keeps_it_out()
 {
    let env = Scenario::load("env");
    let notes = Scenario::load("annotated");
    let dir = tempfile::tempdir().unwrap();
    let mut labelled = late(dir.path(), &notes);
    labelled["allow"] = json!(["read_note", "write_note", "delete_note"]);
    labelled["disabledTools"] = json!(["write_note"]);
    labelled["private"] = json!(["read_note"]);
    labelled["approve"] = json!(["delete_note"]);
    let mut typo = late(dir.path(), &notes);
    typo["allow"] = json!(["read_nte"]);
    let bridge = open(json!({"mcpServers": {
        "good": server(&env),
        "labelled": labelled,
        "typo": typo
    }}))
    .await;
    assert_eq!(unavailable(&bridge), ["labelled", "typo"]);
    // Both can start now; the next due retry starts them.
    std::fs::write(dir.path().join("ok"), "").unwrap();
    tokio::time::sleep(RETRY_INTERVAL).await;
    bridge.refresh().await;
    let typo_refused = |bridge: &Bridge| {
        bridge
            .catalog()
            .unavailable()
            .iter()
            .any(|(name, why)| name == "typo" && why.contains("names no tool"))
    };
    let both_tried = async {
        while bridge.catalog().get("labelled__read_note").is_none() || !typo_refused(&bridge) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let tried = tokio::time::timeout(Duration::from_secs(20), both_tried).await;
    assert!(
        tried.is_ok(),
        "unavailable: {:?}",
        bridge.catalog().unavailable()
    );
    let catalog = bridge.catalog();
    let kept: Vec<&str> = catalog.tools().iter().map(|t| t.py_name.as_str()).collect();
    // The allowlist and disabledTools keep two of its five tools; the typo'd server none.
    assert_eq!(
        kept,
        ["good__env", "labelled__read_note", "labelled__delete_note"]
    );
    let read = catalog.get("labelled__read_note").unwrap();
    let delete = catalog.get("labelled__delete_note").unwrap();
    assert!(read.private && !read.approve);
    assert!(delete.approve && !delete.private);
    let (_, why) = &catalog.unavailable()[0];
    assert!(
        why.contains(
            r#"the allowlist entry "read_nte" on server "typo" names no tool the server lists"#
        ) && why.contains(r#"did you mean "read_note"?"#),
        "{why}"
    );
    assert_eq!(catalog.unavailable().len(), 1);
    drop(catalog);
    let answer = bridge
        .call(
            &CallBudget::new(5),
            "labelled__read_note",
            &json!({"id": 1}),
        )
        .await;
    assert!(answer.is_ok(), "{answer:?}");
    bridge.close().await;
}

#[test]
fn exec_with_a_config_whose_unreachable_server_has_an_allowlist_runs_the_code_with_the_other_servers_tools()
 {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {
        "ok": {"command": example("toy_server"), "args": ["--only", "echo"]},
        "down": {"url": "http://127.0.0.1:1/mcp", "allow": ["add"]}
    }});
    let path = dir.path().join("servers.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let run = exec_with(
        "print(sorted(TOOLS))\nprint(await ok__echo(text='hi'))",
        ExecOptions {
            args: vec!["--config".into(), path.display().to_string()],
            server: Vec::new(),
            ..Default::default()
        },
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.printed(), "['ok__echo']\nhi\n", "{run:?}");
    assert!(run.stderr.contains("down"), "{run:?}");
}
