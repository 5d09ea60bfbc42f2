//! A remote server's HTTP client on a thread of its own, so that reading what it sends never
//! holds up `serve`'s runtime thread.
//!
//! rmcp reads a response body or an SSE event into its typed messages through serde's
//! buffered content, about a microsecond per byte of small JSON objects in a release build
//! (`line_decode.rs` says the same of a local server's lines): a body of many tiny content
//! blocks takes seconds. rmcp's Streamable HTTP client does that work in its worker task,
//! with the repair of `lenient_http.rs` beside it. [`OwnThread::start`] makes that transport
//! with a current-thread tokio runtime of its own entered, so the worker, the HTTP
//! connections it opens and every body it reads run on one thread per remote server; the
//! messages reach the session on `serve`'s runtime already read, through rmcp's channels.
//! Requests sent beside rmcp's session (`raw_http.rs`) stay on `serve`'s runtime: they are
//! task requests with small answers.

use std::borrow::Cow;

use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::oneshot;

/// A transport whose tasks run on a thread of its own. Dropping it ends that thread: its
/// runtime stops, and whatever was still running there is dropped (rmcp's `close`, which
/// ends the session first, has run by then when the session was closed).
pub(super) struct OwnThread<T> {
    inner: T,
    /// Dropped after `inner`: the thread's runtime then stops.
    _stop: oneshot::Sender<()>,
}

impl<T> OwnThread<T> {
    /// Start a thread running a current-thread runtime, and call `make` with that runtime
    /// entered, so the tasks `make` spawns (rmcp's transport worker) and those they spawn
    /// run on that thread.
    ///
    /// # Errors
    /// The runtime or the thread could not be made.
    pub(super) fn start(make: impl FnOnce() -> T) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("mcp-http-client".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        let inner = {
            let _entered = handle.enter();
            make()
        };
        Ok(Self { inner, _stop: stop })
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for OwnThread<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
