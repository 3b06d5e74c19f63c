//! The Feishu / Lark channel: events in by the long connection ([`ws`], the default) or a
//! webhook ([`webhook`]), answers out through the open platform's API ([`api`]).
//!
//! Both modes hand each event's JSON to [`Channel::on_event`], which keeps text messages from
//! people (in a group only those that mention the bot, with the mention taken out), drops events
//! already seen (by event id, remembered across restarts: [`seen`]), and submits them to the daemon in arrival
//! order. The answer is sent as a reply to the message, split into pieces Feishu accepts.
//!
//! Off while `channels.feishu.app_id` is empty. The channel also registers an
//! [`Outlet`](crate::daemon::Outlet), through which Chela can write to a Feishu chat on its own.

mod api;
mod seen;
pub(crate) mod tool;
mod webhook;
mod ws;

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Result, bail};
use chela_proto::chat::Message;
use chela_proto::feishu::event::{Envelope, MessageEvent, parse_envelope};
use tokio::io::AsyncReadExt;

use crate::config::{Config, Feishu};
use crate::daemon::{Answer, BoxFuture, Daemon, Incoming, Outlet, Reply};
use crate::net::HttpClient;
use crate::turn::{Cancel, Quiet};

pub use api::Api;
pub use webhook::unverifiable as unverifiable_webhook;

/// The channel's name in sessions, `allow_from` and outlets.
pub const CHANNEL: &str = "feishu";
/// Characters per message sent; Feishu takes far more, but long messages read badly on a phone.
pub const MAX_CHUNK_CHARS: usize = 4000;

/// Whether the settings turn the channel on.
pub fn configured(cfg: &Config) -> bool {
    !cfg.settings().channels.feishu.app_id.is_empty()
}

/// Runs the channel until the daemon stops.
pub async fn serve(daemon: Arc<Daemon>) -> Result<()> {
    let cfg = daemon.config();
    let settings = cfg.settings().channels.feishu.clone();
    if let Some(why) = webhook::unverifiable(&settings) {
        bail!("{why}");
    }
    if settings.app_secret.is_empty() {
        bail!(
            "channels.feishu.app_id is set but channels.feishu.app_secret is empty; set it with `chela config set channels.feishu.app_secret -`"
        );
    }
    let http = crate::app::http_client(&cfg)?;
    let api = Arc::new(Api::new(http.clone(), &settings.api_base, &settings.app_id, &settings.app_secret));
    // Wrong credentials stop the daemon with the sentence that says so; an unreachable Feishu
    // is retried by the connection loop instead.
    let now = daemon.clock().unix_secs();
    match api.token().await {
        Ok(_) => {
            daemon.live().connected("feishu", now);
            chela_log::info!("feishu: connected as app {}", settings.app_id);
        }
        Err(e) if e.downcast_ref::<api::CredentialsRefused>().is_some() => {
            daemon.live().failed("feishu", &format!("{e:#}"), now);
            return Err(e);
        }
        Err(e) => {
            daemon.live().failed("feishu", &format!("{e:#}"), now);
            chela_log::warn!("feishu: cannot connect yet ({e:#}); retrying");
        }
    }
    // The bot's id tells group messages that mention it from the rest. Without it (the bot
    // feature off, Feishu unreachable for now) any mention counts, which errs toward answering.
    let bot_open_id = match api.bot_open_id().await {
        Ok(id) => Some(id),
        Err(e) => {
            chela_log::warn!("cannot read the Feishu bot's id, so any @mention in a group counts: {e:#}");
            None
        }
    };
    let channel = Arc::new(Channel {
        daemon: Arc::clone(&daemon),
        api: Arc::clone(&api),
        http,
        settings: settings.clone(),
        bot_open_id,
        seen: Mutex::new(seen::Seen::open(daemon.workspace())),
    });
    daemon.outlets().register(Arc::new(FeishuOutlet { api: Arc::clone(&api) }));
    if let Err(e) = daemon.toolbox().register(tool::group(api, Arc::clone(daemon.gate()))) {
        chela_log::warn!("the feishu tools are not available: {e}");
    }
    let served = match settings.mode.as_str() {
        "webhook" => webhook::run(Arc::clone(&channel), &settings.webhook_listen).await,
        _ => ws::run(Arc::clone(&channel)).await,
    };
    daemon.outlets().unregister(CHANNEL);
    daemon.toolbox().unregister(tool::GROUP);
    // The answers still on their way are the daemon's: it flushes them after the turns end.
    served
}

/// `chela doctor`: whether the app credentials get a tenant token.
pub async fn check(http: HttpClient, settings: &Feishu) -> Result<()> {
    Api::new(http, &settings.api_base, &settings.app_id, &settings.app_secret).token().await.map(drop)
}

pub struct Channel {
    daemon: Arc<Daemon>,
    api: Arc<Api>,
    http: HttpClient,
    settings: Feishu,
    bot_open_id: Option<String>,
    /// Event ids handled, in this run and earlier ones ([`seen`]).
    seen: Mutex<seen::Seen>,
}

impl Channel {
    /// One whole event's JSON, from either mode.
    pub fn on_event(&self, payload: &[u8]) {
        match parse_envelope(payload) {
            Ok(Envelope::Message(m)) => self.on_message(m),
            Ok(Envelope::Other { event_type, .. }) => chela_log::debug!("ignored a Feishu {event_type} event"),
            Ok(Envelope::UrlVerification { .. }) => {}
            Err(e) => chela_log::warn!("{e}"),
        }
    }

    fn on_message(&self, m: MessageEvent) {
        match self.seen.lock().unwrap_or_else(PoisonError::into_inner).first(&m.event_id) {
            seen::Verdict::First => {}
            seen::Verdict::Again => {
                chela_log::debug!(event = %m.event_id, "a Feishu event seen before was dropped");
                return;
            }
            seen::Verdict::Malformed => {
                chela_log::warn!("a Feishu event with a malformed id was dropped");
                return;
            }
        }
        // Other bots (and this one) do not start turns.
        if m.sender_type != "user" {
            return;
        }
        let bot = self.bot_open_id.as_deref();
        if m.chat_type != "p2p" && !m.mentions_bot(bot) {
            return;
        }
        let Some(text) = m.text(bot) else {
            let reply = Box::new(ThreadReply { api: Arc::clone(&self.api), message_id: m.message_id });
            self.daemon.say(CHANNEL, &m.chat_id, "I can read text messages only, for now.".to_owned(), reply);
            return;
        };
        if text.is_empty() {
            return;
        }
        let reply = Box::new(ThreadReply { api: Arc::clone(&self.api), message_id: m.message_id });
        let incoming = Incoming {
            channel: CHANNEL.to_owned(),
            chat_id: m.chat_id,
            sender: m.sender,
            user: Message::user_text(text),
            cancel: Cancel::default(),
        };
        self.daemon.converse(incoming, Box::new(Quiet), reply);
    }
}

/// An answer goes out as a reply to the message it answers.
struct ThreadReply {
    api: Arc<Api>,
    message_id: String,
}

impl Reply for ThreadReply {
    fn send(self: Box<Self>, answer: Answer) -> BoxFuture<'static, ()> {
        Box::pin(async move { send_reply(&self.api, &self.message_id, &answer.text).await })
    }
}

async fn send_reply(api: &Api, message_id: &str, text: &str) {
    for piece in chunks(text, MAX_CHUNK_CHARS) {
        if let Err(e) = api.reply_text(message_id, piece).await {
            chela_log::warn!("could not send an answer to Feishu: {e:#}");
            return;
        }
    }
}

/// Splits `text` into pieces of at most `max` characters, at a paragraph break if one is in
/// the second half of the piece, else a line break, else a space, else anywhere (between
/// characters). Empty text is one empty piece, which Feishu refuses, so it becomes "(no answer)"
/// upstream; here it stays as given.
pub fn chunks(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while rest.chars().count() > max {
        let hard = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let window = &rest[..hard];
        let soft = ["\n\n", "\n", " "]
            .iter()
            .find_map(|sep| window.rfind(sep).filter(|&i| i >= hard / 2).map(|i| i + sep.len()))
            .unwrap_or(hard);
        out.push(rest[..soft].trim_end());
        rest = rest[soft..].trim_start();
    }
    out.push(rest);
    out
}

/// Sends to Feishu chats on Chela's own initiative (the IM tools).
pub(crate) struct FeishuOutlet {
    api: Arc<Api>,
}

impl Outlet for FeishuOutlet {
    fn channel(&self) -> &str {
        CHANNEL
    }

    fn send_text<'a>(&'a self, chat_id: &'a str, text: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            for piece in chunks(text, MAX_CHUNK_CHARS) {
                self.api.send_text(chat_id, piece).await.map_err(|e| format!("{e:#}"))?;
            }
            Ok(())
        })
    }

    fn send_file<'a>(
        &'a self,
        chat_id: &'a str,
        path: &'a Path,
        caption: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let name = path.file_name().map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
            let unreadable = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
            let file = tokio::fs::File::open(path).await.map_err(unreadable)?;
            // Read at most one byte past the limit, so a file that grows meanwhile stays bounded.
            let mut data = Vec::new();
            file.take(api::MAX_FILE_BYTES + 1).read_to_end(&mut data).await.map_err(unreadable)?;
            if data.len() as u64 > api::MAX_FILE_BYTES {
                return Err(format!("{name} is larger than the {} bytes Feishu takes", api::MAX_FILE_BYTES));
            }
            if !caption.trim().is_empty() {
                self.send_text(chat_id, caption).await?;
            }
            self.api.send_file(chat_id, &name, data.into()).await.map_err(|e| format!("{e:#}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_answers_split_at_paragraphs_then_lines_then_anywhere() {
        let para = format!("{}\n\n{}", "a".repeat(30), "b".repeat(30));
        assert_eq!(chunks(&para, 40), vec!["a".repeat(30), "b".repeat(30)]);
        let lines = format!("{}\n{}", "a".repeat(30), "b".repeat(30));
        assert_eq!(chunks(&lines, 40), vec!["a".repeat(30), "b".repeat(30)]);
        let solid = "字".repeat(95);
        let pieces = chunks(&solid, 40);
        assert_eq!(pieces.iter().map(|p| p.chars().count()).collect::<Vec<_>>(), [40, 40, 15]);
        assert_eq!(pieces.concat(), solid);
        assert_eq!(chunks("short", 40), ["short"]);
    }

    fn outlet(fake: &chela_testkit::feishu::FakeFeishu) -> FeishuOutlet {
        let http = HttpClient::new(crate::net::ClientOptions::default());
        FeishuOutlet { api: Arc::new(Api::new(http, &fake.base_url(), "cli_test", "secret-test")) }
    }

    #[tokio::test]
    async fn the_outlet_sends_long_text_in_pieces_and_files_by_upload() {
        let fake = chela_testkit::feishu::FakeFeishu::start(Default::default());
        let out = outlet(&fake);
        let long = format!("{}\n\n{}", "a".repeat(MAX_CHUNK_CHARS - 10), "b".repeat(20));
        out.send_text("oc_1", &long).await.unwrap();
        let sent = fake.sent();
        assert_eq!(sent.len(), 2);
        assert!(sent.iter().all(|s| s.receive_id.as_deref() == Some("oc_1") && s.msg_type == "text"));
        assert_eq!(sent[1].text, "b".repeat(20));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report \"q1\".csv");
        std::fs::write(&path, b"a,b\r\n--not-a-boundary\r\n1,2\n").unwrap();
        out.send_file("oc_1", &path, "the report").await.unwrap();
        let uploads = fake.uploads();
        assert_eq!(uploads.len(), 1);
        assert_eq!((uploads[0].file_type.as_str(), uploads[0].file_name.as_str()), ("stream", "report _q1_.csv"));
        assert_eq!(uploads[0].data, b"a,b\r\n--not-a-boundary\r\n1,2\n");
        let sent = fake.sent();
        assert_eq!(sent[2].text, "the report");
        assert_eq!((sent[3].msg_type.as_str(), sent[3].text.as_str()), ("file", uploads[0].file_key.as_str()));

        let missing = out.send_file("oc_1", &dir.path().join("nope"), "").await.unwrap_err();
        assert!(missing.contains("cannot read"), "{missing}");
    }
}
