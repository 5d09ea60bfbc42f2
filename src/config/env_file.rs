//! A config entry's `envFile`: a dotenv file (`KEY=VALUE` lines, `#` comments, quotes, a
//! quoted value across lines) read with dotenvy.
//!
//! A line that cannot be read is named by its number only, never by its text: a broken line
//! in an env file is often a secret (a pasted key, a value with a stray quote), and the error
//! goes to the MCP client's log. dotenvy's own error quotes the line, so its number is taken
//! here: the file reaches dotenvy one physical line per read (see [`LineCounter`]).

use std::cell::Cell;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

/// Variables of the dotenv file at `path`, in file order.
///
/// Errors (the text after the path, which the caller prefixes): the file cannot be opened or
/// read (the I/O error, or "stream did not contain valid UTF-8"), or `line N cannot be read
/// as KEY=VALUE`, N counted from 1 at the first line of the entry at fault.
pub(super) fn read(path: &Path) -> Result<Vec<(String, String)>, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    parse(file)
}

/// Variables of the dotenv text `input` gives, in file order (errors as for [`read`]).
fn parse(input: impl Read) -> Result<Vec<(String, String)>, String> {
    let started = Rc::new(Cell::new(0));
    let counter = LineCounter {
        lines: BufReader::new(input),
        at_line_start: true,
        started: started.clone(),
    };
    dotenvy::from_read_iter(counter)
        .map(|item| {
            item.map_err(|e| match e {
                dotenvy::Error::LineParse(text, _) => {
                    // The entry ended on the last line read; its own line breaks (a quoted
                    // value across lines) lead back to the line it started on.
                    let spanned = text.trim_end_matches(['\n', '\r']).matches('\n').count();
                    let line = started.get().saturating_sub(spanned).max(1);
                    format!(
                        "line {line} cannot be read as KEY=VALUE (its text is not shown here: it may hold a secret)"
                    )
                }
                other => other.to_string(),
            })
        })
        .collect()
}

/// A reader that hands out at most one physical line (through its `\n`) per read, counting
/// the lines it has started. dotenvy reads through a `BufReader`, which reads again only when
/// its buffer is empty and stops a line at its `\n`, so when dotenvy reports an entry the
/// count is the line that entry ended on.
struct LineCounter<R> {
    lines: BufReader<R>,
    at_line_start: bool,
    started: Rc<Cell<usize>>,
}

impl<R: Read> Read for LineCounter<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let available = self.lines.fill_buf()?;
        let line_end = available
            .iter()
            .position(|&b| b == b'\n')
            .map_or(available.len(), |i| i + 1);
        let n = line_end.min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        buf[..n].copy_from_slice(&available[..n]);
        if self.at_line_start {
            self.started.set(self.started.get() + 1);
        }
        self.at_line_start = available[n - 1] == b'\n';
        self.lines.consume(n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_line_is_named_by_its_number_without_its_text() {
        let text =
            "A=1\n# a comment\n\nB=\"two\"\nthis line has SECRET_TOKEN_abc123 but no equals\nC=3\n";
        let error = parse(text.as_bytes()).expect_err("line 5 is bad");
        assert!(
            error.starts_with("line 5 cannot be read as KEY=VALUE"),
            "{error}"
        );
        assert!(!error.contains("SECRET"), "{error}");
    }

    #[test]
    fn a_bad_entry_after_a_value_across_lines_is_counted_by_physical_lines() {
        let text = "A=\"one\ntwo\nthree\"\nB=2\nbad line\n";
        assert_eq!(
            parse(text.as_bytes()).expect_err("line 5 is bad"),
            "line 5 cannot be read as KEY=VALUE (its text is not shown here: it may hold a secret)"
        );
    }

    #[test]
    fn an_unterminated_quote_is_named_by_the_line_it_opens_on() {
        let text = "A=1\nB=\"SECRET_VALUE\nstill secret\n";
        let error = parse(text.as_bytes()).expect_err("the quote never closes");
        assert!(error.starts_with("line 2 cannot be read"), "{error}");
        assert!(!error.contains("SECRET"), "{error}");
    }

    #[test]
    fn a_line_longer_than_a_read_buffer_counts_once() {
        let text = format!("A={}\nB=2\n=bad\n", "x".repeat(20_000));
        let error = parse(text.as_bytes()).expect_err("line 3 is bad");
        assert!(error.starts_with("line 3 cannot be read"), "{error}");
    }

    #[test]
    fn a_good_file_gives_its_variables_in_order() {
        let text = "A=1\r\nexport B='two words'\nC=\"x\ny\"\nD=${A}2\n";
        let vars = parse(text.as_bytes()).expect("a good file");
        let expected = [("A", "1"), ("B", "two words"), ("C", "x\ny"), ("D", "12")];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(vars, expected);
    }
}
