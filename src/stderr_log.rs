//! Everything this program writes on its own stderr (tracing logs and the last-resort error
//! line) goes through [`EscapedStderr`], so text that came from a sandbox or a wrapped
//! server (a server's stderr quoted in a startup error, a tool name in a warning, a
//! structured log field) cannot move the operator's terminal cursor, retitle its window or
//! colour what follows. See docs/threat-model.md, "Forged host errors".
//!
//! Every URL in that text is shown without its userinfo, query and fragment (README,
//! "Wrapped servers": a remote server's URL may hold a key there): rmcp's own error lines
//! quote reqwest's errors, which carry the whole request URL.
//!
//! Logs are therefore written without ANSI colours: a colour sequence of our own would be
//! escaped like anyone else's.
//!
//! The escaped text goes to [`crate::stderr_queue`], whose thread writes it: a stderr nobody
//! reads never holds up the thread that logged.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

use crate::bridge::upstream::plain::shown_url;
use crate::sandbox::escape_controls;
use crate::stderr_queue::{self, Keep};

/// A `MakeWriter` for tracing-subscriber whose writers escape every control character but
/// newline and tab (C0, DEL, C1: ECMA-48) and cut every URL to [`shown_url`] before the
/// text reaches stderr (through [`stderr_queue`], as a log line that is dropped when
/// stderr has fallen 1 MiB behind). Each `write` call is
/// escaped on its own; tracing's fmt layer writes each event in one call, so a multi-byte
/// character is never split across calls in practice, and one that is split is written as
/// U+FFFD rather than as raw bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EscapedStderr;

impl<'a> MakeWriter<'a> for EscapedStderr {
    type Writer = EscapingWriter<QueuedStderr>;

    fn make_writer(&'a self) -> Self::Writer {
        EscapingWriter(QueuedStderr(Keep::IfRoom))
    }
}

/// A writer whose every `write` is one piece of text for [`stderr_queue::write`], kept as
/// the [`Keep`] says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueuedStderr(Keep);

impl Write for QueuedStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        stderr_queue::write(buf, self.0);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The writer [`EscapedStderr`] makes: cuts URLs and escapes control characters, then writes
/// to `W`.
#[derive(Debug)]
pub(crate) struct EscapingWriter<W: Write>(pub W);

impl<W: Write> Write for EscapingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = escape_controls(&redact_urls(&String::from_utf8_lossy(buf)));
        self.0.write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Print `mcp-code-mode: {message}` on stderr with control characters escaped: the one
/// line a failed command ends with, which may quote a wrapped server's stderr.
pub(crate) fn error_line(message: &str) {
    line(&format!("mcp-code-mode: {message}"));
}

/// Print `text` and a newline on stderr, with control characters escaped and URLs cut, in
/// one piece and never dropped (a result line, a progress line, the last error).
pub(crate) fn line(text: &str) {
    let mut writer = EscapingWriter(QueuedStderr(Keep::Always));
    let _ = writer.write_all(format!("{text}\n").as_bytes());
}

/// `text` with each `scheme://…` URL in it shown as [`shown_url`] shows it. A URL runs from
/// its scheme to the first space, quote, bracket or other character that cannot be in one
/// unescaped (RFC 3986), so a URL quoted in `url: "…"` or `(…)` ends at its quote.
fn redact_urls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("://") {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let len = rest[at..]
            .find(|c: char| {
                c.is_whitespace()
                    || c.is_control()
                    || matches!(
                        c,
                        '"' | '\'' | '<' | '>' | '(' | ')' | '`' | '{' | '}' | '|' | '\\' | '^'
                    )
            })
            .unwrap_or(rest.len() - at);
        let end = at + len;
        out.push_str(&rest[..start]);
        out.push_str(&shown_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_url_loses_its_userinfo_query_and_fragment() {
        let line = r#"ERROR worker quit: reqwest::Error { url: "http://u:pw@127.0.0.1:9/mcp?key=SECRET#f", source: x } (url (https://h/p?key=SECRET)) at https://h/a b"#;
        let mut out = EscapingWriter(Vec::new());
        out.write_all(line.as_bytes()).unwrap();
        let text = String::from_utf8(out.0).unwrap();
        assert_eq!(
            text,
            r#"ERROR worker quit: reqwest::Error { url: "http://127.0.0.1:9/mcp", source: x } (url (https://h/p)) at https://h/a b"#
        );
    }

    #[test]
    fn escape_sequences_reach_the_writer_as_text() {
        let mut out = EscapingWriter(Vec::new());
        out.write_all("title \u{1b}]0;PWNED\u{7} red \u{1b}[31m csi \u{9b}2J end\n\tok".as_bytes())
            .unwrap();
        let text = String::from_utf8(out.0).unwrap();
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{text:?}"
        );
        assert!(text.contains("\\u{1b}]0;PWNED\\u{7}"), "{text}");
        assert!(text.ends_with("end\n\tok"), "{text}");
    }
}
