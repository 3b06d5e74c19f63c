//! Who may talk to Chela, the host side: the [`Gate`] every channel's messages pass, over the
//! pairing store `state/access.json` in the workspace.
//!
//! The rules are `chela_core::access`; this module keeps their state on disk. Every change
//! (a code issued to a stranger, the owner's approve, deny or revoke) is a read-modify-write
//! under the file's lock ([`crate::lock::with_file_lock`]) with an atomic write, so the daemon
//! and a `chela pairing approve` in another process never lose each other's update. The daemon
//! notices a change made elsewhere by the file's identity (inode, size, mtime) before each
//! decision, and reloads it. Message counters live in memory only: a restart forgives a flood,
//! and no message costs a disk write.
//!
//! A store that cannot be read (garbage, over the size bound, a bound broken) is an error for
//! the owner's commands and is never overwritten; the daemon keeps the last good state, lets
//! allowed senders in and issues no code until the file is fixed.

use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chela_core::access::{self, AccessError, AccessState, Admission, CODE_LEN, Peer, PendingCode, RateLimiter};
use chela_core::config as keys;
use serde::Serialize;

use crate::authority::SealError;
use crate::config::Config;
use crate::workspace::{Replace, Workspace, create_private_dir, open_dir, write_atomic_at};

/// Channels whose clients are checked by the channel itself (the gateway's token, or the
/// terminal's own user): their senders are the owner, admitted without the gate's rules, and
/// Chela may write to their chats. `xiaozhi`: a voice device the owner approved
/// (`chela device approve`), authorised by its own token.
pub const OWNER_CHANNELS: &[&str] = &["ws", "api", "cli", "mcp", "xiaozhi"];

/// The store's file name, in the workspace's `state/` folder.
pub const STORE_FILE: &str = crate::authority::ACCESS_STORE;
/// Largest store read: the bounded lists of `chela_core::access` take well under this.
pub const MAX_STORE_BYTES: u64 = 1 << 20;

/// Why an owner's action failed.
#[derive(Debug)]
pub enum GateError {
    /// The request itself: an unknown or malformed code, a sender not approved… (HTTP 4xx).
    Rule(AccessError),
    /// The store could not be read or written (HTTP 5xx).
    Store(String),
}

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateError::Rule(e) => e.fmt(f),
            GateError::Store(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for GateError {}

impl From<AccessError> for GateError {
    fn from(e: AccessError) -> Self {
        GateError::Rule(e)
    }
}

impl From<io::Error> for GateError {
    fn from(e: io::Error) -> Self {
        GateError::Store(e.to_string())
    }
}

/// What `chela pairing list` and `GET /api/pairing` show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listing {
    pub pending: Vec<PendingCode>,
    pub allowed: Vec<Peer>,
}

/// The file's identity when it was last read: a rename-based write always changes the inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

fn stamp(path: &Path) -> io::Result<Option<Stamp>> {
    match std::fs::metadata(path) {
        Ok(m) => {
            Ok(Some(Stamp { dev: m.dev(), ino: m.ino(), len: m.len(), mtime: m.mtime(), mtime_nsec: m.mtime_nsec() }))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

struct Inner {
    state: AccessState,
    /// `None`: no file was there.
    seen: Option<Stamp>,
    rate: RateLimiter,
    /// The stamp of a broken file already reported, so a bad file is logged once, not per message.
    reported: Option<Stamp>,
}

/// The admission gate of every channel, and the owner's pairing commands.
pub struct Gate {
    path: PathBuf,
    inner: Mutex<Inner>,
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate").field("path", &self.path).finish_non_exhaustive()
    }
}

/// The `allow_from` setting of `channel`; channels without one pair every sender.
pub fn allow_from<'a>(cfg: &'a Config, channel: &str) -> &'a [String] {
    let channels = &cfg.settings().channels;
    match channel {
        "telegram" => &channels.telegram.allow_from,
        "feishu" => &channels.feishu.allow_from,
        _ => &[],
    }
}

/// The tools' answer when [`Gate::may_send`] says no.
pub fn send_refused(channel: &str, chat: &str) -> String {
    format!(
        "Chela may not write to {channel} chat {chat}: only chats listed in channels.{channel}.allow_from, \
         approved people's own chats and chats where someone allowed talks to Chela can be reached \
         (a revoked person's chats close at once). `chela pairing list` shows who is approved."
    )
}

/// `access.rate_per_hour`.
pub fn rate_per_hour(cfg: &Config) -> u32 {
    u32::try_from(cfg.int(keys::ACCESS_RATE_PER_HOUR)).unwrap_or(access::DEFAULT_RATE_PER_HOUR)
}

impl Gate {
    /// The gate of `ws`, with its store loaded. A store that cannot be read is an error that
    /// names the file and what to do.
    pub fn open(ws: &Workspace) -> Result<Gate, GateError> {
        let path = ws.root().join("state").join(STORE_FILE);
        let seen = stamp(&path)?;
        let state = load(&path)?;
        let inner = Inner { state, seen, rate: RateLimiter::default(), reported: None };
        Ok(Gate { path, inner: Mutex::new(inner) })
    }

    /// The store's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves a whole state behind (each change
        // replaces it in one assignment), so carrying on is safe.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The verdict for one message of `sender` on `channel` at `now` (Unix seconds), with the
    /// channel's `allow_from` and `access.rate_per_hour` from `cfg`. Never fails: when the store
    /// cannot be read or written, allowed senders still pass and strangers are dropped.
    pub fn admit(&self, cfg: &Config, channel: &str, sender: &str, now: u64) -> Admission {
        let allow = allow_from(cfg, channel);
        let mut inner = self.inner();
        self.refresh(&mut inner);
        let mut random = [0u8; CODE_LEN];
        let verdict = match rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty()) {
            Ok(n) if n == CODE_LEN => inner.state.pairing(allow, channel, sender, now, random),
            _ => {
                chela_log::error!("no random bytes for a pairing code; {channel}:{sender} is not answered");
                if inner.state.is_allowed(allow, channel, sender) { Admission::Allowed } else { Admission::Denied }
            }
        };
        let verdict = match verdict {
            // Issue it again under the lock, on the file as it is now: another process may
            // have changed it since it was read.
            Admission::NewCode { code } => {
                match self.edit(&mut inner, |s| Ok(s.pairing(allow, channel, sender, now, random))) {
                    Ok(v) => v,
                    Err(e) => {
                        // Not on disk, so not in memory either: the owner could never approve it.
                        inner.state.pending.retain(|p| p.code != code);
                        chela_log::error!("cannot issue a pairing code to {channel}:{sender}: {e}");
                        Admission::Denied
                    }
                }
            }
            other => other,
        };
        inner.rate.limit(verdict, rate_per_hour(cfg), channel, sender, now)
    }

    /// Counts a reply to `sender`, a stranger on `channel`, that is not a pairing answer (the
    /// id `/whoami` tells): `Allowed` to send it, `RateLimited` to send that instead, `Silent`
    /// to send nothing. Strangers' replies share one budget besides each sender's own.
    pub fn reply_to_stranger(&self, cfg: &Config, channel: &str, sender: &str, now: u64) -> Admission {
        self.inner().rate.reply_to_stranger(rate_per_hour(cfg), channel, sender, now)
    }

    /// Whether `sender` may talk on `channel` now (listed in `allow_from`, or approved),
    /// decided without side effects: no code is issued, no message counted.
    pub fn allows(&self, cfg: &Config, channel: &str, sender: &str) -> bool {
        let mut inner = self.inner();
        self.refresh(&mut inner);
        inner.state.is_allowed(allow_from(cfg, channel), channel, sender)
    }

    /// Whether Chela may write to `chat` of `channel` on its own (every tool that sends asks
    /// this): see `AccessState::may_send`. Decided on the store as it is now, so a revoke from
    /// another process closes the chats at once.
    pub fn may_send(&self, cfg: &Config, channel: &str, chat: &str) -> bool {
        if OWNER_CHANNELS.contains(&channel) {
            return true;
        }
        let mut inner = self.inner();
        self.refresh(&mut inner);
        inner.state.may_send(allow_from(cfg, channel), channel, chat)
    }

    /// Records that `sender`, just admitted, talked in `chat`, so Chela may write there later
    /// (while the sender may still talk). Writes the store only for a chat not known yet.
    pub fn note_chat(&self, channel: &str, chat: &str, sender: &str, now: u64) {
        if OWNER_CHANNELS.contains(&channel) {
            return;
        }
        let mut inner = self.inner();
        self.refresh(&mut inner);
        if inner.state.knows_chat(channel, chat, sender) {
            return;
        }
        if let Err(e) = self.edit(&mut inner, |s| Ok(s.note_chat(channel, chat, sender, now))) {
            chela_log::warn!("cannot remember that {channel}:{sender} talked in chat {chat}: {e}");
        }
    }

    /// Pending codes (live at `now`) and approved senders, from the file as it is now.
    pub fn list(&self, now: u64) -> Result<Listing, GateError> {
        let mut inner = self.inner();
        inner.state = load(&self.path)?;
        inner.seen = stamp(&self.path)?;
        let mut state = inner.state.clone();
        state.prune(now);
        Ok(Listing { pending: state.pending, allowed: state.allowed })
    }

    /// The owner approves `code`.
    pub fn approve(&self, code: &str, now: u64) -> Result<Peer, GateError> {
        let mut inner = self.inner();
        let peer = self.edit(&mut inner, |s| s.approve(code, now))?;
        chela_log::info!("pairing: {}:{} approved (code {code})", peer.channel, peer.sender);
        Ok(peer)
    }

    /// The owner denies `code`; its sender gets no new code for an hour.
    pub fn deny(&self, code: &str, now: u64) -> Result<PendingCode, GateError> {
        let mut inner = self.inner();
        self.edit(&mut inner, |s| s.deny(code, now))
    }

    /// The owner clears the queue of `channel` (all channels: `None`): every waiting request is
    /// denied. Returns the dropped requests.
    pub fn clear(&self, channel: Option<&str>, now: u64) -> Result<Vec<PendingCode>, GateError> {
        let mut inner = self.inner();
        self.edit(&mut inner, |s| Ok(s.clear(channel, now)))
    }

    /// The owner revokes an approved sender.
    pub fn revoke(&self, channel: &str, sender: &str) -> Result<Peer, GateError> {
        let mut inner = self.inner();
        self.edit(&mut inner, |s| s.revoke(channel, sender))
    }

    /// Reloads the store if another writer changed it. A broken file keeps the last good state.
    fn refresh(&self, inner: &mut Inner) {
        let now = match stamp(&self.path) {
            Ok(s) => s,
            Err(e) => {
                chela_log::warn!("cannot look at {}: {e}", self.path.display());
                return;
            }
        };
        if now == inner.seen {
            return;
        }
        match load(&self.path) {
            Ok(state) => {
                inner.state = state;
                inner.seen = now;
            }
            Err(e) => {
                if inner.reported != now {
                    chela_log::error!("{e}");
                    inner.reported = now;
                }
            }
        }
    }

    /// Applies `change` to the store under its lock and writes it back if `change` succeeds.
    fn edit<T>(
        &self,
        inner: &mut Inner,
        change: impl FnOnce(&mut AccessState) -> Result<T, AccessError>,
    ) -> Result<T, GateError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| GateError::Store(format!("cannot create {}: {e}", dir.display())))?;
        crate::lock::with_file_lock(&self.path, || {
            let mut state = load(&self.path)?;
            let out = change(&mut state)?;
            let json = serde_json::to_vec_pretty(&state).map_err(|e| GateError::Store(e.to_string()))?;
            let written = crate::authority::seal(&self.path, &json).and_then(|json| {
                open_dir(dir).and_then(|fd| write_atomic_at(&fd, STORE_FILE.as_ref(), &json, Replace::Yes))
            });
            written.map_err(|e| GateError::Store(format!("cannot write {}: {e}", self.path.display())))?;
            inner.seen = stamp(&self.path)?;
            inner.state = state;
            Ok(out)
        })
    }
}

/// Reads and checks the store; a missing file is the empty state.
fn load(path: &Path) -> Result<AccessState, GateError> {
    let left = "Chela left it as it is: fix it, or move it away to start over with no approved senders";
    let text = match crate::authority::read_sealed(path, MAX_STORE_BYTES) {
        Ok(None) => return Ok(AccessState::default()),
        Ok(Some(text)) => text,
        Err(e @ SealError::Untrusted { .. }) => return Err(GateError::Store(format!("{e}."))),
        Err(e) => return Err(GateError::Store(format!("cannot read the pairing store: {e}. {left}."))),
    };
    let state: AccessState = serde_json::from_str(&text)
        .map_err(|e| GateError::Store(format!("{} is not a valid pairing store ({e}). {left}.", path.display())))?;
    state
        .validate()
        .map_err(|e| GateError::Store(format!("{} is not a valid pairing store: {e}. {left}.", path.display())))?;
    Ok(state)
}

#[cfg(test)]
mod tests;
