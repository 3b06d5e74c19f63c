//! The WebSocket gateway on port 18789 (the protocol, the token and the bounds are
//! `chela_chip::gateway`'s): [`CLIENTS`] tasks, each with its own socket, so a fifth client
//! finds no listener. A chat message becomes an [`Ask`] the main loop runs as a turn (one at a
//! time, between Telegram polls) and answers through the task's [`ANSWERS`] slot; `POST /ota`
//! streams a signed update into the idle app slot (`ota::Updates::receive`).

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use chela_chip::gateway::{self, Action, Conn, Request};
use chela_chip::portal;
use chela_chip::{Board, say};
use critical_section::Mutex as CsMutex;
use embassy_futures::select::{Either3, select3};
use embassy_net::Stack;
use embassy_net::tcp::TcpSocket;
use embassy_sync::blocking_mutex::raw::{CriticalSectionRawMutex, NoopRawMutex};
use embassy_sync::channel::Channel;
use embassy_sync::mutex::Mutex;
use embassy_sync::signal::Signal;
use embassy_time::{Duration, with_timeout};
use embedded_io_async::Write;
use esp_hal::rng::Rng;

use crate::board::Esp;
use crate::led;
use crate::ota::{self, Updates};

pub const CLIENTS: usize = gateway::MAX_CLIENTS;
/// Socket buffers per client: a frame longer than these is read and written in pieces.
const RX: usize = 1024;
const TX: usize = 1024;
/// A client has this long to send its request head.
const HEAD_WAIT: Duration = Duration::from_secs(10);
/// Silence allowed between pieces of an update's body.
const BODY_WAIT: Duration = Duration::from_secs(30);
/// A peer that stops acknowledging is dropped after this long.
const DEAD_PEER: Duration = Duration::from_secs(120);
/// After the answer, what the client still sends (a refused update's body) is read and dropped
/// for at most this long and this many bytes.
const DRAIN_WAIT: Duration = Duration::from_secs(5);
const DRAIN_BYTES: usize = 256 * 1024;

/// What a gateway client asked the main loop for.
pub struct Ask {
    pub slot: usize,
    /// Which connection of the slot asked: an answer for an earlier one is dropped.
    pub serial: u32,
    pub work: Work,
}

pub enum Work {
    /// A chat message: a turn.
    Turn { chat_id: String, content: String },
    /// A request for the setup page (`chela_chip::portal::handle` with the gateway token).
    Setup { head: portal::Head, body: Vec<u8> },
}

pub enum Reply {
    Turn(Result<String, String>),
    /// The page, and whether the chip restarts once it is sent (the settings were saved).
    Page(Vec<u8>, bool),
}

/// Turns waiting for the main loop: at most one per client.
pub static ASKS: Channel<CriticalSectionRawMutex, Ask, CLIENTS> = Channel::new();
/// Each slot's answer: the asking connection's serial and the reply (or why the turn failed).
pub static ANSWERS: [Signal<CriticalSectionRawMutex, (u32, Reply)>; CLIENTS] = [const { Signal::new() }; CLIENTS];
/// Scheduled jobs' answers for each slot's connection (its serial, the chat, the frame): a client
/// that does not read them for a while misses the next ones, and the main loop says so.
static PUSHES: [Channel<CriticalSectionRawMutex, (u32, String, Vec<u8>), 2>; CLIENTS] =
    [const { Channel::new() }; CLIENTS];
/// The chat each slot's connection is in: where a job's answer is pushed.
static CHATS: CsMutex<RefCell<gateway::Chats>> = CsMutex::new(RefCell::new(gateway::Chats::new()));

/// Pushes a job's answer (or why its turn failed) to the clients connected in `chat`: how many
/// are connected there, and how many took it. When none took it, it is held for the next
/// client in the chat (`gateway::Chats::hold`).
pub fn push(chat: &str, result: Result<&str, &str>) -> (usize, usize) {
    let to = critical_section::with(|cs| CHATS.borrow_ref(cs).of(chat));
    let frame = gateway::answer_frame(chat, result);
    let took = to
        .iter()
        .filter(|(slot, serial)| PUSHES[*slot].try_send((*serial, String::from(chat), frame.clone())).is_ok())
        .count();
    if took == 0 {
        hold(chat, frame);
    }
    (to.len(), took)
}

/// The answer to connection `serial` of `slot`'s turn in `chat`, when that connection is gone
/// (its client closed the socket while the turn ran): held for the next client in the chat.
/// `true` when it was gone.
pub fn held_if_gone(slot: usize, serial: u32, chat: &str, result: Result<&str, &str>) -> bool {
    if critical_section::with(|cs| CHATS.borrow_ref(cs).live(slot, serial)) {
        return false;
    }
    hold(chat, gateway::answer_frame(chat, result));
    true
}

fn hold(chat: &str, frame: Vec<u8>) {
    let len = frame.len();
    if !critical_section::with(|cs| CHATS.borrow_ref_mut(cs).hold(chat, frame)) {
        say!(&Esp, "[gateway] an answer of {len} B in chat {chat} is too large to hold; it is in the chat's session");
    }
}

/// Connection `serial` of `slot` is in `chat` (or ended: `None`): the answers held for that
/// chat, to send first.
fn in_chat(slot: usize, serial: u32, chat: Option<&str>) -> Vec<Vec<u8>> {
    critical_section::with(|cs| {
        let mut chats = CHATS.borrow_ref_mut(cs);
        match chat {
            Some(c) => chats.set(slot, serial, c),
            None => {
                chats.clear(slot, serial);
                Vec::new()
            }
        }
    })
}

/// Writes an answer `frame` in `chat`; one the socket does not take is held for the chat's
/// next client. `false` when the write failed.
async fn deliver(sock: &mut TcpSocket<'_>, chat: &str, frame: Vec<u8>) -> bool {
    if sock.write_all(&frame).await.is_ok() {
        return true;
    }
    hold(chat, frame);
    false
}

/// The gateway token in force (the main loop sets it at boot and when the settings change);
/// empty: nobody is let in.
pub static TOKEN: CsMutex<RefCell<String>> = CsMutex::new(RefCell::new(String::new()));

/// The updates' partitions, shared by the console's `ota URL` (main loop) and `POST /ota`.
pub type SharedUpdates = &'static Mutex<NoopRawMutex, Updates>;

pub fn set_token(token: &str) {
    critical_section::with(|cs| {
        let mut t = TOKEN.borrow_ref_mut(cs);
        if t.as_str() != token {
            *t = String::from(token);
        }
    });
}

fn token() -> String {
    critical_section::with(|cs| TOKEN.borrow_ref(cs).clone())
}

/// Held by the one slot that listens: the others wait for it, or serve a client.
static LISTENING: Mutex<CriticalSectionRawMutex, ()> = Mutex::new(());

/// One client slot: accepts, serves, closes, forever. One slot listens at a time (the next one
/// starts as soon as a client is accepted), and a slot's socket buffers and its connection's
/// state are on the heap only while it listens or serves: idle, the gateway holds 2 KiB of heap,
/// not [`CLIENTS`] sockets of static RAM. With every slot busy, a further client finds no
/// listener.
#[embassy_executor::task(pool_size = CLIENTS)]
pub async fn task(stack: Stack<'static>, slot: usize, updates: SharedUpdates) {
    let mut serial = 0u32;
    loop {
        let listening = LISTENING.lock().await;
        ANSWERS[slot].reset();
        let mut buffers = alloc::vec![0u8; RX + TX];
        let (rx, tx) = buffers.split_at_mut(RX);
        let mut sock = TcpSocket::new(stack, rx, tx);
        sock.set_timeout(Some(DEAD_PEER));
        sock.set_keep_alive(Some(Duration::from_secs(60)));
        let accepted = sock.accept(gateway::PORT).await;
        drop(listening);
        if accepted.is_err() {
            continue;
        }
        serial = serial.wrapping_add(1);
        // Boxed: the request's state (the OTA receiver, the WebSocket's) only while it runs.
        alloc::boxed::Box::pin(serve(&mut sock, slot, serial, updates)).await;
        let _ = sock.flush().await;
        sock.close();
        drain(&mut sock).await;
        sock.abort();
    }
}

/// Reads and drops what the client still sends after the answer (our side is closed already),
/// until it closes its side or a bound is met. Resetting a connection with its request's body
/// unread would make the client's stack throw away the answer it has not read yet (a refused
/// `POST /ota` would show a reset, not the 401).
async fn drain(sock: &mut TcpSocket<'_>) {
    let mut sink = [0u8; 256];
    let mut left = DRAIN_BYTES;
    let _ = with_timeout(DRAIN_WAIT, async {
        while left > 0 {
            match sock.read(&mut sink).await {
                Ok(n) if n > 0 => left = left.saturating_sub(n),
                _ => return,
            }
        }
    })
    .await;
}

async fn serve(sock: &mut TcpSocket<'_>, slot: usize, serial: u32, updates: SharedUpdates) {
    let mut head = Vec::new();
    let mut buf = [0u8; 256];
    let end = loop {
        let n = match with_timeout(HEAD_WAIT, sock.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return,
        };
        head.extend_from_slice(&buf[..n]);
        match gateway::head_end(&head) {
            Ok(Some(end)) => break end,
            Ok(None) => {}
            Err(answer) => {
                let _ = sock.write_all(answer.as_bytes()).await;
                return;
            }
        }
    };
    match gateway::request(&head[..end], &token()) {
        Err(answer) => {
            let _ = sock.write_all(answer.as_bytes()).await;
        }
        Ok(Request::Chat(answer)) => {
            if sock.write_all(answer.as_bytes()).await.is_ok() {
                let rest = head.split_off(end);
                drop(head);
                chat(sock, slot, serial, &rest).await;
                in_chat(slot, serial, None);
            }
        }
        Ok(Request::Setup) => setup(sock, slot, serial, &head).await,
        Ok(Request::Update { len, expect_continue }) => {
            let rest = head.split_off(end);
            drop(head);
            update(sock, updates, len, expect_continue, &rest).await;
        }
    }
}

async fn chat(sock: &mut TcpSocket<'_>, slot: usize, serial: u32, first: &[u8]) {
    let mut random = [0u8; 8];
    Rng::new().read(&mut random);
    let mut conn = Conn::new(random);
    let mut actions = Vec::new();
    conn.feed(first, &mut actions);
    let mut buf = [0u8; 256];
    loop {
        // Answers no client took in this chat, before anything else.
        let chat = String::from(conn.chat());
        let mut held = in_chat(slot, serial, Some(&chat)).into_iter();
        while let Some(frame) = held.next() {
            if !deliver(sock, &chat, frame).await {
                held.for_each(|f| hold(&chat, f));
                return;
            }
        }
        for a in actions.drain(..) {
            let (bytes, close) = match a {
                Action::Send(b) => (b, false),
                Action::Close(b) => (b, true),
                Action::Turn { chat_id, content } => {
                    let ask = Ask { slot, serial, work: Work::Turn { chat_id, content } };
                    // At most one turn per connection is waiting, so the channel has room
                    // unless turns of closed connections are still queued.
                    if ASKS.try_send(ask).is_err() {
                        let frame = conn.answer(Err("the device is busy; send it again in a moment"));
                        (frame.unwrap_or_default(), false)
                    } else {
                        continue;
                    }
                }
            };
            if sock.write_all(&bytes).await.is_err() || close {
                return;
            }
        }
        let waiting = conn.waiting().is_some();
        // The answer to this connection's turn, once it asked for one.
        let answered = async { if waiting { ANSWERS[slot].wait().await } else { core::future::pending().await } };
        match select3(sock.read(&mut buf), answered, PUSHES[slot].receive()).await {
            Either3::First(Ok(n)) if n > 0 => conn.feed(&buf[..n], &mut actions),
            Either3::First(_) => return,
            Either3::Second((s, reply)) => {
                let chat = conn.waiting().map(String::from).unwrap_or_default();
                if s == serial
                    && let Reply::Turn(result) = reply
                    && let Some(frame) = conn.answer(result.as_deref().map_err(String::as_str))
                    && !deliver(sock, &chat, frame).await
                {
                    return;
                }
            }
            // A job's answer; one for an earlier connection of this slot (which ended before it
            // read it) is held for the chat's next client.
            Either3::Third((s, chat, frame)) if s != serial => hold(&chat, frame),
            Either3::Third((_, chat, frame)) => {
                if !deliver(sock, &chat, frame).await {
                    return;
                }
            }
        }
    }
}

/// The setup page on the LAN: the request handed to the main loop (which has the settings), the
/// page it gives sent back; a save restarts the chip once the page is sent.
async fn setup(sock: &mut TcpSocket<'_>, slot: usize, serial: u32, first: &[u8]) {
    let refuse = |e: portal::HttpError| e.response().to_http();
    let (head, end) = match portal::head_len(first).and_then(|end| {
        let end = end.ok_or(portal::HttpError::HeadTooLarge)?;
        Ok((portal::parse_head(&first[..end])?, end))
    }) {
        Ok(h) => h,
        Err(e) => {
            let _ = sock.write_all(&refuse(e)).await;
            return;
        }
    };
    // The body: at most `portal::MAX_BODY` (parse_head refused a longer Content-Length).
    let mut body = Vec::from(&first[end..first.len().min(end + head.content_length)]);
    let mut buf = [0u8; 256];
    while body.len() < head.content_length {
        let want = (head.content_length - body.len()).min(buf.len());
        match with_timeout(HEAD_WAIT, sock.read(&mut buf[..want])).await {
            Ok(Ok(n)) if n > 0 => body.extend_from_slice(&buf[..n]),
            _ => return,
        }
    }
    ANSWERS[slot].reset();
    if ASKS.try_send(Ask { slot, serial, work: Work::Setup { head, body } }).is_err() {
        {
            let _ = sock.write_all(gateway::answer(503, "the device is busy; try again").as_bytes()).await;
            return;
        };
    }
    loop {
        let (s, reply) = ANSWERS[slot].wait().await;
        if s != serial {
            continue;
        }
        if let Reply::Page(bytes, restart) = reply {
            let _ = sock.write_all(&bytes).await;
            let _ = sock.flush().await;
            if restart {
                say!(&Esp, "[portal] settings saved from the LAN: restarting");
                embassy_time::Timer::after(Duration::from_millis(300)).await;
                esp_hal::system::software_reset()
            }
        }
        return;
    }
}

/// `POST /ota`: the body into the idle slot, the signature checked, the answer sent; restarts
/// into the new image when it was taken.
async fn update(sock: &mut TcpSocket<'_>, updates: SharedUpdates, len: usize, expect: bool, first: &[u8]) {
    let Ok(mut updates) = updates.try_lock() else {
        let busy = gateway::answer(503, "an update is already being written");
        {
            let _ = sock.write_all(busy.as_bytes()).await;
            return;
        };
    };
    led::hold(led::State::Thinking, u64::MAX);
    let mut report = ota::report;
    let result = match updates.receive(&mut report) {
        Err(e) => Err(e),
        Ok(mut incoming) => {
            if expect {
                let _ = sock.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await;
            }
            chela_chip::link::Answer::head(&mut incoming, 200, &[]);
            let mut got = first.len();
            let mut going = chela_chip::link::Answer::body(&mut incoming, first);
            let mut buf = [0u8; 512];
            while going && got < len {
                let want = (len - got).min(buf.len());
                match with_timeout(BODY_WAIT, sock.read(&mut buf[..want])).await {
                    Ok(Ok(n)) if n > 0 => {
                        got += n;
                        going = chela_chip::link::Answer::body(&mut incoming, &buf[..n]);
                    }
                    _ => break,
                }
            }
            incoming.finish()
        }
    };
    let why = result.as_ref().err().map(|e| alloc::format!("{e}"));
    let answer = gateway::update_answer(result.as_ref().copied().map_err(|_| why.as_deref().unwrap_or("")));
    let _ = sock.write_all(answer.as_bytes()).await;
    let _ = sock.flush().await;
    match result {
        Ok(slot) => ota::restart_into(slot),
        Err(e) => {
            say!(&Esp, "[ota] refused: {e}");
            led::hold(led::State::Error, Esp.now_ms() + 10_000);
        }
    }
}
