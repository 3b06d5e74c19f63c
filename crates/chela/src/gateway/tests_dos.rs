//! Denial of service over a real 127.0.0.1 socket: half-sent request heads, piles of idle
//! WebSockets, one connection taking every conversation. Remote clients are played from
//! 127.0.0.x with [`Limits::loopback_is_local`] off, so the per-address rules apply to them.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::tests::{Harness, harness_with, next_json};
use super::*;

const TOKEN: &str = "owner-token";

/// A gateway that needs `TOKEN`, whose 127.0.0.x clients count as remote.
fn remote_clients(limits: Limits) -> Harness {
    harness_with(vec![], "127.0.0.1:18789", Some(TOKEN), Limits { loopback_is_local: false, ..limits })
}

/// A TCP connection to `addr` from the loopback address `from` (127.0.0.x all reach this machine).
async fn from(ip: &str, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(ip.parse::<IpAddr>().unwrap(), 0)).unwrap();
    socket.connect(addr).await.unwrap()
}

/// What the server sends before it closes `s` (empty when it closed without a word), or
/// `None` when it kept the connection open for 20 s.
async fn until_closed(s: &mut TcpStream) -> Option<String> {
    let mut out = Vec::new();
    match tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out)).await {
        Ok(_) => Some(String::from_utf8_lossy(&out).into_owned()),
        Err(_) => None,
    }
}

const HALF_HEAD: &[u8] = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";

fn request(token: Option<&str>) -> String {
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    format!("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n")
}

/// Opens connections from `ip` that send half a request head and stay; those the server closes
/// at once are counted and dropped.
async fn half_heads(ip: &str, addr: SocketAddr, n: usize) -> (Vec<TcpStream>, usize) {
    let (mut open, mut closed) = (Vec::new(), 0);
    for _ in 0..n {
        let mut s = from(ip, addr).await;
        let _ = s.write_all(HALF_HEAD).await;
        open.push(s);
    }
    // The server takes them in order: one that holds a slot stays open, one past a cap is
    // closed at once. Told apart by a read that ends (closed) or would wait (open).
    let mut kept = Vec::new();
    for mut s in open {
        let mut b = [0u8; 1];
        match tokio::time::timeout(Duration::from_millis(200), s.read(&mut b)).await {
            Ok(_) => closed += 1,
            Err(_) => kept.push(s),
        }
    }
    (kept, closed)
}

#[tokio::test(start_paused = true)]
async fn half_sent_heads_from_strangers_cannot_lock_the_owner_out() {
    let limits = Limits { connections: 12, reserved: 4, per_address: 4, ..Limits::default() };
    let h = remote_clients(limits);
    let addr = h.serve().await;
    // Two addresses try six half heads each: twelve would take every connection there is.
    let (held_a, closed_a) = half_heads("127.0.0.2", addr, 6).await;
    let (held_b, closed_b) = half_heads("127.0.0.3", addr, 6).await;
    // The owner, from another address, is served.
    let mut owner = from("127.0.0.5", addr).await;
    owner.write_all(request(Some(TOKEN)).as_bytes()).await.unwrap();
    let answer = until_closed(&mut owner).await.expect("answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "the owner was locked out: {answer:?}");
    assert_eq!((held_a.len(), held_b.len()), (4, 4), "each address holds its share, no more");
    assert_eq!(closed_a + closed_b, 4);
    // A stranger's whole request on a reserved slot is refused, saying why.
    let mut stranger = from("127.0.0.4", addr).await;
    stranger.write_all(request(None).as_bytes()).await.unwrap();
    let answer = until_closed(&mut stranger).await.expect("the stranger's connection is closed");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("gateway.token"), "the answer names what gets in: {answer}");
    drop((held_a, held_b));
}

#[tokio::test(start_paused = true)]
async fn a_stranger_on_a_reserved_slot_has_little_time_to_send_its_head() {
    let limits = Limits { connections: 6, reserved: 2, per_address: 4, ..Limits::default() };
    let h = remote_clients(limits);
    let addr = h.serve().await;
    let (held, _) = half_heads("127.0.0.2", addr, 4).await;
    assert_eq!(held.len(), 4);
    let mut slow = from("127.0.0.3", addr).await;
    slow.write_all(HALF_HEAD).await.unwrap();
    let started = tokio::time::Instant::now();
    assert!(until_closed(&mut slow).await.is_some(), "the half head on a reserved slot was kept");
    let took = started.elapsed();
    assert!(took < limits.header_timeout, "cut after {took:?}, as late as an ordinary connection");
    drop(held);
}

type Client = tokio_tungstenite::WebSocketStream<TcpStream>;

/// A `/ws` upgrade from `ip`: the socket, or the status it was refused with.
async fn ws_from(ip: &str, addr: SocketAddr) -> Result<Client, (u16, String)> {
    let stream = from(ip, addr).await;
    let url = format!("ws://127.0.0.1:{}/ws?token={TOKEN}", addr.port());
    match tokio_tungstenite::client_async(url, stream).await {
        Ok((c, _)) => Ok(c),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            let body = resp.body().as_ref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
            Err((resp.status().as_u16(), body))
        }
        Err(e) => panic!("the upgrade failed otherwise: {e}"),
    }
}

#[tokio::test]
async fn upgraded_websockets_are_capped_in_all_and_per_address() {
    let limits = Limits { websockets: 3, ws_per_address: 2, ..Limits::default() };
    let h = remote_clients(limits);
    let addr = h.serve().await;
    let a1 = ws_from("127.0.0.2", addr).await.expect("first");
    let _a2 = ws_from("127.0.0.2", addr).await.expect("second");
    let (status, body) = ws_from("127.0.0.2", addr).await.expect_err("a third from one address is refused");
    assert_eq!(status, 503);
    assert!(body.contains("gateway.websockets_per_address"), "{body}");
    let _b1 = ws_from("127.0.0.3", addr).await.expect("another address");
    let (status, body) = ws_from("127.0.0.4", addr).await.expect_err("past the overall cap");
    assert_eq!(status, 503);
    assert!(body.contains("gateway.max_websockets"), "{body}");
    // A socket that goes frees its slot.
    drop(a1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while h.gw.admission.counts().1 > 2 {
        assert!(tokio::time::Instant::now() < deadline, "the closed socket's slot was never freed");
        tokio::task::yield_now().await;
    }
    ws_from("127.0.0.4", addr).await.expect("a freed slot is taken again");
}

/// The next frame from the server within `within`: a JSON event, or the close's reason.
async fn next_frame(c: &mut Client, within: Duration) -> Option<Result<Value, String>> {
    loop {
        match tokio::time::timeout(within, c.next()).await.ok()? {
            Some(Ok(WsMessage::Text(t))) => return Some(Ok(serde_json::from_str(t.as_str()).unwrap())),
            Some(Ok(WsMessage::Close(frame))) => {
                return Some(Err(frame.map(|f| f.reason.to_string()).unwrap_or_default()));
            }
            None | Some(Err(_)) => return Some(Err(String::new())),
            Some(Ok(_)) => {}
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_websocket_is_closed_and_use_keeps_it_open() {
    let limits = Limits { ws_idle: Duration::from_secs(60), ..Limits::default() };
    let h = harness_with(vec![], "127.0.0.1:18789", None, limits);
    let addr = h.serve().await;
    let mut c = super::tests::ws_connect(addr, "/ws").await;
    // Used after 40 s: the idle time starts again from there. (A message answered at once,
    // without the model: the fake model runs in real time, and this test's clock is paused.)
    assert!(next_frame(&mut c, Duration::from_secs(40)).await.is_none(), "closed before it was idle");
    c.send(WsMessage::text(r#"{"type":"message","content":" "}"#)).await.unwrap();
    let answered = next_frame(&mut c, Duration::from_secs(1)).await.expect("answered").unwrap();
    assert_eq!(answered["content"], "the message is empty");
    let since = tokio::time::Instant::now();
    assert!(next_frame(&mut c, Duration::from_secs(50)).await.is_none(), "closed 50 s after it was last used");
    let reason = next_frame(&mut c, Duration::from_secs(600)).await.expect("an idle socket is closed").unwrap_err();
    assert!(reason.contains("idle"), "the close says why: {reason:?}");
    let after = since.elapsed();
    assert!(after >= Duration::from_secs(60) && after < Duration::from_secs(70), "closed after {after:?}");
}

#[tokio::test]
async fn one_connection_waits_for_answers_in_a_few_chats_at_most() {
    // Slow answers, so the first chats are still waiting when the last is sent.
    let slow = |t: &str| chela_testkit::Step::text(t).delay_ms(3000);
    let script = (0..MAX).map(|i| slow(&format!("answer {i}"))).collect();
    const MAX: usize = ws::MAX_BUSY_CHATS_PER_CONNECTION;
    let h = harness_with(script, "127.0.0.1:18789", None, Limits::default());
    let addr = h.serve().await;
    let mut c = super::tests::ws_connect(addr, "/ws").await;
    for i in 0..=MAX {
        let msg = serde_json::json!({"type": "message", "content": "hi", "chat_id": format!("c{i}")});
        c.send(WsMessage::text(msg.to_string())).await.unwrap();
    }
    let refused = loop {
        let e = next_json(&mut c).await;
        if e["type"] == "error" {
            break e;
        }
    };
    assert_eq!(refused["chat_id"], format!("c{MAX}"));
    assert!(refused["content"].as_str().unwrap().contains("already waiting for answers"), "{refused}");
}
