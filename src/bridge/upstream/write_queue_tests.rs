use super::*;
use crate::bridge::upstream::ticket::WriteTicket;
use tokio::io::AsyncReadExt;

/// A queue writing into a pipe of `capacity` bytes nobody reads yet.
fn queue(capacity: usize) -> (WriteQueue, tokio::io::DuplexStream, CloseReason) {
    let (ours, theirs) = tokio::io::duplex(capacity);
    let reason = CloseReason::default();
    let (queue, _task) = WriteQueue::start("test", ours, reason.clone());
    (queue, theirs, reason)
}

fn line(tag: &str, len: usize) -> Vec<u8> {
    let mut line = format!("{tag}:").into_bytes();
    line.resize(len - 1, b'p');
    line.push(b'\n');
    line
}

/// Read what reached the other end within a short while.
async fn received(theirs: &mut tokio::io::DuplexStream) -> String {
    let mut all = Vec::new();
    let mut buf = vec![0; 1 << 16];
    while let Ok(Ok(n)) =
        tokio::time::timeout(std::time::Duration::from_millis(200), theirs.read(&mut buf)).await
    {
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&all).into_owned()
}

/// Let the writing task take what it can.
async fn settle() {
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
}

#[tokio::test]
async fn a_withdrawn_request_is_never_written_but_one_in_the_pipe_is() {
    let (queue, mut theirs, _) = queue(1024);
    let first = RequestId::Number(1);
    let second = RequestId::Number(2);
    // The first fills the pipe and is being written; the second waits in the queue.
    let a = queue.send(line("first", 4096), Line::Request(Some(first.clone())));
    let b = queue.send(line("second", 100), Line::Request(Some(second.clone())));
    settle().await;
    assert!(!queue.withdraw_request(&first), "the first is in the pipe");
    assert!(queue.withdraw_request(&second));
    assert_eq!(queue.queued(), (0, 0));
    let got = received(&mut theirs).await;
    assert!(got.starts_with("first:"), "{got:.40}");
    assert!(!got.contains("second"), "a withdrawn request was written");
    assert!(a.await.is_ok());
    assert!(b.await.is_ok(), "a withdrawn line's write ends quietly");
}

#[tokio::test]
async fn a_line_whose_sender_stops_waiting_is_withdrawn() {
    let (queue, mut theirs, _) = queue(1024);
    let _first = queue.send(line("first", 4096), Line::Request(None));
    settle().await;
    drop(queue.send(line("dropped", 100), Line::Request(None)));
    queue.send(line("kept", 100), Line::Other).detach();
    let got = received(&mut theirs).await;
    assert!(!got.contains("dropped"), "{got:.40}");
    assert!(got.contains("kept:"), "a detached line is still written");
}

#[tokio::test]
async fn past_the_message_bound_answers_are_dropped_and_requests_fail_the_server() {
    let (queue, _theirs, reason) = queue(64);
    for _ in 0..MAX_QUEUED_MESSAGES + 500 {
        queue.send(line("answer", 150), Line::Other).detach();
    }
    let (count, bytes) = queue.queued();
    // One is being written; the rest wait, no more than the bound.
    assert!(count <= MAX_QUEUED_MESSAGES, "{count} queued");
    assert!(bytes <= MAX_QUEUED_MESSAGES * 150, "{bytes} bytes queued");
    assert!(
        reason.get().is_none(),
        "dropped answers do not fail the server"
    );
    let refused = queue
        .send(line("call", 100), Line::Request(Some(RequestId::Number(9))))
        .await;
    assert!(refused.is_err());
    let why = reason.get().expect("the server is marked failed");
    assert!(why.contains("does not read its input"), "{why}");
}

#[tokio::test]
async fn past_the_byte_bound_a_request_fails_but_one_alone_always_fits() {
    let (queue, _theirs, reason) = queue(64);
    let _held = queue.send(line("held", 1024), Line::Request(None));
    settle().await;
    let _alone = queue.send(line("big", MAX_QUEUED_BYTES + 10), Line::Request(None));
    assert!(reason.get().is_none(), "one message fits an empty queue");
    let over = queue.send(line("more", 100), Line::Request(None)).await;
    assert!(over.is_err(), "over the byte bound");
    assert!(reason.get().is_some());
}

#[tokio::test]
async fn stopping_drops_what_waits_and_ends_the_input() {
    let (ours, mut theirs) = tokio::io::duplex(1024);
    let (queue, task) = WriteQueue::start("test", ours, CloseReason::default());
    let _first = queue.send(line("first", 2048), Line::Other);
    let waiting = queue.send(line("waiting", 100), Line::Other);
    settle().await;
    queue.stop();
    assert!(
        waiting.await.is_err(),
        "its sender learns it was not written"
    );
    let got = received(&mut theirs).await;
    assert!(
        got.starts_with("first:") && !got.contains("waiting"),
        "{got:.40}"
    );
    tokio::time::timeout(std::time::Duration::from_secs(2), task)
        .await
        .expect("the writing task ends")
        .expect("it did not panic");
    assert!(queue.send(line("late", 10), Line::Other).await.is_err());
}

#[tokio::test]
async fn a_call_settled_as_withdrawn_is_skipped_and_so_is_its_cancel() {
    let (queue, mut theirs, _) = queue(1024);
    let (held, waiting) = (WriteTicket::default(), WriteTicket::default());
    let held_id = RequestId::Number(1);
    let waiting_id = RequestId::Number(2);
    // The first is taken and written into the pipe; the second waits behind it.
    let _a = queue.send(
        line("held", 4096),
        Line::Call(held_id.clone(), held.clone()),
    );
    let b = queue.send(
        line("waiting", 100),
        Line::Call(waiting_id.clone(), waiting.clone()),
    );
    settle().await;
    // The calls end before any cancel comes: the record settles each ticket.
    assert!(held.settle(), "a request in the pipe is sent");
    assert!(!waiting.settle(), "a queued request is withdrawn");
    // The writer skips the withdrawn one once the pipe drains, and its cancel goes too.
    let got = received(&mut theirs).await;
    assert!(got.starts_with("held:"), "{got:.40}");
    assert!(!got.contains("waiting"), "a withdrawn request was written");
    assert!(b.await.is_ok(), "a skipped line's write ends quietly");
    assert!(
        queue.withdraw_request(&waiting_id),
        "its cancel is not written"
    );
    assert!(
        !queue.withdraw_request(&held_id),
        "the written one's cancel is"
    );
}

#[tokio::test]
async fn a_line_sent_to_an_idle_queue_is_in_the_pipe_before_its_sender_yields() {
    use futures::FutureExt;
    let (queue, mut theirs, _) = queue(1024);
    let ticket = WriteTicket::default();
    let sent = queue.send(
        line("now", 100),
        Line::Call(RequestId::Number(1), ticket.clone()),
    );
    // No await yet: the writing task has not run, so only the sender can have written it.
    let mut buf = vec![0; 1024];
    let n = theirs
        .read(&mut buf)
        .now_or_never()
        .expect("the line is already in the pipe")
        .unwrap();
    assert_eq!(&buf[..n], &line("now", 100)[..]);
    assert!(
        ticket.settle(),
        "a call written at once is sent, not withdrawn"
    );
    assert_eq!(queue.queued(), (0, 0));
    assert!(sent.await.is_ok());
}

#[tokio::test]
async fn a_line_sent_while_another_is_half_written_waits_whole_behind_it() {
    let (queue, mut theirs, _) = queue(1024);
    // The pipe takes a quarter of the first at once; the writing task owes the rest.
    let first = queue.send(line("first", 4096), Line::Request(None));
    let second = queue.send(line("second", 100), Line::Request(None));
    assert_eq!(queue.queued(), (1, 100), "the second waits in the queue");
    let got = received(&mut theirs).await;
    assert_eq!(
        got.as_bytes(),
        [line("first", 4096), line("second", 100)].concat(),
        "lines arrive whole and in order"
    );
    assert!(first.await.is_ok() && second.await.is_ok());
}
