//! `serve --http`'s bounds on connections, judged from raw TCP:
//!
//! - a connection that sends half a request header is closed within the header read
//!   timeout;
//! - a connection that sends a request's headers and then trickles its body is closed
//!   within the same timeout, counted from the headers, and is answered `408` (not `413`),
//!   counted as `body_timeout`;
//! - while more half-sent connections are open than the process has descriptors, `/healthz`
//!   still answers (the connection cap keeps the rest in the accept queue, and the timeout
//!   frees the slots);
//! - with a token, a `401` closes its connection, and clients without the token that keep
//!   every connection slot busy with requests (refused ones, and `/healthz/live`, which
//!   needs no token) do not keep a client with the token out: a connection that never
//!   presented the token is closed one header timeout after it was accepted.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::common::{bin, example};
use super::http_serving::Served;

/// The start of a request whose header block never ends.
const HALF_A_HEADER: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";

/// The bearer token of the tests that serve with one.
const TOKEN: &str = "connections-test-token-0123456789";

/// `serve --http` wrapping the toy server, under `ulimit -n NOFILE` when given.
fn serve(args: &[&str], nofile: Option<u32>) -> Served {
    serve_as(args, nofile, None)
}

/// [`serve`], requiring `token` when given (else with `--http-no-auth`).
fn serve_as(args: &[&str], nofile: Option<u32>, token: Option<&str>) -> Served {
    let command = match nofile {
        Some(n) => {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\"")])
                .arg(bin());
            c
        }
        None => Command::new(bin()),
    };
    Served::launch_as(command, args, token, |command, journal| {
        command
            .arg("--")
            .arg(example("toy_server"))
            .arg("--journal")
            .arg(journal);
    })
}

fn half_sent(addr: &str) -> std::io::Result<TcpStream> {
    let mut stream = TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(5))?;
    stream.write_all(HALF_A_HEADER)?;
    Ok(stream)
}

#[test]
fn a_connection_that_sends_half_a_header_is_closed_within_the_header_read_timeout() {
    let served = serve(&["--http-header-timeout", "2"], None);
    let mut stream = half_sent(served.addr()).unwrap();
    let began = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 256];
    // The server closes it: end of file (or a reset), not the read timeout.
    let read = stream.read(&mut buf);
    let waited = began.elapsed();
    assert!(
        matches!(&read, Ok(0))
            || matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "the half-sent connection was not closed: {read:?} after {waited:?}\n{}",
        served.log()
    );
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(20),
        "closed after {waited:?}, the timeout is 2 s"
    );
}

#[test]
fn a_connection_that_trickles_a_request_body_is_closed_within_the_header_read_timeout() {
    let served = serve(&["--http-header-timeout", "2"], None);
    let mut stream =
        TcpStream::connect_timeout(&served.addr().parse().unwrap(), Duration::from_secs(5))
            .unwrap();
    stream
        .write_all(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
              Accept: application/json, text/event-stream\r\nContent-Length: 200\r\n\r\n{",
        )
        .unwrap();
    let began = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_millis(400)))
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    // One body byte every 400 ms (each within the timeout, the whole body never), until
    // the server closes the connection or 12 s pass.
    let closed = loop {
        if began.elapsed() > Duration::from_secs(12) {
            break false;
        }
        if stream.write_all(b" ").is_err() {
            break true;
        }
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => {}
        }
    };
    let waited = began.elapsed();
    assert!(
        closed,
        "the trickling connection was still open after {waited:?}; read: {}\n{}",
        String::from_utf8_lossy(&answer),
        served.log()
    );
    assert!(
        waited >= Duration::from_millis(1500),
        "closed after {waited:?}, before the 2 s timeout: {}",
        String::from_utf8_lossy(&answer)
    );
    // A slow body is a timeout, not a body over --http-max-body (200 bytes here).
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 408") && answer.contains("sent too slowly"),
        "{answer}"
    );
    assert!(answer.contains("--http-header-timeout"), "{answer}");
    let (status, metrics) = served.request("GET", "/metrics", &[], "");
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics.contains("mcp_code_mode_refusals_total{reason=\"body_timeout\"} 1"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("reason=\"body_too_large\"} 1"),
        "the slow body was counted as too large: {metrics}"
    );
}

#[test]
fn healthz_answers_while_more_half_sent_connections_are_open_than_serve_has_descriptors() {
    // 400 stalled connections against 256 descriptors: without a cap the process runs out
    // of descriptors, and without the timeout none is ever given back.
    let served = serve(
        &[
            "--http-header-timeout",
            "1",
            "--http-max-connections",
            "100",
        ],
        Some(256),
    );
    let stalled: Vec<TcpStream> = (0..400)
        .filter_map(|_| half_sent(served.addr()).ok())
        .collect();
    assert!(
        stalled.len() >= 300,
        "only {} of 400 connections could be opened\n{}",
        stalled.len(),
        served.log()
    );
    std::thread::sleep(Duration::from_millis(500));
    let began = Instant::now();
    let (status, text) = served.request("GET", "/healthz", &[], "");
    assert!(
        status == 200 || status == 503,
        "/healthz got {status} after {:?} with {} stalled connections: {text}\n{}",
        began.elapsed(),
        stalled.len(),
        served.log()
    );
    assert!(text.contains("\"live\":true"), "{text}\n{}", served.log());
    drop(stalled);
}

#[test]
fn a_request_without_the_token_is_answered_401_and_its_connection_closed() {
    let served = serve_as(&["--pool", "0"], None, Some(TOKEN));
    let mut stream =
        TcpStream::connect_timeout(&served.addr().parse().unwrap(), Duration::from_secs(5))
            .unwrap();
    // Keep-alive (HTTP/1.1's default): only the server's choice closes it.
    stream
        .write_all(format!("GET /mcp HTTP/1.1\r\nHost: {}\r\n\r\n", served.addr()).as_bytes())
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let began = Instant::now();
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        read.is_ok(),
        "the connection was kept open after its 401 ({read:?} after {:?}): {answer}",
        began.elapsed()
    );
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
}

/// Keep a connection to `addr` busy until `stop` (or `until`): `GET path` without the
/// token every 300 ms, on one keep-alive connection, opening a new one whenever the server
/// closes it. Each answer counts in `answers`.
fn hold_without_token(
    addr: String,
    path: &'static str,
    stop: Arc<AtomicBool>,
    until: Instant,
    answers: Arc<AtomicUsize>,
) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let going = || !stop.load(Ordering::SeqCst) && Instant::now() < until;
    while going() {
        let Ok(mut stream) = TcpStream::connect(&addr) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut buf = [0u8; 4096];
        while going() {
            if stream.write_all(request.as_bytes()).is_err() {
                break;
            }
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    answers.fetch_add(1, Ordering::SeqCst);
                }
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

#[test]
fn clients_without_the_token_keeping_every_connection_busy_do_not_keep_a_client_with_the_token_from_being_answered()
 {
    let served = serve_as(
        &[
            "--pool",
            "0",
            "--http-header-timeout",
            "2",
            "--http-max-connections",
            "4",
        ],
        None,
        Some(TOKEN),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicUsize::new(0));
    let until = Instant::now() + Duration::from_secs(30);
    // As many holders as there are slots: two refused (401), two on the probe that needs
    // no token.
    let holders: Vec<_> = ["/mcp", "/mcp", "/healthz/live", "/healthz/live"]
        .into_iter()
        .map(|path| {
            let (addr, stop, answers) = (served.addr().to_owned(), stop.clone(), answers.clone());
            std::thread::spawn(move || hold_without_token(addr, path, stop, until, answers))
        })
        .collect();
    // Every slot taken: each holder has been answered at least once.
    let warm = Instant::now();
    while answers.load(Ordering::SeqCst) < 8 && warm.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        answers.load(Ordering::SeqCst) >= 8,
        "the holders were not answered\n{}",
        served.log()
    );
    let began = Instant::now();
    let (status, text) = served.initialize(&[]);
    let waited = began.elapsed();
    stop.store(true, Ordering::SeqCst);
    for holder in holders {
        holder.join().unwrap();
    }
    assert_eq!(status, 200, "{text}\n{}", served.log());
    // One header timeout (2 s) frees a slot; the rest is margin for a loaded machine.
    assert!(
        waited < Duration::from_secs(10),
        "the client with the token waited {waited:?} for its answer\n{}",
        served.log()
    );
}
