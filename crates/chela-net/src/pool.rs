//! Keep-alive connections for trusted traffic (`Guard::AllowAll`: the provider, web search,
//! channels), so a daemon pays for the TCP and TLS handshakes once per origin instead of once per
//! request. Each connection is hyper's HTTP/1.1 client connection (`handshake`) over the same dial
//! path as a fresh one (resolve, proxy tunnel, TLS; see `Dialer`), driven by a task of its own.
//!
//! The rules, all enforced here:
//! - The pool holds idle connections only, keyed by origin (scheme, host, port; the proxy is the
//!   client's). A request takes one out for itself, so two requests at once use two connections.
//! - A connection goes back only when hyper says it can take another request (`is_ready`), which
//!   it says only once the previous response was read to the end. One whose body was dropped
//!   half-way is closed (its task aborted), never reused; one the server closed is discarded.
//! - Bounded: `max_idle_per_host` per origin (the oldest goes first), `MAX_ORIGINS` origins (the
//!   least recently used goes), and each idle connection is closed `IDLE_TIMEOUT` after it came
//!   back, on tokio's clock, by one reaper task that runs only while something is idle.
//! - A kept-alive connection the server closed is never an error by itself. Seen closed when a
//!   request comes, it is skipped. Seen closed by its task only after the request was queued on
//!   it but before hyper took the request to write, it hands the request back
//!   (`TrySendError::take_message`), which is then sent once on a fresh connection within the
//!   same deadline. If the close crosses the request on the wire (hyper had started writing), the
//!   caller gets `Dropped` (retryable): the server may have acted on it, and only the caller
//!   knows whether the request is safe to repeat.
//!
//! Not here: guarded requests (`Guard::PublicOnly`). They get a `Lease` with no way home; see
//! `send_now` in `lib.rs` for why.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout, timeout_at};

use super::error::chain;
use super::url::Url;
use super::{Dialer, Driver, Guard, NetError, Phase, Response, hyper_error};

/// How long an unused connection stays open. Below the usual server-side keep-alive limits
/// (60 s and more), so we rarely pick a connection the server is just closing.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle connections kept per host by default. An assistant rarely has more than a couple of
/// requests to one host in flight (a streaming model call, a search); more than this are closed
/// when done.
pub(crate) const MAX_IDLE_PER_HOST: usize = 4;
/// The most `ClientOptions::max_idle_per_host` may ask for.
pub(crate) const MAX_IDLE_PER_HOST_CEILING: usize = 64;
/// Origins with idle connections. A daemon talks to a handful (its provider, search, a channel
/// or two, MCP servers); one that fetches from many hosts must not hold a socket for each.
pub(crate) const MAX_ORIGINS: usize = 16;

type Head = hyper::Request<Full<Bytes>>;

/// An open HTTP/1.1 connection: where requests go in, and the task that drives it. The task ends
/// when the server closes or the sender is dropped; dropping a `Live` also aborts it, so a
/// connection never outlives its handle.
pub(crate) struct Live {
    sender: SendRequest<Full<Bytes>>,
    _driver: Driver,
}

impl Live {
    /// Dials `url` (bounded by `deadline`, errors and phases from the dial) and starts the task.
    pub(crate) async fn open(dialer: &Dialer, url: &Url, guard: Guard, deadline: Instant) -> Result<Live, NetError> {
        let io = dialer.open(url, guard, deadline).await?;
        // One stream type for every connection (see `Dialer::open`), so hyper's HTTP/1 client is
        // compiled once.
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| NetError::Protocol { host: url.host.clone(), reason: chain(&e) })?;
        let task = tokio::spawn(async move {
            if let Err(e) = conn.await {
                chela_log::debug!(error = %chain(&e), "http connection ended with an error");
            }
        });
        Ok(Live { sender, _driver: Driver(task.abort_handle()) })
    }
}

/// Scheme, host and port: which connections may carry a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Origin {
    https: bool,
    host: String,
    port: u16,
}

impl Origin {
    fn of(url: &Url) -> Origin {
        Origin { https: url.https, host: url.host.clone(), port: url.port }
    }
}

/// A connection lent to one request. It goes back to its pool (if it has one) once the response
/// was read to the end; otherwise dropping the lease closes it.
pub(crate) struct Lease {
    live: Option<Live>,
    home: Option<Home>,
}

/// Where a connection goes back to.
pub(crate) type Home = (Weak<Shared>, Origin);

/// Sends `head` on `live` and waits for the response headers until `deadline`. On error the
/// connection is closed, and the request comes back too when hyper wrote none of it.
pub(crate) async fn send(
    mut live: Live,
    home: Option<Home>,
    url: &Url,
    head: Head,
    deadline: Instant,
) -> Result<Response, (NetError, Option<Head>)> {
    match timeout_at(deadline, live.sender.try_send_request(head)).await {
        Err(_) => Err((NetError::Timeout { phase: Phase::Headers, target: url.authority() }, None)),
        Ok(Err(mut e)) => {
            let unsent = e.take_message();
            Err((hyper_error(&url.host, Phase::Headers, e.error()), unsent))
        }
        Ok(Ok(response)) => {
            let (parts, body) = response.into_parts();
            Ok(Response::new(parts, body, url.host.clone(), Lease { live: Some(live), home }))
        }
    }
}

impl Lease {
    /// Called when the body has ended. hyper readies the connection for the next request a moment
    /// later, on the connection's task; waiting (at most `wait`) for that lets it go back to the
    /// pool now rather than be closed for looking busy.
    pub(crate) async fn body_ended(&mut self, wait: Duration) {
        if let (Some(live), Some(_)) = (&mut self.live, &self.home) {
            // An error or a timeout leaves it not ready, so `release` closes it.
            let _ = timeout(wait, live.sender.ready()).await;
            self.release();
        }
    }

    /// Back to the pool if the connection can take another request, else closed.
    fn release(&mut self) {
        if let (Some(live), Some((pool, origin))) = (self.live.take(), self.home.take())
            && live.sender.is_ready()
            && let Some(pool) = pool.upgrade()
        {
            pool.put(origin, live);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.release();
    }
}

#[derive(Debug)]
pub(crate) struct Pool {
    dialer: Arc<Dialer>,
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    max_idle_per_host: usize,
    state: Mutex<State>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("max_idle_per_host", &self.max_idle_per_host).finish_non_exhaustive()
    }
}

struct State {
    /// Oldest first: connections are pushed when they come back.
    idle: Vec<Idle>,
    /// Closes expired connections while any are idle; see `reap`.
    reaper: Option<JoinHandle<()>>,
}

struct Idle {
    origin: Origin,
    live: Live,
    since: Instant,
}

impl State {
    /// Drops what the server closed and what has been idle too long.
    fn prune(&mut self, now: Instant) {
        self.idle.retain(|i| i.live.sender.is_ready() && now < i.since + IDLE_TIMEOUT);
    }
}

impl Drop for State {
    fn drop(&mut self) {
        if let Some(reaper) = &self.reaper {
            reaper.abort();
        }
    }
}

impl Pool {
    pub(crate) fn new(dialer: Arc<Dialer>, max_idle_per_host: usize) -> Pool {
        let state = Mutex::new(State { idle: Vec::new(), reaper: None });
        Pool { dialer, shared: Arc::new(Shared { max_idle_per_host, state }) }
    }

    /// Sends `head` on an idle connection to `url`'s origin, or on a new one.
    pub(crate) async fn send(&self, url: &Url, head: Head, deadline: Instant) -> Result<Response, NetError> {
        let origin = Origin::of(url);
        let mut head = head;
        if let Some(live) = self.shared.take(&origin) {
            match send(live, self.home(&origin), url, head, deadline).await {
                // The server had closed it before our request was written: a fresh one, once.
                Err((_, Some(unsent))) => head = unsent,
                done => return done.map_err(|(e, _)| e),
            }
        }
        let live = Live::open(&self.dialer, url, Guard::AllowAll, deadline).await?;
        send(live, self.home(&origin), url, head, deadline).await.map_err(|(e, _)| e)
    }

    fn home(&self, origin: &Origin) -> Option<Home> {
        // With no idle connections allowed, a connection has no way home and closes when done.
        (self.shared.max_idle_per_host > 0).then(|| (Arc::downgrade(&self.shared), origin.clone()))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing here panics while holding the lock, and the state is valid between statements.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most recently returned idle connection to `origin`: the least likely to have been
    /// closed by the server.
    fn take(&self, origin: &Origin) -> Option<Live> {
        let mut state = self.lock();
        state.prune(Instant::now());
        let at = state.idle.iter().rposition(|i| i.origin == *origin)?;
        Some(state.idle.remove(at).live)
    }

    fn put(self: &Arc<Self>, origin: Origin, live: Live) {
        // The reaper needs a runtime; a response dropped outside one just closes its connection.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let now = Instant::now();
        let mut state = self.lock();
        state.prune(now);
        let same = state.idle.iter().filter(|i| i.origin == origin).count();
        if same >= self.max_idle_per_host {
            // The oldest of this origin goes; `same` > 0 here, as `max_idle_per_host` is.
            if let Some(at) = state.idle.iter().position(|i| i.origin == origin) {
                state.idle.remove(at);
            }
        } else if same == 0
            && let Some(lru) = origin_to_evict(&state.idle)
        {
            state.idle.retain(|i| i.origin != lru);
        }
        state.idle.push(Idle { origin, live, since: now });
        if state.reaper.as_ref().is_none_or(JoinHandle::is_finished) {
            state.reaper = Some(runtime.spawn(reap(Arc::downgrade(self))));
        }
    }
}

/// The least recently returned origin, when `MAX_ORIGINS` origins are held.
fn origin_to_evict(idle: &[Idle]) -> Option<Origin> {
    let mut recent: Vec<&Origin> = Vec::new();
    for i in idle.iter().rev() {
        if !recent.contains(&&i.origin) {
            recent.push(&i.origin);
        }
    }
    if recent.len() < MAX_ORIGINS { None } else { recent.last().map(|o| (*o).clone()) }
}

/// Closes idle connections as they expire; ends when none is left (the next `put` starts another)
/// or the pool is gone.
async fn reap(pool: Weak<Shared>) {
    loop {
        let next = {
            let Some(pool) = pool.upgrade() else { return };
            let mut state = pool.lock();
            state.prune(Instant::now());
            let Some(oldest) = state.idle.first() else {
                // Under the lock `put` takes, so a connection put back after this starts a reaper.
                state.reaper = None;
                return;
            };
            oldest.since + IDLE_TIMEOUT
        };
        tokio::time::sleep_until(next).await;
    }
}
