//! The chip's heartbeat: the core's actionable-item rule over `HEARTBEAT.md` in flash, the
//! interval, and the active hours (UTC on the chip).

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;

use chela_chip::console;
use chela_chip::cron::Route;
use chela_chip::feishu::conn::Incoming;
use chela_chip::heartbeat::{self, Beat, Heartbeat};
use chela_chip::turn::Chip;
use chela_chip::{Board, boot};
use chela_core::console::{ChipConfig, ChipDefaults, Field};
use chela_core::flash::RamFlash;
use chela_core::heartbeat::ActiveHours;
use chela_core::storage::Storage;

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
    let (chip, _) = chip();
    heartbeat::target(config, console::channels(config, true).unwrap(), feishu_built, &chip.store)
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

const FEISHU: [(Field, &str); 4] = [
    (Field::FeishuAppId, "cli_a5f0"),
    (Field::FeishuSecret, "Xk9vQ2mPz7LrT4bW"),
    (Field::FeishuAllow, "ou_owner,ou_friend"),
    (Field::Channel, "feishu"),
];

fn message(sender: &str, chat_id: &str, direct: bool) -> Incoming {
    Incoming { sender: sender.into(), chat_id: chat_id.into(), text: "hi".into(), direct }
}

#[test]
fn the_feishu_beat_runs_in_the_session_of_the_owners_direct_chat() {
    let (mut chip, _) = chip();
    let fs = config(&FEISHU);
    let on = console::channels(&fs, true).unwrap();
    let beat = |chip: &Chip<RamFlash, Clock>, config: &ChipConfig| heartbeat::target(config, on, true, &chip.store);
    // Before the owner wrote: the bot's chat with the user, by open_id.
    assert_eq!(beat(&chip, &fs), Ok(Route::Feishu("ou_owner".into())));
    // Neither a group message of the owner's, nor another user's direct chat, is taken for it;
    // nor a chat id the chip would not keep.
    let long = format!("oc_{}", "a".repeat(heartbeat::MAX_CHAT_ID));
    for m in [
        message("ou_owner", "oc_group", false),
        message("ou_friend", "oc_friend_dm", true),
        message("ou_owner", "oc_a/b", true),
        message("ou_owner", &long, true),
        message("ou_owner", "ou_owner", true),
    ] {
        assert_eq!(heartbeat::note_owner_chat(&mut chip.store, &fs, &m), Ok(false), "{m:?}");
    }
    assert_eq!(beat(&chip, &fs), Ok(Route::Feishu("ou_owner".into())));
    // The owner's direct message: kept, once (the same chat again writes nothing).
    let dm = message("ou_owner", "oc_dm", true);
    assert_eq!(heartbeat::note_owner_chat(&mut chip.store, &fs, &dm), Ok(true));
    assert_eq!(heartbeat::note_owner_chat(&mut chip.store, &fs, &dm), Ok(false));
    let route = beat(&chip, &fs).unwrap();
    assert_eq!(route, Route::Feishu("oc_dm".into()));
    // The beat's turn and the owner's messages share one session.
    assert_eq!(route.session(), boot::session_key("feishu", &dm.chat_id));
    assert_eq!(route.session(), "feishu_oc_dm");

    // Kept across a power cycle.
    let (flash, board, seed) = boot::power_off(chip);
    let mut chip = boot::power_on(flash, board, seed, ChipDefaults::default()).unwrap();
    assert_eq!(beat(&chip, &fs), Ok(Route::Feishu("oc_dm".into())));
    // Another owner: not the old owner's chat; theirs until they write.
    let friend_first = config(&[&FEISHU[..], &[(Field::FeishuAllow, "ou_friend,ou_owner")]].concat());
    assert_eq!(beat(&chip, &friend_first), Ok(Route::Feishu("ou_friend".into())));
    // The owner off feishu_allow altogether: no chat of theirs is written to.
    let gone = config(&[&FEISHU[..], &[(Field::FeishuAllow, "ou_friend")]].concat());
    assert_eq!(beat(&chip, &gone), Ok(Route::Feishu("ou_friend".into())));
    // A damaged record is not used.
    Storage::replace(&mut chip.store, heartbeat::OWNER_CHAT_KEY, b"ou_owner\noc_../x").unwrap();
    assert_eq!(beat(&chip, &fs), Ok(Route::Feishu("ou_owner".into())));
    // Telegram in use: its owner, whatever Feishu kept.
    let tg = config(&[(Field::TgToken, "123:abc"), (Field::TgAllow, "42,7")]);
    let on_tg = console::channels(&tg, true).unwrap();
    let route = heartbeat::target(&tg, on_tg, true, &chip.store).unwrap();
    assert_eq!((route.session(), heartbeat::owner(&tg)), ("tg_42".into(), "42"));
    assert_eq!(heartbeat::owner(&fs), "ou_owner");
}
