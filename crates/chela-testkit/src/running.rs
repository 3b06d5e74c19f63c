//! [`Running`]: the plumbing every fake server shares: its own single-threaded tokio runtime on
//! a named background thread, the state the handle and the server's tasks share, and the stop
//! channel. Dropping it fires the stop channel and joins the thread, which drops the runtime and
//! with it every connection, pending delay and half-sent body: the one shutdown mechanism.
//!
//! A runtime of its own makes a fake work the same from a plain `#[test]` that runs a child
//! process and from inside a `#[tokio::test]`.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

/// A fake's server, serving until dropped.
pub(crate) struct Running<S> {
    addr: SocketAddr,
    shared: Arc<S>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// A fresh runtime for one fake's thread.
pub(crate) fn runtime() -> io::Result<Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// Binds `127.0.0.1:port` (0 picks a free one) for `runtime`.
pub(crate) fn bind(runtime: &Runtime, port: u16) -> io::Result<TcpListener> {
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
    listener.set_nonblocking(true)?;
    let _in_runtime = runtime.enter();
    TcpListener::from_std(listener)
}

impl<S: Send + Sync + 'static> Running<S> {
    /// Binds `127.0.0.1:port` and runs `serve(listener, shared, stop)` on a thread named
    /// `{name}-{port}`; `serve` returns once `stop` fires or its sender is dropped.
    pub(crate) fn start<F, Fut>(name: &str, port: u16, shared: S, serve: F) -> io::Result<Running<S>>
    where
        F: FnOnce(TcpListener, Arc<S>, oneshot::Receiver<()>) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let runtime = runtime()?;
        let listener = bind(&runtime, port)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(shared);
        Running::spawn(format!("{name}-{}", addr.port()), addr, runtime, shared, move |shared, stop| {
            serve(listener, shared, stop)
        })
    }

    /// Runs `serve(shared, stop)` on `runtime` on a thread named `thread`, for a fake that binds
    /// its own listeners (`addr` is the one its handle reports).
    pub(crate) fn spawn<F, Fut>(
        thread: String,
        addr: SocketAddr,
        runtime: Runtime,
        shared: Arc<S>,
        serve: F,
    ) -> io::Result<Running<S>>
    where
        F: FnOnce(Arc<S>, oneshot::Receiver<()>) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let (stop, stopped) = oneshot::channel();
        let serving = Arc::clone(&shared);
        let thread = std::thread::Builder::new().name(thread).spawn(move || {
            runtime.block_on(serve(serving, stopped));
            // Dropping the runtime here cancels every connection task still running.
            drop(runtime);
        })?;
        Ok(Running { addr, shared, stop: Some(stop), thread: Some(thread) })
    }
}

impl<S> Running<S> {
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the handle and the server's tasks share.
    pub(crate) fn shared(&self) -> &Arc<S> {
        &self.shared
    }
}

impl<S> fmt::Debug for Running<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Running").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl<S> Drop for Running<S> {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The server may already be gone (its thread panicked); nothing more to stop then.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic on the server thread has already been printed; re-raising it while
            // dropping could abort the test binary.
            let _ = thread.join();
        }
    }
}
