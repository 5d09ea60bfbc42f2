//! A wrapped stdio server's stderr: drained line by line into serve's log, its last lines
//! kept to explain a failed start.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::ChildStderr;

/// Stderr lines kept to explain a failed start.
const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line logged, in characters.
const MAX_STDERR_LINE_CHARS: usize = 500;

/// The last [`STDERR_TAIL_LINES`] lines a server wrote to stderr, each cut to
/// [`MAX_STDERR_LINE_CHARS`] characters; clones share the same lines.
#[derive(Clone, Default)]
pub(super) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        if let Ok(mut t) = self.0.lock() {
            if t.len() == STDERR_TAIL_LINES {
                t.pop_front();
            }
            t.push_back(line);
        }
    }

    /// The kept lines as the tail of an error message ("its stderr ended with: ..."), or
    /// empty when the server wrote none.
    pub(super) fn render(&self) -> String {
        let lines: Vec<String> = self
            .0
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        if lines.is_empty() {
            String::new()
        } else {
            format!("\n  its stderr ended with:\n    {}", lines.join("\n    "))
        }
    }

    /// Read `stderr` until it ends, on a task of its own: each line is logged (at info, with
    /// the server's name) and kept. A line without a newline is read in pieces of at most
    /// 64 KiB, so it never grows without bound.
    pub(super) fn drain(&self, name: String, stderr: ChildStderr) {
        let tail = self.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match AsyncReadExt::take(&mut lines, 64 * 1024)
                    .read_until(b'\n', &mut buf)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let text = String::from_utf8_lossy(&buf);
                        let line =
                            crate::bridge::refusal::cap(text.trim_end(), MAX_STDERR_LINE_CHARS);
                        tracing::info!(server = %name, "stderr: {line}");
                        tail.push(line);
                    }
                }
            }
        });
    }
}
