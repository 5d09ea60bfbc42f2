//! Descriptors `serve` inherited without O_CLOEXEC (a parent's pipe, socket or file) reach
//! none of its children: `serve` marks every descriptor above 2 close-on-exec at its start.
//!
//! Tests: `native::a_descriptor_serve_inherits_reaches_no_wrapped_server_or_launcher`, and the
//! same on `docker::` (wrapped server and docker client children).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{bin, example};
use super::pool::children;

/// `serve` (with a pool of one on `backend`) started by a shell that leaves `marker` open at
/// fd 7 without close-on-exec; its wrapped server, a shell that lists its own descriptors
/// into `listing` and then becomes the toy server. stdin is kept open (a client that waits).
fn serve_inheriting(backend: &str, marker: &Path, listing: &Path) -> Child {
    Command::new("bash")
        .args(["-c", "exec 7<\"$1\"; shift; exec \"$@\"", "bash"])
        .arg(marker)
        .arg(bin())
        .args([
            "serve",
            "--pool",
            "1",
            "--backend",
            backend,
            "--",
            "sh",
            "-c",
        ])
        .arg("ls -l /proc/$$/fd > \"$1.part\"; mv \"$1.part\" \"$1\"; shift; exec \"$@\"")
        .arg("sh")
        .arg(listing)
        .arg(example("toy_server"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start serve")
}

/// Every descendant of `pid` (children, their children, ...).
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = children(pid);
    let mut next = 0;
    while next < found.len() {
        let more = children(found[next]);
        found.extend(more);
        next += 1;
    }
    found
}

/// Descendants of `pid` holding a descriptor that names `marker`, with the descriptor.
fn holders(pid: u32, marker: &Path) -> Vec<String> {
    let mut held = Vec::new();
    for process in descendants(pid) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{process}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|target| target == marker) {
                let cmdline = std::fs::read(format!("/proc/{process}/cmdline")).unwrap_or_default();
                held.push(format!(
                    "pid {process} fd {:?}: {}",
                    fd.file_name(),
                    String::from_utf8_lossy(&cmdline).replace('\0', " ")
                ));
            }
        }
    }
    held
}

fn a_descriptor_serve_inherits_reaches_no_wrapped_server_or_launcher(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("inherited-marker");
    std::fs::write(&marker, "a parent's file").unwrap();
    let listing = dir.path().join("wrapped-fds");
    let mut serve = serve_inheriting(backend, &marker, &listing);
    let start = Instant::now();
    // The wrapped server has listed its descriptors, and natively the pool's launcher runs.
    let launcher_up = || {
        backend != "native"
            || children(serve.id()).iter().any(|c| {
                std::fs::read(format!("/proc/{c}/cmdline"))
                    .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains("__launcher"))
            })
    };
    while !(listing.exists() && launcher_up()) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no listing or no launcher within 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let held = holders(serve.id(), &marker);
    let own = std::fs::read_link(format!("/proc/{}/fd/7", serve.id()));
    // The client goes away: serve ends its pool and its server, and exits.
    drop(serve.stdin.take());
    let _ = serve.wait();
    // Control: serve itself did inherit the file at fd 7.
    assert_eq!(own.ok().as_deref(), Some(marker.as_path()));
    let wrapped = std::fs::read_to_string(&listing).unwrap();
    assert!(
        !wrapped.contains(marker.to_str().unwrap()),
        "the wrapped server holds serve's inherited descriptor:\n{wrapped}"
    );
    assert!(held.is_empty(), "serve's children hold it: {held:?}");
}

crate::on_both_backends!(a_descriptor_serve_inherits_reaches_no_wrapped_server_or_launcher);
