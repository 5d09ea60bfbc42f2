//! `serve --http`: a request whose id is already in use by a request in flight in its
//! session is refused at once (`400`, `-32600`) and never runs; the run under that id is
//! still answered, the id is free once it is, and after a cancel; another session's ids are
//! its own.

use std::time::{Duration, Instant};

use serde_json::json;

use super::Served;
use crate::suite::common::run_request as run;

#[test]
fn a_request_reusing_an_id_in_flight_in_its_session_is_refused_and_the_first_run_is_answered() {
    let served = Served::start(&[], None);
    let (a, b) = (served.open_session(), served.open_session());
    let sleepy = "import asyncio\nawait asyncio.sleep(4)\nprint('first')";
    let first = std::thread::scope(|scope| {
        let first = scope.spawn(|| served.post_in(&a, &run(6, sleepy)));
        std::thread::sleep(Duration::from_millis(1500));
        let (status, text) = served.post_in(&a, &run(6, "print('second')"));
        assert_eq!(status, 400, "{text}");
        assert!(
            text.contains(r#""code":-32600"#) && text.contains("already in use"),
            "{text}"
        );
        // Another session's id 6 is its own.
        let (status, text) = served.post_in(&b, &run(6, "print('other')"));
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("other"), "{text}");
        first.join().unwrap()
    });
    let (status, text) = first;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("first") && !text.contains("second"), "{text}");
    // Answered: the id is free again.
    let (status, text) = served.post_in(&a, &run(6, "print('third')"));
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("third"), "{text}");
}

#[test]
fn an_id_whose_request_the_client_cancelled_is_free_again() {
    let served = Served::start(&[], None);
    let session = served.open_session();
    let long = "import asyncio\nawait asyncio.sleep(60)";
    std::thread::scope(|scope| {
        let cancelled = scope.spawn(|| served.post_in(&session, &run(7, long)));
        std::thread::sleep(Duration::from_millis(1500));
        let (status, text) = served.post_in(&session, &run(7, "print('early')"));
        assert_eq!(status, 400, "in flight: {text}");
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": 7, "reason": "test"}});
        let (status, text) = served.post_in(&session, &cancel.to_string());
        assert_eq!(status, 202, "{text}");
        // The run ends (its sandbox is killed) and the id is free; until then it is held.
        let end = Instant::now() + Duration::from_secs(20);
        let (status, text) = loop {
            let (status, text) = served.post_in(&session, &run(7, "print('after')"));
            if status != 400 || Instant::now() > end {
                break (status, text);
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("after"), "{text}");
        let _ = cancelled.join();
    });
}

#[test]
fn an_id_stays_in_use_while_its_run_goes_on_after_the_client_closed_the_response() {
    use std::io::{Read, Write};
    let served = Served::start(&[], None);
    let session = served.open_session();
    let body = run(8, "import asyncio\nawait asyncio.sleep(5)\nprint('first')");
    let mut stream = std::net::TcpStream::connect(served.addr()).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{body}",
        served.addr(),
        body.len()
    )
    .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the run's stream opened");
    // The client closes the response; the run goes on, and so does its id.
    drop(stream);
    std::thread::sleep(Duration::from_millis(500));
    let (status, text) = served.post_in(&session, &run(8, "print('second')"));
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("already in use"), "{text}");
}
