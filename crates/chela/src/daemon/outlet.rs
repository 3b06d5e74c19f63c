//! Where Chela speaks on its own: each running channel registers an [`Outlet`], and the tools
//! that send (`telegram_send_text`, `im_send_media`, …) look it up by channel name. A channel
//! that is not running has no outlet, so a tool names that instead of failing somewhere deep.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};

use chela_core::config as keys;

use crate::config::Config;
use crate::workspace::Workspace;

/// A boxed, sendable future: the outlets are trait objects.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One channel's way of sending to one of its chats.
///
/// Contract: `send_*` returns once the platform accepted the message (or with a sentence for
/// the person saying why not); it never retries for longer than the channel's own back-off.
pub trait Outlet: Send + Sync {
    /// The channel's name, as in `Incoming::channel`: `telegram`, `feishu`, `ws`.
    fn channel(&self) -> &str;
    fn send_text<'a>(&'a self, chat_id: &'a str, text: &'a str) -> BoxFuture<'a, Result<(), String>>;
    /// Sends a file (already opened and checked by the caller's sandbox), with a caption.
    fn send_file<'a>(&'a self, chat_id: &'a str, path: &'a Path, caption: &'a str)
    -> BoxFuture<'a, Result<(), String>>;
}

/// The running channels' outlets, by channel name.
#[derive(Default)]
pub struct Outlets(RwLock<BTreeMap<String, Arc<dyn Outlet>>>);

impl Outlets {
    /// Adds (or replaces, after a channel restarted) the outlet of `outlet.channel()`.
    pub fn register(&self, outlet: Arc<dyn Outlet>) {
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        map.insert(outlet.channel().to_owned(), outlet);
    }

    /// Removes a channel's outlet when the channel stops.
    pub fn unregister(&self, channel: &str) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).remove(channel);
    }

    pub fn get(&self, channel: &str) -> Option<Arc<dyn Outlet>> {
        self.0.read().unwrap_or_else(PoisonError::into_inner).get(channel).cloned()
    }

    /// The channels that can send now.
    pub fn channels(&self) -> Vec<String> {
        self.0.read().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect()
    }
}

/// Whether Chela may send to `chat_id` of `channel` on its own: a chat listed in the channel's
/// `allow_from`, or one where an admitted (allowed or paired) person has talked, which is what
/// a session file records — a stranger's words never make one. The same rule as
/// `telegram_send_text` and `feishu_send_message`.
pub fn may_send(ws: &Workspace, cfg: &Config, channel: &str, chat_id: &str) -> bool {
    let list = match channel {
        // The gateway's clients passed its token (or sit on loopback): the owner.
        "ws" => return true,
        "telegram" => cfg.list(keys::TELEGRAM_ALLOW_FROM),
        "feishu" => cfg.list(keys::FEISHU_ALLOW_FROM),
        _ => return false,
    };
    list.iter().any(|a| a == "*" || a == chat_id) || ws.session_path(channel, chat_id).exists()
}
