//! An audit log that stops taking records, a named pipe nobody reads once its 64 KiB buffer
//! is full (README "Governance"), stalls no run: records are written by a thread of their
//! own, a record waits at most `WRITE_WAIT` (2 s) and the log then counts as failed, so
//! the run goes on unaudited, or with `--audit-required` fails closed. Each `exec` here is
//! killed if it has not ended in `GIVE_UP`, so a frozen one fails the test and is not left.
//!
//! Index: an audit log on a fifo nobody reads stalls no run and a required one fails closed.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{Exec, bin, native_available, toy};

/// Far longer than the runs here take, even on a loaded host.
const GIVE_UP: Duration = Duration::from_secs(90);

/// Calls whose records (`--audit-args full`, 15 KB each) fill a pipe's 64 KiB many times.
const CODE: &str = "for i in range(40):\n    await echo(text='x' * 15000)\nprint('done')";

/// `exec --audit FIFO --audit-args full EXTRA… --code CODE -- toy_server`, with a FIFO in
/// `dir` that nobody reads; SIGKILLed after `GIVE_UP` (the test then fails).
fn exec_on_a_fifo(dir: &Path, extra: &[&str]) -> Exec {
    let fifo = dir.join("audit.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = Command::new(bin())
        .args(["exec", "--audit"])
        .arg(&fifo)
        .args(["--audit-args", "full"])
        .args(extra)
        .args(["--code", CODE, "--"])
        .args(toy())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("start exec");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for exec") {
            break Some(status);
        }
        if started.elapsed() > GIVE_UP {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let Some(status) = status else {
        panic!("exec froze on the audit FIFO (killed after {GIVE_UP:?}); stderr:\n{stderr}");
    };
    Exec {
        code: status.code().unwrap_or(-1),
        result: stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok()),
        stdout,
        stderr,
    }
}

#[test]
fn an_audit_log_on_a_fifo_nobody_reads_stalls_no_run_and_a_required_one_fails_closed() {
    if !native_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let run = exec_on_a_fifo(dir.path(), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.printed(), "done\n", "{run:?}");
    assert!(run.stderr.contains("took no record"), "{}", run.stderr);

    let dir = tempfile::tempdir().expect("temp dir");
    let run = exec_on_a_fifo(dir.path(), &["--audit-required"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(!run.printed().contains("done"), "{run:?}");
    assert!(run.error().contains("--audit-required"), "{run:?}");
}
