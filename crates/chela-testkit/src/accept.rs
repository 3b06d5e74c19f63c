//! The accept loop every fake shares (the fake LLM, the fake audio API, the fake Telegram): one
//! hyper HTTP/1 connection per client, each served by its own task with `handle`, until `stop`
//! fires (or its sender is dropped).
//!
//! Bounds: at most [`MAX_CONNECTIONS`] clients at once (more wait in the listen backlog), a
//! deadline on each request head and at most [`MAX_HEAD_BYTES`] of it buffered. An accept error
//! (out of file descriptors) waits a little instead of spinning.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};

use crate::body::ReplyBody;

/// How long a client may take to send a request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Clients served at once; more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 256;
/// Largest buffered request head (hyper's read buffer).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// `on_open` runs as each connection is accepted; what it returns is held until the connection
/// closes (the fake LLM counts open connections with it).
pub(crate) async fn serve_http1<H, F, O, G>(
    listener: TcpListener,
    mut stop: oneshot::Receiver<()>,
    handle: H,
    on_open: O,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<ReplyBody>, Infallible>> + Send + 'static,
    O: Fn() -> G,
    G: Send + 'static,
{
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            _ = &mut stop => return,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_closed) => return,
            },
        };
        let stream = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let handle = handle.clone();
        let open = on_open();
        tokio::spawn(async move {
            let _permit = permit;
            let _open = open;
            let service = hyper::service::service_fn(handle);
            // A client that hangs up mid-request is not the fake's problem; hyper has already
            // closed the connection by the time this returns.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
