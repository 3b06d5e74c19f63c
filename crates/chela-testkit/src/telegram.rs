//! [`FakeTelegram`]: a fake Telegram Bot API on 127.0.0.1, for the Telegram channel's tests.
//!
//! What it is: the methods a bot uses, in the Bot API's documented formats
//! (<https://core.telegram.org/bots/api>): `getMe`; `getUpdates` as a long poll honouring
//! `offset` (updates below it are confirmed and forgotten), `limit` and `timeout`, with the
//! 409 Conflict a second concurrent poller gets; `getFile` and the `/file/bot<token>/<path>`
//! download; `sendMessage` and `editMessageText` with a real `parse_mode=HTML` parser (see
//! [`parse_html`]) that refuses bad markup with "Bad Request: can't parse entities: …" and
//! text over 4096 UTF-16 units with "Bad Request: message is too long"; `sendChatAction`;
//! `sendDocument`/`sendPhoto` as multipart uploads. A wrong token gets 401. Parameters may come
//! in the query string, a JSON body, a urlencoded form or a multipart form, as with Telegram.
//!
//! The test pushes updates (text, commands, photos, documents, voice notes, or any JSON), can
//! make the next sends answer 429 with `retry_after`, and can make the next `getUpdates`
//! answers hostile (garbage, an endless body, a huge update). It reads back every call and
//! every message that was accepted, and can wait for them without sleeping.
//!
//! What it is not: Telegram's rate limits or its group semantics; it keeps no chats or users.

mod html;
mod server;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::Notify;

pub use html::{Parsed, parse as parse_html};

use crate::running::Running;

/// Telegram's limit on a message's text after entity parsing, in UTF-16 units.
pub const MAX_TEXT_UNITS: usize = 4096;
/// Telegram's limit on a caption, in UTF-16 units.
pub const MAX_CAPTION_UNITS: usize = 1024;
/// The largest file `getFile` serves, as with Telegram's cloud Bot API.
pub const MAX_DOWNLOAD_BYTES: usize = 20 * 1024 * 1024;
/// Calls and sent messages kept for the test to read; older ones are dropped.
const MAX_RECORDED: usize = 10_000;
/// The bot's user id, as `getMe` reports it and as the sender of its messages.
pub const BOT_ID: i64 = 7_000_000_001;

/// One API call as the fake received it.
#[derive(Clone, Debug)]
pub struct Call {
    /// As the client spelled it, e.g. `getUpdates`.
    pub method: String,
    /// Every parameter, from query, JSON, form or multipart; an uploaded file appears as
    /// `{"file_name": …, "bytes": N}`.
    pub params: Value,
    pub at: Instant,
}

/// A message (or file) the fake accepted.
#[derive(Clone, Debug)]
pub struct Sent {
    pub method: String,
    pub chat_id: i64,
    pub message_id: i64,
    /// The text (or caption) as Telegram would show it: markup parsed away.
    pub text: String,
    /// The text as sent.
    pub raw: String,
    pub parse_mode: Option<String>,
    pub entities: Vec<(String, usize, usize)>,
    /// An uploaded file: its name and bytes.
    pub file: Option<(String, Vec<u8>)>,
}

/// How the next `getUpdates` misbehaves (each is used once, in order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hostile {
    /// 200 with a body that is not JSON.
    Garbage,
    /// 200 with a body of JSON whitespace that never ends.
    Endless,
    /// 200 with one well-formed update whose text is this many bytes (not queued: sent once).
    Huge(usize),
}

#[derive(Default)]
struct State {
    next_update_id: i64,
    next_message_id: i64,
    next_file: u64,
    updates: VecDeque<Value>,
    /// Updates below this id were confirmed by an `offset`.
    confirmed: i64,
    /// file_id → (file_path, bytes)
    files: HashMap<String, (String, Vec<u8>)>,
    omit_file_sizes: bool,
    calls: VecDeque<Call>,
    sent: VecDeque<Sent>,
    limited: usize,
    retry_after: u64,
    refuse_html: usize,
    hostile: VecDeque<Hostile>,
    /// Bumped by each `getUpdates`, so an older poll still waiting learns it was superseded.
    poll_generation: u64,
}

pub(crate) struct Shared {
    token: String,
    state: Mutex<State>,
    /// Wakes tests waiting for calls or messages.
    changed: Condvar,
    /// Wakes long polls when an update is pushed or a newer poll arrives.
    updates: Notify,
}

/// Each critical section leaves the state consistent, so a poisoned lock is used as is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn user(id: i64) -> Value {
    json!({"id": id, "is_bot": false, "first_name": "Tester", "username": format!("tester{id}"), "language_code": "en"})
}

fn chat(id: i64) -> Value {
    if id > 0 {
        json!({"id": id, "type": "private", "first_name": "Tester", "username": format!("tester{id}")})
    } else {
        json!({"id": id, "type": "group", "title": "Test group"})
    }
}

/// The bot itself, as `getMe` and the `from` of its messages show it.
pub fn bot_user() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "Chela Test", "username": "chela_test_bot",
        "can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false})
}

/// A running fake Bot API. Dropping it stops the server and every connection.
#[derive(Debug)]
pub struct FakeTelegram {
    server: Running<Shared>,
}

impl FakeTelegram {
    /// Starts a fake bot with `token` on `127.0.0.1:0`.
    ///
    /// # Panics
    /// If no port can be bound or the runtime cannot start.
    pub fn start(token: &str) -> FakeTelegram {
        FakeTelegram::try_start(token, 0)
            .unwrap_or_else(|e| panic!("chela-testkit: cannot start the fake Telegram on 127.0.0.1: {e}"))
    }

    pub fn try_start(token: &str, port: u16) -> io::Result<FakeTelegram> {
        let shared = Shared {
            token: token.to_string(),
            // Real update ids are large and not 0-based; a client must not assume otherwise.
            state: Mutex::new(State { next_update_id: 815_000_000, next_message_id: 1, ..State::default() }),
            changed: Condvar::new(),
            updates: Notify::new(),
        };
        Ok(FakeTelegram { server: Running::start("chela-fake-telegram", port, shared, server::serve)? })
    }

    /// `http://127.0.0.1:PORT`, what `channels.telegram.api_base` is set to.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// Queues an update; its `update_id` is kept if it has one (a duplicate, say), else the
    /// next id is assigned. Returns the id.
    pub fn push_update(&self, mut update: Value) -> i64 {
        let mut st = lock(&self.server.shared().state);
        let id = match update["update_id"].as_i64() {
            Some(id) => id,
            None => {
                let id = st.next_update_id;
                st.next_update_id += 1;
                update["update_id"] = id.into();
                id
            }
        };
        st.updates.push_back(update);
        drop(st);
        self.server.shared().updates.notify_waiters();
        id
    }

    fn message(&self, chat_id: i64, from: i64, fields: Value) -> Value {
        let mut st = lock(&self.server.shared().state);
        let message_id = st.next_message_id;
        st.next_message_id += 1;
        drop(st);
        let mut message =
            json!({"message_id": message_id, "from": user(from), "chat": chat(chat_id), "date": unix_now()});
        if let (Some(m), Value::Object(f)) = (message.as_object_mut(), fields) {
            m.extend(f);
        }
        json!({ "message": message })
    }

    /// A text message from `from` in `chat_id`; a leading `/command` gets its `bot_command` entity.
    pub fn push_text(&self, chat_id: i64, from: i64, text: &str) -> i64 {
        let mut fields = json!({ "text": text });
        if text.starts_with('/') {
            let len: usize = text.split_whitespace().next().unwrap_or("").chars().map(char::len_utf16).sum();
            fields["entities"] = json!([{"offset": 0, "length": len, "type": "bot_command"}]);
        }
        let update = self.message(chat_id, from, fields);
        self.push_update(update)
    }

    fn store_file(&self, dir: &str, ext: &str, bytes: Vec<u8>) -> Value {
        let mut st = lock(&self.server.shared().state);
        st.next_file += 1;
        let n = st.next_file;
        let file_id = format!("BQACAgIAAxkBAAI{n:08}");
        let size = bytes.len();
        st.files.insert(file_id.clone(), (format!("{dir}/file_{n}.{ext}"), bytes));
        let mut file = json!({"file_id": file_id, "file_unique_id": format!("AgAD{n:06}")});
        if !st.omit_file_sizes {
            file["file_size"] = size.into();
        }
        file
    }

    /// A photo: two sizes, as Telegram sends (the largest last), both downloadable.
    pub fn push_photo(&self, chat_id: i64, from: i64, jpeg: Vec<u8>, caption: &str) -> i64 {
        let thumb_len = jpeg.len().min(256);
        let mut thumb = self.store_file("photos", "jpg", jpeg[..thumb_len].to_vec());
        let mut full = self.store_file("photos", "jpg", jpeg);
        thumb["width"] = 90.into();
        thumb["height"] = 90.into();
        full["width"] = 1280.into();
        full["height"] = 960.into();
        let mut fields = json!({ "photo": [thumb, full] });
        if !caption.is_empty() {
            fields["caption"] = caption.into();
        }
        let update = self.message(chat_id, from, fields);
        self.push_update(update)
    }

    pub fn push_document(&self, chat_id: i64, from: i64, file_name: &str, bytes: Vec<u8>) -> i64 {
        let mut doc = self.store_file("documents", "bin", bytes);
        doc["file_name"] = file_name.into();
        doc["mime_type"] = "application/octet-stream".into();
        let update = self.message(chat_id, from, json!({ "document": doc }));
        self.push_update(update)
    }

    pub fn push_voice(&self, chat_id: i64, from: i64, ogg: Vec<u8>, duration_secs: u32) -> i64 {
        let mut voice = self.store_file("voice", "oga", ogg);
        voice["duration"] = duration_secs.into();
        voice["mime_type"] = "audio/ogg".into();
        let update = self.message(chat_id, from, json!({ "voice": voice }));
        self.push_update(update)
    }

    /// From now on, files are announced without `file_size` (it is optional in the Bot API), so
    /// a client must bound the download itself.
    pub fn omit_file_sizes(&self) {
        lock(&self.server.shared().state).omit_file_sizes = true;
    }

    /// The next `calls` sends (`sendMessage`, `editMessageText`, `sendPhoto`, `sendDocument`)
    /// answer 429 with `retry_after` seconds.
    pub fn rate_limit(&self, calls: usize, retry_after: u64) {
        let mut st = lock(&self.server.shared().state);
        st.limited = calls;
        st.retry_after = retry_after;
    }

    /// The next `count` messages sent with `parse_mode=HTML` are refused with Telegram's
    /// "can't parse entities" error whatever they hold: for testing a client's plain-text
    /// fallback when its renderer is (as it should be) never wrong.
    pub fn refuse_html(&self, count: usize) {
        lock(&self.server.shared().state).refuse_html = count;
    }

    /// The next `getUpdates` answers (one per call, starting with a poll already waiting)
    /// misbehave as given.
    pub fn hostile(&self, answers: impl IntoIterator<Item = Hostile>) {
        lock(&self.server.shared().state).hostile.extend(answers);
        self.server.shared().updates.notify_waiters();
    }

    /// Every call so far (up to 10,000, oldest first).
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.server.shared().state).calls.iter().cloned().collect()
    }

    /// The calls of one method (case-insensitive).
    pub fn calls_to(&self, method: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.method.eq_ignore_ascii_case(method)).collect()
    }

    /// Every message accepted so far, oldest first.
    pub fn sent(&self) -> Vec<Sent> {
        lock(&self.server.shared().state).sent.iter().cloned().collect()
    }

    /// Updates queued and not yet confirmed by an `offset`.
    pub fn unconfirmed(&self) -> usize {
        let st = lock(&self.server.shared().state);
        st.updates.iter().filter(|u| u["update_id"].as_i64().unwrap_or(0) >= st.confirmed).count()
    }

    /// Waits (without polling) until `ready` holds for the accepted messages, or `timeout`
    /// passes; returns them either way for the test to assert on.
    pub fn wait_sent(&self, timeout: Duration, ready: impl Fn(&[Sent]) -> bool) -> Vec<Sent> {
        self.wait(timeout, |st| {
            let sent: Vec<Sent> = st.sent.iter().cloned().collect();
            ready(&sent).then_some(sent)
        })
        .unwrap_or_else(|| self.sent())
    }

    /// Waits until `n` calls of `method` arrived (or `timeout`); returns those calls.
    pub fn wait_calls(&self, method: &str, n: usize, timeout: Duration) -> Vec<Call> {
        self.wait(timeout, |st| {
            let calls: Vec<Call> = st.calls.iter().filter(|c| c.method.eq_ignore_ascii_case(method)).cloned().collect();
            (calls.len() >= n).then_some(calls)
        })
        .unwrap_or_else(|| self.calls_to(method))
    }

    fn wait<T>(&self, timeout: Duration, mut done: impl FnMut(&State) -> Option<T>) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.server.shared().state);
        loop {
            if let Some(v) = done(&st) {
                return Some(v);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            st = self.server.shared().changed.wait_timeout(st, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}
