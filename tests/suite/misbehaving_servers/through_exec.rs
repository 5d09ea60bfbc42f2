//! End to end, through `exec` and the native sandbox (the module scripts/test-unprivileged
//! selects from this file).

use super::Scenario;
use crate::suite::common::{ExecOptions, exec_with, native_available, require};

fn exec_scenario(code: &str, scenario: &Scenario) -> crate::suite::common::Exec {
    exec_with(
        code,
        ExecOptions {
            server: scenario.command(),
            ..Default::default()
        },
    )
}

#[test]
fn exec_reads_a_crlf_server_with_junk_and_boms() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let scenario = Scenario::load("transport");
    let run = exec_scenario("print(await echo({}))", &scenario);
    assert_eq!(run.printed(), "echoed\n", "{run:?}");
}

#[test]
fn exec_turns_a_dying_server_into_a_tool_error_the_code_can_catch() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let scenario = Scenario::load("process");
    let code = "try:\n    await die({})\nexcept ToolError as e:\n    print('caught', e)\n";
    let run = exec_scenario(code, &scenario);
    assert!(run.printed().starts_with("caught "), "{run:?}");
    assert!(run.printed().contains("exited with status 9"), "{run:?}");
}

#[test]
fn exec_survives_an_endless_line_with_bounded_memory() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let scenario = Scenario::load("floods");
    let code = "try:\n    await endless_line({})\nexcept ToolError as e:\n    print('caught', e)\n";
    let run = exec_scenario(code, &scenario);
    assert!(run.printed().contains("over 16 MiB"), "{run:?}");
}
