//! Request latency of `chela::net::HttpClient` over TLS on 127.0.0.1: a fresh connection per
//! request (TCP and TLS handshakes every time, as the client worked before keep-alive) against
//! the pooled keep-alive connection that provider, search and channel traffic now use.
//!
//! Two identical hyper servers with a self-signed certificate run on their own thread; each
//! counts the TCP connections it accepts. One iteration sends a GET to each (fresh, then pooled,
//! so noise hits both alike) and reads the 2-byte body; the time is from `send` to the end of
//! the body. The fresh client is the same client with `max_idle_per_host: 0`, so both share one
//! rustls configuration (and its TLS session cache), as the old client's requests did.
//!
//! Run: `cargo bench -p chela --bench http`.

#![allow(clippy::disallowed_methods, reason = "a benchmark measures real time")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chela::net::{ClientOptions, Guard, HttpClient, Request};
use http_body_util::Full;
use hyper::http::Method;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

const RUNS: usize = 300;
const WARMUP: usize = 20;

fn main() {
    let (acceptor, pem) = tls_acceptor();
    let (fresh_addr, fresh_conns) = server(acceptor.clone());
    let (pooled_addr, pooled_conns) = server(acceptor);

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let options = |max_idle_per_host| ClientOptions {
        extra_root_pem: Some(pem.clone().into_bytes()),
        max_idle_per_host,
        ..ClientOptions::default()
    };
    let fresh = HttpClient::new(options(0));
    let pooled = HttpClient::new(options(ClientOptions::default().max_idle_per_host));

    let (mut fresh_times, mut pooled_times) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    rt.block_on(async {
        for i in 0..WARMUP + RUNS {
            let a = timed(&fresh, fresh_addr).await;
            let b = timed(&pooled, pooled_addr).await;
            if i >= WARMUP {
                fresh_times.push(a);
                pooled_times.push(b);
            }
        }
    });

    println!("GET over TLS on 127.0.0.1, {RUNS} requests each after {WARMUP} warm-up, interleaved");
    println!("{:<28} {:>10} {:>10} {:>12}", "", "p50 µs", "p90 µs", "connections");
    for (name, times, conns) in [
        ("fresh connection each", &mut fresh_times, &fresh_conns),
        ("pooled (keep-alive)", &mut pooled_times, &pooled_conns),
    ] {
        times.sort();
        let pct = |p: usize| times[(times.len() - 1) * p / 100].as_secs_f64() * 1e6;
        println!("{name:<28} {:>10.0} {:>10.0} {:>12}", pct(50), pct(90), conns.load(Ordering::SeqCst));
    }
}

async fn timed(client: &HttpClient, addr: SocketAddr) -> Duration {
    let req = Request {
        method: Method::GET,
        url: format!("https://{addr}/"),
        headers: Vec::new(),
        body: Bytes::new(),
        timeout: Duration::from_secs(5),
        guard: Guard::AllowAll,
    };
    let started = Instant::now();
    let resp = client.send(req).await.expect("request to the local server");
    let body = resp.bytes(16, Duration::from_secs(5)).await.expect("body from the local server");
    let elapsed = started.elapsed();
    assert_eq!(body, "ok");
    elapsed
}

/// A certificate for 127.0.0.1 (an IP SAN), so no name resolution is timed.
fn tls_acceptor() -> (tokio_rustls::TlsAcceptor, String) {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
    (tokio_rustls::TlsAcceptor::from(Arc::new(config)), cert.cert.pem())
}

/// A keep-alive HTTPS server answering "ok", on a thread of its own; returns its address and
/// the count of accepted TCP connections.
fn server(acceptor: tokio_rustls::TlsAcceptor) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let counted = conns.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(listener).unwrap();
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let _ = stream.set_nodelay(true);
                counted.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else { return };
                    let service = service_fn(|_req| async {
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"ok"))))
                    });
                    let _ =
                        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
                });
            }
        });
    });
    (addr, conns)
}
