//! serve (stdio) whose stdout nobody reads any more, its stdin still open (a client that
//! closed its read end, or died while something else holds the stdin pipe): serve ends as
//! at the end of its stdin, its runs cancelled, its sandboxes and wrapped servers ended
//! (src/serve/client_output.rs, src/serve/stdio.rs). A closed stdout while the wrapped
//! servers start: `startup_endings`.
//!
//! Index: a client that closes serve's stdout mid-run ends serve, the run's sandbox and the
//! wrapped server (a pipe: seen without a write); a client whose stdout socket is closed
//! ends serve at the first answer that cannot be written.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use super::common::{
    RAW_INITIALIZE, assert_none_named, bin, example, exits_within, native_available,
    processes_named, require, until_named,
};

/// How long serve may take to exit once its stdout lost its reader (a loaded machine).
const EXIT_BOUND: Duration = Duration::from_secs(10);
/// What waits for serve's exit: serve, its stdout without a reader.
const STDOUT_CLOSED: &str = "serve, its stdout without a reader";
/// What a client sends once `initialize` is answered.
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The toy server under the name `marker` (a process is named by the file it was started
/// from), in `dir`.
fn named_toy(dir: &Path, marker: &str) -> PathBuf {
    let path = dir.join(marker);
    std::os::unix::fs::symlink(example("toy_server"), &path).expect("link the toy server");
    path
}

/// `serve --pool POOL -- server` with stdin piped, stdout to `stdout`, stderr dropped.
fn serve(pool: &str, server: &Path, stdout: Stdio) -> (Child, ChildStdin) {
    let mut child = Command::new(bin())
        .args(["serve", "--pool", pool, "--"])
        .arg(server)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .expect("start serve");
    let stdin = child.stdin.take().expect("stdin");
    (child, stdin)
}

/// Send `line` to serve.
fn send(stdin: &mut ChildStdin, line: &str) {
    writeln!(stdin, "{line}").expect("write to serve");
}

#[test]
fn a_client_that_closes_serves_stdout_mid_run_ends_serve_the_sandbox_and_the_server() {
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let id = std::process::id() % 1_000_000;
    let (server_marker, code_marker) = (format!("srv{id}"), format!("run{id}"));
    let (mut serve, mut stdin) = serve("1", &named_toy(dir.path(), &server_marker), Stdio::piped());
    let mut stdout = BufReader::new(serve.stdout.take().expect("stdout"));
    send(&mut stdin, RAW_INITIALIZE);
    let mut answer = String::new();
    stdout.read_line(&mut answer).expect("initialize's answer");
    assert!(answer.contains("\"result\""), "{answer}");
    send(&mut stdin, INITIALIZED);
    // A run that names itself, then sleeps far past the test.
    let code = format!(
        "import ctypes, time\nctypes.CDLL(None).prctl(15, {code_marker:?}.encode(), 0, 0, 0)\ntime.sleep(120)"
    );
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "run_python", "arguments": {"code": code}}});
    send(&mut stdin, &call.to_string());
    until_named(&code_marker, 1, Duration::from_secs(60), "the run");
    assert!(
        !processes_named(&server_marker).is_empty(),
        "the server runs"
    );
    // The client stops reading; its stdin stays open and nothing more is sent.
    drop(stdout);
    let code = exits_within(&mut serve, EXIT_BOUND, STDOUT_CLOSED);
    assert_eq!(code, Some(0), "a client that went away is a normal end");
    assert_none_named(&code_marker, "the run's sandbox");
    assert_none_named(&server_marker, "the wrapped server");
    assert_eq!(
        super::cleanup::cgroups_of(serve.id()),
        Vec::<PathBuf>::new(),
        "run cgroups (the pooled sandbox's included) left"
    );
    drop(stdin);
}

#[test]
fn a_client_whose_stdout_socket_is_closed_ends_serve_at_the_first_answer_it_cannot_write() {
    // A socket, not a pipe: only the failed write (EPIPE) tells serve.
    let dir = tempfile::tempdir().expect("temp dir");
    let server_marker = format!("sock{}", std::process::id() % 1_000_000);
    let (ours, theirs) = UnixStream::pair().expect("socket pair");
    let (mut serve, mut stdin) = serve(
        "0",
        &named_toy(dir.path(), &server_marker),
        Stdio::from(OwnedFd::from(theirs)),
    );
    send(&mut stdin, RAW_INITIALIZE);
    let mut answer = String::new();
    BufReader::new(&ours)
        .read_line(&mut answer)
        .expect("initialize's answer");
    assert!(answer.contains("\"result\""), "{answer}");
    send(&mut stdin, INITIALIZED);
    drop(ours);
    // Still serving: its answer to this goes nowhere.
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    );
    let code = exits_within(&mut serve, EXIT_BOUND, STDOUT_CLOSED);
    assert_eq!(code, Some(0), "a client that went away is a normal end");
    assert_none_named(&server_marker, "the wrapped server");
    drop(stdin);
}
