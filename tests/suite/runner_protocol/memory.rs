//! Running out of memory under limits of the rlimit fallback's kind (RLIMIT_DATA and RLIMIT_AS,
//! no memory cgroup to kill the process): the code's MemoryError, or a runaway recursion
//! under a raised recursion limit, is the code's own error, with only its own frames; the
//! runner's own failure never lands in the code's output; the next cell runs.
//!
//! The limits are a quarter of the launcher's (`RLIMIT_DATA` 256 MiB, `RLIMIT_AS` 1 GiB) so
//! the process fills them in about a second; the runner's headroom is the same fraction.

use serde_json::Value;

use super::{Runner, names_a_runner_file, ok_done};

const LIMITS: [&str; 2] = ["--data=67108864", "--as=268435456"];

/// Runs `code` in a runner under [`LIMITS`] and returns its `done` and the text of the
/// `output` messages before it, after checking that neither names a runner file and that a
/// cell after it still runs.
fn run_out_of_memory(code: &str) -> (Value, String) {
    let mut runner = Runner::start_under_prlimit(&LIMITS);
    let done = runner.run(code);
    let streamed: String = runner
        .take_output()
        .iter()
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    let stdout = done["stdout"].as_str().unwrap_or_default();
    let error = done["error"].as_str().unwrap_or_default();
    for text in [stdout, error, &streamed] {
        assert!(!names_a_runner_file(text), "{done}\n{streamed}");
    }
    assert_eq!(done["stopped"], false, "{done}");
    assert_eq!(runner.run("print('after')"), ok_done("after\n"));
    (done, streamed)
}

#[test]
fn under_a_memory_rlimit_a_runaway_recursion_is_the_codes_error_naming_memory() {
    let code =
        "import sys\nsys.setrecursionlimit(10**8)\ndef f(n): return f(n+1)\nprint('deep')\nf(0)";
    let (done, streamed) = run_out_of_memory(code);
    assert_eq!(done["stdout"], "deep\n", "{done}");
    assert_eq!(streamed, "deep\n");
    let error = done["error"].as_str().unwrap();
    // Python 3.11 raises MemoryError, or SystemError when not even a frame could be made.
    assert!(error.contains("memory"), "{error}");
    assert!(error.contains("File \"<code>\", line 3, in f"), "{error}");
    assert!(error.lines().count() <= 21, "{error}");
}

#[test]
fn under_a_memory_rlimit_a_recursion_past_a_raised_limit_shows_its_innermost_frames() {
    let code = "import sys\nsys.setrecursionlimit(20000)\ndef f(n): return f(n+1)\nf(0)";
    let (done, _) = run_out_of_memory(code);
    let error = done["error"].as_str().unwrap();
    assert!(
        error.contains("RecursionError: maximum recursion depth exceeded\n(the traceback was 1"),
        "{error}"
    );
    assert!(
        error.ends_with("frames deep: only the innermost 1000 are shown)"),
        "{error}"
    );
}

#[test]
fn under_a_memory_rlimit_a_memory_hog_gets_its_own_memory_error() {
    // Small objects fill the limit to its last byte; large ones fail while room is left.
    for hog in [
        "x = []\nwhile True:\n    x.append([0] * 100)",
        "x = []\nwhile True:\n    x.append(b'x' * 1000)",
        "x = b'x' * (1 << 40)",
    ] {
        let (done, streamed) = run_out_of_memory(&format!("print('hog')\n{hog}"));
        assert_eq!(done["stdout"], "hog\n", "{done}");
        assert_eq!(streamed, "hog\n");
        let error = done["error"].as_str().unwrap();
        assert!(error.starts_with("Traceback"), "{error}");
        assert!(error.ends_with("\nMemoryError"), "{error}");
    }
}

#[test]
fn a_runner_that_fails_itself_out_of_memory_exits_with_status_three_and_no_output() {
    let mut runner = Runner::start_under_prlimit(&LIMITS);
    // The runner's own formatting of the error fails as it would at the limit.
    runner.cell(
        "import sys\n\
         def broken(error, limit):\n    raise MemoryError\n\
         sys.modules['code_mode_runner.cells'].error_text = broken\n\
         print('before')\n\
         raise ValueError('x')",
    );
    let mut lines = Vec::new();
    while let Ok(line) = runner.lines.recv_timeout(super::WAIT) {
        lines.push(line);
    }
    let status = super::wait_exit(&mut runner.child);
    assert_eq!(status, 3, "{lines:?}");
    let text = lines.join("\n");
    assert!(!names_a_runner_file(&text), "{text}");
    assert!(!text.contains("\"done\""), "{text}");
}
