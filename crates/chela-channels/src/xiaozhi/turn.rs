//! A device's utterance as a turn: submitted to the daemon in the device's own session
//! (channel [`CHANNEL`], chat = the device's MAC), the model's text streamed into the voice
//! pipeline's [`ReplyWriter`] as it arrives, and the face (`llm` emotion) set from the reply's
//! first character.
//!
//! The device is the owner's (approved with `chela device approve`), so its turns get the same
//! session owners, memory, tools and skills as every other channel. A turn that fails (the
//! model, the settings, a busy session) is told on the device's screen (`alert`) and spoken as
//! one short sentence; nothing waits for ever. Dropping [`Running`] cancels the turn: a new
//! utterance, `abort` or the device leaving.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chela_core::agent::{ToolCall, ToolResult};
use chela_proto::chat::Message as ChatMessage;
use chela_proto::xiaozhi::message::{Alert, Llm, Message as XzMessage};
use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::daemon::{Answer, BoxFuture, Daemon, Incoming, Reply};
use crate::turn::{Cancel, Observer, TurnEnd};
use crate::voice::pipeline::ReplyWriter;

/// The channel name of device sessions.
pub const CHANNEL: &str = "xiaozhi";
/// Reply text kept for speech while the speaker is behind; more is not spoken (logged).
pub const MAX_REPLY_TEXT: usize = 64 * 1024;
/// What a failed turn says aloud (the detail goes to the screen and the log).
pub const SPOKEN_FAILURE: &str = "Sorry, I cannot answer right now.";
/// Characters of a failure's explanation shown on the device's screen.
const ALERT_CHARS: usize = 120;
/// How long a turn waits for the device's MCP tools to be listed before it starts without them
/// (only while their setup runs: right after the device's hello).
pub const TOOLS_WAIT: Duration = Duration::from_secs(3);

/// What a turn waits on before it starts (the device's tools being listed).
pub type Waiting = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where a turn's messages go.
pub struct Ctx {
    pub daemon: Arc<Daemon>,
    pub device: String,
    pub session_id: String,
    /// The connection's control queue (`llm`, `alert`).
    pub control: mpsc::Sender<Value>,
}

/// A running turn; dropping it cancels the turn.
pub struct Running {
    cancel: Cancel,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Text streamed by the turn, waiting for the speaker: bounded, never blocks the turn.
#[derive(Default)]
struct Stream {
    text: Mutex<(String, bool)>,
    more: Notify,
}

impl Stream {
    fn push(&self, delta: &str) {
        let mut g = self.text.lock().unwrap_or_else(PoisonError::into_inner);
        // Once cut, the rest of the reply is dropped too: speech never skips a middle part.
        if g.1 || g.0.len() + delta.len() > MAX_REPLY_TEXT {
            if !g.1 {
                chela_log::info!(
                    "xiaozhi: a reply is longer than {MAX_REPLY_TEXT} bytes waiting for speech; the rest is not spoken"
                );
            }
            g.1 = true;
            return;
        }
        g.0.push_str(delta);
        drop(g);
        self.more.notify_one();
    }

    fn take(&self) -> String {
        std::mem::take(&mut self.text.lock().unwrap_or_else(PoisonError::into_inner).0)
    }
}

struct DeviceObserver(Arc<Stream>);

impl Observer for DeviceObserver {
    fn text(&mut self, text: &str) {
        self.0.push(text);
    }
    fn reply_done(&mut self, _tools_follow: bool) {}
    fn tool_started(&mut self, _call: &ToolCall) {}
    fn tool_finished(&mut self, _call: &ToolCall, _result: &ToolResult, _elapsed: Duration) {}
}

/// Starts the turn for `text`; its reply goes into `writer`. With `tools`, the turn starts once
/// they are settled or after [`TOOLS_WAIT`], whichever is first (dropping [`Running`] meanwhile
/// ends the wait, and no turn starts).
pub fn start(ctx: Ctx, text: String, writer: ReplyWriter, tools: Option<Waiting>) -> Running {
    let cancel = Cancel::default();
    let stream = Arc::new(Stream::default());
    let incoming = Incoming {
        channel: CHANNEL.to_owned(),
        chat_id: ctx.device.clone(),
        sender: ctx.device.clone(),
        user: ChatMessage::user_text(text),
        cancel: cancel.clone(),
    };
    let daemon = Arc::clone(&ctx.daemon);
    let speaker = Speaker { ctx, writer: Some(writer), face_set: false, cancel: cancel.clone() };
    let observer = Box::new(DeviceObserver(Arc::clone(&stream)));
    // A message the daemon drops drops this reply: its writer, closed unused, ends the reply
    // as an empty `finish` would.
    let reply = Box::new(Spoken { speaker, stream });
    match tools {
        None => {
            daemon.converse(incoming, observer, reply);
        }
        Some(settled) => {
            let cancel = cancel.clone();
            tokio::spawn(crate::tasks::boxed(async move {
                tokio::select! {
                    _ = tokio::time::timeout(TOOLS_WAIT, settled) => {
                        daemon.converse(incoming, observer, reply);
                    }
                    () = cancel.cancelled() => {}
                }
            }));
        }
    }
    Running { cancel }
}

/// Speaks the answer on the device it was asked on: while the turn runs, as it is written.
struct Spoken {
    speaker: Speaker,
    stream: Arc<Stream>,
}

impl Reply for Spoken {
    fn preview<'a>(
        &'a mut self,
        mut ended: oneshot::Receiver<()>,
        _may_send: &'a (dyn Fn() -> bool + Sync),
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = &mut ended => return,
                    () = self.stream.more.notified() => self.speaker.speak(&self.stream.take()).await,
                }
            }
        })
    }

    fn send(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        let Spoken { mut speaker, stream } = *self;
        Box::pin(async move {
            match answer.end {
                Some(end) => {
                    speaker.speak(&stream.take()).await;
                    speaker.end(&end).await;
                }
                None => {
                    speaker.alert(&answer.text);
                    speaker.speak(&answer.text).await;
                    speaker.finish().await;
                }
            }
        })
    }
}

struct Speaker {
    ctx: Ctx,
    /// `None` once the reply was cancelled (its `push` failed).
    writer: Option<ReplyWriter>,
    face_set: bool,
    cancel: Cancel,
}

impl Speaker {
    /// Speaks more of the reply; the first text also sets the face.
    async fn speak(&mut self, text: &str) {
        let mut text = text;
        if text.trim().is_empty() {
            return;
        }
        if !self.face_set {
            self.face_set = true;
            let (face, rest) = emotion(text);
            let llm = Llm {
                session_id: Some(self.ctx.session_id.clone()),
                emotion: face.name.to_owned(),
                text: face.emoji.map(str::to_owned),
            };
            self.control(XzMessage::Llm(llm));
            text = rest;
        }
        let Some(w) = &mut self.writer else { return };
        if w.push(text).await.is_err() {
            // The reply was cancelled (a new utterance, abort): stop the turn as well.
            self.writer = None;
            self.cancel.cancel();
        }
    }

    async fn finish(&mut self) {
        if let Some(w) = self.writer.take() {
            let _ = w.finish().await;
        }
    }

    /// After the turn: the rest is spoken, or a failure is told.
    async fn end(&mut self, end: &anyhow::Result<TurnEnd>) {
        match end {
            Ok(TurnEnd::Done(o)) if o.cancelled => {}
            Ok(TurnEnd::Done(o)) => {
                // A provider that does not stream gives the text only at the end.
                if !self.face_set && !o.text.trim().is_empty() {
                    self.speak(&o.text.clone()).await;
                }
                self.finish().await;
            }
            Ok(TurnEnd::Failed(_)) | Err(_) => {
                if self.cancel.is_cancelled() {
                    return;
                }
                let why = self.ctx.daemon.reply_text(end);
                chela_log::warn!(device = %self.ctx.device, "xiaozhi: a turn failed: {why}");
                self.alert(&why);
                self.face_set = true;
                self.speak(SPOKEN_FAILURE).await;
                self.finish().await;
            }
        }
    }

    fn alert(&self, text: &str) {
        let shown: String = text.chars().take(ALERT_CHARS).collect();
        self.control(XzMessage::Alert(alert(Some(self.ctx.session_id.clone()), &shown)));
    }

    fn control(&self, msg: XzMessage) {
        if self.cancel.is_cancelled() {
            return;
        }
        let value = serde_json::to_value(&msg).unwrap_or_default();
        if self.ctx.control.try_send(value).is_err() {
            chela_log::debug!(device = %self.ctx.device, "xiaozhi: a control message was dropped (queue full or device gone)");
        }
    }
}

/// A face: the firmware's emotion name, and the emoji the reply began with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Face {
    pub name: &'static str,
    pub emoji: Option<&'static str>,
}

/// Leading emoji → the firmware's emotion names (a subset of `message::EMOTIONS`).
const FACES: &[(&str, &str)] = &[
    ("😊", "happy"),
    ("🙂", "happy"),
    ("😀", "happy"),
    ("😃", "happy"),
    ("😄", "happy"),
    ("😆", "laughing"),
    ("😂", "laughing"),
    ("🤣", "laughing"),
    ("🤭", "funny"),
    ("😢", "sad"),
    ("😞", "sad"),
    ("😭", "crying"),
    ("😠", "angry"),
    ("😡", "angry"),
    ("😍", "loving"),
    ("🥰", "loving"),
    ("😳", "embarrassed"),
    ("😮", "surprised"),
    ("😯", "surprised"),
    ("😱", "shocked"),
    ("🤔", "thinking"),
    ("😉", "winking"),
    ("😎", "cool"),
    ("😌", "relaxed"),
    ("😋", "delicious"),
    ("😘", "kissy"),
    ("😏", "confident"),
    ("😴", "sleepy"),
    ("🤪", "silly"),
    ("😕", "confused"),
    ("😐", "neutral"),
];

/// The face for a reply that begins with `text`, and the text with that emoji taken off (it is
/// shown, not spoken). No known emoji: `neutral`, text unchanged.
pub fn emotion(text: &str) -> (Face, &str) {
    let trimmed = text.trim_start();
    for (emoji, name) in FACES {
        if let Some(rest) = trimmed.strip_prefix(emoji) {
            // A variation selector may follow the emoji.
            let rest = rest.strip_prefix('\u{fe0f}').unwrap_or(rest);
            return (Face { name, emoji: Some(emoji) }, rest.trim_start());
        }
    }
    (Face { name: "neutral", emoji: None }, text)
}

/// An `alert` the firmware shows (all three fields are required).
pub fn alert(session_id: Option<String>, message: &str) -> Alert {
    Alert { session_id, status: "Error".into(), message: message.to_owned(), emotion: "sad".into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_emoji_sets_the_face_and_is_not_spoken() {
        assert_eq!(emotion("😊 Hello there."), (Face { name: "happy", emoji: Some("😊") }, "Hello there."));
        assert_eq!(
            emotion("  🤔\u{fe0f}Let me think."),
            (Face { name: "thinking", emoji: Some("🤔") }, "Let me think.")
        );
        assert_eq!(emotion("Hello 😊"), (Face { name: "neutral", emoji: None }, "Hello 😊"));
        assert_eq!(emotion(""), (Face { name: "neutral", emoji: None }, ""));
    }

    #[test]
    fn every_face_is_one_the_firmware_knows() {
        for (_, name) in FACES {
            assert!(chela_proto::xiaozhi::message::EMOTIONS.contains(name), "{name}");
        }
    }

    #[test]
    fn the_stream_keeps_at_most_its_bound() {
        let s = Stream::default();
        s.push(&"a".repeat(MAX_REPLY_TEXT - 1));
        s.push("bb");
        s.push("c");
        assert_eq!(s.take().len(), MAX_REPLY_TEXT - 1, "text past the bound is dropped, not kept");
        s.push("after");
        assert_eq!(s.take(), "", "once cut, the rest of the reply is not spoken either");
        let fresh = Stream::default();
        fresh.push("one. ");
        assert_eq!(fresh.take(), "one. ");
        fresh.push("two.");
        assert_eq!(fresh.take(), "two.", "taking makes room again");
    }
}
