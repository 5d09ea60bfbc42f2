//! The exit codes a signal leaves: SIGTERM, SIGINT and SIGHUP end `exec` and `serve` (stdio)
//! with 128 + the signal's number, as a shell reports a process the signal killed; `exec`
//! prints the stopped run's result first. (`serve --http`: `http_serving`.)
//!
//! Index: a signal ends exec with 128 plus its number after printing what the code printed;
//! a signal ends serve on stdio with 128 plus its number; a signal ends serve with a run in
//! flight answering it and logging no error; a signal ends serve promptly while
//! its client holds stdin open; an unknown option before `--code` is named in exec's error;
//! a code file longer than 16 MiB is refused (exit 2) before anything runs; a launcher whose
//! rootfs is gone exits 125 saying so.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{
    RAW_INITIALIZE, bin, exits_within, native_available, processes_named, require, send_signal,
    toy, until_named,
};

/// The signals that end `exec` and `serve`, with the exit code each must leave.
const SIGNALS: [(&str, i32); 3] = [("INT", 130), ("HUP", 129), ("TERM", 143)];

/// How long `exec` or `serve` may take to exit after a signal here (a loaded machine).
const EXIT_BOUND: Duration = Duration::from_secs(30);

#[test]
fn a_signal_ends_exec_with_128_plus_its_number_after_printing_what_the_code_printed() {
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    for (name, expected) in SIGNALS {
        // The code names itself once it has printed, so the test knows when to signal.
        let marker = format!("ex{name}{}", std::process::id() % 1_000_000);
        let code = format!(
            "import ctypes, time\nprint('printed before the signal', flush=True)\nctypes.CDLL(None).prctl(15, {marker:?}.encode(), 0, 0, 0)\ntime.sleep(60)"
        );
        let mut child = Command::new(bin())
            .args(["exec", "--deadline", "90", "--code", &code, "--"])
            .args(toy())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start exec");
        until_named(&marker, 1, Duration::from_secs(30), "the code");
        // Time for the host to read the printed line, which came before the name.
        std::thread::sleep(Duration::from_millis(300));
        send_signal(name, child.id());
        let code = exits_within(&mut child, EXIT_BOUND, &format!("exec (SIG{name})"));
        let out = child.wait_with_output().expect("exec's output");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code, Some(expected), "SIG{name}; stderr: {stderr}");
        let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
            .unwrap_or_else(|e| panic!("SIG{name}: no result line ({e}): {stdout:?} {stderr}"));
        assert_eq!(result["stdout"], "printed before the signal\n", "{result}");
        assert_eq!(result["stopped"], true, "{result}");
        assert_eq!(
            result["error"],
            format!("stopped by SIG{name}; the sandbox was killed"),
            "{result}"
        );
        assert!(
            processes_named(&marker).is_empty(),
            "SIG{name}: the sandbox outlived exec"
        );
    }
}

#[test]
fn a_signal_ends_serve_on_stdio_with_128_plus_its_number() {
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    for (name, expected) in SIGNALS {
        let mut child = Command::new(bin())
            .args(["serve", "--pool", "0", "--"])
            .args(toy())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start serve");
        // Once serve answered initialize, it serves (and watches for signals).
        let mut stdin = child.stdin.take().expect("stdin");
        writeln!(stdin, "{RAW_INITIALIZE}").expect("send initialize");
        let mut line = String::new();
        // Kept open: a stdout nobody reads any more would end serve before the signal.
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        stdout
            .read_line(&mut line)
            .expect("read initialize's answer");
        assert!(line.contains("\"result\""), "{line}");
        send_signal(name, child.id());
        let code = exits_within(&mut child, EXIT_BOUND, &format!("serve (SIG{name})"));
        assert_eq!(code, Some(expected), "SIG{name}");
        drop((stdin, stdout));
    }
}

#[test]
fn a_signal_ends_serve_with_a_run_in_flight_answering_it_and_logging_no_error() {
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    for (name, expected) in SIGNALS {
        let marker = format!("sv{name}{}", std::process::id() % 1_000_000);
        let code = format!(
            "import ctypes, time\nctypes.CDLL(None).prctl(15, {marker:?}.encode(), 0, 0, 0)\ntime.sleep(60)"
        );
        let mut child = Command::new(bin())
            .args(["serve", "--pool", "0", "--deadline", "90", "--"])
            .args(toy())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let stderr = child.stderr.take().expect("stderr");
        let log = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
        writeln!(stdin, "{RAW_INITIALIZE}").expect("send initialize");
        let mut line = String::new();
        stdout.read_line(&mut line).expect("initialize's answer");
        assert!(line.contains("\"result\""), "{line}");
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code": code}}});
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("send initialized");
        writeln!(stdin, "{call}").expect("send the call");
        until_named(&marker, 1, Duration::from_secs(60), "the run");
        send_signal(name, child.id());
        // The client still reads serve's stdout, and holds its stdin open.
        let rest: Vec<String> = stdout.lines().map_while(Result::ok).collect();
        let code = exits_within(&mut child, EXIT_BOUND, &format!("serve (SIG{name})"));
        let log = log.join().expect("stderr");
        assert_eq!(code, Some(expected), "SIG{name}; stderr: {log}");
        let answer = rest
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|message| message["id"] == 1)
            .unwrap_or_else(|| panic!("SIG{name}: the run got no answer: {rest:?} {log}"));
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(
            text.contains("cancelled because mcp-code-mode is shutting down"),
            "SIG{name}: {answer}"
        );
        assert!(
            !log.lines().any(|line| line.contains(" ERROR ")),
            "SIG{name}: a signal is a normal ending, yet serve logged an error: {log}"
        );
        assert!(
            processes_named(&marker).is_empty(),
            "SIG{name}: the sandbox outlived serve"
        );
        drop(stdin);
    }
}

/// The most a signal-ended `serve --pool 0` may take to exit here: its own ending takes
/// tens of milliseconds; a pending stdin read on tokio's blocking pool used to hold the
/// runtime's shutdown for its full 2 s timeout.
const SIGNAL_EXIT_BOUND: Duration = Duration::from_millis(1500);

#[test]
fn a_signal_ends_serve_promptly_while_its_client_holds_stdin_open() {
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    // stdout a file (rmcp's pipe path needs both streams to be pipes), and stdin either a
    // pipe or a socket: both were read on the blocking pool, and both are held open here.
    let dir = tempfile::tempdir().expect("tempdir");
    for kind in ["pipe", "socket"] {
        let out_path = dir.path().join(format!("{kind}.out"));
        let out = std::fs::File::create(&out_path).expect("stdout file");
        let mut command = Command::new(bin());
        command
            .args(["serve", "--pool", "0", "--"])
            .args(toy())
            .stdout(out)
            .stderr(Stdio::null());
        let (mut input, mut child): (Box<dyn Write>, Child) = if kind == "pipe" {
            let mut child = command.stdin(Stdio::piped()).spawn().expect("start serve");
            (Box::new(child.stdin.take().expect("stdin")), child)
        } else {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socketpair");
            let theirs = std::os::fd::OwnedFd::from(theirs);
            let child = command.stdin(theirs).spawn().expect("start serve");
            (Box::new(ours), child)
        };
        writeln!(input, "{RAW_INITIALIZE}").expect("send initialize");
        // Once serve answered initialize, it serves, with a read of stdin pending.
        let start = Instant::now();
        while !std::fs::read_to_string(&out_path)
            .unwrap_or_default()
            .contains("\"result\"")
        {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{kind}: no answer"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        send_signal("TERM", child.id());
        let signalled = Instant::now();
        let code = exits_within(&mut child, EXIT_BOUND, &format!("serve ({kind}, SIGTERM)"));
        assert_eq!(code, Some(143), "{kind}");
        let took = signalled.elapsed();
        assert!(
            took < SIGNAL_EXIT_BOUND,
            "{kind}: serve took {took:?} to exit after SIGTERM with stdin open"
        );
        drop(input);
    }
}

#[test]
fn an_unknown_option_before_code_is_named_in_execs_error() {
    let out = Command::new(bin())
        .args(["exec", "--pool", "2", "--code", "print(1)", "--"])
        .args(toy())
        .output()
        .expect("run exec");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unexpected argument '--pool'"), "{stderr}");
    assert!(!stderr.contains("not provided"), "{stderr}");
}

#[test]
fn exec_refuses_a_code_file_longer_than_serve_takes_a_line_without_running_it() {
    // One byte past 16 MiB, the longest line serve takes from a stdio client (a sparse file:
    // NUL bytes the code would fail on, had exec run it).
    let file = tempfile::NamedTempFile::new().expect("temp file");
    file.as_file()
        .set_len(16 * 1024 * 1024 + 1)
        .expect("grow the file");
    let out = Command::new(bin())
        .args(["exec", "--file"])
        .arg(file.path())
        .arg("--")
        .args(toy())
        .output()
        .expect("run exec");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the code is longer than 16777216 bytes (16 MiB)"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no run, no result line");
}

#[test]
fn a_launcher_whose_rootfs_is_gone_exits_125_saying_the_rootfs_is_gone() {
    // A rootfs moved away while serve runs: the launcher says the rootfs itself is missing,
    // not that it lacks a `tmp` directory.
    let dir = tempfile::tempdir().expect("tempdir");
    let rootfs = dir.path().join("rootfs-gone");
    let out = Command::new(bin())
        .arg("__launcher")
        .arg("--rootfs")
        .arg(&rootfs)
        .args(["--", "/usr/bin/python3", "-c", "1"])
        .stdin(Stdio::null())
        .output()
        .expect("run the launcher");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "failed to find the rootfs {}: it is missing (was it moved or removed?) (stage mount)",
            rootfs.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("in the rootfs: it needs"), "{stderr}");
}
