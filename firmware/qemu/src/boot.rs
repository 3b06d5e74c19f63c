//! Power on and off: the chip's state that survives a reboot is what is in flash. Booting
//! scans the partition with the core's flash store, loads the memory entries and the session's
//! history from it; powering off keeps only the flash.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::ops::ControlFlow;

use chela_core::console::{BootGuard, BootMode, BootPolicy, ChipConfig, ChipDefaults};
use chela_core::flash::{FlashStore, RamFlash};
use chela_core::memory::Entries;
use chela_core::session::{self, Budget};
use chela_core::storage::Storage;
use chela_proto::chat::Message;

use crate::clock::Clock;
use crate::println;
use crate::turn::{Chip, ENTRIES, Turn};

/// The serial console's session.
pub const SESSION: &str = "serial_console.jsonl";

/// History bytes loaded for a turn: the same as the turn's history budget.
const HISTORY_BYTES: usize = 16 * 1024;

/// The build's settings: from the environment at build time (`build.rs` rebuilds when they
/// change), else the emulator's own. The console's overrides in flash win over them.
pub const DEFAULTS: ChipDefaults = ChipDefaults {
    wifi_ssid: env_or(option_env!("CHELA_WIFI_SSID"), "Build Default Net"),
    wifi_password: env_or(option_env!("CHELA_WIFI_PASSWORD"), ""),
    tg_token: env_or(option_env!("CHELA_TG_TOKEN"), ""),
    tg_allow: env_or(option_env!("CHELA_TG_ALLOW"), ""),
    provider: env_or(option_env!("CHELA_PROVIDER"), "anthropic"),
    api_key: env_or(option_env!("CHELA_API_KEY"), ""),
    model: env_or(option_env!("CHELA_MODEL"), ""),
    base_url: env_or(option_env!("CHELA_BASE_URL"), ""),
};

const fn env_or(v: Option<&'static str>, or: &'static str) -> &'static str {
    match v {
        Some(v) => v,
        None => or,
    }
}

/// Boots on `flash`: scans it, counts the boot (safe mode after a crash loop), loads the
/// settings and the memory entries.
pub fn power_on(flash: RamFlash, clock: Clock, seed: u64) -> Result<Chip, String> {
    let mut store = FlashStore::open(flash).map_err(|e| alloc::format!("the flash store did not open: {e}"))?;
    let guard = BootGuard::boot(&mut store, BootPolicy::default())
        .map_err(|e| alloc::format!("the boot counter could not be written: {e}"))?;
    let (config, report) =
        ChipConfig::load(&store, DEFAULTS).map_err(|e| alloc::format!("the settings could not be read: {e}"))?;
    if let BootMode::Safe { quick_resets } = guard.mode() {
        println!("[boot] safe mode: {quick_resets} quick resets in a row; channels stay off");
    }
    if report.loaded > 0 || report.skipped > 0 {
        println!("[boot] settings: {} from flash, {} unreadable skipped", report.loaded, report.skipped);
    }
    let s = store.stats();
    println!(
        "[boot] flash: {} sectors of {} B, {} records ({} B), {} corrupt skipped, {} sectors repaired",
        s.sectors, s.sector_size, s.records, s.record_bytes, s.corrupt, s.repaired
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
        println!("[boot] {skipped} unreadable memory lines skipped");
    }
    Ok(Chip { store, entries, clock, seed, last_answer_bytes: 0, config, guard })
}

/// Powers off: everything but the flash (and the time, which SNTP would give again) is lost.
pub fn power_off(chip: Chip) -> (RamFlash, Clock, u64) {
    (chip.store.into_flash(), chip.clock, chip.seed)
}

/// The session's history as a turn starts with it.
pub fn history(chip: &Chip) -> Result<Vec<Message>, String> {
    let loaded =
        session::load(&chip.store, SESSION, Budget { bytes: HISTORY_BYTES, max_read: 4 * HISTORY_BYTES as u64 })
            .map_err(|e| alloc::format!("the session could not be read: {e}"))?;
    if loaded.skipped_lines > 0 || loaded.torn_tail {
        return Err(alloc::format!("the session has {} unreadable lines", loaded.skipped_lines));
    }
    Ok(loaded.messages)
}

/// Appends the turn's messages to the session, durably.
pub fn persist(chip: &mut Chip, turn: &Turn) -> Result<(), String> {
    let ts = chip.clock.unix();
    session::append_turn(&mut chip.store, SESSION, &turn.messages, ts).map_err(|e| e.to_string())
}
