//! The chip's gateway (`chela_chip::gateway`) against a real WebSocket client (tungstenite)
//! over loopback, and against hand-made bytes for the abuse cases.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

use chela_chip::gateway::{self, Action, Conn, MAX_HEAD, MAX_MESSAGE};
use chela_proto::websocket::{Message as WsMessage, encode};
use tungstenite::Message;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// Serves one connection the way the firmware's task does: the head, the upgrade, then frames;
/// a turn is answered with `echo: …`.
fn serve_one(mut sock: TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 256];
    let end = loop {
        let n = sock.read(&mut buf).unwrap_or(0);
        if n == 0 {
            return;
        }
        head.extend_from_slice(&buf[..n]);
        match gateway::head_end(&head) {
            Ok(Some(end)) => break end,
            Ok(None) => {}
            Err(answer) => return drop(sock.write_all(answer.as_bytes())),
        }
    };
    match gateway::upgrade(&head[..end], TOKEN) {
        Ok(answer) => sock.write_all(answer.as_bytes()).unwrap(),
        Err(answer) => return drop(sock.write_all(answer.as_bytes())),
    }
    let mut conn = Conn::new([0, 0, 0, 0, 0, 0, 0, 1]);
    let mut actions = Vec::new();
    conn.feed(&head[end..], &mut actions);
    loop {
        for a in actions.drain(..) {
            match a {
                Action::Send(bytes) => sock.write_all(&bytes).unwrap(),
                Action::Close(bytes) => return drop(sock.write_all(&bytes)),
                Action::Turn { content, .. } => {
                    let reply = conn.answer(Ok(&format!("echo: {content}"))).unwrap();
                    sock.write_all(&reply).unwrap();
                }
            }
        }
        let n = sock.read(&mut buf).unwrap_or(0);
        if n == 0 {
            return;
        }
        conn.feed(&buf[..n], &mut actions);
    }
}

fn server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for sock in listener.incoming().flatten() {
            thread::spawn(move || serve_one(sock));
        }
    });
    port
}

fn json(m: Message) -> serde_json::Value {
    serde_json::from_str(m.to_text().unwrap()).unwrap()
}

#[test]
fn a_real_client_chats_with_the_token() {
    let port = server();
    let (mut ws, resp) = tungstenite::connect(format!("ws://127.0.0.1:{port}/ws?token={TOKEN}")).unwrap();
    assert_eq!(resp.status(), 101);
    ws.send(Message::text(r#"{"type":"message","content":"hello","chat_id":"kitchen"}"#)).unwrap();
    let v = json(ws.read().unwrap());
    assert_eq!(v, serde_json::json!({"type":"response","content":"echo: hello","chat_id":"kitchen"}));
    // No chat id: the one named last on this connection.
    ws.send(Message::text(r#"{"type":"message","content":"again"}"#)).unwrap();
    assert_eq!(json(ws.read().unwrap())["chat_id"], "kitchen");
    // Pings are answered.
    ws.send(Message::Ping(b"p".to_vec().into())).unwrap();
    assert!(matches!(ws.read().unwrap(), Message::Pong(p) if &p[..] == b"p"));
    ws.close(None).unwrap();
}

#[test]
fn the_token_is_required_as_a_bearer_or_in_the_query() {
    let port = server();
    let url = format!("ws://127.0.0.1:{port}/");
    let err = tungstenite::connect(&url).unwrap_err();
    assert!(matches!(err, tungstenite::Error::Http(ref r) if r.status() == 401), "{err:?}");
    let err = tungstenite::connect(format!("{url}?token=wrong")).unwrap_err();
    assert!(matches!(err, tungstenite::Error::Http(ref r) if r.status() == 401), "{err:?}");
    let mut req = tungstenite::client::IntoClientRequest::into_client_request(url.as_str()).unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    assert!(tungstenite::connect(req).is_ok());
}

fn head(lines: &[&str]) -> Vec<u8> {
    let mut h = lines.join("\r\n");
    h.push_str("\r\n\r\n");
    h.into_bytes()
}

const KEY: &str = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==";

#[test]
fn upgrades_are_checked() {
    let ok = |extra: &[&'static str]| {
        let mut l = vec![
            "GET /?token=t HTTP/1.1",
            "Host: chip:18789",
            "Upgrade: websocket",
            "Connection: keep-alive, Upgrade",
            "Sec-WebSocket-Version: 13",
            KEY,
        ];
        l.extend_from_slice(extra);
        gateway::upgrade(&head(&l), "t")
    };
    // RFC 6455's own example key and answer.
    assert!(ok(&[]).unwrap().contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
    assert!(ok(&["Origin: http://chip:18789"]).is_ok());
    assert!(ok(&["Origin: http://evil.example"]).unwrap_err().starts_with("HTTP/1.1 403"));
    let status = |h: &[&str], token: &str| gateway::upgrade(&head(h), token).map_err(|e| e[9..12].to_owned());
    let up = ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13", KEY];
    let with = |first: &'static str| [&[first][..], &up[..]].concat();
    assert_eq!(status(&with("POST /?token=t HTTP/1.1"), "t").unwrap_err(), "400");
    assert_eq!(status(&with("GET /admin?token=t HTTP/1.1"), "t").unwrap_err(), "404");
    assert_eq!(status(&with("GET /?token=t HTTP/1.1")[..1], "t").unwrap_err(), "426");
    // No token set on the chip: nobody gets in, not even with an empty one.
    assert_eq!(status(&with("GET /?token= HTTP/1.1"), "").unwrap_err(), "401");
    assert_eq!(status(&with("GET /?token=T HTTP/1.1"), "t").unwrap_err(), "401");
    let old = ["GET /?token=t HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 8", KEY];
    assert_eq!(status(&old, "t").unwrap_err(), "400");
    let nokey = ["GET /?token=t HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13"];
    assert_eq!(status(&nokey, "t").unwrap_err(), "400");
    assert_eq!(gateway::upgrade(&[0xff, 0xfe, b'\r', b'\n', b'\r', b'\n'], "t").unwrap_err()[9..12].to_owned(), "400");
}

#[test]
fn the_head_is_bounded() {
    assert_eq!(gateway::head_end(b"GET / HTTP/1.1\r\n").unwrap(), None);
    assert_eq!(gateway::head_end(b"GET / HTTP/1.1\r\n\r\nrest").unwrap(), Some(18));
    let endless = vec![b'a'; MAX_HEAD];
    assert!(gateway::head_end(&endless).unwrap_err().starts_with("HTTP/1.1 431"));
    let mut late = vec![b'a'; MAX_HEAD];
    late.extend_from_slice(b"\r\n\r\n");
    assert!(gateway::head_end(&late).is_err());
}

/// A client's frame: masked, as a client must.
fn client_frame(m: &WsMessage) -> Vec<u8> {
    let mut out = Vec::new();
    encode(m, Some([1, 2, 3, 4]), &mut out);
    out
}

fn text(s: &str) -> Vec<u8> {
    client_frame(&WsMessage::Text(s.to_owned()))
}

/// The events among `actions`, decoded.
fn events(actions: &[Action]) -> Vec<serde_json::Value> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(b) => {
                let mut d = chela_proto::websocket::Decoder::new(chela_proto::websocket::Role::Client, 1 << 16);
                d.handle_bytes(b);
                match d.poll_message().unwrap() {
                    Some(WsMessage::Text(t)) => Some(serde_json::from_str(&t).unwrap()),
                    _ => None,
                }
            }
            _ => None,
        })
        .collect()
}

fn close_code(a: &Action) -> u16 {
    let Action::Close(b) = a else { panic!("not a close: {a:?}") };
    let mut d = chela_proto::websocket::Decoder::new(chela_proto::websocket::Role::Client, 1 << 16);
    d.handle_bytes(b);
    match d.poll_message().unwrap() {
        Some(WsMessage::Close(code, _)) => code,
        m => panic!("{m:?}"),
    }
}

#[test]
fn one_turn_at_a_time_per_connection() {
    let mut conn = Conn::new([7; 8]);
    let mut out = Vec::new();
    let msg = text(r#"{"type":"message","content":"one"}"#);
    // Byte by byte: frames may arrive in any pieces.
    for b in &msg {
        conn.feed(std::slice::from_ref(b), &mut out);
    }
    assert_eq!(out, [Action::Turn { chat_id: "ws_0707070707070707".into(), content: "one".into() }]);
    out.clear();
    conn.feed(&text(r#"{"type":"message","content":"two","chat_id":"x"}"#), &mut out);
    let e = events(&out);
    assert_eq!(e[0]["type"], "error");
    assert!(e[0]["content"].as_str().unwrap().contains("one message at a time"));
    assert_eq!(conn.waiting(), Some("ws_0707070707070707"));
    let answer = conn.answer(Err("the model failed")).unwrap();
    assert_eq!(
        events(&[Action::Send(answer)])[0],
        serde_json::json!({"type":"error","content":"the model failed","chat_id":"ws_0707070707070707"})
    );
    assert!(conn.answer(Ok("late")).is_none());
}

#[test]
fn abuse_is_answered_or_closed() {
    let bad = |input: Vec<u8>| {
        let mut conn = Conn::new([1; 8]);
        let mut out = Vec::new();
        conn.feed(&input, &mut out);
        out
    };
    for (input, why) in [
        (text("not json"), "not the expected JSON"),
        (text(r#"{"type":"subscribe","content":"x"}"#), "unknown message type"),
        (text(r#"{"type":"message","content":"  "}"#), "empty"),
        (text(r#"{"type":"message","content":"x","chat_id":"../etc"}"#), "chat_id may hold only"),
        (client_frame(&WsMessage::Binary(vec![1, 2])), "text frames"),
        (text(&format!(r#"{{"type":"message","content":"x","chat_id":"{}"}}"#, "a".repeat(49))), "at most 48"),
    ] {
        let out = bad(input);
        let e = events(&out);
        assert_eq!(e.len(), 1, "{why}: {out:?}");
        assert!(e[0]["content"].as_str().unwrap().contains(why), "{e:?}");
    }
    // A message over the bound, in one frame or in fragments: closed with 1009 from its header.
    let huge = text(&format!(r#"{{"type":"message","content":"{}"}}"#, "a".repeat(MAX_MESSAGE)));
    assert_eq!(close_code(&bad(huge[..16].to_vec())[0]), 1009);
    // Unmasked frames (a server's) and reserved bits break the protocol: 1002.
    let mut unmasked = Vec::new();
    encode(&WsMessage::Text("x".into()), None, &mut unmasked);
    assert_eq!(close_code(&bad(unmasked)[0]), 1002);
    let mut rsv = text("x");
    rsv[0] |= 0x40;
    assert_eq!(close_code(&bad(rsv)[0]), 1002);
    // A close is answered, and nothing after it is read.
    let mut conn = Conn::new([1; 8]);
    let mut out = Vec::new();
    let mut input = client_frame(&WsMessage::Close(1000, String::new()));
    input.extend(text(r#"{"type":"message","content":"after"}"#));
    conn.feed(&input, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(close_code(&out[0]), 1000);
    conn.feed(&text(r#"{"type":"message","content":"later"}"#), &mut out);
    assert_eq!(out.len(), 1);
}

#[test]
fn an_unnamed_chat_is_random_per_connection_and_a_named_one_sticks() {
    let turn_of = |conn: &mut Conn, msg: &str| {
        let mut out = Vec::new();
        conn.feed(&text(msg), &mut out);
        let [Action::Turn { chat_id, .. }] = &out[..] else { panic!("{out:?}") };
        conn.answer(Ok("ok")).unwrap();
        chat_id.clone()
    };
    let unnamed = r#"{"type":"message","content":"hi"}"#;
    let (mut a, mut b) = (Conn::new([0xa1; 8]), Conn::new([0x5c, 1, 2, 3, 4, 5, 6, 7]));
    assert_eq!(turn_of(&mut a, unnamed), "ws_a1a1a1a1a1a1a1a1");
    assert_eq!(turn_of(&mut b, unnamed), "ws_5c01020304050607", "not a counter: another connection, another chat");
    assert_eq!(turn_of(&mut a, unnamed), "ws_a1a1a1a1a1a1a1a1", "the connection keeps its own");
    assert_eq!(turn_of(&mut a, r#"{"type":"message","content":"x","chat_id":"garden"}"#), "garden");
    assert_eq!(turn_of(&mut a, unnamed), "garden", "a named chat sticks");
    // A refused name does not stick.
    let mut out = Vec::new();
    a.feed(&text(r#"{"type":"message","content":"x","chat_id":"../etc"}"#), &mut out);
    assert_eq!(events(&out)[0]["type"], "error");
    assert_eq!(turn_of(&mut a, unnamed), "garden");
}

#[test]
fn a_scheduled_answer_reaches_the_clients_of_its_chat_only() {
    // Three clients: two in "garden" (one named it, one moved there), one in its own chat.
    let mut conns = [Conn::new([1; 8]), Conn::new([2; 8]), Conn::new([3; 8])];
    let mut chats = gateway::Chats::new();
    for (slot, (conn, msg)) in conns
        .iter_mut()
        .zip([r#"{"content":"a","chat_id":"garden"}"#, r#"{"content":"b","chat_id":"kitchen"}"#, r#"{"content":"c"}"#])
        .enumerate()
    {
        let mut out = Vec::new();
        conn.feed(&text(&msg.replace('{', r#"{"type":"message","#)), &mut out);
        conn.answer(Ok("ok")).unwrap();
        chats.set(slot, 7, conn.chat());
    }
    assert_eq!(conns[2].chat(), "ws_0303030303030303");
    let mut out = Vec::new();
    conns[1].feed(&text(r#"{"type":"message","content":"x","chat_id":"garden"}"#), &mut out);
    chats.set(1, 7, conns[1].chat());
    assert_eq!(chats.of("garden"), [(0, 7), (1, 7)]);
    assert_eq!(chats.of("kitchen"), [], "the client that moved away gets no more of kitchen's answers");
    assert_eq!(chats.of("ws_0303030303030303"), [(2, 7)]);
    // A chat no client is in reaches nobody; an ended connection leaves, a stale end does not
    // remove the slot's next connection.
    assert_eq!(chats.of("gardens"), []);
    chats.clear(0, 6);
    assert_eq!(chats.of("garden"), [(0, 7), (1, 7)]);
    chats.clear(0, 7);
    assert_eq!(chats.of("garden"), [(1, 7)]);
    chats.set(0, 8, "garden");
    assert_eq!(chats.of("garden"), [(0, 8), (1, 7)], "the serial tells a slot's connections apart");
    // Out-of-range slots are ignored, not a panic.
    chats.set(gateway::MAX_CLIENTS, 1, "garden");
    assert_eq!(chats.of("garden").len(), 2);
    // The pushed frame: the host's `response` event for that chat, or `error` for a failed turn.
    let pushed = |r| events(&[Action::Send(gateway::answer_frame("garden", r))])[0].clone();
    assert_eq!(
        pushed(Ok("water them")),
        serde_json::json!({"type":"response","content":"water them","chat_id":"garden"})
    );
    assert_eq!(
        pushed(Err("the model failed")),
        serde_json::json!({"type":"error","content":"the model failed","chat_id":"garden"})
    );
}

#[test]
fn an_answer_no_client_took_goes_to_the_next_client_of_its_chat_once() {
    let content = |frame: &[u8]| events(&[Action::Send(frame.to_vec())])[0]["content"].clone();
    let mut chats = gateway::Chats::new();
    // A client asks in "garden", then closes its socket before the answer comes.
    let mut a = Conn::new([1; 8]);
    let mut out = Vec::new();
    a.feed(&text(r#"{"type":"message","content":"how are the tomatoes?","chat_id":"garden"}"#), &mut out);
    assert!(chats.set(0, 1, a.chat()).is_empty());
    assert!(chats.live(0, 1));
    chats.clear(0, 1);
    // The main loop finds the asker gone, and holds the answer for the chat.
    assert!(!chats.live(0, 1));
    let frame = gateway::answer_frame("garden", Ok("they need water"));
    assert!(chats.hold("garden", frame.clone()));
    // Not for a client of another chat, nor another connection of the same slot elsewhere.
    assert!(chats.set(1, 1, "kitchen").is_empty());
    assert!(chats.set(0, 2, "ws_0101010101010101").is_empty());
    // The next connection in "garden" gets it first, and only once: no other client gets it.
    assert_eq!(chats.set(0, 2, "garden"), [frame]);
    assert!(chats.set(0, 2, "garden").is_empty());
    assert!(chats.set(2, 1, "garden").is_empty());
    assert!(!chats.live(0, 1) && chats.live(0, 2), "the serial tells a slot's connections apart");

    // Bounded: the newest HELD_ANSWERS, in order.
    for i in 0..gateway::HELD_ANSWERS + 1 {
        assert!(chats.hold("attic", gateway::answer_frame("attic", Ok(&format!("answer {i}")))));
    }
    let got = chats.set(3, 1, "attic");
    let got: Vec<_> = got.iter().map(|f| content(f)).collect();
    assert_eq!(got, (1..=gateway::HELD_ANSWERS).map(|i| format!("answer {i}")).collect::<Vec<_>>());
    // And by bytes: the oldest go to make room; one frame over the bound is not held at all.
    let half = vec![b'x'; gateway::HELD_BYTES / 2 + 1];
    assert!(chats.hold("a", half.clone()) && chats.hold("b", half.clone()));
    assert!(chats.set(3, 2, "a").is_empty(), "dropped for b's room");
    assert_eq!(chats.set(3, 3, "b"), [half]);
    assert!(!chats.hold("c", vec![b'x'; gateway::HELD_BYTES + 1]));
    assert!(chats.set(3, 4, "c").is_empty());
    // Out-of-range slots get nothing and take nothing.
    assert!(chats.hold("d", gateway::answer_frame("d", Ok("kept"))));
    assert!(chats.set(gateway::MAX_CLIENTS, 1, "d").is_empty());
    assert!(!chats.live(gateway::MAX_CLIENTS, 1));
    assert_eq!(chats.set(1, 2, "d").len(), 1);
}

fn post(lines: &[&str]) -> Result<gateway::Request, String> {
    gateway::request(&head(lines), "t")
}

#[test]
fn a_posted_update_needs_the_token_and_a_length() {
    use gateway::Request;
    assert_eq!(
        post(&["POST /ota HTTP/1.1", "Authorization: Bearer t", "Content-Length: 1234"]),
        Ok(Request::Update { len: 1234, expect_continue: false })
    );
    assert_eq!(
        post(&["POST /ota?token=t HTTP/1.1", "content-length: 9", "Expect: 100-continue"]),
        Ok(Request::Update { len: 9, expect_continue: true })
    );
    // The setup page: a plain GET of /, or its form's POST.
    assert_eq!(post(&["GET / HTTP/1.1", "Host: chip"]), Ok(Request::Setup));
    assert_eq!(post(&["GET /?token=x HTTP/1.1"]), Ok(Request::Setup));
    assert_eq!(post(&["POST /save HTTP/1.1", "Content-Length: 3"]), Ok(Request::Setup));
    assert_eq!(post(&["GET /ws HTTP/1.1"]).unwrap_err()[9..12].to_owned(), "426", "/ws is the chat only");
    // The chat still upgrades through the same entry point.
    let up = ["GET /?token=t HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13", KEY];
    assert!(matches!(post(&up), Ok(Request::Chat(a)) if a.starts_with("HTTP/1.1 101")));
    let status = |lines: &[&str]| post(lines).unwrap_err()[9..12].to_owned();
    assert_eq!(status(&["POST /ota HTTP/1.1", "Content-Length: 9"]), "401");
    assert_eq!(status(&["POST /ota?token=T HTTP/1.1", "Content-Length: 9"]), "401");
    assert_eq!(
        gateway::request(&head(&["POST /ota?token= HTTP/1.1", "Content-Length: 9"]), "").unwrap_err()[9..12].to_owned(),
        "401"
    );
    assert_eq!(status(&["POST /ota?token=t HTTP/1.1"]), "411");
    assert_eq!(status(&["POST /ota?token=t HTTP/1.1", "Transfer-Encoding: chunked"]), "411");
    assert_eq!(status(&["POST /ota?token=t HTTP/1.1", "Content-Length: 9", "Content-Length: 10"]), "400");
    assert_eq!(status(&["POST /ota?token=t HTTP/1.1", "Content-Length: -1"]), "400");
    assert_eq!(status(&["POST /ota?token=t HTTP/1.1", "Content-Length: 99999999999999999999999"]), "400");
    let over = format!("Content-Length: {}", gateway::MAX_UPDATE + 1);
    assert_eq!(status(&["POST /ota?token=t HTTP/1.1", &over]), "413");
    assert_eq!(status(&["POST /admin?token=t HTTP/1.1", "Content-Length: 9"]), "404");
    assert_eq!(status(&["POST /ota?token=t", "Content-Length: 9"]), "400");
    let cross = ["POST /ota?token=t HTTP/1.1", "Host: chip:18789", "Origin: http://evil.example", "Content-Length: 9"];
    assert_eq!(status(&cross), "403");
    assert_eq!(gateway::request(b"POST /ota\xff HTTP/1.1\r\n\r\n", "t").unwrap_err()[9..12].to_owned(), "400");
}

proptest::proptest! {
    /// Any bytes, and valid heads with bytes changed: no panic; an update is taken only with the
    /// token and within the bound.
    #[test]
    fn request_heads_from_anyone_are_answered_without_panicking(
        junk in proptest::collection::vec(proptest::num::u8::ANY, 0..600),
        edits in proptest::collection::vec((0usize..200, proptest::num::u8::ANY), 0..6),
    ) {
        let _ = gateway::request(&junk, "t");
        let _ = gateway::request(&junk, "");
        let mut h = head(&["POST /ota?token=t HTTP/1.1", "Host: chip", "Content-Length: 4096"]);
        for (at, b) in edits {
            let at = at % h.len();
            h[at] = b;
        }
        if let Ok(gateway::Request::Update { len, .. }) = gateway::request(&h, "t") {
            proptest::prop_assert!(len <= gateway::MAX_UPDATE);
            let text = String::from_utf8_lossy(&h);
            proptest::prop_assert!(text.contains("token=t ") || text.contains("token=t&") || text.contains("Bearer t"));
        }
        let _ = gateway::request(&h, "");
        let taken = matches!(gateway::request(&h, ""), Ok(gateway::Request::Update { .. }));
        proptest::prop_assert!(!taken, "no token set: no update is taken");
    }
}
