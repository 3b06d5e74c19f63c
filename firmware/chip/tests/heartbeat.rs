//! The chip's heartbeat: the core's actionable-item rule over `HEARTBEAT.md` in flash, the
//! interval, and the active hours (UTC on the chip).

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;

use chela_chip::console;
use chela_chip::cron::Route;
use chela_chip::heartbeat::{self, Beat, Heartbeat};
use chela_chip::turn::Chip;
use chela_chip::{Board, boot};
use chela_core::console::{ChipConfig, ChipDefaults, Field};
use chela_core::flash::RamFlash;
use chela_core::heartbeat::ActiveHours;

/// 2026-12-03T12:00:00Z.
const NOON: u64 = 1_796_299_200;

#[derive(Clone, Default)]
struct Clock {
    ms: Rc<Cell<u64>>,
    unix: Rc<Cell<Option<u64>>>,
}

impl Board for Clock {
    fn now_ms(&self) -> u64 {
        self.ms.get()
    }
    fn unix(&self) -> Option<u64> {
        self.unix.get()
    }
    fn print(&self, _: fmt::Arguments<'_>) {}
}

fn chip() -> (Chip<RamFlash, Clock>, Clock) {
    let clock = Clock::default();
    (boot::power_on(RamFlash::new(4096, 8), clock.clone(), 1, ChipDefaults::default()).unwrap(), clock)
}

#[test]
fn open_items_become_the_prompt_when_due() {
    let (mut chip, clock) = chip();
    let mut hb = Heartbeat::new(1000, ActiveHours::ALWAYS, 0);
    assert_eq!(hb.poll(&chip).unwrap(), Beat::NotYet);
    clock.ms.set(1000);
    // No file yet: nothing to do.
    assert_eq!(hb.poll(&chip).unwrap(), Beat::Nothing);
    assert_eq!(hb.next_ms(), 2000);
    heartbeat::write(&mut chip.store, "# Heartbeat\n- [x] done\n- [ ] water the plants\n\nCall Ana\n").unwrap();
    clock.ms.set(1500);
    assert_eq!(hb.poll(&chip).unwrap(), Beat::NotYet);
    clock.ms.set(2500);
    let Beat::Prompt(p) = hb.poll(&chip).unwrap() else { panic!("no prompt") };
    assert!(p.starts_with("[Heartbeat] HEARTBEAT.md has these open items."), "{p}");
    assert!(p.ends_with("- [ ] water the plants\nCall Ana\n"), "{p}");
    assert!(!p.contains("- [x]"), "{p}");
    // The next beat is one interval after this one, not after the missed ones.
    assert_eq!(hb.next_ms(), 3500);
    // Everything checked: nothing.
    heartbeat::write(&mut chip.store, "- [x] water the plants\n").unwrap();
    clock.ms.set(3500);
    assert_eq!(hb.poll(&chip).unwrap(), Beat::Nothing);
}

#[test]
fn active_hours_are_utc_and_need_the_clock() {
    let (mut chip, clock) = chip();
    heartbeat::write(&mut chip.store, "do it\n").unwrap();
    let mut hb = Heartbeat::new(1, ActiveHours::parse("08:00-11:00").unwrap(), 0);
    clock.ms.set(1);
    // Hours set but no SNTP answer yet: skipped, never run blind.
    assert_eq!(hb.poll(&chip).unwrap(), Beat::Outside);
    clock.unix.set(Some(NOON));
    clock.ms.set(2);
    assert_eq!(hb.poll(&chip).unwrap(), Beat::Outside);
    clock.unix.set(Some(NOON - 2 * 3600));
    clock.ms.set(3);
    assert!(matches!(hb.poll(&chip).unwrap(), Beat::Prompt(_)));
}

#[test]
fn the_file_is_bounded_and_survives_a_reboot() {
    let (mut chip, _) = chip();
    let big = "a".repeat(heartbeat::MAX_BYTES + 1);
    assert!(heartbeat::write(&mut chip.store, &big).unwrap_err().contains("at most"));
    heartbeat::write(&mut chip.store, "- [ ] feed the cat\n").unwrap();
    heartbeat::write(&mut chip.store, "- [ ] feed the dog\n").unwrap();
    let (flash, board, seed) = boot::power_off(chip);
    let chip = boot::power_on(flash, board, seed, ChipDefaults::default()).unwrap();
    assert_eq!(heartbeat::read(&chip.store).unwrap(), "- [ ] feed the dog\n");
}

fn config(settings: &[(Field, &str)]) -> ChipConfig {
    let mut config = ChipConfig::new(ChipDefaults::default());
    for (f, v) in [(Field::WifiSsid, "home"), (Field::ApiKey, "sk-test")].iter().chain(settings) {
        config.set(*f, v).unwrap();
    }
    config
}

fn target(config: &ChipConfig, feishu_built: bool) -> Result<Route, String> {
    heartbeat::target(config, console::channels(config, true).unwrap(), feishu_built)
}

#[test]
fn the_beat_talks_to_the_owner_of_the_chat_channel_in_use() {
    let tg = [(Field::TgToken, "123:abc"), (Field::TgAllow, "42,7")];
    assert_eq!(target(&config(&tg), true), Ok(Route::Telegram(42)));
    // Feishu in use: its owner (the first of feishu_allow), never Telegram's, though set.
    let fs = [
        (Field::FeishuAppId, "cli_a5f0"),
        (Field::FeishuSecret, "Xk9vQ2mPz7LrT4bW"),
        (Field::FeishuAllow, "ou_owner,ou_friend"),
        (Field::Channel, "feishu"),
    ];
    let both = config(&[&tg[..], &fs].concat());
    assert_eq!(target(&both, true), Ok(Route::Feishu("ou_owner".into())));
    let e = target(&both, false).unwrap_err();
    assert!(e.starts_with("no owner chat: ") && e.contains("this image leaves out"), "{e}");
    // The gateway alone: no owner chat, said; Feishu chosen but without its allowlist: the same.
    let gw = (Field::GatewayToken, "0123456789abcdef0123456789abcdef");
    assert_eq!(target(&config(&[gw]), true), Err("no owner chat: tg_allow is empty".into()));
    let half = config(&[gw, (Field::FeishuAppId, "cli_a5f0"), (Field::FeishuSecret, "x"), (Field::Channel, "feishu")]);
    assert_eq!(target(&half, true), Err("no owner chat: feishu_allow is empty".into()));
}
