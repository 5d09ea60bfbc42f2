//! skills/mcp-code-mode/SKILL.md keeps its numbers equal to the code's constants.
//!
//! Index: one test, the numbers table against the constants.

use std::path::PathBuf;

use mcp_code_mode::limits::*;

fn skill() -> String {
    std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("skills/mcp-code-mode/SKILL.md"),
    )
    .unwrap()
}

fn row(text: &str, name: &str) -> String {
    text.lines()
        .find(|l| l.starts_with(&format!("| {name} |")))
        .unwrap_or_else(|| panic!("SKILL.md has no row {name:?}"))
        .to_owned()
}

#[test]
fn the_skills_numbers_are_the_codes() {
    let s = skill();
    let want = [
        (
            "wall-clock deadline",
            format!("{DEFAULT_DEADLINE_SECS} seconds"),
        ),
        ("tool calls", format!("{DEFAULT_MAX_CALLS} ")),
        ("refused calls", format!("{MAX_REFUSED_CALLS} more")),
        (
            "one call's time",
            format!("{} seconds", CALL_TIMEOUT.as_secs()),
        ),
        (
            "arguments of one call",
            format!("{} KiB", MAX_ARGS_BYTES / 1024),
        ),
        (
            "result of one call",
            format!("{} KiB", MAX_RESULT_BYTES / 1024),
        ),
        (
            "error message of a refused call",
            format!("{MAX_ERROR_CHARS} characters"),
        ),
        ("output kept", format!("{} KiB", STDOUT_KEEP_BYTES / 1024)),
        (
            "output that stops the run",
            format!("{} MiB", STDOUT_STOP_BYTES >> 20),
        ),
        ("memory", format!("{} MiB", MEMORY_BYTES >> 20)),
        ("processes and threads", format!("{MAX_PIDS} |")),
    ];
    for (name, value) in want {
        let line = row(&s, name);
        assert!(
            line.contains(&value),
            "SKILL.md row {line:?} should say {value:?}"
        );
    }
    assert!(s.contains(&format!(
        "at most {} KiB of output",
        STDOUT_KEEP_BYTES / 1024
    )));
    assert!(s.contains(&format!(
        "`/tmp` ({} MiB, at most {} files and directories)",
        TMP_BYTES >> 20,
        TMP_INODES
    )));
}
