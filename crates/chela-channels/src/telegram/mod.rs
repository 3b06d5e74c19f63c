//! The Telegram channel: long polling of the Bot API, one [`Incoming`] per message, the answer
//! sent back as Telegram HTML.
//!
//! What it does, in order: `getMe` once (a rejected token stops `chela run` with the fix);
//! then `getUpdates` with a 30 s long poll, from the offset saved in `state/telegram.offset`.
//! Each update is handled in arrival order and the next offset saved (atomically) before the
//! next update, so a restart neither replays a handled update nor skips an unhandled one; an
//! update id below the offset (a duplicate) is skipped. A message becomes an [`Incoming`]
//! submitted to the daemon; a task then sends "typing" every 4 s until the turn ends and
//! sends its answer ([`reply`]). While it runs, the `telegram` tool group (`telegram_send_text`,
//! see `tool`) and the channel's outlet let Chela write to allowed chats on its own. Photos reach the model as image blocks; documents and voice
//! notes are saved under `inbox/` and announced by path ([`inbound`]). Commands: `/start`,
//! `/help`, `/new` and `/reset` (a fresh session), `/whoami` (the sender's id, answered to
//! anyone, since it is how a stranger learns what to be allowed as; nothing is stored). From a
//! stranger, `/start` and `/help` are messages like any other (the gate answers with a pairing
//! code), and `/whoami` is counted by the gate's limits for strangers.
//!
//! Failures: 429 waits `retry_after`; a network error or an unreadable answer backs off
//! (1 s doubling to 60 s) and never spins; 401 ends the channel with an error.
//!
//! While a turn runs, its answer grows in one message edited at most once a second, then
//! replaced by the whole formatted answer ([`stream`]; `channels.telegram.stream_edits`).
//!
//! Not here: webhooks, groups' mention rules.

mod api;
mod inbound;
mod offset;
mod reply;
mod stream;
pub(crate) mod tool;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use chela_core::access::Admission;
use chela_core::config as keys;
use serde_json::Value;

use crate::config::Config;
use crate::daemon::{Daemon, Incoming};
use crate::turn::{Cancel, Observer, Quiet};

pub use api::{Api, ApiError};
pub use reply::TelegramOutlet;
use reply::TelegramReply;

/// The channel's name in sessions, `allow_from` and outlets.
pub const CHANNEL: &str = "telegram";

const HELP: &str = "I'm Chela, a personal assistant. Send me a message, a photo, a document or a voice note.\n\n\
/new or /reset: start a fresh conversation (the old one is archived)\n\
/whoami: your Telegram user id, for the owner to let you in\n\
/help: this text";

/// Whether the channel is configured (it has a token).
pub fn configured(cfg: &Config) -> bool {
    !cfg.get(keys::TELEGRAM_TOKEN).is_empty()
}

/// The core's bounded exponential back-off, 1 s to a minute, for failed polls and sends:
/// counts the failures in a row.
struct Backoff(u32);

impl Backoff {
    const STEPS: chela_core::retry::Exponential =
        chela_core::retry::Exponential::new(Duration::from_secs(1), Duration::from_secs(60));

    fn new() -> Backoff {
        Backoff(0)
    }

    fn next(&mut self) -> Duration {
        let d = Backoff::STEPS.step(self.0);
        self.0 = self.0.saturating_add(1);
        d
    }
}

struct Channel {
    daemon: Arc<Daemon>,
    api: Api,
    max_file: usize,
}

/// Runs the channel until the daemon stops. Errors only when it cannot run at all.
pub async fn serve(daemon: Arc<Daemon>) -> Result<()> {
    let cfg = daemon.config();
    let http = crate::app::http_client(&cfg)?;
    let api = Api::new(http, cfg.get(keys::TELEGRAM_API_BASE), cfg.get(keys::TELEGRAM_TOKEN));
    let me = tokio::select! {
        me = api.get_me() => me,
        () = daemon.shutdown().wait() => return Ok(()),
    };
    let now = daemon.clock().unix_secs();
    match me {
        Ok(me) => {
            daemon.live().connected(CHANNEL, now);
            chela_log::info!("telegram: connected, polling as @{}", me["username"].as_str().unwrap_or("?"));
        }
        Err(ApiError::Unauthorized) => {
            daemon.live().failed(CHANNEL, &ApiError::Unauthorized.to_string(), now);
            bail!("{}", ApiError::Unauthorized)
        }
        // Offline at start is not fatal: the poll loop retries.
        Err(e) => {
            daemon.live().failed(CHANNEL, &e.to_string(), now);
            chela_log::warn!("telegram: cannot connect: {e}; will keep trying");
        }
    }
    daemon.outlets().register(Arc::new(TelegramOutlet::new(api.clone())));
    if let Err(e) = daemon.toolbox().register(tool::group(api.clone(), Arc::clone(daemon.gate()))) {
        chela_log::warn!("the telegram tools are not available: {e}");
    }
    let mut chan = Channel { daemon: Arc::clone(&daemon), api, max_file: cfg.usize(keys::TELEGRAM_MAX_FILE_BYTES) };
    let result = poll(&mut chan).await;
    daemon.outlets().unregister(CHANNEL);
    daemon.toolbox().unregister(tool::GROUP);
    // The answers still on their way are the daemon's: it flushes them after the turns end.
    result
}

/// Waits `d`, or less if the daemon stops: `false` then.
async fn pause(daemon: &Daemon, d: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => true,
        () = daemon.shutdown().wait() => false,
    }
}

async fn poll(chan: &mut Channel) -> Result<()> {
    let store = offset::Store::new(chan.daemon.workspace());
    let mut next = store.load().await;
    let mut backoff = Backoff::new();
    loop {
        let got = tokio::select! {
            got = chan.api.get_updates(next) => got,
            () = chan.daemon.shutdown().wait() => return Ok(()),
        };
        let wait = match got {
            Ok(updates) => {
                backoff = Backoff::new();
                chan.daemon.live().connected(CHANNEL, chan.daemon.clock().unix_secs());
                for update in updates {
                    let Some(id) = update["update_id"].as_i64() else {
                        chela_log::warn!("telegram: an update without an id was skipped");
                        continue;
                    };
                    if id < next {
                        chela_log::debug!("telegram: update {id} was already handled");
                        continue;
                    }
                    handle(chan, &update).await;
                    next = id + 1;
                    if let Err(e) = store.save(next).await {
                        // Not fatal: the update is handled; a restart might show it again.
                        chela_log::warn!("telegram: cannot save the update offset: {e:#}");
                    }
                    if chan.daemon.shutdown().is_triggered() {
                        return Ok(());
                    }
                }
                continue;
            }
            Err(ApiError::Unauthorized) => bail!("{}", ApiError::Unauthorized),
            Err(ApiError::RateLimited { retry_after }) => retry_after,
            Err(e) => {
                let wait = backoff.next();
                chan.daemon.live().failed(CHANNEL, &e.to_string(), chan.daemon.clock().unix_secs());
                chela_log::warn!("telegram: {e}; retrying in {} s", wait.as_secs());
                wait
            }
        };
        if !pause(&chan.daemon, wait).await {
            return Ok(());
        }
    }
}

/// A `/command` (with any `@botname` suffix removed), lowercased.
fn command(text: &str) -> Option<String> {
    let word = text.strip_prefix('/')?.split_whitespace().next()?;
    Some(word.split('@').next().unwrap_or(word).to_ascii_lowercase())
}

async fn handle(chan: &Channel, update: &Value) {
    let Some(msg) = update.get("message") else { return };
    let (Some(chat), Some(sender)) = (msg["chat"]["id"].as_i64(), msg["from"]["id"].as_i64()) else {
        chela_log::debug!("telegram: a message without a chat or a sender was skipped");
        return;
    };
    let (chat_id, sender) = (chat.to_string(), sender.to_string());
    let text = msg["text"].as_str().or_else(|| msg["caption"].as_str()).unwrap_or("");
    let allowed = chan.daemon.may_talk(CHANNEL, &sender);
    match command(text).as_deref() {
        Some("start" | "help") if allowed => return chan.answer(&chat_id, HELP.to_owned()),
        Some("whoami") => {
            // A stranger's reply counts like any other (per sender and for all strangers), so
            // a flood of commands cannot make the bot write without bound.
            if !allowed {
                let cfg = chan.daemon.config();
                match chan.daemon.gate().reply_to_stranger(&cfg, CHANNEL, &sender, chan.daemon.clock().unix_secs_u64())
                {
                    Admission::Allowed => {}
                    limited => {
                        if let Some(text) = limited.reply_text() {
                            chan.answer(&chat_id, text);
                        }
                        return;
                    }
                }
            }
            let text = format!(
                "Your Telegram user id is {sender} (this chat: {chat_id}).\n\
                 The owner can let you in with: chela config set channels.telegram.allow_from {sender}"
            );
            return chan.answer(&chat_id, text);
        }
        Some("new" | "reset") if allowed => return chan.restart(&chat_id, &sender),
        _ => {}
    }
    // Nothing from a sender who may not talk is downloaded or stored: the daemon sees only the
    // text, and answers (a pairing code) or drops it.
    let user = if allowed {
        match inbound::message(&chan.api, chan.daemon.workspace(), msg, chan.max_file).await {
            Ok(Some(user)) => user,
            Ok(None) => return,
            Err(refusal) => return chan.answer(&chat_id, refusal),
        }
    } else {
        chela_proto::chat::Message::user_text(text)
    };
    let incoming =
        Incoming { channel: CHANNEL.to_owned(), chat_id: chat_id.clone(), sender, user, cancel: Cancel::default() };
    // Read for each message, so `chela config set channels.telegram.stream_edits false` applies
    // without a restart.
    let (observer, preview): (Box<dyn Observer + Send>, _) = if chan.daemon.config().bool(keys::TELEGRAM_STREAM_EDITS) {
        let (live, preview) = stream::Live::new();
        (Box::new(live), Some(preview))
    } else {
        (Box::new(Quiet), None)
    };
    chan.daemon.converse(incoming, observer, Box::new(TelegramReply::new(chan.api.clone(), chat_id, preview)));
}

impl Channel {
    /// Sends `text` as is (no Markdown), in the chat's order, without holding up the poll loop.
    fn answer(&self, chat_id: &str, text: String) {
        let reply = TelegramReply::new(self.api.clone(), chat_id.to_owned(), None);
        self.daemon.say(CHANNEL, chat_id, text, Box::new(reply));
    }

    fn restart(&self, chat_id: &str, sender: &str) {
        let reply = TelegramReply::new(self.api.clone(), chat_id.to_owned(), None);
        self.daemon.restart_then(CHANNEL, chat_id, sender, Box::new(reply));
    }
}

/// `chela doctor`'s check: the token is accepted and the API reachable. `None` when the
/// channel is not configured; else what to print and, on failure, the fix.
pub async fn doctor(cfg: &Config) -> Option<Result<String, (String, String)>> {
    if !configured(cfg) {
        return None;
    }
    let base = cfg.get(keys::TELEGRAM_API_BASE);
    let http = match crate::app::http_client(cfg) {
        Ok(h) => h,
        Err(e) => return Some(Err((format!("telegram: {e:#}"), "chela config set proxy.url …".to_owned()))),
    };
    let api = Api::new(http, base, cfg.get(keys::TELEGRAM_TOKEN));
    Some(match api.get_me().await {
        Ok(me) => Ok(format!("telegram: bot @{} answers at {base}", me["username"].as_str().unwrap_or("?"))),
        Err(e @ ApiError::Unauthorized) => {
            Err((format!("telegram: {e}"), "chela config set channels.telegram.token -".to_owned()))
        }
        Err(e) => Err((
            format!("telegram: {base} did not answer getMe: {e}"),
            "check your network, proxy.url and channels.telegram.api_base".to_owned(),
        )),
    })
}

#[cfg(test)]
mod tests;
