//! The signals that end `serve` and `exec` (SIGTERM, SIGINT, SIGHUP) and the exit code each
//! leaves: 128 + its number, as a shell reports a process killed by it (130 for SIGINT, 129
//! for SIGHUP, 143 for SIGTERM; POSIX `sh`, "Exit Status" of the Shell Command Language).

use std::sync::{Arc, OnceLock};

/// One of the signals that end `serve` and `exec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// SIGTERM (15), what supervisors send.
    Term,
    /// SIGINT (2), Ctrl-C.
    Int,
    /// SIGHUP (1), the terminal went away.
    Hup,
}

impl Ending {
    /// The signal's number (signal(7)).
    pub(crate) fn number(self) -> i32 {
        match self {
            Self::Term => libc::SIGTERM,
            Self::Int => libc::SIGINT,
            Self::Hup => libc::SIGHUP,
        }
    }

    /// The signal's name, `SIGTERM`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Term => "SIGTERM",
            Self::Int => "SIGINT",
            Self::Hup => "SIGHUP",
        }
    }

    /// The process's exit code after this signal ended it: 128 + its number.
    pub(crate) fn exit_code(self) -> u8 {
        u8::try_from(128 + self.number()).unwrap_or(u8::MAX)
    }
}

/// A future that resolves at the first SIGTERM, SIGINT or SIGHUP with which one it was;
/// never, if they cannot be watched. The signals are watched from this call on (not from
/// the first poll), and from then on they no longer kill the process.
pub(crate) fn first() -> impl std::future::Future<Output = Ending> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let watched = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    );
    async move {
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = watched else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => Ending::Term,
            _ = int.recv() => Ending::Int,
            _ = hup.recv() => Ending::Hup,
        }
    }
}

/// Run `work` until it ends (`Ok` with its output) or `signalled` resolves (`Err` with the
/// signal); then call `wind_down` (which asks `work` to end: cancel its runs, stop reading
/// its client) and let `work` go on for at most `limit` more, so that what it answers then
/// (the cancelled runs' results) is written, before it is dropped. Dropping `work` drops its
/// sandboxes, whose Drop kills them and removes their cgroup or container.
pub(crate) async fn until_signal_wound_down<F: std::future::Future>(
    work: F,
    signalled: impl std::future::Future<Output = Ending>,
    wind_down: impl FnOnce(),
    limit: std::time::Duration,
) -> Result<F::Output, Ending> {
    let mut work = std::pin::pin!(work);
    let ending = tokio::select! {
        out = &mut work => return Ok(out),
        ending = signalled => ending,
    };
    wind_down();
    let _ = tokio::time::timeout(limit, work).await;
    Err(ending)
}

/// A future that resolves at the first of these signals and records which in `caught`, for
/// a shutdown that must own its trigger (`serve --http`'s graceful shutdown).
pub(crate) fn recorded(
    caught: &Arc<OnceLock<Ending>>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let caught = caught.clone();
    let signalled = first();
    async move {
        let _ = caught.set(signalled.await);
    }
}

#[cfg(test)]
mod tests {
    use super::Ending;

    #[test]
    fn each_signal_exits_with_128_plus_its_number() {
        assert_eq!(Ending::Int.exit_code(), 130);
        assert_eq!(Ending::Hup.exit_code(), 129);
        assert_eq!(Ending::Term.exit_code(), 143);
    }
}
