//! What a wrapped server writes reaches the operator's terminal only as text: its stderr
//! quoted in a startup error and its tool names in a warning keep no control character
//! (src/stderr_log.rs).

use crate::suite::common::{ExecOptions, exec_with};

/// A server that retitles the window, clears the screen and colours a fake all-clear on
/// its stderr, then dies before answering `initialize`.
const HOSTILE_STDERR: &str = "import sys\nsys.stderr.write('\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[41mFAKE: all good\\x9b0m\\n')\nsys.stderr.flush()\nsys.exit(1)\n";

#[test]
fn a_dying_servers_escape_sequences_reach_the_terminal_as_text() {
    let run = exec_with(
        "print(1)",
        ExecOptions {
            server: vec![
                "/usr/bin/python3".into(),
                "-c".into(),
                HOSTILE_STDERR.into(),
            ],
            ..ExecOptions::default()
        },
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("PWNED"),
        "the stderr tail is quoted: {run:?}"
    );
    let raw: Vec<char> = run
        .stderr
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect();
    assert!(
        raw.is_empty(),
        "raw control characters {raw:?} in {:?}",
        run.stderr
    );
}
