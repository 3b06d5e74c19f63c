//! Power on and off: the chip's state that survives a reboot is what is in flash. Booting
//! scans the partition with the core's flash store, loads the memory entries and a session's
//! history from it; powering off keeps only the flash.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::ops::ControlFlow;

use chela_core::console::{BootGuard, BootMode, BootPolicy, ChipConfig, ChipDefaults};
use chela_core::flash::{Flash, FlashStore};
use chela_core::memory::Entries;
use chela_core::session::{self, Budget};
use chela_core::storage::Storage;
use chela_proto::chat::Message;

use crate::tools::ENTRIES;
use crate::turn::{Chip, HISTORY_BYTES, Turn};
use crate::{Board, say};

/// Boots on `flash`: scans it, counts the boot (safe mode after a crash loop: the core's
/// `console::BootGuard`), loads the settings (`defaults` are the build's, overridden by what
/// the serial console stored) and the memory entries.
pub fn power_on<F: Flash, B: Board>(
    flash: F,
    board: B,
    seed: u64,
    defaults: ChipDefaults,
) -> Result<Chip<F, B>, String> {
    let mut store = FlashStore::open(flash).map_err(|e| alloc::format!("the flash store did not open: {e}"))?;
    let guard = BootGuard::boot(&mut store, BootPolicy::default())
        .map_err(|e| alloc::format!("the boot counter could not be written: {e}"))?;
    let (config, report) =
        ChipConfig::load(&store, defaults).map_err(|e| alloc::format!("the settings could not be read: {e}"))?;
    if let BootMode::Safe { quick_resets } = guard.mode() {
        say!(&board, "[boot] safe mode: {quick_resets} quick resets in a row; channels stay off");
    }
    if report.loaded > 0 || report.skipped > 0 {
        say!(&board, "[boot] settings: {} from flash, {} unreadable skipped", report.loaded, report.skipped);
    }
    let s = store.stats();
    say!(
        &board,
        "[boot] flash: {} sectors of {} B, {} records ({} B), {} corrupt skipped, {} sectors repaired",
        s.sectors,
        s.sector_size,
        s.records,
        s.record_bytes,
        s.corrupt,
        s.repaired
    );
    // Entries are one replacement record, newest line last; read back to front.
    let mut lines: Vec<String> = Vec::new();
    store
        .read_newest_first(ENTRIES, &mut |l| {
            lines.push(String::from_utf8_lossy(l.bytes).into_owned());
            ControlFlow::Continue(())
        })
        .map_err(|e| alloc::format!("the memory entries could not be read: {e}"))?;
    lines.reverse();
    let (entries, skipped) = Entries::parse(&lines.join("\n"));
    if skipped > 0 {
        say!(&board, "[boot] {skipped} unreadable memory lines skipped");
    }
    Ok(Chip { store, entries, board, seed, last_answer_bytes: 0, config, guard })
}

/// Powers off: everything but the flash is lost.
pub fn power_off<F: Flash, B: Board>(chip: Chip<F, B>) -> (F, B, u64) {
    (chip.store.into_flash(), chip.board, chip.seed)
}

/// The session (flash key) of `chat_id` on `channel`: `tg_…` for Telegram, `feishu_…`, `ws_…`.
/// A turn for a message and one the device starts itself in the same chat share it.
pub fn session_key(channel: &str, chat_id: &str) -> String {
    let prefix = if channel == "telegram" { "tg" } else { channel };
    alloc::format!("{prefix}_{chat_id}")
}

/// The history of session `name` as a turn starts with it, and the lines skipped as unreadable.
pub fn history<F: Flash, B: Board>(chip: &Chip<F, B>, name: &str) -> Result<(Vec<Message>, usize), String> {
    let loaded = session::load(&chip.store, name, Budget { bytes: HISTORY_BYTES, max_read: 4 * HISTORY_BYTES as u64 })
        .map_err(|e| alloc::format!("the session could not be read: {e}"))?;
    Ok((loaded.messages, loaded.skipped_lines + usize::from(loaded.torn_tail)))
}

/// Appends the turn's messages to session `name`, durably.
pub fn persist<F: Flash, B: Board>(chip: &mut Chip<F, B>, name: &str, turn: &Turn) -> Result<(), String> {
    let ts = chip.board.unix().unwrap_or(0);
    session::append_turn(&mut chip.store, name, &turn.messages, ts).map_err(|e| e.to_string())
}
