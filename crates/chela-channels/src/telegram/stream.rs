//! Streaming edits: an answer that is still being written grows in one Telegram message.
//!
//! The turn's [`Observer`] ([`Live`]) keeps the text streamed so far (bounded) and wakes the
//! reply task, whose [`Preview`] sends it as one plain message and then edits that message, at
//! most once per [`EDIT_EVERY`] (Telegram allows about one message a second per chat). When
//! the turn ends, the preview is replaced by the whole answer as Telegram HTML
//! ([`super::reply::finish_markdown`]), again no sooner than [`EDIT_EVERY`] after the last edit.
//! The first preview waits [`EDIT_EVERY`] too, so a fast answer (done within a second) is
//! simply sent, as without streaming.
//!
//! The preview shows what the final answer will show, without its formatting: the first
//! message's worth of the rendered Markdown as plain text, so half-written markup never reaches
//! Telegram's parser. Text written before a tool call is replaced by the next reply's text.
//! A preview Telegram refuses (429, network) is skipped; the final answer is not.
//!
//! `channels.telegram.stream_edits = false` turns it off: the answer is sent when whole.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chela_proto::telegram::{render_chunks, visible_text};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::api::{Api, ApiError};
use crate::turn::Observer;

/// The shortest time between two sends or edits of the preview message.
pub const EDIT_EVERY: Duration = Duration::from_secs(1);
/// Streamed text kept for the preview: more than one Telegram message shows (4096 UTF-16
/// units), so the preview only stops growing where the message would be full anyway.
const MAX_PREVIEW_BYTES: usize = 32 * 1024;

#[derive(Default)]
struct Text {
    text: String,
    /// Bumped by every change, so the previewer knows whether there is anything new.
    version: u64,
}

/// What the turn's observer and the reply task share.
#[derive(Default)]
struct Shared {
    text: Mutex<Text>,
    changed: Notify,
}

/// The observer of a streamed turn. Never blocks: it only appends to a bounded string.
pub struct Live(Arc<Shared>);

impl Live {
    /// A new observer, and the [`Preview`] that shows what it sees.
    pub fn new() -> (Live, Preview) {
        let shared = Arc::new(Shared::default());
        // The first preview comes no sooner than EDIT_EVERY after the message arrived: an answer
        // written faster is sent whole, with no preview to edit.
        let preview =
            Preview { shared: Arc::clone(&shared), message: None, last: Instant::now(), shown: String::new(), seen: 0 };
        (Live(shared), preview)
    }

    fn edit(&self, f: impl FnOnce(&mut String)) {
        let mut t = self.0.text.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut t.text);
        t.version += 1;
        drop(t);
        self.0.changed.notify_one();
    }
}

impl Observer for Live {
    fn text(&mut self, text: &str) {
        self.edit(|kept| {
            let room = MAX_PREVIEW_BYTES.saturating_sub(kept.len());
            let mut cut = text.len().min(room);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            kept.push_str(&text[..cut]);
        });
    }

    fn reply_done(&mut self, tools_follow: bool) {
        // What the model said before its tool calls is not the answer: the next reply replaces it.
        if tools_follow {
            self.edit(String::clear);
        }
    }

    fn tool_started(&mut self, _: &chela_core::agent::ToolCall) {}
    fn tool_finished(&mut self, _: &chela_core::agent::ToolCall, _: &chela_core::agent::ToolResult, _: Duration) {}
}

/// The reply task's side: the preview message, once sent, and when it last changed.
pub struct Preview {
    shared: Arc<Shared>,
    /// The preview message's id, once Telegram took it.
    pub message: Option<i64>,
    /// When the preview was last sent or edited (at first: when the message came).
    last: Instant,
    shown: String,
    seen: u64,
}

/// What the preview shows for `text`: the plain text of the answer's first message.
fn preview_of(text: &str) -> String {
    render_chunks(text).first().map(|c| visible_text(c).trim().to_owned()).unwrap_or_default()
}

impl Preview {
    /// Shows the streamed text in `chat_id` until `stop` fires (the turn ended). A request
    /// already made when `stop` fires is finished first, so a preview message Telegram took is
    /// never forgotten (and left behind beside the answer). Each send or edit asks `may_send`
    /// first; once it says no, the preview stops for good.
    pub async fn run(
        &mut self,
        api: &Api,
        chat_id: &str,
        mut stop: oneshot::Receiver<()>,
        may_send: &(dyn Fn() -> bool + Sync),
    ) {
        loop {
            let changed = {
                let t = self.shared.text.lock().unwrap_or_else(PoisonError::into_inner);
                t.version != self.seen
            };
            if !changed {
                tokio::select! {
                    biased;
                    _ = &mut stop => return,
                    () = self.shared.changed.notified() => continue,
                }
            }
            // At most one send or edit per EDIT_EVERY; the text taken after the wait is the newest.
            tokio::select! {
                biased;
                _ = &mut stop => return,
                () = tokio::time::sleep_until(self.last + EDIT_EVERY) => {}
            }
            let text = {
                let t = self.shared.text.lock().unwrap_or_else(PoisonError::into_inner);
                self.seen = t.version;
                preview_of(&t.text)
            };
            if text.is_empty() || text == self.shown {
                continue;
            }
            if !may_send() {
                return;
            }
            let sent = match self.message {
                None => api.send_message(chat_id, &text, false).await.map(|id| self.message = Some(id)),
                Some(id) => api.edit_message_text(chat_id, id, &text, false).await,
            };
            self.last = Instant::now();
            match sent {
                Ok(()) => self.shown = text,
                Err(ApiError::RateLimited { retry_after }) => {
                    // The next preview waits the platform out (the final answer retries by itself).
                    self.last = Instant::now() + retry_after.saturating_sub(EDIT_EVERY);
                }
                Err(e) => chela_log::debug!("telegram: a preview of the answer was not shown: {e}"),
            }
        }
    }

    /// Waits until the final edit may be made (no sooner than [`EDIT_EVERY`] after the last).
    pub async fn settle(&self) {
        tokio::time::sleep_until(self.last + EDIT_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_observer_keeps_a_bounded_text_and_forgets_what_came_before_tools() {
        let (mut live, preview) = Live::new();
        live.text("Let me look.");
        live.reply_done(true);
        live.text("It is **noon**");
        live.text(" é");
        let text = preview.shared.text.lock().unwrap().text.clone();
        assert_eq!(text, "It is **noon** é");
        assert_eq!(preview_of(&text), "It is noon é");
        let big = "é".repeat(MAX_PREVIEW_BYTES);
        live.text(&big);
        live.text("more");
        let t = preview.shared.text.lock().unwrap();
        assert!(t.text.len() <= MAX_PREVIEW_BYTES && t.text.len() > MAX_PREVIEW_BYTES - 2, "{}", t.text.len());
        assert_eq!(t.version, 6);
    }

    #[test]
    fn the_preview_is_the_first_messages_plain_text() {
        assert_eq!(preview_of("  "), "");
        assert_eq!(preview_of("a <b> & `c`"), "a <b> & c");
        let long = "word ".repeat(3000);
        let shown = preview_of(&long);
        assert!(shown.encode_utf16().count() <= 4096, "{}", shown.len());
        assert!(shown.len() > 3000);
    }
}
