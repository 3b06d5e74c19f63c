//! The Feishu long connection on a reader and a writer at once (`feishu::duplex`), as the ESP32
//! task runs it on its TLS halves: over in-memory pipes and a clock the test moves, so every
//! step is deterministic. What matters most: pings go out while a read waits, and that read is
//! never dropped half-way (embedded-tls's read is not cancel-safe).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

use chela_chip::feishu::conn::{Action, Conn, Incoming, MAX_FRAME_BYTES};
use chela_chip::feishu::duplex::{self, Clock};
use chela_chip::feishu::{Access, ClientConfig};
use chela_proto::feishu::frame::{Frame, Header, METHOD_CONTROL, METHOD_DATA};
use chela_proto::websocket::{self, Decoder, Message, Role};
use embassy_futures::select::{Either, select};
use embassy_futures::{block_on, yield_now};
use embedded_io_async::{ErrorKind, ErrorType, Read, Write};

const OWNER: &str = "ou_owner";
const PING_S: u64 = 5;

/// What the server has sent and the client not yet read; the read waiting on it.
#[derive(Default)]
struct Pipe {
    bytes: VecDeque<u8>,
    eof: bool,
    waker: Option<Waker>,
    /// Set when a read was dropped before it returned: the property under test.
    cancelled: bool,
    reads_started: usize,
}

struct Reader(Rc<RefCell<Pipe>>);

impl ErrorType for Reader {
    type Error = ErrorKind;
}

/// Marks the pipe if the read it lives in is dropped before it finishes.
struct Guard(Rc<RefCell<Pipe>>, bool);

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.borrow_mut().cancelled = true;
        }
    }
}

impl Read for Reader {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        self.0.borrow_mut().reads_started += 1;
        let mut guard = Guard(self.0.clone(), false);
        let n = poll_fn(|cx| {
            let mut p = self.0.borrow_mut();
            if p.bytes.is_empty() && !p.eof {
                p.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            let n = buf.len().min(p.bytes.len());
            for (i, b) in p.bytes.drain(..n).enumerate() {
                buf[i] = b;
            }
            Poll::Ready(n)
        })
        .await;
        guard.1 = true;
        Ok(n)
    }
}

struct Writer(Rc<RefCell<Vec<u8>>>);

impl ErrorType for Writer {
    type Error = ErrorKind;
}

impl Write for Writer {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, ErrorKind> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }

    async fn flush(&mut self) -> Result<(), ErrorKind> {
        Ok(())
    }
}

/// A clock the test moves; waits wake when it passes their time.
#[derive(Default)]
struct TestClock {
    now: Cell<u64>,
    waiting: RefCell<Vec<Waker>>,
}

impl TestClock {
    fn set(&self, ms: u64) {
        self.now.set(ms);
        for w in self.waiting.borrow_mut().drain(..) {
            w.wake();
        }
    }
}

impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        self.now.get()
    }

    async fn at(&self, ms: u64) {
        poll_fn(|cx| {
            if self.now.get() >= ms {
                Poll::Ready(())
            } else {
                self.waiting.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }
}

/// The server's end: what it sends, and the client's frames decoded.
struct Server {
    pipe: Rc<RefCell<Pipe>>,
    written: Rc<RefCell<Vec<u8>>>,
    decoder: Decoder,
}

impl Server {
    fn send(&self, message: &Message) {
        let mut out = Vec::new();
        websocket::encode(message, None, &mut out);
        let mut p = self.pipe.borrow_mut();
        p.bytes.extend(out);
        if let Some(w) = p.waker.take() {
            w.wake();
        }
    }

    fn hang_up(&self) {
        let mut p = self.pipe.borrow_mut();
        p.eof = true;
        if let Some(w) = p.waker.take() {
            w.wake();
        }
    }

    /// The client's messages since the last call.
    fn got(&mut self) -> Vec<Message> {
        let bytes = std::mem::take(&mut *self.written.borrow_mut());
        self.decoder.handle_bytes(&bytes);
        let mut out = Vec::new();
        while let Some(m) = self.decoder.poll_message().unwrap() {
            out.push(m);
        }
        out
    }

    /// The client's Feishu frames since the last call: (method, `type` header).
    fn frames(&mut self) -> Vec<(i32, String)> {
        self.got()
            .into_iter()
            .map(|m| match m {
                Message::Binary(b) => {
                    let f = Frame::decode(&b, 1 << 20).unwrap();
                    (f.method, f.header("type").unwrap_or_default().to_string())
                }
                other => panic!("the client sent {other:?}"),
            })
            .collect()
    }
}

fn message_event(event_id: &str, text: &str) -> Message {
    let content = serde_json::json!({ "text": text }).to_string();
    let payload = serde_json::json!({
        "schema": "2.0",
        "header": {"event_id": event_id, "event_type": "im.message.receive_v1", "token": "vt", "app_id": "cli_a1b2"},
        "event": {
            "sender": {"sender_id": {"open_id": OWNER}, "sender_type": "user"},
            "message": {"message_id": "om_1", "chat_id": "oc_chat", "chat_type": "p2p", "message_type": "text",
                        "content": content}
        }
    })
    .to_string();
    let headers = [("type", "event"), ("message_id", event_id), ("sum", "1"), ("seq", "0")];
    let frame = Frame {
        seq_id: 1,
        service: 77,
        method: METHOD_DATA,
        headers: headers.iter().map(|(k, v)| Header { key: k.to_string(), value: v.to_string() }).collect(),
        payload: payload.into_bytes(),
        ..Frame::default()
    };
    Message::Binary(frame.to_bytes())
}

fn setup() -> (Reader, Writer, Server, Conn) {
    let pipe = Rc::new(RefCell::new(Pipe::default()));
    let written = Rc::new(RefCell::new(Vec::new()));
    let server = Server { pipe: pipe.clone(), written: written.clone(), decoder: Decoder::new(Role::Server, 1 << 20) };
    let config = ClientConfig { ping_interval: PING_S, ..ClientConfig::default() };
    (Reader(pipe), Writer(written), server, Conn::new(77, config, 0, 42))
}

async fn settle() {
    for _ in 0..8 {
        yield_now().await;
    }
}

/// Why the run ended, or the script's complaint when the run outlived it.
fn finish(end: Either<String, &str>) -> String {
    match end {
        Either::First(why) => why,
        Either::Second(complaint) => panic!("{complaint}"),
    }
}

const PING: (i32, &str) = (METHOD_CONTROL, "ping");

fn owned(frames: &[(i32, &str)]) -> Vec<(i32, String)> {
    frames.iter().map(|(m, t)| (*m, t.to_string())).collect()
}

#[test]
fn pings_go_out_while_a_read_waits_and_that_read_is_never_dropped() {
    let (reader, writer, mut server, conn) = setup();
    let pipe = server.pipe.clone();
    let clock = TestClock::default();
    let access = Access { allow: vec![OWNER.into()] };
    let turns = RefCell::new(Vec::new());
    let hand_on = async |a: Action| turns.borrow_mut().push(a);
    let run = duplex::run(reader, writer, conn, Vec::new(), &access, &clock, hand_on);
    let script = async {
        settle().await;
        // The first ping at once, while the reader waits on a socket with nothing to read.
        assert_eq!(server.frames(), owned(&[PING]));
        assert_eq!(pipe.borrow().reads_started, 1);
        // Every interval another, the same read still waiting.
        for k in 1..=2 {
            clock.set(k * PING_S * 1000);
            settle().await;
            assert_eq!(server.frames(), owned(&[PING]), "ping {k}");
        }
        assert_eq!(pipe.borrow().reads_started, 1);
        // An event: acknowledged on the writer, its turn handed on.
        server.send(&message_event("ev_1", "hello"));
        settle().await;
        let frames = server.frames();
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_eq!((frames[0].0, frames[0].1.as_str()), (METHOD_DATA, "event"));
        let turn = Incoming { sender: OWNER.into(), chat_id: "oc_chat".into(), text: "hello".into(), direct: true };
        assert_eq!(*turns.borrow(), vec![Action::Turn(turn)]);
        assert!(!pipe.borrow().cancelled, "a read was dropped while the connection lived");
        // Silent three intervals after it last spoke (at 10 s): dead, and the run ends.
        clock.set(10_000 + 3 * PING_S * 1000);
        settle().await;
        "the script ran out before the connection ended"
    };
    let why = finish(block_on(select(run, script)));
    assert!(why.contains("silent"), "{why}");
}

#[test]
fn a_turn_that_waits_does_not_hold_up_the_pings() {
    let (reader, writer, mut server, conn) = setup();
    let clock = TestClock::default();
    let access = Access { allow: vec![OWNER.into()] };
    // The firmware's turn queue, full: handing on waits until the test opens it.
    let open = Cell::new(false);
    let handed = Cell::new(0);
    let hand_on = async |_: Action| {
        poll_fn(|cx| {
            if open.get() {
                Poll::Ready(())
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
        .await;
        handed.set(handed.get() + 1);
    };
    let mut early = Vec::new();
    // The event came with the handshake's answer: fed before the first read.
    websocket::encode(&message_event("ev_1", "one"), None, &mut early);
    let run = duplex::run(reader, writer, conn, early, &access, &clock, hand_on);
    let script = async {
        settle().await;
        // The ack and the first ping went out, though the turn is stuck.
        let mut frames = server.frames();
        frames.sort();
        assert_eq!(frames, owned(&[PING, (METHOD_DATA, "event")]));
        clock.set(PING_S * 1000);
        settle().await;
        assert_eq!(server.frames(), owned(&[PING]));
        assert_eq!(handed.get(), 0);
        open.set(true);
        settle().await;
        assert_eq!(handed.get(), 1);
        server.send(&Message::Close(1000, String::new()));
        settle().await;
        "the script ran out before the connection ended"
    };
    let why = finish(block_on(select(run, script)));
    assert_eq!(why, "Feishu closed the long connection (1000)");
    // The close was answered before the run ended.
    assert!(matches!(server.got().as_slice(), [Message::Close(1000, _)]));
}

#[test]
fn a_hang_up_and_a_garbled_stream_end_the_run_with_the_reason() {
    let (reader, writer, server, conn) = setup();
    let clock = TestClock::default();
    let access = Access::default();
    server.hang_up();
    let why = block_on(duplex::run(reader, writer, conn, Vec::new(), &access, &clock, async |_| {}));
    assert_eq!(why, "Feishu closed the long connection");

    let (reader, writer, server, conn) = setup();
    // A message over the frame bound: the decoder refuses it, the connection closes.
    server.send(&Message::Binary(vec![0; MAX_FRAME_BYTES + 1]));
    let why = block_on(duplex::run(reader, writer, conn, Vec::new(), &access, &clock, async |_| {}));
    assert!(why.contains("bytes") || why.contains("large"), "{why}");
}

#[test]
fn a_sender_not_allowed_is_acknowledged_and_dropped_not_turned() {
    let (reader, writer, mut server, conn) = setup();
    let clock = TestClock::default();
    let nobody = Access::default();
    let handed = RefCell::new(Vec::new());
    let hand_on = async |a: Action| handed.borrow_mut().push(a);
    let run = duplex::run(reader, writer, conn, Vec::new(), &nobody, &clock, hand_on);
    let script = async {
        server.send(&message_event("ev_1", "let me in"));
        settle().await;
        let mut frames = server.frames();
        frames.sort();
        assert_eq!(frames, owned(&[PING, (METHOD_DATA, "event")]));
        server.hang_up();
        settle().await;
        "the script ran out before the connection ended"
    };
    let why = finish(block_on(select(run, script)));
    assert_eq!(why, "Feishu closed the long connection");
    let handed = handed.into_inner();
    assert!(matches!(handed.as_slice(), [Action::Dropped(w)] if w.contains("feishu_allow")), "{handed:?}");
}
