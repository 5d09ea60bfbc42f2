//! Spawning a server: a command not on PATH is a clear error, a relative path is taken from the
//! working directory, the environment is MCP's default plus the variables passed.

use std::path::PathBuf;

use mcp_code_mode::bridge::{Bridge, DEFAULT_ENV};
use serde_json::Value;

use super::{Scenario, call, entry, open_spec};

#[tokio::test]
async fn a_command_not_on_path_is_a_clear_error_naming_it() {
    let mut spec = Scenario::load("env").spec();
    spec.command = "no-such-mcp-server-x7".into();
    let Err(e) = Bridge::open(vec![entry(spec)], false).await else {
        panic!("opened");
    };
    let text = e.to_string();
    assert!(
        text.contains("\"no-such-mcp-server-x7\" was not found"),
        "{text}"
    );
    assert!(text.contains("PATH"), "{text}");
}

#[tokio::test]
async fn a_relative_command_path_is_taken_from_the_working_directory() {
    let scenario = Scenario::load("env");
    let mut spec = scenario.spec();
    let binary = PathBuf::from(&spec.command);
    let dir = binary.parent().unwrap().to_path_buf();
    spec.command = format!("./{}", binary.file_name().unwrap().to_string_lossy());
    spec.cwd = Some(dir);
    let bridge = open_spec(spec.clone()).await;
    assert!(call(&bridge, "env").await.is_ok());
    bridge.close().await;
    spec.cwd = None;
    let Err(e) = Bridge::open(vec![entry(spec)], false).await else {
        panic!("opened from the wrong directory");
    };
    assert!(
        e.to_string().contains("./scripted_server\" was not found"),
        "{e}"
    );
}

#[tokio::test]
async fn the_server_gets_mcps_default_environment_plus_the_variables_passed() {
    let scenario = Scenario::load("env");
    let mut spec = scenario.spec();
    spec.env = vec![
        ("API_TOKEN".into(), "t0k3n".into()),
        ("HOME".into(), "/srv/elsewhere".into()),
    ];
    let bridge = open_spec(spec).await;
    let env: Value = serde_json::from_str(&call(&bridge, "env").await.unwrap()).unwrap();
    let env = env.as_object().expect("an object");
    assert_eq!(env["API_TOKEN"], "t0k3n");
    assert_eq!(env["HOME"], "/srv/elsewhere", "passed values win");
    assert!(env.contains_key("PATH"));
    for key in env.keys() {
        assert!(
            DEFAULT_ENV.contains(&key.as_str()) || key == "API_TOKEN",
            "{key} leaked into the server's environment"
        );
    }
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok() && !env.contains_key("CARGO_MANIFEST_DIR"));
    bridge.close().await;
}
