//! Who may talk to Chela: per-channel allowlists, one-time pairing codes and a per-sender rate
//! limit, as values.
//!
//! What it is: the rules, shared by the host and the chip. [`AccessState`] is what must survive
//! a restart (approved senders, pending codes, recent refusals); [`RateLimiter`] is what need
//! not (message counters). Both are plain serialisable values with a bound on everything.
//!
//! What it is not: a store. It reads no clock and draws no random numbers: `now` (Unix seconds)
//! and 8 random bytes per request come in as arguments, and persisting the state is the
//! driver's job (the host writes `state/access.json` under a lock).
//!
//! How to drive it, per incoming message: [`AccessState::pairing`] decides from the allowlist
//! and the pairing state; when it returned [`Admission::NewCode`] the driver persists the state;
//! then [`RateLimiter::limit`] turns the verdict into the final one. [`admit`] does both for a
//! driver that persists after every change. The owner's side is [`AccessState::approve`],
//! [`AccessState::deny`] and [`AccessState::revoke`].

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use alloc::collections::BTreeMap;
use serde::{Deserialize, Serialize};

/// Symbols of a pairing code: digits and capitals without the look-alikes 0/O and 1/I, so a
/// code read aloud or retyped from a phone survives. 32 symbols: 5 bits each.
pub const CODE_ALPHABET: &[u8; 32] = b"23456789ABCDEFGHJKLMNPQRSTUVWXYZ";
/// Symbols in a code: 40 bits, so guessing one of at most [`MAX_PENDING`] live codes takes
/// about 2^35 tries, far beyond what the rate limit lets through in a code's hour.
pub const CODE_LEN: usize = 8;
/// How long a code stays valid.
pub const CODE_TTL_SECS: u64 = 3600;
/// How long a denied sender is not offered a new code, so a stranger cannot spam the owner.
pub const REFUSAL_SECS: u64 = 3600;
/// Codes waiting for the owner on one channel; the next stranger gets [`Admission::TooManyPending`].
pub const MAX_PENDING_PER_CHANNEL: usize = 3;
/// Codes waiting on all channels together.
pub const MAX_PENDING: usize = 32;
/// Senders approved by pairing (the config's `allow_from` lists are not counted).
pub const MAX_ALLOWED: usize = 512;
/// Denied senders remembered for [`REFUSAL_SECS`]; when full, the oldest refusal is forgotten.
pub const MAX_REFUSED: usize = 64;
/// Longest channel name or sender id, in bytes. Longer ones are refused, never stored.
pub const MAX_ID_BYTES: usize = 128;
/// Senders whose message counts are kept; the idlest is forgotten first.
pub const MAX_TRACKED: usize = 1024;
/// The default of `access.rate_per_hour`.
pub const DEFAULT_RATE_PER_HOUR: u32 = 30;
/// Replies to strangers (pairing answers, "slow down", `/whoami`) on all channels together,
/// an hour: a crowd of senders cannot make the bot write without bound. A fresh pairing code
/// is always sent (codes are bounded by [`MAX_PENDING_PER_CHANNEL`] already), so the crowd
/// cannot keep a real person from learning theirs.
pub const STRANGER_REPLIES_PER_HOUR: u32 = 120;
/// Chats remembered as opened by an admitted sender ([`ChatLink`]); when full, the oldest link
/// is forgotten, and Chela may write there on its own again once someone allowed talks there.
pub const MAX_CHATS: usize = 1024;

/// What to do with one incoming message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Give it to the model.
    Allowed,
    /// An unknown sender: a fresh pairing code was issued (the driver persists the state).
    NewCode { code: String },
    /// An unknown sender who already has a live code: the same code again.
    StillPending { code: String },
    /// An unknown sender, but the channel already has its pending codes.
    TooManyPending,
    /// Over the rate limit: told once.
    RateLimited { retry_after_secs: u64 },
    /// Over the rate limit and already told: send nothing.
    Silent,
    /// Refused (denied recently, or an id no platform sends): send nothing.
    Denied,
}

impl Admission {
    /// Whether the message goes to the model.
    pub fn admits(&self) -> bool {
        matches!(self, Admission::Allowed)
    }

    /// The sentence to send back to the sender, `None` when nothing is sent (the message is
    /// for the model, or the sender gets silence).
    pub fn reply_text(&self) -> Option<String> {
        Some(match self {
            Admission::Allowed | Admission::Silent | Admission::Denied => return None,
            Admission::NewCode { code } => format!(
                "Hi! I only talk with people my owner has approved. Your pairing code is {code}: \
                 send it to my owner, who approves it with `chela pairing approve {code}` or on \
                 the dashboard. The code is valid for one hour."
            ),
            Admission::StillPending { code } => format!(
                "Your pairing code {code} is still waiting for my owner, who approves it with \
                 `chela pairing approve {code}`. Until then I cannot answer you."
            ),
            Admission::TooManyPending => "Too many people are waiting for my owner's approval right now. \
                                          Please try again in an hour."
                .to_string(),
            Admission::RateLimited { retry_after_secs } => format!(
                "You are sending messages faster than I may answer. Please wait {} and try again.",
                duration(*retry_after_secs)
            ),
        })
    }
}

/// `90` → "2 minutes", `5` → "5 seconds": a wait as a person says it, rounded up.
fn duration(secs: u64) -> String {
    match secs {
        0..=1 => "a second".to_string(),
        2..=59 => format!("{secs} seconds"),
        60..=119 => "a minute".to_string(),
        _ => format!("{} minutes", secs.div_ceil(60)),
    }
}

/// An approved sender.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    pub channel: String,
    pub sender: String,
    /// When the owner approved it (Unix seconds).
    #[serde(default)]
    pub since: u64,
}

/// A code waiting for the owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCode {
    pub channel: String,
    pub sender: String,
    pub code: String,
    /// Unix seconds; the code is gone from this moment.
    pub expires_at: u64,
}

/// A sender the owner denied, who is not offered a new code until `until`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub channel: String,
    pub sender: String,
    pub until: u64,
}

/// A chat where an admitted sender talked: what lets Chela write there on its own (a group, or
/// a Feishu chat, whose id is not its person's). It counts only while its sender may talk, so
/// a revoke closes the sender's chats at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatLink {
    pub channel: String,
    pub chat: String,
    pub sender: String,
    /// When it was first seen (Unix seconds); the oldest goes first when the list is full.
    #[serde(default)]
    pub since: u64,
}

/// Why an owner's action or a stored state was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AccessError {
    /// Not 8 symbols of [`CODE_ALPHABET`].
    MalformedCode { given: String },
    /// No live code matches (never issued, expired, or already used).
    UnknownCode { code: String },
    /// [`MAX_ALLOWED`] senders are approved already.
    AllowedFull,
    /// `revoke` of a sender that pairing never approved.
    NotApproved { channel: String, sender: String },
    /// An empty or over-long channel or sender id.
    BadId { what: &'static str },
    /// A stored state that breaks a bound or holds a malformed code.
    Invalid { why: String },
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessError::MalformedCode { given } => write!(
                f,
                "`{given}` is not a pairing code: a code is {CODE_LEN} letters and digits, such as 7KQ4MXT2 \
                 (no 0, O, 1 or I)."
            ),
            AccessError::UnknownCode { code } => write!(
                f,
                "No pending request has the code {code}. Codes last one hour and work once; \
                 `chela pairing list` shows the pending ones."
            ),
            AccessError::AllowedFull => write!(
                f,
                "{MAX_ALLOWED} senders are approved already, the most Chela keeps. Revoke one first \
                 (`chela pairing revoke CHANNEL:SENDER`), or open the channel with allow_from."
            ),
            AccessError::NotApproved { channel, sender } => {
                write!(f, "{channel}:{sender} is not among the approved senders (`chela pairing list` shows them).")
            }
            AccessError::BadId { what } => write!(f, "the {what} must be 1 to {MAX_ID_BYTES} bytes of printable text."),
            AccessError::Invalid { why } => f.write_str(why),
        }
    }
}

/// Whether a channel's `allow_from` list lets `sender` in: `*` opens the channel, otherwise the
/// sender's id must be listed.
pub fn listed<S: AsRef<str>>(allow_from: &[S], sender: &str) -> bool {
    allow_from.iter().map(|s| s.as_ref().trim()).any(|s| s == "*" || s == sender)
}

/// `input` as a code: surrounding space and dashes dropped, upper-cased, checked.
pub fn normalize_code(input: &str) -> Result<String, AccessError> {
    let code: String =
        input.chars().filter(|c| !c.is_whitespace() && *c != '-').map(|c| c.to_ascii_uppercase()).collect();
    if code.len() == CODE_LEN && code.bytes().all(|b| CODE_ALPHABET.contains(&b)) {
        Ok(code)
    } else {
        let given: String = input.chars().take(2 * CODE_LEN).collect();
        Err(AccessError::MalformedCode { given })
    }
}

/// The code of `random`, with candidate number `attempt` (0 first). Each byte picks one of the
/// 32 symbols (uniformly: 256 is a multiple of 32). Candidates 0..1024 differ from each other
/// in their first two symbols, so there is always a free one among [`MAX_PENDING`] + 1.
fn code_of(random: [u8; CODE_LEN], attempt: usize) -> String {
    let mut idx = random.map(|b| usize::from(b) % CODE_ALPHABET.len());
    idx[0] = (idx[0] + attempt) % CODE_ALPHABET.len();
    idx[1] = (idx[1] + attempt / CODE_ALPHABET.len()) % CODE_ALPHABET.len();
    idx.iter().map(|&i| char::from(CODE_ALPHABET[i])).collect()
}

fn check_id(id: &str, what: &'static str) -> Result<(), AccessError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES || id.chars().any(char::is_control) {
        return Err(AccessError::BadId { what });
    }
    Ok(())
}

/// What survives a restart: approved senders, live codes, recent refusals. Every list is
/// bounded ([`MAX_ALLOWED`], [`MAX_PENDING`], [`MAX_REFUSED`]); [`AccessState::validate`]
/// checks a state read from a file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessState {
    #[serde(default)]
    pub allowed: Vec<Peer>,
    #[serde(default)]
    pub pending: Vec<PendingCode>,
    #[serde(default)]
    pub refused: Vec<Refusal>,
    /// Chats opened by admitted senders, for [`AccessState::may_send`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chats: Vec<ChatLink>,
}

impl AccessState {
    /// Checks the bounds and the form of every entry, for a state that came from outside.
    pub fn validate(&self) -> Result<(), AccessError> {
        let over = |what: &str, n: usize, max: usize| {
            (n > max).then(|| AccessError::Invalid { why: format!("it lists {n} {what}, more than the {max} allowed") })
        };
        if let Some(e) = over("approved senders", self.allowed.len(), MAX_ALLOWED)
            .or_else(|| over("pending codes", self.pending.len(), MAX_PENDING))
            .or_else(|| over("refusals", self.refused.len(), MAX_REFUSED))
            .or_else(|| over("chats", self.chats.len(), MAX_CHATS))
        {
            return Err(e);
        }
        let ids = self
            .allowed
            .iter()
            .map(|p| (&p.channel, &p.sender))
            .chain(self.pending.iter().map(|p| (&p.channel, &p.sender)))
            .chain(self.refused.iter().map(|r| (&r.channel, &r.sender)))
            .chain(self.chats.iter().map(|c| (&c.channel, &c.sender)))
            .chain(self.chats.iter().map(|c| (&c.channel, &c.chat)));
        for (channel, sender) in ids {
            check_id(channel, "channel").and_then(|()| check_id(sender, "sender")).map_err(|e| {
                let shown: String = sender.chars().take(40).collect();
                AccessError::Invalid { why: format!("an entry ({shown:?}) has a bad id: {e}") }
            })?;
        }
        for (i, p) in self.pending.iter().enumerate() {
            if normalize_code(&p.code).ok().as_deref() != Some(p.code.as_str()) {
                return Err(AccessError::Invalid { why: format!("pending code {:?} is malformed", p.code) });
            }
            if self.pending[..i].iter().any(|q| q.code == p.code) {
                return Err(AccessError::Invalid { why: format!("pending code {} appears twice", p.code) });
            }
        }
        Ok(())
    }

    /// Drops codes and refusals whose time is over.
    pub fn prune(&mut self, now: u64) {
        self.pending.retain(|p| p.expires_at > now);
        self.refused.retain(|r| r.until > now);
    }

    /// Whether `sender` may talk on `channel`: listed in `allow_from`, or approved by pairing.
    pub fn is_allowed<S: AsRef<str>>(&self, allow_from: &[S], channel: &str, sender: &str) -> bool {
        listed(allow_from, sender) || self.allowed.iter().any(|p| p.channel == channel && p.sender == sender)
    }

    /// Whether Chela may write to `chat` of `channel` on its own (the tools that send): a chat
    /// listed in `allow_from` (a private chat's id is its person's; `*` opens talking, not
    /// writing to any chat the bot is in), the private chat of an approved sender, or a chat
    /// where a sender who may still talk has talked ([`AccessState::note_chat`]).
    pub fn may_send<S: AsRef<str>>(&self, allow_from: &[S], channel: &str, chat: &str) -> bool {
        if check_id(channel, "channel").and_then(|()| check_id(chat, "chat")).is_err() {
            return false;
        }
        allow_from.iter().any(|a| a.as_ref().trim() == chat)
            || self.allowed.iter().any(|p| p.channel == channel && p.sender == chat)
            || self
                .chats
                .iter()
                .any(|l| l.channel == channel && l.chat == chat && self.is_allowed(allow_from, channel, &l.sender))
    }

    /// Whether `chat` is already known as opened by `sender`.
    pub fn knows_chat(&self, channel: &str, chat: &str, sender: &str) -> bool {
        chat == sender || self.chats.iter().any(|l| l.channel == channel && l.chat == chat && l.sender == sender)
    }

    /// Records that `sender`, just admitted, talked in `chat`; `true` when the state changed
    /// (persist it). A private chat whose id is the sender's needs no link. When
    /// [`MAX_CHATS`] are kept, the oldest link is forgotten.
    pub fn note_chat(&mut self, channel: &str, chat: &str, sender: &str, now: u64) -> bool {
        let ids = check_id(channel, "channel").and_then(|()| check_id(chat, "chat"));
        if ids.and_then(|()| check_id(sender, "sender")).is_err() || self.knows_chat(channel, chat, sender) {
            return false;
        }
        if self.chats.len() >= MAX_CHATS
            && let Some(oldest) = self.chats.iter().enumerate().min_by_key(|(_, l)| l.since).map(|(i, _)| i)
        {
            self.chats.remove(oldest);
        }
        self.chats.push(ChatLink {
            channel: channel.to_string(),
            chat: chat.to_string(),
            sender: sender.to_string(),
            since: now,
        });
        true
    }

    /// The allowlist and pairing verdict for one message: `Allowed`, `NewCode` (the state
    /// changed: persist it), `StillPending`, `TooManyPending` or `Denied`. `random` makes the
    /// code; it must come from a cryptographic source.
    pub fn pairing<S: AsRef<str>>(
        &mut self,
        allow_from: &[S],
        channel: &str,
        sender: &str,
        now: u64,
        random: [u8; CODE_LEN],
    ) -> Admission {
        if check_id(channel, "channel").and_then(|()| check_id(sender, "sender")).is_err() {
            return Admission::Denied;
        }
        if self.is_allowed(allow_from, channel, sender) {
            return Admission::Allowed;
        }
        self.prune(now);
        if self.refused.iter().any(|r| r.channel == channel && r.sender == sender) {
            return Admission::Denied;
        }
        if let Some(p) = self.pending.iter().find(|p| p.channel == channel && p.sender == sender) {
            return Admission::StillPending { code: p.code.clone() };
        }
        let on_channel = self.pending.iter().filter(|p| p.channel == channel).count();
        if on_channel >= MAX_PENDING_PER_CHANNEL || self.pending.len() >= MAX_PENDING {
            return Admission::TooManyPending;
        }
        // At most MAX_PENDING - 1 codes exist, so one of the first MAX_PENDING candidates is free.
        let code = (0..MAX_PENDING)
            .map(|attempt| code_of(random, attempt))
            .find(|c| !self.pending.iter().any(|p| &p.code == c))
            .unwrap_or_else(|| code_of(random, MAX_PENDING));
        self.pending.push(PendingCode {
            channel: channel.to_string(),
            sender: sender.to_string(),
            code: code.clone(),
            expires_at: now.saturating_add(CODE_TTL_SECS),
        });
        Admission::NewCode { code }
    }

    /// The live pending code `code` (typed by a person: any case, dashes allowed).
    fn take_pending(&mut self, code: &str, now: u64) -> Result<PendingCode, AccessError> {
        let code = normalize_code(code)?;
        self.prune(now);
        let at = self.pending.iter().position(|p| p.code == code).ok_or(AccessError::UnknownCode { code })?;
        Ok(self.pending.remove(at))
    }

    /// The owner approves `code`: its sender may talk from now on. Returns the new peer.
    pub fn approve(&mut self, code: &str, now: u64) -> Result<Peer, AccessError> {
        let normal = normalize_code(code)?;
        let Some(p) = self.pending.iter().find(|p| p.code == normal && p.expires_at > now) else {
            return Err(AccessError::UnknownCode { code: normal });
        };
        let known = self.allowed.iter().any(|a| a.channel == p.channel && a.sender == p.sender);
        if !known && self.allowed.len() >= MAX_ALLOWED {
            return Err(AccessError::AllowedFull);
        }
        let p = self.take_pending(&normal, now)?;
        let peer = Peer { channel: p.channel, sender: p.sender, since: now };
        if !known {
            self.allowed.push(peer.clone());
        }
        Ok(peer)
    }

    /// The owner denies `code`: the request is dropped and its sender gets no new code for
    /// [`REFUSAL_SECS`]. Returns the dropped request.
    pub fn deny(&mut self, code: &str, now: u64) -> Result<PendingCode, AccessError> {
        let p = self.take_pending(code, now)?;
        if self.refused.len() >= MAX_REFUSED
            && let Some(oldest) = self.refused.iter().enumerate().min_by_key(|(_, r)| r.until).map(|(i, _)| i)
        {
            self.refused.remove(oldest);
        }
        self.refused.push(Refusal {
            channel: p.channel.clone(),
            sender: p.sender.clone(),
            until: now.saturating_add(REFUSAL_SECS),
        });
        Ok(p)
    }

    /// The owner clears the queue: every live request (of `channel`, or of all channels) is
    /// denied as by [`AccessState::deny`], so a crowd that filled it cannot fill it again with the
    /// same senders for [`REFUSAL_SECS`]. Returns the dropped requests.
    pub fn clear(&mut self, channel: Option<&str>, now: u64) -> Vec<PendingCode> {
        self.prune(now);
        let codes: Vec<String> =
            self.pending.iter().filter(|p| channel.is_none_or(|c| p.channel == c)).map(|p| p.code.clone()).collect();
        codes.iter().filter_map(|code| self.deny(code, now).ok()).collect()
    }

    /// The owner revokes an approved sender: its next message is a stranger's again.
    pub fn revoke(&mut self, channel: &str, sender: &str) -> Result<Peer, AccessError> {
        let at = self
            .allowed
            .iter()
            .position(|p| p.channel == channel && p.sender == sender)
            .ok_or_else(|| AccessError::NotApproved { channel: channel.to_string(), sender: sender.to_string() })?;
        // `may_send` already ignores links of a sender who may not talk; dropping them keeps
        // the list to what counts.
        self.chats.retain(|l| !(l.channel == channel && l.sender == sender));
        Ok(self.allowed.remove(at))
    }
}

/// One sender's count, as a GCRA token bucket: `tat_ms` is the moment (Unix milliseconds) at
/// which the bucket would be full again; `told` is whether the sender has been told to slow
/// down since its last admitted message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub tat_ms: u64,
    pub told: bool,
}

/// Per-sender message counters: bursts of up to `per_hour` messages, then one every
/// `3600 / per_hour` seconds. At most [`MAX_TRACKED`] senders are tracked.
///
/// Why a token bucket (GCRA) rather than a sliding log: one number per sender however high the
/// limit, which the chip can afford too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimiter {
    buckets: BTreeMap<String, Bucket>,
    /// Every reply to a stranger, all senders together ([`STRANGER_REPLIES_PER_HOUR`]).
    #[serde(default)]
    strangers: Option<Bucket>,
}

impl RateLimiter {
    /// Senders tracked now (never more than [`MAX_TRACKED`]).
    pub fn tracked(&self) -> usize {
        self.buckets.len()
    }

    /// Counts one message of `channel`/`sender` against `per_hour` (0: no limit) and returns
    /// the final verdict: `verdict` itself, or `RateLimited` the first time over the limit and
    /// `Silent` after. `Denied` messages are not counted; `NewCode` is counted but always
    /// delivered, so a stranger learns the code it was given.
    ///
    /// A reply to a stranger (`StillPending`, `TooManyPending`, `RateLimited`) also counts
    /// against [`STRANGER_REPLIES_PER_HOUR`], whatever `per_hour` is; over it, `Silent`.
    pub fn limit(&mut self, verdict: Admission, per_hour: u32, channel: &str, sender: &str, now: u64) -> Admission {
        if matches!(verdict, Admission::Denied) {
            return verdict;
        }
        let verdict = match per_hour {
            0 => verdict,
            _ => match self.hit(per_hour, channel, sender, now) {
                Ok(()) => verdict,
                Err(_) if matches!(verdict, Admission::NewCode { .. }) => verdict,
                Err(limited) => limited,
            },
        };
        match verdict {
            Admission::StillPending { .. } | Admission::TooManyPending | Admission::RateLimited { .. } => {
                if self.stranger_reply(now) { verdict } else { Admission::Silent }
            }
            other => other,
        }
    }

    /// Counts one reply to a stranger outside pairing (`/whoami`): `Allowed` to send it,
    /// `RateLimited` once over the sender's `per_hour`, `Silent` after that or when
    /// [`STRANGER_REPLIES_PER_HOUR`] is spent.
    pub fn reply_to_stranger(&mut self, per_hour: u32, channel: &str, sender: &str, now: u64) -> Admission {
        let verdict = match per_hour {
            0 => Admission::Allowed,
            _ => self.hit(per_hour, channel, sender, now).map_or_else(|limited| limited, |()| Admission::Allowed),
        };
        match verdict {
            Admission::Allowed | Admission::RateLimited { .. } if !self.stranger_reply(now) => Admission::Silent,
            other => other,
        }
    }

    /// Takes one reply from the budget shared by all strangers; `false` when it is spent.
    fn stranger_reply(&mut self, now: u64) -> bool {
        let bucket = self.strangers.get_or_insert(Bucket { tat_ms: 0, told: false });
        gcra(bucket, STRANGER_REPLIES_PER_HOUR, now.saturating_mul(1000)).is_ok()
    }

    fn hit(&mut self, per_hour: u32, channel: &str, sender: &str, now: u64) -> Result<(), Admission> {
        let now_ms = now.saturating_mul(1000);
        let key = format!("{channel}\n{sender}");
        if !self.buckets.contains_key(&key) && self.buckets.len() >= MAX_TRACKED {
            self.evict(now_ms);
        }
        let bucket = self.buckets.entry(key).or_insert(Bucket { tat_ms: now_ms, told: false });
        gcra(bucket, per_hour, now_ms)
    }

    /// Makes room for one more sender: forgets every full bucket (the same as not tracked), or
    /// if there is none, the one closest to full.
    fn evict(&mut self, now_ms: u64) {
        self.buckets.retain(|_, b| b.tat_ms > now_ms);
        if self.buckets.len() >= MAX_TRACKED
            && let Some(key) = self.buckets.iter().min_by_key(|(_, b)| b.tat_ms).map(|(k, _)| k.clone())
        {
            self.buckets.remove(&key);
        }
    }
}

/// One message through `bucket` at `now_ms`, `per_hour` (not 0) a burst and an hour's rate:
/// `RateLimited` the first time over, `Silent` after.
fn gcra(bucket: &mut Bucket, per_hour: u32, now_ms: u64) -> Result<(), Admission> {
    const HOUR_MS: u64 = 3_600_000;
    let interval = (HOUR_MS / u64::from(per_hour.max(1))).max(1);
    let window = interval.saturating_mul(u64::from(per_hour.max(1)));
    let next = bucket.tat_ms.max(now_ms).saturating_add(interval);
    if next - now_ms > window {
        let wait_ms = next - now_ms - window;
        if bucket.told {
            return Err(Admission::Silent);
        }
        bucket.told = true;
        return Err(Admission::RateLimited { retry_after_secs: wait_ms.div_ceil(1000).max(1) });
    }
    *bucket = Bucket { tat_ms: next, told: false };
    Ok(())
}

/// One message's request to [`admit`].
#[derive(Clone, Copy, Debug)]
pub struct Request<'a, S> {
    pub channel: &'a str,
    pub sender: &'a str,
    /// The channel's `allow_from` setting.
    pub allow_from: &'a [S],
    /// `access.rate_per_hour`; 0 turns the limit off.
    pub rate_per_hour: u32,
    /// Unix seconds.
    pub now: u64,
    /// Cryptographically random bytes, used only when a code is issued.
    pub random: [u8; CODE_LEN],
}

/// The whole decision for one message: pairing, then the rate limit. A driver that persists
/// `state` when the result is `NewCode` needs nothing else.
pub fn admit<S: AsRef<str>>(state: &mut AccessState, rate: &mut RateLimiter, req: &Request<'_, S>) -> Admission {
    let verdict = state.pairing(req.allow_from, req.channel, req.sender, req.now, req.random);
    rate.limit(verdict, req.rate_per_hour, req.channel, req.sender, req.now)
}

#[cfg(test)]
mod tests;
