//! Sending: an answer as Telegram HTML in chunks Telegram accepts (resent plain if Telegram
//! still refuses the markup), plain text, files; the [`Reply`] the daemon delivers a chat's
//! answers through, and the [`Outlet`] the sending tools use.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use chela_proto::telegram::{MAX_MESSAGE_UNITS, render_chunks, split_plain, visible_text};

use tokio::sync::oneshot;

use super::api::{Api, ApiError, Upload};
use super::stream::Preview;
use super::{Backoff, CHANNEL};
use crate::daemon::{Answer, BoxFuture, Outlet, Reply};

/// How often "typing" is renewed while a turn runs (Telegram shows it for 5 s).
const TYPING_EVERY: Duration = Duration::from_secs(4);
/// Tries per message: 429s and network errors are retried this many times in all.
const MAX_ATTEMPTS: usize = 5;
/// Telegram's limit on an uploaded file.
const MAX_UPLOAD_BYTES: u64 = 50 * 1024 * 1024;

/// Sends one message, waiting out 429s and retrying network errors with back-off.
async fn send_one(api: &Api, chat_id: &str, text: &str, html: bool) -> Result<(), ApiError> {
    retried(|| async { api.send_message(chat_id, text, html).await.map(drop) }).await
}

/// Replaces the text of message `message_id`, with the same retries as [`send_one`].
async fn edit_one(api: &Api, chat_id: &str, message_id: i64, text: &str, html: bool) -> Result<(), ApiError> {
    retried(|| api.edit_message_text(chat_id, message_id, text, html)).await
}

/// Runs `call` until it succeeds, waiting out 429s and retrying network errors with back-off,
/// [`MAX_ATTEMPTS`] times in all.
async fn retried<F, Fut>(call: F) -> Result<(), ApiError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), ApiError>>,
{
    let mut backoff = Backoff::new();
    let mut attempt = 1;
    loop {
        let wait = match call().await {
            Ok(()) => return Ok(()),
            Err(ApiError::RateLimited { retry_after }) => retry_after,
            // A timeout may hide a message that did arrive; a second copy beats a lost answer.
            Err(ApiError::Net { retryable: true, .. }) => backoff.next(),
            Err(e) => return Err(e),
        };
        if attempt >= MAX_ATTEMPTS {
            return Err(ApiError::Net {
                what: format!("Telegram did not take the message after {attempt} tries"),
                retryable: false,
            });
        }
        attempt += 1;
        tokio::time::sleep(wait).await;
    }
}

/// Sends a model's answer: Markdown rendered to HTML and split; a chunk whose markup Telegram
/// refuses is sent again as its plain text.
pub async fn send_markdown(api: &Api, chat_id: &str, markdown: &str) -> Result<(), ApiError> {
    for chunk in render_chunks(markdown) {
        let plain = visible_text(&chunk);
        if plain.trim().is_empty() {
            continue;
        }
        match send_one(api, chat_id, &chunk, true).await {
            Err(e) if e.is_bad_markup() => {
                chela_log::info!("telegram: the answer's markup was refused ({e}); sending it plain");
                send_one(api, chat_id, &plain, false).await?;
            }
            other => other?,
        }
    }
    Ok(())
}

/// Finishes a streamed answer: its first chunk replaces the text of the preview message
/// `message_id`, the rest follow as new messages. A chunk whose markup Telegram refuses goes
/// out as its plain text; a preview Telegram no longer lets edit (deleted meanwhile) is left,
/// and the whole answer is sent anew.
pub async fn finish_markdown(api: &Api, chat_id: &str, message_id: i64, markdown: &str) -> Result<(), ApiError> {
    let chunks: Vec<String> =
        render_chunks(markdown).into_iter().filter(|c| !visible_text(c).trim().is_empty()).collect();
    let Some((first, rest)) = chunks.split_first() else { return Ok(()) };
    let edited = match edit_one(api, chat_id, message_id, first, true).await {
        Err(e) if e.is_bad_markup() => {
            chela_log::info!("telegram: the answer's markup was refused ({e}); showing it plain");
            edit_one(api, chat_id, message_id, &visible_text(first), false).await
        }
        other => other,
    };
    match edited {
        Ok(()) => {}
        Err(ApiError::Refused { status: 400, description }) => {
            chela_log::info!("telegram: the preview could not be edited ({description}); sending the answer anew");
            return send_markdown(api, chat_id, markdown).await;
        }
        Err(e) => return Err(e),
    }
    for chunk in rest {
        match send_one(api, chat_id, chunk, true).await {
            Err(e) if e.is_bad_markup() => send_one(api, chat_id, &visible_text(chunk), false).await?,
            other => other?,
        }
    }
    Ok(())
}

/// Sends text as it is (no parse mode), split to fit.
pub async fn send_plain(api: &Api, chat_id: &str, text: &str) -> Result<(), ApiError> {
    for chunk in split_plain(text, MAX_MESSAGE_UNITS) {
        if !chunk.trim().is_empty() {
            send_one(api, chat_id, &chunk, false).await?;
        }
    }
    Ok(())
}

/// Where the answer to one message goes: "typing" while the turn runs, the answer growing in
/// one message when `preview` is given ([`super::stream`]), then the whole answer as Telegram
/// HTML. The daemon's own sentences (a pairing code, "busy") and the commands' answers go plain.
pub struct TelegramReply {
    api: Api,
    chat_id: String,
    preview: Option<Preview>,
}

impl TelegramReply {
    pub fn new(api: Api, chat_id: String, preview: Option<Preview>) -> TelegramReply {
        TelegramReply { api, chat_id, preview }
    }
}

impl Reply for TelegramReply {
    fn working(&self) -> BoxFuture<'static, ()> {
        let (api, chat_id) = (self.api.clone(), self.chat_id.clone());
        Box::pin(async move {
            loop {
                if let Err(e) = api.send_chat_action(&chat_id, "typing").await {
                    chela_log::debug!("telegram: typing: {e}");
                }
                tokio::time::sleep(TYPING_EVERY).await;
            }
        })
    }

    fn preview<'a>(
        &'a mut self,
        ended: oneshot::Receiver<()>,
        may_send: &'a (dyn Fn() -> bool + Sync),
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(preview) = self.preview.as_mut() {
                preview.run(&self.api, &self.chat_id, ended, may_send).await;
            }
        })
    }

    fn send(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let TelegramReply { api, chat_id, preview } = *self;
            let sent = match (&answer.end, preview.as_ref().and_then(|p| p.message.map(|id| (p, id)))) {
                (None, _) => send_plain(&api, &chat_id, &answer.text).await,
                (Some(_), Some((p, id))) => {
                    p.settle().await;
                    finish_markdown(&api, &chat_id, id, &answer.text).await
                }
                (Some(_), None) => send_markdown(&api, &chat_id, &answer.text).await,
            };
            if let Err(e) = sent {
                chela_log::warn!("telegram: the answer to chat {chat_id} was not delivered: {e}");
            }
        })
    }
}

/// The channel's way of speaking on its own, for the sending tools.
pub struct TelegramOutlet {
    api: Api,
}

impl TelegramOutlet {
    pub fn new(api: Api) -> TelegramOutlet {
        TelegramOutlet { api }
    }
}

impl Outlet for TelegramOutlet {
    fn channel(&self) -> &str {
        CHANNEL
    }

    fn send_text<'a>(&'a self, chat_id: &'a str, text: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move { send_markdown(&self.api, chat_id, text).await.map_err(|e| e.to_string()) })
    }

    fn send_file<'a>(
        &'a self,
        chat_id: &'a str,
        path: &'a Path,
        caption: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let meta = tokio::fs::metadata(path).await.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            if meta.len() > MAX_UPLOAD_BYTES {
                return Err(format!(
                    "{} is {} MB; Telegram takes files up to {} MB",
                    path.display(),
                    meta.len() / 1_048_576,
                    MAX_UPLOAD_BYTES / 1_048_576
                ));
            }
            let bytes = tokio::fs::read(path).await.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let file_name = path.file_name().map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
            let caption: String = split_plain(caption, 1024).into_iter().next().unwrap_or_default();
            let upload = Upload { field: "document", file_name: &file_name, bytes: bytes.into() };
            let mut backoff = Backoff::new();
            for attempt in 1..=MAX_ATTEMPTS {
                let wait = match self
                    .api
                    .send_file("sendDocument", &[("chat_id", chat_id), ("caption", &caption)], upload.clone())
                    .await
                {
                    Ok(_) => return Ok(()),
                    Err(ApiError::RateLimited { retry_after }) => retry_after,
                    Err(ApiError::Net { retryable: true, .. }) if attempt < MAX_ATTEMPTS => backoff.next(),
                    Err(e) => return Err(e.to_string()),
                };
                tokio::time::sleep(wait.min(Duration::from_secs(60))).await;
            }
            Err(format!("Telegram did not take {} after {MAX_ATTEMPTS} tries", path.display()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::{ClientOptions, HttpClient};
    use chela_testkit::FakeTelegram;

    #[tokio::test]
    async fn the_outlet_sends_text_and_uploads_files() {
        let fake = FakeTelegram::start("1:outlet");
        let outlet =
            TelegramOutlet::new(Api::new(HttpClient::new(ClientOptions::default()), &fake.base_url(), "1:outlet"));
        assert_eq!(outlet.channel(), "telegram");
        outlet.send_text("5", "_done_ & **dusted**").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report \"q\".txt");
        std::fs::write(&path, b"line one\r\n\r\n--not a boundary\r\n").unwrap();
        outlet.send_file("5", &path, "the <report>").await.unwrap();
        let sent = fake.sent();
        assert_eq!(sent[0].text, "done & dusted");
        assert_eq!(sent[1].method, "sendDocument");
        assert_eq!(sent[1].text, "the <report>");
        assert_eq!(sent[1].file, Some(("report q.txt".to_owned(), b"line one\r\n\r\n--not a boundary\r\n".to_vec())));
        let missing = outlet.send_file("5", &dir.path().join("nope"), "").await.unwrap_err();
        assert!(missing.contains("cannot read"), "{missing}");
    }
}
