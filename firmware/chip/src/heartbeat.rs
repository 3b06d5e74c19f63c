//! The chip's heartbeat: every so often, `HEARTBEAT.md` in the flash store is read and, inside
//! the active hours, its open items (the core's rule, `chela_core::heartbeat`, the host's
//! too) become a turn with the core's prompt. The file is written from the serial console
//! (`heartbeat_write`). The chip knows only UTC, so its active hours
//! are UTC hours. The turn runs in the owner's chat on the chat channel in use ([`target`]):
//! on Feishu, the owner's direct chat with the bot, in the session their own messages use
//! (the chat's id is learnt from their first direct message: [`note_owner_chat`]).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::ControlFlow;

use chela_core::console::{ChipConfig, Field};
use chela_core::flash::{self, Flash, FlashStore, Order};
use chela_core::heartbeat::{ActiveHours, actionable_items, prompt};
use chela_core::storage::Storage;
use chela_core::zone::Zone;

use crate::Board;
use crate::console::Channels;
use crate::cron::{Route, route};
use crate::feishu::conn::Incoming;
use crate::turn::Chip;

/// The file's key in the flash store.
pub const FILE: &str = chela_core::console::HEARTBEAT_FILE;
/// The most of it read: the chip's turn budget, not the host's 64 KiB.
pub const MAX_BYTES: usize = 4096;
/// MimiClaw's interval.
pub const EVERY_MS: u64 = 30 * 60 * 1000;
/// The store key of the Feishu owner's direct chat with the bot (under `chip/`: not a chat
/// session): `OWNER_OPEN_ID\nCHAT_ID`.
pub const OWNER_CHAT_KEY: &str = "chip/feishu_owner_chat";
/// The longest chat id kept there.
pub const MAX_CHAT_ID: usize = 64;

/// What a heartbeat poll found.
#[derive(Debug, PartialEq, Eq)]
pub enum Beat {
    /// Not due yet.
    NotYet,
    /// Due, but outside the active hours (or, with hours set, before the clock is known).
    Outside,
    /// Due, and the file has no open items.
    Nothing,
    /// Due: run a turn with this prompt.
    Prompt(String),
}

/// The heartbeat's timer and window.
#[derive(Debug)]
pub struct Heartbeat {
    every_ms: u64,
    hours: ActiveHours,
    next_ms: u64,
}

impl Heartbeat {
    /// The first beat is `every_ms` after `now_ms` (boot), as on the host.
    pub fn new(every_ms: u64, hours: ActiveHours, now_ms: u64) -> Heartbeat {
        Heartbeat { every_ms: every_ms.max(1), hours, next_ms: now_ms.saturating_add(every_ms) }
    }

    /// When the next beat is due (the board's `now_ms`).
    pub fn next_ms(&self) -> u64 {
        self.next_ms
    }

    /// Whether a beat is due now and what it asks for; a due beat arms the next one.
    pub fn poll<F: Flash, B: Board>(&mut self, chip: &Chip<F, B>) -> Result<Beat, String> {
        let now_ms = chip.board.now_ms();
        if now_ms < self.next_ms {
            return Ok(Beat::NotYet);
        }
        self.next_ms = now_ms.saturating_add(self.every_ms);
        if self.hours != ActiveHours::ALWAYS {
            let Some(unix) = chip.board.unix() else { return Ok(Beat::Outside) };
            if !self.hours.contains(unix as i64, &Zone::utc()) {
                return Ok(Beat::Outside);
            }
        }
        let text = read(&chip.store)?;
        let items = actionable_items(&text);
        Ok(if items.is_empty() { Beat::Nothing } else { Beat::Prompt(prompt(&items, false)) })
    }
}

/// Where the heartbeat's turn runs: the owner's chat on the chat channel in use, the first of
/// `feishu_allow` with `channel feishu` (the bot's direct chat with that user: its `oc_…` id
/// once the owner wrote there, [`note_owner_chat`], so the beat shares that conversation's
/// session; the user's `ou_…` until then), else the first of `tg_allow`; `Err` says why there
/// is none (the console's line). Never another channel's owner: with Feishu in use,
/// Telegram's owner is not written to, and the other way round.
pub fn target<F: Flash>(
    config: &ChipConfig,
    on: Channels,
    feishu_built: bool,
    store: &FlashStore<F>,
) -> Result<Route, String> {
    let (channel, allow) = owner_list(config);
    let owner = owner(config);
    if owner.is_empty() {
        return Err(format!("no owner chat: {} is empty", allow.name()));
    }
    match route(channel, owner, config, on, feishu_built) {
        Ok(Route::Feishu(_)) if let Some(chat) = owner_chat(store, owner) => Ok(Route::Feishu(chat)),
        r => r.map_err(|e| format!("no owner chat: {e}")),
    }
}

/// The chat channel in use and its allowlist, whose first entry is the owner.
fn owner_list(config: &ChipConfig) -> (&'static str, Field) {
    if config.get(Field::Channel) == "feishu" { ("feishu", Field::FeishuAllow) } else { ("telegram", Field::TgAllow) }
}

/// The owner on the chat channel in use: the first of its allowlist (`feishu_allow` with
/// `channel feishu`, else `tg_allow`), empty when there is none. The heartbeat's turn runs for
/// them (a job it adds is theirs).
pub fn owner(config: &ChipConfig) -> &str {
    config.get(owner_list(config).1).split(',').next().unwrap_or_default().trim()
}

/// Remembers the chat of a Feishu message as the owner's direct chat when it is one: sent by
/// the owner (the first of `feishu_allow`) in their direct chat with the bot (never a group).
/// Written to flash only when it changes; `Ok(true)` when it was.
pub fn note_owner_chat<F: Flash>(
    store: &mut FlashStore<F>,
    config: &ChipConfig,
    message: &Incoming,
) -> Result<bool, String> {
    let owner = config.get(Field::FeishuAllow).split(',').next().unwrap_or_default().trim();
    if !message.direct || owner.is_empty() || message.sender != owner || !chat_id_ok(&message.chat_id) {
        return Ok(false);
    }
    if owner_chat(store, owner).as_deref() == Some(message.chat_id.as_str()) {
        return Ok(false);
    }
    let record = format!("{owner}\n{}", message.chat_id);
    Storage::replace(store, OWNER_CHAT_KEY, record.as_bytes())
        .map(|()| true)
        .map_err(|e| format!("the owner's chat was not kept: {e}"))
}

/// The direct chat kept for `owner`, if it is still the owner's (another owner's is not used).
fn owner_chat<F: Flash>(store: &FlashStore<F>, owner: &str) -> Option<String> {
    let mut record = Vec::new();
    store
        .read(OWNER_CHAT_KEY, Order::OldestFirst, &mut |r| {
            record.clear();
            record.extend_from_slice(r.payload);
            ControlFlow::Continue(())
        })
        .ok()?;
    let (who, chat) = core::str::from_utf8(&record).ok()?.split_once('\n')?;
    (who == owner && chat_id_ok(chat)).then(|| chat.into())
}

/// A Feishu chat id as the chip keeps one: `oc_` and letters, digits, `_` or `-`, bounded.
fn chat_id_ok(id: &str) -> bool {
    id.len() <= MAX_CHAT_ID
        && id.starts_with("oc_")
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `HEARTBEAT.md` as stored, at most [`MAX_BYTES`] of it (cut at a character).
pub fn read<F: Flash>(store: &FlashStore<F>) -> Result<String, String> {
    let mut content = Vec::new();
    store
        .read(FILE, Order::OldestFirst, &mut |r| {
            // A replace starts the file again; appended lines (none are written here) follow.
            if r.kind == flash::Kind::Replace {
                content.clear();
            }
            if content.len() < MAX_BYTES {
                content.extend_from_slice(r.payload);
                if r.kind != flash::Kind::Replace {
                    content.push(b'\n');
                }
            }
            ControlFlow::Continue(())
        })
        .map_err(|e| alloc::format!("HEARTBEAT.md could not be read: {e}"))?;
    content.truncate(MAX_BYTES);
    let text = String::from_utf8_lossy(&content);
    // A cut inside a character leaves a replacement character at the end: drop it.
    Ok(String::from(text.trim_end_matches('\u{FFFD}')))
}

/// Replaces `HEARTBEAT.md`, atomically; refused over [`MAX_BYTES`].
pub fn write<F: Flash>(store: &mut FlashStore<F>, text: &str) -> Result<(), String> {
    if text.len() > MAX_BYTES {
        return Err(alloc::format!("HEARTBEAT.md holds at most {MAX_BYTES} bytes on this device"));
    }
    Storage::replace(store, FILE, text.as_bytes()).map_err(|e| alloc::format!("HEARTBEAT.md was not written: {e}"))
}
