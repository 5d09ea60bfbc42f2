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

use super::common::{
    RAW_INITIALIZE, assert_none_named, bin, example, exits_within, send_signal, until_named,
};

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
    writeln!(stdin, "{RAW_INITIALIZE}").expect("send initialize");
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
    until_named(
        marker,
        processes,
        Duration::from_secs(30),
        "the wrapped server",
    );
    (serve, stdin)
}

/// serve while its one wrapped server, a [`silent_server`] named `prefix` and this test's
/// pid, starts: serve, its stdin and the server's name.
fn serve_while_a_silent_server_starts(dir: &Path, prefix: &str) -> (Child, ChildStdin, String) {
    let marker = format!("{prefix}{}", std::process::id() % 1_000_000);
    let server = silent_server(dir, &marker);
    let (serve, stdin) = serve_while_starting(&[server.as_os_str(), "1000".as_ref()], &marker, 1);
    (serve, stdin, marker)
}

/// Wait (at most [`EXIT_BOUND`]) for `serve` to exit after `why` and for the wrapped
/// servers named `marker` to be gone: serve's exit code (`None`: ended by a signal).
fn ends_with_its_servers(serve: &mut Child, marker: &str, why: &str) -> Option<i32> {
    let code = exits_within(serve, EXIT_BOUND, &format!("serve ({why})"));
    assert_none_named(marker, &format!("the wrapped server ({why})"));
    code
}

#[test]
fn a_client_that_closes_its_input_while_a_wrapped_server_starts_ends_serve_and_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut serve, stdin, marker) = serve_while_a_silent_server_starts(dir.path(), "eof");
    drop(stdin);
    let code = ends_with_its_servers(&mut serve, &marker, "stdin closed");
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
    let (mut serve, stdin, marker) = serve_while_a_silent_server_starts(dir.path(), "out");
    // The client stops reading; its stdin stays open.
    drop(serve.stdout.take());
    let code = ends_with_its_servers(&mut serve, &marker, "stdout closed");
    assert_eq!(code, Some(0), "a client that went away is a normal end");
    drop(stdin);
}

#[test]
fn a_signal_while_a_wrapped_server_starts_ends_serve_and_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, expected) in [("INT", 130), ("HUP", 129), ("TERM", 143)] {
        let (mut serve, stdin, marker) =
            serve_while_a_silent_server_starts(dir.path(), &format!("sig{name}"));
        send_signal(name, serve.id());
        let code = ends_with_its_servers(&mut serve, &marker, &format!("SIG{name}"));
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
    let code = ends_with_its_servers(&mut serve, &marker, "stdin closed");
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
    // Six hundred tools whose schemas take real work (examples/scripted_server.rs): a build
    // of a second or more, timed here first from the listing to serve's answer to
    // `initialize`. It must dwarf what ending serve costs anyway (its wrapped server ended,
    // its runtime shut down): on a loaded machine that is a few hundred milliseconds, and a
    // build of 150 tools (about 400 ms there) let that cost alone fail the bound below.
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("received.log");
    let scenario = dir.path().join("heavy.json");
    let text = serde_json::json!({"tools": "$heavy_tools*600", "log": log});
    std::fs::write(&scenario, text.to_string()).expect("write the scenario");
    let (mut serve, stdin) = serve_scripted(&scenario);
    let listed = until_listed(&log);
    let mut answer = String::new();
    let mut stdout = std::io::BufReader::new(serve.stdout.take().expect("stdout"));
    std::io::BufRead::read_line(&mut stdout, &mut answer).expect("read the answer");
    let build = listed.elapsed();
    assert!(answer.contains("\"result\""), "{answer}");
    drop(stdin);
    exits_within(&mut serve, EXIT_BOUND, "serve (the timing run)");
    std::fs::remove_file(&log).expect("clear the journal");
    // Again, and the client leaves a quarter into the build.
    let (mut serve, stdin) = serve_scripted(&scenario);
    let listed = until_listed(&log);
    std::thread::sleep(build / 4);
    drop(stdin);
    let code = exits_within(
        &mut serve,
        EXIT_BOUND,
        "serve (stdin closed while the catalog built)",
    );
    let took = listed.elapsed() - build / 4;
    eprintln!("build {build:?}; serve ended {took:?} after its client left");
    assert_eq!(code, Some(0), "a client that went away is a normal end");
    // A build on the runtime thread would hold the end back for the rest of the build.
    assert!(
        took * 2 < build,
        "serve ended {took:?} after its client left, in a build of {build:?}"
    );
}
