//! The chip's heartbeat: every so often, `HEARTBEAT.md` in the flash store is read and, inside
//! the active hours, its open items (the core's rule, `chela_core::heartbeat`, the host's
//! too) become a turn with the core's prompt. The file is written from the serial console
//! (`heartbeat_write`). The chip knows only UTC, so its active hours
//! are UTC hours. The turn runs in the owner's chat on the chat channel in use ([`target`]).

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
use crate::turn::Chip;

/// The file's key in the flash store.
pub const FILE: &str = chela_core::console::HEARTBEAT_FILE;
/// The most of it read: the chip's turn budget, not the host's 64 KiB.
pub const MAX_BYTES: usize = 4096;
/// MimiClaw's interval.
pub const EVERY_MS: u64 = 30 * 60 * 1000;

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
/// `feishu_allow` with `channel feishu` (the bot's chat with that user), else the first of
/// `tg_allow`; `Err` says why there is none (the console's line). Never another channel's
/// owner: with Feishu in use, Telegram's owner is not written to, and the other way round.
pub fn target(config: &ChipConfig, on: Channels, feishu_built: bool) -> Result<Route, String> {
    let (channel, allow) = if config.get(Field::Channel) == "feishu" {
        ("feishu", Field::FeishuAllow)
    } else {
        ("telegram", Field::TgAllow)
    };
    let owner = config.get(allow).split(',').next().unwrap_or_default().trim();
    if owner.is_empty() {
        return Err(format!("no owner chat: {} is empty", allow.name()));
    }
    route(channel, owner, config, on, feishu_built).map_err(|e| format!("no owner chat: {e}"))
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
