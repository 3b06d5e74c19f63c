//! Keep-alive and the guard, against hyper servers on 127.0.0.1 that count the TCP connections
//! they accept; and `NetError::is_unreachable` against real refusals and a name that never
//! resolves.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::tests::{LONG, SHORT, client, get, tls_acceptor};
use super::*;

/// A body that sends "abc" and then nothing, ever: a stream the client gives up on.
struct Endless(bool);

impl hyper::body::Body for Endless {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Pending
        } else {
            Poll::Ready(Some(Ok(Frame::data("abc".into()))))
        }
    }
}

/// Connections accepted, requests answered and connections closed by the client, as a
/// `counting_server` saw them.
#[derive(Default)]
struct Counts {
    connections: AtomicUsize,
    requests: AtomicUsize,
    closed: tokio::sync::watch::Sender<usize>,
}

impl Counts {
    fn get(&self) -> (usize, usize) {
        (self.connections.load(Ordering::SeqCst), self.requests.load(Ordering::SeqCst))
    }

    /// Waits until the client has closed `n` connections in all (bounded, for a failing test).
    async fn closed(&self, n: usize) {
        let mut closed = self.closed.subscribe();
        let waited = tokio::time::timeout(LONG, closed.wait_for(|c| *c >= n)).await.is_ok();
        assert!(waited, "the client closed {} connections, not {n}", *closed.borrow());
    }
}

/// A keep-alive hyper server on 127.0.0.1 (TLS for `localhost` when `tls` is given). It answers
/// "hello", except a request to `/endless`, whose body never ends.
async fn counting_server(tls: Option<tokio_rustls::TlsAcceptor>) -> (SocketAddr, Arc<Counts>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let shared = counts.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            shared.connections.fetch_add(1, Ordering::SeqCst);
            let (counts, closes, tls) = (shared.clone(), shared.clone(), tls.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    counts.requests.fetch_add(1, Ordering::SeqCst);
                    let body = if req.uri().path() == "/endless" {
                        http_body_util::Either::Left(Endless(false))
                    } else {
                        http_body_util::Either::Right(Full::new(Bytes::from_static(b"hello")))
                    };
                    async move { Ok::<_, Infallible>(hyper::Response::new(body)) }
                });
                let http = hyper::server::conn::http1::Builder::new();
                let _ = match tls {
                    None => http.serve_connection(TokioIo::new(stream), service).await,
                    Some(acceptor) => {
                        let Ok(tls) = acceptor.accept(stream).await else { return };
                        http.serve_connection(TokioIo::new(tls), service).await
                    }
                };
                // The client closed it (or the server gave up on it): either way, no longer open.
                closes.closed.send_modify(|n| *n += 1);
            });
        }
    });
    (addr, counts)
}

#[tokio::test]
async fn sequential_requests_share_one_connection() {
    let (addr, counts) = counting_server(None).await;
    let client = client();
    for i in 0..10 {
        // Clones share the pool, as the provider, search and channels do.
        let resp = client.clone().send(get(format!("http://{addr}/{i}"))).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (1, 10), "10 requests, one TCP connection");
}

#[tokio::test]
async fn https_requests_share_one_connection() {
    let (acceptor, pem) = tls_acceptor();
    let (addr, counts) = counting_server(Some(acceptor)).await;
    let client = HttpClient::new(ClientOptions { extra_root_pem: Some(pem.into_bytes()), ..ClientOptions::default() });
    for _ in 0..10 {
        let resp = client.send(get(format!("https://localhost:{}/", addr.port()))).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (1, 10), "one TCP connection and one TLS handshake");
}

#[tokio::test]
async fn no_idle_connections_means_a_fresh_connection_each_time() {
    let (addr, counts) = counting_server(None).await;
    let client = HttpClient::new(ClientOptions { max_idle_per_host: 0, ..ClientOptions::default() });
    for _ in 0..3 {
        let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (3, 3));
}

#[tokio::test]
async fn the_guarded_path_opens_a_connection_per_request() {
    // `Guard::PublicOnly` cannot reach a server on loopback, so this drives the path it takes,
    // `send_fresh`, with the guard off; the guard itself is tested in `tests.rs`.
    let (addr, counts) = counting_server(None).await;
    let client = client();
    for _ in 0..10 {
        let url = Url::parse(&format!("http://{addr}/")).unwrap();
        let head = build_request(&url, Method::GET, &[], Bytes::new()).unwrap();
        let resp = client.send_fresh(url, Guard::AllowAll, head, Instant::now() + LONG).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (10, 10), "every guarded request dials the address it checked");
}

#[tokio::test]
async fn a_pooled_connection_never_carries_a_guarded_request() {
    let (addr, counts) = counting_server(None).await;
    let client = client();
    let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    // An idle connection to exactly this origin is now in the pool; the guard must still refuse.
    let req = Request { guard: Guard::PublicOnly, ..get(format!("http://{addr}/")) };
    let err = client.send(req).await.unwrap_err();
    assert!(matches!(err, NetError::Refused { .. }), "{err:?}");
    assert_eq!(counts.get(), (1, 1), "the refused request reached nothing");
}

#[tokio::test]
async fn a_response_dropped_mid_body_is_not_reused() {
    let (addr, counts) = counting_server(None).await;
    let client = client();
    let mut resp = client.send(get(format!("http://{addr}/endless"))).await.unwrap();
    assert_eq!(resp.chunk(SHORT).await.unwrap().unwrap(), "abc");
    drop(resp);
    // Had the half-read connection gone back to the pool, this would read the rest of the
    // endless body as its response, or hang.
    for _ in 0..3 {
        let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (2, 4), "a new connection after the dropped one, then reused");
}

#[tokio::test]
async fn two_requests_at_once_use_two_connections_and_a_busy_one_is_not_lent() {
    let (addr, counts) = counting_server(None).await;
    let client = client();
    let mut streaming = client.send(get(format!("http://{addr}/endless"))).await.unwrap();
    assert_eq!(streaming.chunk(SHORT).await.unwrap().unwrap(), "abc");
    // The first connection is busy with a body that never ends: the second request must neither
    // wait for it nor be written behind it.
    let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    assert_eq!(counts.get(), (2, 2));
    // Both headers in before either body is read: two connections again, then both go back.
    let (a, b) =
        tokio::join!(client.send(get(format!("http://{addr}/a"))), client.send(get(format!("http://{addr}/b"))));
    assert_eq!(counts.get(), (3, 4), "the idle connection and a new one");
    for resp in [a.unwrap(), b.unwrap()] {
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    for _ in 0..4 {
        let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    assert_eq!(counts.get(), (3, 8), "the two idle connections are reused");
    drop(streaming);
    counts.closed(1).await;
    drop(client);
    // The pool goes with the last clone of the client, and its connections with it.
    counts.closed(3).await;
}

#[tokio::test]
async fn idle_connections_are_bounded_per_origin_and_closed_when_they_expire() {
    let (addr, counts) = counting_server(None).await;
    let client = client();
    let mut held = Vec::new();
    for i in 0..pool::MAX_IDLE_PER_HOST + 2 {
        held.push(client.send(get(format!("http://{addr}/{i}"))).await.unwrap());
    }
    for resp in held {
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    }
    // Six connections came back; the two oldest are closed at once.
    counts.closed(2).await;
    let open = pool::MAX_IDLE_PER_HOST;

    tokio::time::pause();
    tokio::time::advance(pool::IDLE_TIMEOUT - Duration::from_secs(1)).await;
    let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    assert_eq!(counts.get().0, open + 2, "not expired yet, so reused");
    assert_eq!(*counts.closed.borrow(), 2);

    // Past the timeout for every idle connection, the one just used included: none is left
    // open on the server's side, and nothing is in the pool to hand out.
    tokio::time::advance(pool::IDLE_TIMEOUT + Duration::from_secs(1)).await;
    counts.closed(open + 2).await;
    tokio::time::resume();
    let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    assert_eq!(counts.get().0, open + 3);
}

#[tokio::test]
async fn the_least_recently_used_origin_goes_when_too_many_are_held() {
    let mut servers = Vec::new();
    for _ in 0..=pool::MAX_ORIGINS {
        servers.push(counting_server(None).await);
    }
    let client = client();
    let fetch = |addr: SocketAddr| {
        let client = client.clone();
        async move {
            let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
            assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
        }
    };
    for (addr, _) in &servers {
        fetch(*addr).await;
    }
    // One origin too many: the first one's connection was closed to make room.
    let (first, first_counts) = &servers[0];
    first_counts.closed(1).await;
    for (addr, counts) in &servers[1..] {
        fetch(*addr).await;
        assert_eq!(counts.get(), (1, 2), "still held, so reused");
        assert_eq!(*counts.closed.borrow(), 0);
    }
    fetch(*first).await;
    assert_eq!(first_counts.get(), (2, 2));
}

#[tokio::test]
async fn a_kept_alive_connection_the_server_closed_costs_a_new_connection_not_an_error() {
    // Answers one request per connection with keep-alive, then closes the connection when told.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (close_tx, mut close_rx) = tokio::sync::mpsc::channel::<tokio::sync::oneshot::Sender<()>>(1);
    let accepted = Arc::new(AtomicUsize::new(0));
    let seen = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            seen.fetch_add(1, Ordering::SeqCst);
            super::tests::read_head(&mut stream).await;
            stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello").await.unwrap();
            let Some(done) = close_rx.recv().await else { return };
            drop(stream);
            let _ = done.send(());
        }
    });
    let client = client();
    for round in 1..=3 {
        let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
        assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        close_tx.send(done_tx).await.unwrap();
        done_rx.await.unwrap();
        // The close has reached the client's socket. Straight away, the next request usually
        // finds the connection still looking idle, is queued on it, and hyper hands it back
        // unwritten when the connection's task reads the close first; after a turn of the
        // scheduler, the pool has seen the connection close and skips it. Either way: no error,
        // one new connection.
        if round % 2 == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), round);
    }
    let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    assert_eq!(accepted.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_connection_dropped_mid_body_does_not_take_an_idle_ones_place() {
    let (addr, counts) = counting_server(None).await;
    let client = HttpClient::new(ClientOptions { max_idle_per_host: 1, ..ClientOptions::default() });
    let mut streaming = client.send(get(format!("http://{addr}/endless"))).await.unwrap();
    assert_eq!(streaming.chunk(SHORT).await.unwrap().unwrap(), "abc");
    let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    // The one idle slot holds the second connection; the first, dropped half-way, must not
    // push it out on its way to being closed.
    drop(streaming);
    counts.closed(1).await;
    let resp = client.send(get(format!("http://{addr}/"))).await.unwrap();
    assert_eq!(resp.bytes(100, SHORT).await.unwrap(), "hello");
    assert_eq!(counts.get(), (2, 3), "the idle connection was reused");
}

#[tokio::test]
async fn a_silent_proxy_times_out_at_the_requests_deadline_in_the_proxy_phase() {
    // A "proxy" that accepts and never answers the CONNECT.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            held.push(listener.accept().await.unwrap().0);
        }
    });
    let client = HttpClient::new(ClientOptions {
        proxy: Some(Proxy::parse(&format!("http://{proxy}")).unwrap()),
        ..ClientOptions::default()
    });
    let req = Request { timeout: Duration::from_millis(200), ..get("http://example.com/") };
    let started = Instant::now();
    let err = client.send(req).await.unwrap_err();
    // The request's own timeout reached the pool's connector, which knows the phase.
    assert!(matches!(err, NetError::Timeout { phase: Phase::Proxy, .. }), "{err:?}");
    assert!(started.elapsed() < LONG);
}

#[tokio::test]
async fn a_refused_connection_is_unreachable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for guard in [Guard::AllowAll, Guard::PublicOnly] {
        let req = Request { guard, ..get(format!("http://127.0.0.1:{port}/")) };
        let err = client().send(req).await.unwrap_err();
        if guard == Guard::AllowAll {
            assert!(matches!(err, NetError::Connect { refused: true, .. }), "{err:?}");
            assert!(err.is_unreachable() && err.is_retryable(), "{err:?}");
        } else {
            assert!(!err.is_unreachable(), "refused by the guard, not by the network: {err:?}");
        }
    }
    // A proxy that is down is the only way out, so the origin is unreachable too.
    let via = HttpClient::new(ClientOptions {
        proxy: Some(Proxy::parse(&format!("socks5h://127.0.0.1:{port}")).unwrap()),
        ..ClientOptions::default()
    });
    let err = via.send(get("http://example.com/")).await.unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
}

#[tokio::test]
async fn a_name_that_does_not_exist_is_unreachable() {
    let started = Instant::now();
    let client = client();
    let pending = client.send(get("https://api.chela-test.invalid/v1/messages"));
    let err = tokio::time::timeout(LONG, pending).await.expect("resolution is bounded").unwrap_err();
    assert!(matches!(err, NetError::Dns { not_found: true, .. }), "{err:?}");
    assert!(err.is_unreachable(), "{err:?}");
    assert!(err.to_string().starts_with("could not resolve api.chela-test.invalid: "), "{err}");
    assert!(started.elapsed() < LONG);
}

#[tokio::test]
async fn timeouts_and_resets_are_not_unreachable() {
    // Accepts, reads the request, and holds the connection without answering.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            held.push(silent.accept().await.unwrap().0);
        }
    });
    let req = Request { timeout: Duration::from_millis(150), ..get(format!("http://{silent_addr}/")) };
    let err = client().send(req).await.unwrap_err();
    assert!(matches!(err, NetError::Timeout { phase: Phase::Headers, .. }), "{err:?}");
    assert!(!err.is_unreachable() && err.is_retryable(), "{err:?}");

    // Accepts and closes at once, before answering.
    let closing = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closing_addr = closing.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = closing.accept().await.unwrap();
            let _ = s.shutdown().await;
        }
    });
    let err = client().send(get(format!("http://{closing_addr}/"))).await.unwrap_err();
    assert!(matches!(err, NetError::Dropped { .. }), "{err:?}");
    assert!(!err.is_unreachable() && err.is_retryable(), "{err:?}");
}

#[test]
fn resolver_texts_that_mean_no_such_name() {
    use super::error::resolver_says_no_such_name as no_such_name;
    let gai = |detail: &str| std::io::Error::other(format!("failed to lookup address information: {detail}"));
    assert!(no_such_name(&gai("Name or service not known")));
    assert!(no_such_name(&gai("No address associated with hostname")));
    assert!(no_such_name(&gai("nodename nor servname provided, or not known")));
    // No answer is not a negative answer: the network may be down for a moment.
    assert!(!no_such_name(&gai("Temporary failure in name resolution")));
    assert!(!no_such_name(&gai("Try again")));
}
