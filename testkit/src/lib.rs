//! Test-only helpers shared by every test in the workspace (the host crate's unit and
//! integration tests, the launcher's unit and binary tests), so that each rule exists once.
//!
//! - [`require`]: the one skip rule. A test that needs something this host lacks prints
//!   `SKIPPED` past the test harness's output capture and returns; under CI it fails.
//! - [`golden`]: the one golden-file rule. `UPDATE_GOLDEN=1` rewrites the file (refused under
//!   CI); any other value, or none, compares.
//! - [`schemas`]: JSON Schemas whose check costs 2^depth steps, for the argument-check tests.

use std::io::Write;
use std::path::Path;

pub mod schemas;

/// The two environment variables the rules read, read once per check.
#[derive(Debug, Clone, Copy)]
struct Env {
    /// `CI=true` or `CI=1`, as CI services set it.
    ci: bool,
    /// `UPDATE_GOLDEN=1` exactly.
    update_golden: bool,
}

impl Env {
    fn read() -> Self {
        Self::from_values(
            std::env::var("CI").ok().as_deref(),
            std::env::var("UPDATE_GOLDEN").ok().as_deref(),
        )
    }

    fn from_values(ci: Option<&str>, update_golden: Option<&str>) -> Self {
        Self {
            ci: matches!(ci, Some("true" | "1")),
            update_golden: update_golden == Some("1"),
        }
    }
}

/// Whether this run is CI (`CI=true` or `CI=1`, as CI services set it), where a missing host
/// feature is a failure, not a skip.
pub fn in_ci() -> bool {
    Env::read().ci
}

/// The one skip rule. Returns `ok`. When `ok` is false: under CI ([`in_ci`]) the test fails
/// with `why`; otherwise `SKIPPED <test>: <why>` goes straight to file descriptor 2, which
/// the harness does not capture, so the skip shows even when the test passes.
///
/// Use it as `if !require(feature_here(), "why") { return; }`.
pub fn require(ok: bool, why: &str) -> bool {
    require_in(Env::read(), ok, why)
}

fn require_in(env: Env, ok: bool, why: &str) -> bool {
    if !ok {
        let test = std::thread::current()
            .name()
            .unwrap_or("<unnamed test>")
            .to_owned();
        assert!(!env.ci, "required under CI: {test}: {why}");
        // `eprintln!` is captured by the test harness; a direct write to stderr is not.
        let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {why}");
    }
    ok
}

/// Whether golden files are to be rewritten: `UPDATE_GOLDEN=1` exactly. Refused under CI,
/// where a golden file is only ever compared.
fn updating(env: Env) -> bool {
    assert!(
        !(env.update_golden && env.ci),
        "UPDATE_GOLDEN=1 is refused under CI: golden files are compared there, never rewritten"
    );
    env.update_golden
}

/// The one golden-file rule: compares `actual` with the file at `path`, or rewrites the file
/// when `UPDATE_GOLDEN=1` (never under CI). Panics with the difference's first line when they
/// differ, and with the fix when the file is missing. `scripts/test` ends with
/// `git diff --exit-code tests/golden`, so a rewrite cannot go unnoticed.
pub fn golden(path: &Path, actual: &str) {
    golden_in(Env::read(), path, actual);
}

fn golden_in(env: Env, path: &Path, actual: &str) {
    if updating(env) {
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

/// Python that defines `fork_up_to(limit)`: fork up to `limit` children that each sleep
/// 30 s, and return how many were made and the errno name that stopped it (or `None`). The
/// fork-bomb tests of the launcher and of the pids cgroup share it.
pub const FORK_UP_TO_PY: &str = r#"
import errno as _fork_errno, os as _fork_os, time as _fork_time
def fork_up_to(limit):
    n = 0
    try:
        while n < limit:
            if _fork_os.fork() == 0:
                _fork_time.sleep(30); _fork_os._exit(0)
            n += 1
    except OSError as e:
        return n, _fork_errno.errorcode[e.errno]
    return n, None
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn env(ci: &str, update: &str) -> Env {
        Env::from_values(Some(ci), Some(update))
    }

    fn panics(f: impl FnOnce()) -> bool {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err()
    }

    #[test]
    fn ci_is_true_or_1_and_update_golden_is_exactly_1() {
        assert!(Env::from_values(Some("true"), None).ci);
        assert!(Env::from_values(Some("1"), None).ci);
        assert!(!Env::from_values(Some("false"), None).ci);
        assert!(!Env::from_values(None, None).ci);
        assert!(Env::from_values(None, Some("1")).update_golden);
        assert!(!Env::from_values(None, Some("0")).update_golden);
        assert!(!Env::from_values(None, Some("true")).update_golden);
    }

    #[test]
    fn a_skip_fails_under_ci_and_returns_false_outside_it() {
        for ci in ["true", "1"] {
            assert!(panics(|| {
                require_in(env(ci, ""), false, "x");
            }));
            assert!(require_in(env(ci, ""), true, "x"));
        }
        assert!(!require_in(
            env("false", ""),
            false,
            "a skip outside CI returns false"
        ));
    }

    #[test]
    fn update_golden_rewrites_only_when_1_and_is_refused_under_ci() {
        let dir = std::env::temp_dir().join(format!("testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("g.txt");
        std::fs::write(&file, "old\n").unwrap();

        // Any value but 1 compares (and 0 does not rewrite).
        assert!(panics(|| golden_in(env("false", "0"), &file, "new\n")));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\n");
        golden_in(env("false", "1"), &file, "new\n");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
        assert!(panics(|| golden_in(env("true", "1"), &file, "newer\n")));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
        golden_in(env("true", ""), &file, "new\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
