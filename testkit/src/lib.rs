//! Test-only helpers shared by every test in the workspace (the host crate's unit and
//! integration tests, the launcher's unit and binary tests), so that each rule exists once.
//!
//! - [`require`]: the one skip rule. A test that needs something this host lacks prints
//!   `SKIPPED` past the test harness's output capture and returns; under CI it fails.
//! - [`golden`]: the one golden-file rule. `UPDATE_GOLDEN=1` rewrites the file (refused under
//!   CI); any other value, or none, compares.

use std::io::Write;
use std::path::Path;

/// Whether this run is CI (`CI=true` or `CI=1`, as CI services set it), where a missing host
/// feature is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The one skip rule. Returns `ok`. When `ok` is false: under CI ([`in_ci`]) the test fails
/// with `why`; otherwise `SKIPPED <test>: <why>` goes straight to file descriptor 2, which
/// the harness does not capture, so the skip shows even when the test passes.
///
/// Use it as `if !require(feature_here(), "why") { return; }`.
pub fn require(ok: bool, why: &str) -> bool {
    if !ok {
        let test = std::thread::current()
            .name()
            .unwrap_or("<unnamed test>")
            .to_owned();
        assert!(!in_ci(), "required under CI: {test}: {why}");
        // `eprintln!` is captured by the test harness; a direct write to stderr is not.
        let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {why}");
    }
    ok
}

/// Whether golden files are to be rewritten: `UPDATE_GOLDEN=1` exactly. Refused under CI,
/// where a golden file is only ever compared.
fn updating() -> bool {
    let update = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    assert!(
        !(update && in_ci()),
        "UPDATE_GOLDEN=1 is refused under CI: golden files are compared there, never rewritten"
    );
    update
}

/// The one golden-file rule: compares `actual` with the file at `path`, or rewrites the file
/// when `UPDATE_GOLDEN=1` (see [`updating`]). Panics with the difference's first line when they
/// differ, and with the fix when the file is missing. `scripts/test` ends with
/// `git diff --exit-code tests/golden`, so a rewrite cannot go unnoticed.
pub fn golden(path: &Path, actual: &str) {
    if updating() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
        std::fs::write(path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let _ = writeln!(
            std::io::stderr().lock(),
            "REWROTE {}; review the diff",
            path.display()
        );
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; create it with UPDATE_GOLDEN=1 and review it",
            path.display()
        )
    });
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the actual output from line {} on; if the change is intended, \
             rewrite it with UPDATE_GOLDEN=1 and review the diff.\n--- expected line ---\n{}\n--- actual line ---\n{}",
            path.display(),
            line + 1,
            expected.lines().nth(line).unwrap_or("<end of file>"),
            actual.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // These checks change the process environment; they are one test so they never race.
    #[test]
    #[allow(unsafe_code)]
    fn skips_fail_under_ci_and_update_golden_is_exactly_one_and_refused_under_ci() {
        let dir = std::env::temp_dir().join(format!("testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("g.txt");
        std::fs::write(&file, "old\n").unwrap();
        let caught =
            |f: &dyn Fn()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err();
        // SAFETY: set_var races only with other threads reading the environment; this is the
        // only test of this crate that reads or writes CI and UPDATE_GOLDEN.
        unsafe {
            for ci in ["true", "1"] {
                std::env::set_var("CI", ci);
                assert!(caught(&|| {
                    require(false, "x");
                }));
                assert!(require(true, "x"));
            }
            std::env::set_var("CI", "false");
            assert!(!require(false, "a skip outside CI returns false"));

            // Any value but 1 compares (and 0 does not rewrite).
            std::env::set_var("UPDATE_GOLDEN", "0");
            assert!(caught(&|| golden(&file, "new\n")));
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\n");
            std::env::set_var("UPDATE_GOLDEN", "1");
            golden(&file, "new\n");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
            std::env::set_var("CI", "true");
            assert!(caught(&|| golden(&file, "newer\n")));
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
            std::env::remove_var("UPDATE_GOLDEN");
            golden(&file, "new\n");
            std::env::remove_var("CI");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
