//! Abuse cases that need the gateway's timers shortened, over a real 127.0.0.1 socket: slow
//! request heads, and a WebSocket client that never reads what it is sent. (The rest of the
//! corpus runs the real binary: `tests/abuse/gateway.rs`.)

use std::time::Duration;
use tokio::time::Instant;

use futures_util::SinkExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::tests::{harness_with, until_answer, ws_connect};
use super::*;

#[tokio::test]
async fn a_request_head_sent_slowly_is_cut_off_at_the_header_timeout() {
    let limits = Limits { header_timeout: Duration::from_millis(300), ..Limits::default() };
    let h = harness_with(vec![], "127.0.0.1:18789", None, limits);
    let addr = h.serve().await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 512];
    // One header line every 100 ms, for up to 5 s: a slowloris never finishes its head.
    let cut = loop {
        if started.elapsed() > Duration::from_secs(5) {
            break false;
        }
        if s.write_all(b"X-Slow: 1\r\n").await.is_err() {
            break true;
        }
        match tokio::time::timeout(Duration::from_millis(100), s.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => break true,
            // hyper may say 408 before closing.
            Ok(Ok(n)) => {
                assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"), "answered a half head");
                break true;
            }
            Err(_) => {}
        }
    };
    assert!(cut, "the slow head was still being read after 5 s");
    assert!(started.elapsed() < Duration::from_secs(3), "cut after {:?}", started.elapsed());
    assert_eq!(h.get("/health").await.0, hyper::StatusCode::OK);
}

#[tokio::test]
async fn a_websocket_client_that_never_reads_is_cut_off_not_buffered_for() {
    let limits = Limits { write_timeout: Duration::from_millis(300), outbound: 8, ..Limits::default() };
    let h = harness_with(vec![chela_testkit::Step::text("hi")], "127.0.0.1:18789", None, limits);
    let addr = h.serve().await;
    let mut c = ws_connect(addr, "/ws").await;
    c.send(WsMessage::text(r#"{"type":"message","content":"hi","chat_id":"sink"}"#)).await.unwrap();
    until_answer(&mut c).await;
    // From now on the client reads nothing; the gateway keeps pushing 64 KiB messages to it.
    let outlet = h.daemon.outlets().get("ws").unwrap();
    let text = "z".repeat(64 * 1024);
    let started = Instant::now();
    let mut pushed = 0usize;
    while outlet.send_text("sink", &text).await.is_ok() {
        pushed += text.len();
        assert!(started.elapsed() < Duration::from_secs(15), "still taking data after {pushed} bytes");
        tokio::task::yield_now().await;
    }
    // What was taken is bounded by the socket buffers and the queue, not by what was sent.
    // (About 4.5 MiB here: the kernel's socket buffers on loopback and the 8 queued events.)
    assert!(pushed < 16 * 1024 * 1024, "{pushed} bytes were taken for a client that reads nothing");
    drop(c);
}

#[test]
fn a_full_outbound_queue_cuts_the_connection() {
    let (tx, _rx) = tokio::sync::mpsc::channel(2);
    let out = ws::Outbox::new(tx);
    let e = serde_json::json!({"type": "token"});
    assert!(out.push(&e) && out.push(&e));
    assert!(!out.is_cut());
    assert!(!out.push(&e), "the third event does not fit");
    assert!(out.is_cut(), "and the client is cut off");
}
