//! `exec --file PATH`: the code read from a file, a FIFO or `/dev/stdin`.
//!
//! At most [`MAX_CLIENT_LINE_BYTES`] (16 MiB) are read, the most code a run_python call can
//! bring through `serve`'s stdio; reading stops one byte past that bound, so `/dev/zero` or a
//! generator that never ends costs 16 MiB of memory and an error, not the host's memory.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};

use crate::limits::MAX_CLIENT_LINE_BYTES;

/// The code in the file at `path`, as UTF-8 text.
///
/// Errors: the file cannot be opened or read, holds more than [`MAX_CLIENT_LINE_BYTES`]
/// bytes (nothing past the bound is read), or is not UTF-8; each names `path`.
pub(crate) fn read(path: &Path) -> anyhow::Result<String> {
    let failed = || format!("failed to read the code from {}", path.display());
    let file = std::fs::File::open(path).with_context(failed)?;
    let mut bytes = Vec::new();
    // One byte past the bound tells a file of exactly the bound from a longer one.
    file.take(MAX_CLIENT_LINE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(failed)?;
    if bytes.len() > MAX_CLIENT_LINE_BYTES {
        bail!(
            "{}: the code is longer than {} bytes (16 MiB), the most one run takes (a run_python call brings no more on serve's stdio)",
            failed(),
            MAX_CLIENT_LINE_BYTES
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: it is not UTF-8 text (invalid bytes at offset {})",
            failed(),
            e.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn a_file_that_never_ends_is_refused_after_the_bound() {
        // Without the bound this read would go on until the host runs out of memory.
        let error = read(Path::new("/dev/zero")).expect_err("/dev/zero is refused");
        let text = format!("{error:#}");
        assert!(text.contains("/dev/zero"), "{text}");
        assert!(
            text.contains("longer than 16777216 bytes (16 MiB)"),
            "{text}"
        );
    }

    #[test]
    fn code_of_exactly_the_bound_is_read_whole() {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        let code = format!("{}\n", "#".repeat(MAX_CLIENT_LINE_BYTES - 1));
        file.write_all(code.as_bytes()).expect("write");
        assert_eq!(
            read(file.path()).expect("read").len(),
            MAX_CLIENT_LINE_BYTES
        );
    }

    #[test]
    fn code_that_is_not_utf8_is_named_with_where_it_breaks() {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        file.write_all(b"print(1)\n\xff").expect("write");
        let text = format!("{:#}", read(file.path()).expect_err("not UTF-8"));
        assert!(
            text.contains("not UTF-8 text (invalid bytes at offset 9)"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_file_is_named() {
        let text = format!(
            "{:#}",
            read(Path::new("/nonexistent/code.py")).expect_err("missing")
        );
        assert!(
            text.starts_with("failed to read the code from /nonexistent/code.py: "),
            "{text}"
        );
    }
}
