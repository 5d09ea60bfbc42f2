//! Spawning sandbox processes from one long-lived thread.
//!
//! The launcher sets `PR_SET_PDEATHSIG`, which fires when the *thread* that forked it exits,
//! not the process (prctl(2)). Tokio's blocking pool retires idle threads, so a launcher
//! spawned from one could be killed mid-run. Every sandbox is therefore spawned from this
//! thread, which lives as long as the process; when the process dies, the thread dies with
//! it, and so does every sandbox.

use std::sync::OnceLock;
use std::sync::mpsc;

use tokio::process::{Child, Command};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

type Job = (Handle, Command, oneshot::Sender<std::io::Result<Child>>);

fn sender() -> &'static Mutex<mpsc::Sender<Job>> {
    static SENDER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    SENDER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        // If the thread cannot start, `rx` is dropped and every spawn fails with "the
        // spawner thread is gone".
        let started = std::thread::Builder::new()
            .name("sandbox-spawner".into())
            .spawn(move || {
                while let Ok((handle, mut command, reply)) = rx.recv() {
                    let _guard = handle.enter();
                    let _ = reply.send(command.spawn());
                }
            });
        if let Err(e) = started {
            tracing::error!("failed to start the sandbox spawner thread: {e}");
        }
        Mutex::new(tx)
    })
}

use std::sync::Mutex;

/// Spawn `command` from the long-lived spawner thread.
///
/// # Errors
/// The spawn's I/O error, or `Other` when the spawner thread is gone.
pub(super) async fn spawn(command: Command) -> std::io::Result<Child> {
    let (reply, answer) = oneshot::channel();
    let job = (Handle::current(), command, reply);
    sender()
        .lock()
        .map_err(|_| std::io::Error::other("the spawner lock is poisoned"))?
        .send(job)
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    answer
        .await
        .map_err(|_| std::io::Error::other("the spawner thread dropped the request"))?
}
