//! `mcp-code-mode doctor`: which sandbox layers this host gives us, and how to get the rest.
//!
//! Three parts: [`facts`] gathers [`Facts`] (I/O, no judgement); [`checks`] maps them to a
//! [`Report`] and is pure, so every diagnosis is unit-tested without the kernel (with the
//! fixes from `advice`); [`report`](mod@report) holds the lines, the verdict and
//! [`Report::exit_code`]: 0 every layer, 1 degraded (it runs, with less), 2 the native
//! backend cannot run.
//!
//! `serve --strict` and `exec --strict` use [`require_every_layer`]. No unsafe here.

mod advice;
mod checks;
mod facts;
mod report;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use crate::rootfs::Rootfs;

pub(crate) use checks::report;
pub(crate) use facts::{DockerCheck, RootfsFacts, find_rootfs, gather};
pub(crate) use report::Report;

/// `--strict` found a native layer that is not ok.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DoctorError {
    /// The lines that are not ok, rendered.
    #[error(
        "refusing to start the native backend with --strict: {count} layer(s) not ok (mcp-code-mode doctor says more):\n{lines}"
    )]
    NotEveryLayer { count: usize, lines: String },
}

/// For `--strict`: Ok when the native backend would run with every layer on `rootfs`,
/// else the lines that are not ok.
///
/// # Errors
/// [`DoctorError::NotEveryLayer`].
pub(crate) async fn require_every_layer(rootfs: &Rootfs) -> Result<(), DoctorError> {
    let facts = gather(RootfsFacts::Present(rootfs.clone()), DockerCheck::Skip).await;
    let report = report(&facts);
    let bad = report.not_ok();
    if bad.is_empty() {
        return Ok(());
    }
    Err(DoctorError::NotEveryLayer {
        count: bad.len(),
        lines: bad
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

/// What `mcp-code-mode doctor` does: find (or, with `build`, build) the rootfs, gather the
/// facts, report.
pub(crate) async fn run(cache_root: Option<PathBuf>, build: bool) -> Report {
    let rootfs = find_rootfs(cache_root, build).await;
    let docker = if build {
        DockerCheck::Import
    } else {
        DockerCheck::Look
    };
    report(&gather(rootfs, docker).await)
}
