//! Newline-delimited input read with a bound on each line.
//!
//! Both ends the host reads line by line use this one reader: the runner protocol (run loop,
//! [`crate::limits::MAX_PROTOCOL_LINE_BYTES`]) and a wrapped server's stdio transport
//! (`bridge::upstream::transport`, 16 MiB). A line ends at `\n`. At the end of input, bytes
//! after the last `\n` are not a line: they are what a writer killed in the middle of a line
//! leaves, and are dropped (counted in [`LineRead::Eof`]), as the reference MCP SDKs' stdio
//! readers do. A line longer than the bound is never held in memory in full.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What [`read_line`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// A whole line, now in the buffer without its `\n`.
    Line,
    /// The end of input; `dropped` bytes followed the last `\n` and were not a line.
    Eof {
        /// Bytes of the unterminated tail, dropped.
        dropped: usize,
    },
    /// The line grew past the bound before its `\n`; the reader stopped inside it.
    TooLong,
}

/// Read one line of at most `max` bytes (the `\n` not counted) into `line`, which is cleared
/// first.
///
/// # Errors
/// The reader's own I/O error.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
    line: &mut Vec<u8>,
) -> std::io::Result<LineRead> {
    line.clear();
    continue_line(reader, max, line).await
}

/// [`read_line`] without clearing `line` first: the read goes on from what `line` holds.
/// Cancel-safe: dropped before it returns, it has consumed from `reader` exactly what it
/// appended to `line`, so the next call picks the line up where this one stopped. The caller
/// clears `line` after each [`LineRead::Line`].
///
/// # Errors
/// The reader's own I/O error.
pub(crate) async fn continue_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
    line: &mut Vec<u8>,
) -> std::io::Result<LineRead> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            let dropped = line.len();
            line.clear();
            return Ok(LineRead::Eof { dropped });
        }
        let (content, ended) = match memchr::memchr(b'\n', available) {
            Some(at) => (at, true),
            None => (available.len(), false),
        };
        if line.len() + content > max {
            return Ok(LineRead::TooLong);
        }
        line.extend_from_slice(&available[..content]);
        reader.consume(content + usize::from(ended));
        if ended {
            return Ok(LineRead::Line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    /// Every read of `input` through a buffer of `capacity` bytes, until the end or a stop.
    async fn reads(input: &[u8], max: usize, capacity: usize) -> Vec<(LineRead, Vec<u8>)> {
        let mut reader = BufReader::with_capacity(capacity, input);
        let mut line = Vec::new();
        let mut out = Vec::new();
        loop {
            let read = read_line(&mut reader, max, &mut line).await.unwrap();
            out.push((read, line.clone()));
            if read != LineRead::Line {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_end_at_newline_and_keep_everything_else() {
        for capacity in [1, 3, 64] {
            let got = reads(b"a\r\n\nbc\n", 10, capacity).await;
            assert_eq!(
                got,
                vec![
                    (LineRead::Line, b"a\r".to_vec()),
                    (LineRead::Line, b"".to_vec()),
                    (LineRead::Line, b"bc".to_vec()),
                    (LineRead::Eof { dropped: 0 }, b"".to_vec()),
                ],
                "capacity {capacity}"
            );
        }
    }

    #[tokio::test]
    async fn an_unterminated_last_line_is_dropped_and_counted() {
        let got = reads(b"whole\n{\"half\":", 100, 4).await;
        assert_eq!(got[0], (LineRead::Line, b"whole".to_vec()));
        assert_eq!(got[1], (LineRead::Eof { dropped: 8 }, Vec::new()));
        assert_eq!(got.len(), 2);
    }

    #[tokio::test]
    async fn the_bound_counts_the_line_without_its_newline() {
        for capacity in [1, 5, 64] {
            let got = reads(b"12345\n123456\n", 5, capacity).await;
            assert_eq!(got[0], (LineRead::Line, b"12345".to_vec()));
            assert_eq!(got[1].0, LineRead::TooLong, "capacity {capacity}");
            assert!(got[1].1.len() <= 5);
        }
    }

    #[tokio::test]
    async fn an_endless_line_stops_at_the_bound() {
        let input = vec![b'x'; 1 << 20];
        let got = reads(&input, 1000, 4096).await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, LineRead::TooLong);
        assert!(got[0].1.len() <= 1000);
    }
}
