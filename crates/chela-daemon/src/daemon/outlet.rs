//! Where Chela speaks on its own: each running channel registers an [`Outlet`], and the tools
//! that send (`im_send_text`, `im_send_media` and the channels' aliases) look it up by channel
//! name. A channel that is not running has no outlet, so a tool names that instead of failing
//! somewhere deep. The daemon also delivers answers through it ([`super::OutletReply`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};

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
