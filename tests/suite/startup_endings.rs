//! serve (stdio) while its wrapped servers still start: a client that goes away (its stdin
//! ends, or serve's stdout loses its reader) or a signal ends the startup at once, and no wrapped server is left running
//! (README, "Runs the client can steer"; the signals' exit codes: `exit_codes`). That a client
//! that sends `initialize` at once gets its answer after startup is
//! `server_startup::serve_answers_initialize_within_its_startup_timeout_when_a_wrapped_server_hangs`.
//!
//! Index: a client that closes its input while a wrapped server starts ends serve and the
//! server; so does one that closes serve's stdout (its input still open); a signal while a wrapped server starts ends serve and the server; a wrapped server
//! that serve ends takes the children it started along (its process group); a client that
//! closes its input while the catalog builds ends serve within a fraction of the build (the
//! build runs off the runtime thread and stops when nobody waits for it).

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{bin, example, processes_named};

/// Far above the test's bound on serve's exit: an exit within the bound is not the startup
/// giving up on the server.
const STARTUP_TIMEOUT_SECS: &str = "300";
/// How long serve may take to exit once its client left or a signal came (a loaded machine).
const EXIT_BOUND: Duration = Duration::from_secs(15);

/// A wrapped server that never answers `initialize`: `sleep` under the name `marker` (the
/// process's name is the name it was started by), in `dir`.
fn silent_server(dir: &Path, marker: &str) -> PathBuf {
    let path = dir.join(marker);
    std::os::unix::fs::symlink("/bin/sleep", &path).expect("link sleep");
    path
}

/// `serve` with `args` (stdin and stdout piped, stderr dropped), sent what a client sends
/// first, `initialize`, which serve holds until its startup ends.
fn serve_initialized<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> (Child, ChildStdin) {
    let mut serve = Command::new(bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start serve");
    let mut stdin = serve.stdin.take().expect("stdin");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
    )
    .expect("send initialize");
    (serve, stdin)
}

/// serve wrapping the server command `argv` (which never answers), once `processes`
/// processes named `marker` run: stdin, stdout piped.
fn serve_while_starting(argv: &[&OsStr], marker: &str, processes: usize) -> (Child, ChildStdin) {
    let serve_args = [
        "serve",
        "--pool",
        "0",
        "--startup-timeout",
        STARTUP_TIMEOUT_SECS,
        "--",
    ];
    let (serve, stdin) = serve_initialized(
        serve_args
            .iter()
            .map(OsStr::new)
            .chain(argv.iter().copied()),
    );
    let start = Instant::now();
    while processes_named(marker).len() < processes {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the wrapped server never started: {:?}",
            processes_named(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (serve, stdin)
}

/// Wait (at most [`EXIT_BOUND`]) for `serve` to exit: its exit code (`None`: killed by a
/// signal); kills it and fails when it does not exit in time.
fn exits_in_time(serve: &mut Child, what: &str) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = serve.try_wait().expect("wait") {
            return status.code();
        }
        if start.elapsed() > EXIT_BOUND {
            let _ = serve.kill();
            let _ = serve.wait();
            panic!("{what}: serve still ran after {EXIT_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// No process named `marker` (the wrapped server) runs, after a short grace for the kill.
fn assert_no_server_left(marker: &str, what: &str) {
    let start = Instant::now();
    while !processes_named(marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{what}: the wrapped server outlived serve: {:?}",
            processes_named(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_client_that_closes_its_input_while_a_wrapped_server_starts_ends_serve_and_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = format!("eof{}", std::process::id() % 1_000_000);
    let server = silent_server(dir.path(), &marker);
    let (mut serve, stdin) =
        serve_while_starting(&[server.as_os_str(), "1000".as_ref()], &marker, 1);
    drop(stdin);
    let code = exits_in_time(&mut serve, "stdin closed");
    assert_no_server_left(&marker, "stdin closed");
    assert_eq!(code, Some(0), "a client that went away is a normal end");
    let out = serve.wait_with_output().expect("serve's output");
    assert!(
        out.stdout.is_empty(),
        "nobody reads an answer: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_client_that_closes_serves_stdout_while_a_wrapped_server_starts_ends_serve_and_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = format!("out{}", std::process::id() % 1_000_000);
    let server = silent_server(dir.path(), &marker);
    let (mut serve, stdin) =
        serve_while_starting(&[server.as_os_str(), "1000".as_ref()], &marker, 1);
    // The client stops reading; its stdin stays open.
    drop(serve.stdout.take());
    let code = exits_in_time(&mut serve, "stdout closed");
    assert_no_server_left(&marker, "stdout closed");
    assert_eq!(code, Some(0), "a client that went away is a normal end");
    drop(stdin);
}

#[test]
fn a_signal_while_a_wrapped_server_starts_ends_serve_and_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, expected) in [("INT", 130), ("HUP", 129), ("TERM", 143)] {
        let marker = format!("sig{name}{}", std::process::id() % 1_000_000);
        let server = silent_server(dir.path(), &marker);
        let (mut serve, stdin) =
            serve_while_starting(&[server.as_os_str(), "1000".as_ref()], &marker, 1);
        let sent = Command::new("kill")
            .args([format!("-{name}"), serve.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success(), "SIG{name}");
        let code = exits_in_time(&mut serve, &format!("SIG{name}"));
        assert_no_server_left(&marker, &format!("SIG{name}"));
        assert_eq!(code, Some(expected), "SIG{name}");
        drop(stdin);
    }
}

#[test]
fn a_wrapped_server_that_serve_ends_takes_the_children_it_started_along() {
    // A shell that starts a child (a background job: the shell's process group, no setsid),
    // as `npx` starts `node`, then becomes the never-answering server itself.
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = format!("kid{}", std::process::id() % 1_000_000);
    let server = silent_server(dir.path(), &marker);
    let shell = [
        "sh".as_ref(),
        "-c".as_ref(),
        "\"$0\" 1000 & exec \"$0\" 1000".as_ref(),
        server.as_os_str(),
    ];
    // Both the server and its child.
    let (mut serve, stdin) = serve_while_starting(&shell, &marker, 2);
    drop(stdin);
    let code = exits_in_time(&mut serve, "stdin closed");
    assert_no_server_left(&marker, "stdin closed");
    assert_eq!(code, Some(0), "a client that went away is a normal end");
}

/// serve wrapping `scripted_server` on `scenario` (a file), with the client's `initialize`
/// sent; stdin and stdout piped.
fn serve_scripted(scenario: &Path) -> (Child, ChildStdin) {
    let server = example("scripted_server");
    serve_initialized([
        "serve".as_ref(),
        "--pool".as_ref(),
        "0".as_ref(),
        "--".as_ref(),
        server.as_os_str(),
        scenario.as_os_str(),
    ])
}

/// Wait until the wrapped server's journal `log` shows a `tools/list` request.
fn until_listed(log: &Path) -> Instant {
    let start = Instant::now();
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains("\"tools/list\"")
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the wrapped server was never listed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Instant::now()
}

#[test]
fn a_client_that_closes_its_input_while_the_catalog_builds_ends_serve_within_a_fraction_of_the_build()
 {
    // Hundreds of tools whose schemas take real work (examples/scripted_server.rs): a build
    // of seconds, timed here first from the listing to serve's answer to `initialize`.
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("received.log");
    let scenario = dir.path().join("heavy.json");
    let text = serde_json::json!({"tools": "$heavy_tools*150", "log": log});
    std::fs::write(&scenario, text.to_string()).expect("write the scenario");
    let (mut serve, stdin) = serve_scripted(&scenario);
    let listed = until_listed(&log);
    let mut answer = String::new();
    let mut stdout = std::io::BufReader::new(serve.stdout.take().expect("stdout"));
    std::io::BufRead::read_line(&mut stdout, &mut answer).expect("read the answer");
    let build = listed.elapsed();
    assert!(answer.contains("\"result\""), "{answer}");
    drop(stdin);
    exits_in_time(&mut serve, "the timing run");
    std::fs::remove_file(&log).expect("clear the journal");
    // Again, and the client leaves a quarter into the build.
    let (mut serve, stdin) = serve_scripted(&scenario);
    let listed = until_listed(&log);
    std::thread::sleep(build / 4);
    drop(stdin);
    let code = exits_in_time(&mut serve, "stdin closed while the catalog built");
    let took = listed.elapsed() - build / 4;
    eprintln!("build {build:?}; serve ended {took:?} after its client left");
    assert_eq!(code, Some(0), "a client that went away is a normal end");
    // A build on the runtime thread would hold the end back for the rest of the build.
    assert!(
        took * 2 < build,
        "serve ended {took:?} after its client left, in a build of {build:?}"
    );
}
