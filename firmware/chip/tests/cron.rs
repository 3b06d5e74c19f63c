//! Cron on the chip, on the host: the tools, the jobs in flash across power cycles, the due
//! rule (the core's schedule maths) and the bad input the model or the flash can give.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;

use chela_chip::console;
use chela_chip::cron::{self, CRON_KEY, Cron, Fired, MAX_JOBS, Route};
use chela_chip::tools::{Join, Toolbox};
use chela_chip::turn::Chip;
use chela_chip::{Board, boot};
use chela_core::console::{ChipConfig, ChipDefaults, Field};
use chela_core::flash::RamFlash;
use chela_core::router::MadeBy;
use chela_proto::chat::ToolSpec;

/// 2026-12-03T12:00:00+00:00.
const NOON: u64 = 1_796_299_200;

#[derive(Clone, Default)]
struct Clock {
    unix: Rc<Cell<Option<u64>>>,
    out: Rc<RefCell<String>>,
}

impl Board for Clock {
    fn now_ms(&self) -> u64 {
        0
    }
    fn unix(&self) -> Option<u64> {
        self.unix.get()
    }
    fn print(&self, args: fmt::Arguments<'_>) {
        self.out.borrow_mut().push_str(&args.to_string());
    }
}

fn chip(at: Option<u64>) -> (Chip<RamFlash, Clock>, Clock) {
    let clock = Clock::default();
    clock.unix.set(at);
    let chip = boot::power_on(RamFlash::new(4096, 8), clock.clone(), 1, ChipDefaults::default()).unwrap();
    (chip, clock)
}

fn reboot(chip: Chip<RamFlash, Clock>) -> Chip<RamFlash, Clock> {
    let (flash, board, seed) = boot::power_off(chip);
    boot::power_on(flash, board, seed, ChipDefaults::default()).unwrap()
}

fn call(cron: &mut Cron, chip: &mut Chip<RamFlash, Clock>, name: &str, input: &str) -> Result<String, String> {
    Toolbox::run(cron, chip, name, input).expect("a cron tool")
}

fn fired(id: &str, message: &str) -> Fired {
    Fired { id: id.into(), message: message.into(), channel: "telegram".into(), chat_id: "42".into(), made_by: None }
}

#[test]
fn an_interval_job_fires_each_period_and_survives_a_reboot() {
    let (mut chip, clock) = chip(Some(NOON));
    let (mut cron, bad) = Cron::load(&chip);
    assert!(cron.is_empty() && bad.is_empty());
    cron.set_origin("telegram", "42", "42");
    let out = call(&mut cron, &mut chip, "cron_add", r#"{"message":"water the plants","every_s":3600}"#).unwrap();
    assert_eq!(out, "Scheduled job-1; next run 2026-12-03T13:00:00+00:00.");
    assert_eq!(cron.next_in(NOON), Some(3600));

    clock.unix.set(Some(NOON + 3599));
    assert_eq!(cron.due(&mut chip), (vec![], None), "not before its time");
    clock.unix.set(Some(NOON + 3600));
    assert_eq!(cron.due(&mut chip), (vec![fired("job-1", "water the plants")], None));
    assert_eq!(cron.due(&mut chip), (vec![], None), "once per period");

    // Powered off and on: the job and its last run come back from flash.
    let chip = reboot(chip);
    let (mut cron, bad) = Cron::load(&chip);
    let mut chip = chip;
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(cron.len(), 1);
    assert_eq!(cron.due(&mut chip), (vec![], None), "the run before the reboot counts");
    clock.unix.set(Some(NOON + 7200));
    assert_eq!(cron.due(&mut chip).0, vec![fired("job-1", "water the plants")]);
    let listed = call(&mut cron, &mut chip, "cron_list", "{}").unwrap();
    assert_eq!(listed, "job-1: every 3600 s; next 2026-12-03T15:00:00+00:00; \"water the plants\"");
}

#[test]
fn a_one_shot_fires_once_and_is_gone() {
    let (mut chip, clock) = chip(Some(NOON));
    let (mut cron, _) = Cron::load(&chip);
    cron.set_origin("telegram", "42", "42");
    call(&mut cron, &mut chip, "cron_add", r#"{"message":"tea is ready","in_s":300}"#).unwrap();
    call(&mut cron, &mut chip, "cron_add", r#"{"message":"call mum","at":1796310000}"#).unwrap();
    assert_eq!(cron.len(), 2);
    clock.unix.set(Some(NOON + 301));
    assert_eq!(cron.due(&mut chip).0, vec![fired("job-1", "tea is ready")]);
    assert_eq!(cron.len(), 1, "a one-shot is removed once it ran");
    clock.unix.set(Some(1_796_310_000));
    assert_eq!(cron.due(&mut chip).0, vec![fired("job-2", "call mum")]);
    assert!(cron.is_empty());
    clock.unix.set(Some(1_796_310_000 + 86_400));
    assert_eq!(cron.due(&mut chip).0, vec![]);
    let chip = reboot(chip);
    assert!(Cron::load(&chip).0.is_empty(), "the removal reached flash");
}

#[test]
fn a_cron_expression_fires_at_its_utc_minute() {
    let (mut chip, clock) = chip(Some(NOON));
    let (mut cron, _) = Cron::load(&chip);
    cron.set_origin("serial", "console", "console");
    let out = call(&mut cron, &mut chip, "cron_add", r#"{"message":"morning report","cron":"30 8 * * 1-5"}"#).unwrap();
    // 2026-12-03 is a Thursday: the next weekday 08:30 UTC is Friday's.
    assert_eq!(out, "Scheduled job-1; next run 2026-12-04T08:30:00+00:00.");
    clock.unix.set(Some(NOON + 20 * 3600 + 29 * 60));
    assert!(cron.due(&mut chip).0.is_empty());
    clock.unix.set(Some(NOON + 20 * 3600 + 30 * 60 + 5));
    let f = cron.due(&mut chip).0;
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].channel.as_str(), f[0].chat_id.as_str()), ("serial", "console"));
}

#[test]
fn a_device_that_was_off_runs_a_missed_job_once_and_only_within_the_grace_window() {
    let (mut chip, clock) = chip(Some(NOON));
    let (mut cron, _) = Cron::load(&chip);
    cron.set_origin("telegram", "42", "42");
    call(&mut cron, &mut chip, "cron_add", r#"{"message":"hourly","every_s":3600}"#).unwrap();
    call(&mut cron, &mut chip, "cron_add", r#"{"message":"soon","in_s":60}"#).unwrap();
    // Off for five and a half hours: the hourly job missed five runs, runs once now (its last
    // instant is within the hour's grace); the one-shot is past the grace and never runs.
    let chip = reboot(chip);
    let mut chip = chip;
    let (mut cron, _) = Cron::load(&chip);
    clock.unix.set(Some(NOON + 5 * 3600 + 1800));
    assert_eq!(cron.due(&mut chip).0, vec![fired("job-1", "hourly")]);
    assert!(cron.due(&mut chip).0.is_empty());
}

#[test]
fn bad_requests_get_clear_refusals_and_change_nothing() {
    let (mut chip, clock) = chip(None);
    let (mut cron, _) = Cron::load(&chip);
    cron.set_origin("telegram", "42", "42");
    let e = call(&mut cron, &mut chip, "cron_add", r#"{"message":"x","every_s":600}"#).unwrap_err();
    assert!(e.contains("clock is not set"), "{e}");
    clock.unix.set(Some(NOON));
    for (input, want) in [
        (r#"{"message":"x","every_s":30}"#, "the shortest interval is 60 s"),
        (r#"{"message":"x","every_s":600,"in_s":5}"#, "exactly one of"),
        (r#"{"message":"x"}"#, "exactly one of"),
        (r#"{"message":"","in_s":5}"#, "1 to 1024 bytes"),
        (r#"{"message":"x","at":1}"#, "not in the future"),
        (r#"{"message":"x","cron":"61 * * * *"}"#, "trigger.expr"),
        (r#"{"message":"x","in_s":18446744073709551615}"#, "too large"),
        (r#"{"message":"x","in_s":5,"tz":"Europe/Paris"}"#, "schema"),
        ("not json", "schema"),
    ] {
        let e = call(&mut cron, &mut chip, "cron_add", input).unwrap_err();
        assert!(e.contains(want), "{input}: {e}");
    }
    let long = format!(r#"{{"message":"{}","in_s":5}}"#, "a".repeat(1025));
    assert!(call(&mut cron, &mut chip, "cron_add", &long).is_err());
    let e = call(&mut cron, &mut chip, "cron_remove", r#"{"id":"job-9"}"#).unwrap_err();
    assert!(e.contains("no job `job-9`"), "{e}");
    assert!(cron.is_empty());
    assert_eq!(call(&mut cron, &mut chip, "cron_list", "{}").unwrap(), "No jobs are scheduled.");

    for i in 0..MAX_JOBS {
        call(&mut cron, &mut chip, "cron_add", &format!(r#"{{"message":"m{i}","every_s":3600}}"#)).unwrap();
    }
    let e = call(&mut cron, &mut chip, "cron_add", r#"{"message":"one too many","every_s":3600}"#).unwrap_err();
    assert!(e.contains("at most 16 jobs"), "{e}");
    assert_eq!(call(&mut cron, &mut chip, "cron_remove", r#"{"id":"job-3"}"#).unwrap(), "Removed job-3.");
    let chip = reboot(chip);
    let (cron, bad) = Cron::load(&chip);
    assert!(bad.is_empty());
    assert_eq!(cron.len(), MAX_JOBS - 1);
}

#[test]
fn a_job_without_a_chat_is_refused() {
    let (mut chip, _) = chip(Some(NOON));
    let (mut cron, _) = Cron::load(&chip);
    let e = call(&mut cron, &mut chip, "cron_add", r#"{"message":"x","in_s":60}"#).unwrap_err();
    assert!(e.contains("no chat"), "{e}");
}

#[test]
fn a_damaged_job_list_costs_the_bad_entries_only() {
    let (mut chip, _) = chip(Some(NOON));
    let good = r#"{"id":"job-1","trigger":{"type":"interval","every_s":600},"action":{"type":"agent","message":"ok","channel":"telegram","chat_id":"42"}}"#;
    let text = format!(
        "{{\"version\": 1, \"jobs\": [\n  {good},\n  {{\"id\":\"job-2\",\"trigger\":{{\"type\":\"cron\",\"expr\":\"nope\"}},\"action\":{{\"type\":\"agent\",\"message\":\"x\"}}}}\n]}}\n"
    );
    chip.store.replace(CRON_KEY, text.as_bytes()).unwrap();
    let chip = reboot(chip);
    let (cron, bad) = Cron::load(&chip);
    assert_eq!(cron.len(), 1);
    assert_eq!(bad.len(), 1);
    assert!(bad[0].contains("job-2") && bad[0].contains("trigger.expr"), "{bad:?}");

    let mut chip = chip;
    chip.store.replace(CRON_KEY, b"\xff\x00garbage").unwrap();
    let (cron, bad) = Cron::load(&chip);
    assert!(cron.is_empty());
    assert!(bad[0].contains("unreadable"), "{bad:?}");
}

/// A toolbox with one tool, to check that `Join` offers and routes both sides.
struct Echo;

const ECHO: [ToolSpec<'static>; 1] =
    [ToolSpec { name: "echo", description: "echo", input_schema: r#"{"type":"object"}"# }];

impl<F: chela_core::flash::Flash, B: Board> Toolbox<F, B> for Echo {
    fn specs(&self) -> &[ToolSpec<'static>] {
        &ECHO
    }
    fn guidance(&self) -> &str {
        " Echo."
    }
    fn run(&mut self, _: &mut Chip<F, B>, name: &str, input: &str) -> Option<Result<String, String>> {
        (name == "echo").then(|| Ok(input.to_string()))
    }
}

#[test]
fn joined_toolboxes_offer_and_run_both() {
    let (mut chip, _) = chip(Some(NOON));
    let (cron, _) = Cron::load(&chip);
    let mut tools = Join::new::<RamFlash, Clock>(Echo, cron);
    let names: Vec<&str> = Toolbox::<RamFlash, Clock>::specs(&tools).iter().map(|s| s.name).collect();
    assert_eq!(names, ["echo", "cron_add", "cron_list", "cron_remove"]);
    assert!(Toolbox::<RamFlash, Clock>::guidance(&tools).starts_with(" Echo. Schedule"));
    assert_eq!(tools.run(&mut chip, "echo", "hi"), Some(Ok("hi".into())));
    assert_eq!(tools.run(&mut chip, "cron_list", "{}"), Some(Ok("No jobs are scheduled.".into())));
    assert_eq!(tools.run(&mut chip, "nope", "{}"), None);
}

fn config(settings: &[(Field, &str)]) -> ChipConfig {
    let mut config = ChipConfig::new(ChipDefaults::default());
    for (f, v) in [(Field::WifiSsid, "home"), (Field::ApiKey, "sk-test")].iter().chain(settings) {
        config.set(*f, v).unwrap();
    }
    config
}

const TELEGRAM: &[(Field, &str)] = &[(Field::TgToken, "123:abc"), (Field::TgAllow, "42,7")];
const FEISHU: &[(Field, &str)] = &[
    (Field::TgToken, "123:abc"),
    (Field::TgAllow, "42,7"),
    (Field::FeishuAppId, "cli_a5f0"),
    (Field::FeishuSecret, "Xk9vQ2mPz7LrT4bW"),
    (Field::FeishuAllow, "ou_owner,ou_friend"),
    (Field::Channel, "feishu"),
];

fn route(channel: &str, chat: &str, config: &ChipConfig, feishu_built: bool) -> Result<Route, String> {
    let on = console::channels(config, true).unwrap();
    cron::route(channel, chat, config, on, feishu_built)
}

#[test]
fn a_job_runs_in_its_own_chat_on_the_channel_in_use_and_nowhere_else() {
    let tg = config(TELEGRAM);
    assert_eq!(route("telegram", "42", &tg, true), Ok(Route::Telegram(42)));
    assert_eq!(route("telegram", "7", &tg, true), Ok(Route::Telegram(7)));
    // Taken off tg_allow: not run, in that chat or any other.
    let e = route("telegram", "99", &tg, true).unwrap_err();
    assert!(e.contains("`99` is not a chat in tg_allow"), "{e}");
    assert!(route("telegram", "ou_owner", &tg, true).is_err());
    // A Feishu job while Telegram is in use is not moved to the Telegram owner.
    let e = route("feishu", "oc_chat", &tg, true).unwrap_err();
    assert!(e.contains("on Feishu, which is not the chat channel in use"), "{e}");

    // Feishu in use (Telegram's settings still there): a Telegram job is not run at all, not
    // in Telegram and not in the Feishu owner's chat.
    let fs = config(FEISHU);
    let e = route("telegram", "42", &fs, true).unwrap_err();
    assert!(e.contains("on Telegram, which is not the chat channel in use"), "{e}");
    assert_eq!(route("feishu", "oc_chat", &fs, true), Ok(Route::Feishu("oc_chat".into())));
    assert_eq!(route("feishu", "ou_friend", &fs, true), Ok(Route::Feishu("ou_friend".into())));
    let e = route("feishu", "ou_stranger", &fs, true).unwrap_err();
    assert!(e.contains("not a chat in feishu_allow"), "{e}");
    assert!(route("feishu", "42", &fs, true).is_err(), "no Feishu id");
    // An image without Feishu says so.
    let e = route("feishu", "oc_chat", &fs, false).unwrap_err();
    assert!(e.contains("this image leaves out"), "{e}");

    // The gateway: with its token, in any image that has it, whatever the chat channel.
    let gw = config(&[(Field::GatewayToken, "0123456789abcdef0123456789abcdef")]);
    for c in [&gw, &config(&[TELEGRAM, &[(Field::GatewayToken, "0123456789abcdef0123456789abcdef")]].concat())] {
        assert_eq!(route("ws", "garden", c, false), Ok(Route::Gateway("garden".into())));
        assert!(route("ws", "../etc", c, false).is_err(), "a chat id the gateway refuses");
        assert!(route("ws", &"a".repeat(49), c, false).is_err(), "longer than a session key takes");
    }
    let e = route("ws", "garden", &tg, true).unwrap_err();
    assert!(e.contains("gateway, which is off"), "{e}");
    assert!(route("sms", "42", &tg, true).unwrap_err().contains("not a chat this device talks in"));
}

#[test]
fn a_job_that_cannot_reach_its_chat_is_said_once_and_again_after_it_ran() {
    let (mut chip, clock) = chip(Some(NOON));
    let (mut cron, _) = Cron::load(&chip);
    cron.set_origin("telegram", "42", "42");
    call(&mut cron, &mut chip, "cron_add", r#"{"message":"water the plants","every_s":3600}"#).unwrap();
    let due_at = |cron: &mut Cron, chip: &mut Chip<RamFlash, Clock>, h: u64| {
        clock.unix.set(Some(NOON + h * 3600));
        let (mut fired, err) = cron.due(chip);
        assert_eq!((fired.len(), err), (1, None));
        fired.remove(0)
    };
    let (fs, tg) = (config(FEISHU), config(TELEGRAM));
    let on = |c: &ChipConfig| console::channels(c, true).unwrap();
    let job = due_at(&mut cron, &mut chip, 1);
    let said = cron.route(&job, &fs, on(&fs), true).unwrap_err().expect("said the first time");
    assert!(said.starts_with("job-1: its chat is on Telegram") && said.contains("skipped"), "{said}");
    let job = due_at(&mut cron, &mut chip, 2);
    assert_eq!(cron.route(&job, &fs, on(&fs), true), Err(None), "not at each run");
    // Back on Telegram it runs; lost again, it is said again.
    let job = due_at(&mut cron, &mut chip, 3);
    assert_eq!(cron.route(&job, &tg, on(&tg), true), Ok(Route::Telegram(42)));
    let job = due_at(&mut cron, &mut chip, 4);
    assert!(cron.route(&job, &fs, on(&fs), true).unwrap_err().is_some());
}

/// The job the next run of `cron` fires, `h` hours after noon (one job kept).
fn due_at(cron: &mut Cron, chip: &mut Chip<RamFlash, Clock>, clock: &Clock, h: u64) -> Fired {
    clock.unix.set(Some(NOON + h * 3600));
    let (mut fired, err) = cron.due(chip);
    assert_eq!((fired.len(), err), (1, None), "one job due at +{h} h");
    fired.remove(0)
}

fn on(config: &ChipConfig) -> console::Channels {
    console::channels(config, true).unwrap()
}

const HOURLY: &str = r#"{"message":"post the standup","every_s":3600}"#;

#[test]
fn a_feishu_group_job_stops_when_its_maker_leaves_feishu_allow() {
    let (mut chip, clock) = chip(Some(NOON));
    let (mut cron, _) = Cron::load(&chip);
    // ou_friend asks in a group chat; the device records them as the maker, not the chat.
    cron.set_origin("feishu", "oc_group", "ou_friend");
    call(&mut cron, &mut chip, "cron_add", HOURLY).unwrap();
    // Kept across a power cycle, maker and all.
    let chip = reboot(chip);
    let (mut cron, bad) = Cron::load(&chip);
    let mut chip = chip;
    assert!(bad.is_empty(), "{bad:?}");
    let job = due_at(&mut cron, &mut chip, &clock, 1);
    assert_eq!(job.made_by, Some(MadeBy::new("feishu", "ou_friend", vec![])));
    assert_eq!(job.maker(), "ou_friend");
    let both = config(FEISHU);
    assert_eq!(cron.route(&job, &both, on(&both), true), Ok(Route::Feishu("oc_group".into())));

    // The owner takes ou_friend off the allowlist: the group is still a chat the device talks
    // in (the owner writes there), but ou_friend's job no longer runs there; said once.
    let owner_only = config(&[FEISHU, &[(Field::FeishuAllow, "ou_owner")]].concat());
    let job = due_at(&mut cron, &mut chip, &clock, 2);
    let said = cron.route(&job, &owner_only, on(&owner_only), true).unwrap_err().expect("said the first time");
    assert_eq!(said, "job-1: its maker `ou_friend` is not in feishu_allow now; skipped (said once)");
    let job = due_at(&mut cron, &mut chip, &clock, 3);
    assert_eq!(cron.route(&job, &owner_only, on(&owner_only), true), Err(None), "not at each run");
    // Allowed again: it runs again.
    let job = due_at(&mut cron, &mut chip, &clock, 4);
    assert_eq!(cron.route(&job, &both, on(&both), true), Ok(Route::Feishu("oc_group".into())));

    // A job's own turn adds a job: it is the same maker's, not the chat's or the owner's.
    cron.set_origin(&job.channel, &job.chat_id, job.maker());
    call(&mut cron, &mut chip, "cron_add", HOURLY).unwrap();
    clock.unix.set(Some(NOON + 6 * 3600));
    let (fired, _) = cron.due(&mut chip);
    assert_eq!(fired.len(), 2);
    assert!(fired.iter().all(|f| f.maker() == "ou_friend"), "{fired:?}");
}

#[test]
fn a_direct_chat_job_runs_while_its_maker_is_allowed() {
    let (mut chip, clock) = chip(Some(NOON));
    let (mut cron, _) = Cron::load(&chip);
    // Feishu: the owner's direct chat with the bot is an `oc_` chat too.
    cron.set_origin("feishu", "oc_dm", "ou_owner");
    call(&mut cron, &mut chip, "cron_add", HOURLY).unwrap();
    let fs = config(FEISHU);
    let job = due_at(&mut cron, &mut chip, &clock, 1);
    assert_eq!(cron.route(&job, &fs, on(&fs), true), Ok(Route::Feishu("oc_dm".into())));
    let friend_only = config(&[FEISHU, &[(Field::FeishuAllow, "ou_friend")]].concat());
    let job = due_at(&mut cron, &mut chip, &clock, 2);
    let said = cron.route(&job, &friend_only, on(&friend_only), true).unwrap_err().unwrap();
    assert!(said.contains("its maker `ou_owner` is not in feishu_allow now"), "{said}");

    // Telegram: tg_allow names chats; a direct chat's maker is that chat, a group's the group
    // (every member of an allowed group may talk, so may schedule there).
    let (mut chip, clock) = self::chip(Some(NOON));
    let (mut cron, _) = Cron::load(&chip);
    cron.set_origin("telegram", "-1001", "-1001");
    call(&mut cron, &mut chip, "cron_add", HOURLY).unwrap();
    let group = config(&[(Field::TgToken, "123:abc"), (Field::TgAllow, "42,-1001")]);
    let job = due_at(&mut cron, &mut chip, &clock, 1);
    assert_eq!((job.made_by.as_ref(), job.maker()), (None, "-1001"), "the chat itself: not kept twice");
    assert_eq!(cron.route(&job, &group, on(&group), true), Ok(Route::Telegram(-1001)));
    let tg = config(TELEGRAM);
    let job = due_at(&mut cron, &mut chip, &clock, 2);
    assert!(cron.route(&job, &tg, on(&tg), true).unwrap_err().unwrap().contains("not a chat in tg_allow"));
}

#[test]
fn the_model_cannot_name_the_maker() {
    let (mut chip, _) = chip(Some(NOON));
    let (mut cron, _) = Cron::load(&chip);
    cron.set_origin("feishu", "oc_group", "ou_friend");
    for args in [
        r#"{"message":"x","every_s":3600,"made_by":{"channel":"feishu","chat_id":"ou_owner"}}"#,
        r#"{"message":"x","every_s":3600,"made_by":"ou_owner"}"#,
        r#"{"message":"x","every_s":3600,"channel":"feishu","chat_id":"ou_owner"}"#,
    ] {
        assert!(call(&mut cron, &mut chip, "cron_add", args).is_err(), "{args}");
    }
    assert!(cron.is_empty(), "nothing kept");
    let chip = reboot(chip);
    assert!(Cron::load(&chip).0.is_empty(), "nothing in flash");
}

/// One job under CRON_KEY as the flash holds it: a Feishu or Telegram chat, hourly since noon.
fn stored(channel: &str, chat: &str, made_by: Option<&str>) -> String {
    let made_by = made_by.map_or(String::new(), |m| format!(",\"made_by\":{m}"));
    format!(
        "{{\"version\": 1, \"jobs\": [{{\"id\":\"job-1\",\"trigger\":{{\"type\":\"interval\",\"every_s\":3600}},\
         \"action\":{{\"type\":\"agent\",\"message\":\"hi\",\"channel\":\"{channel}\",\"chat_id\":\"{chat}\"}},\
         \"created_at\":{NOON}{made_by}}}]}}"
    )
}

/// Where the one job of `record` runs at +1 h under `config`, or the console's line.
fn run_stored(record: &str, config: &ChipConfig) -> (Result<Route, Option<String>>, String) {
    let (mut chip, clock) = chip(Some(NOON));
    chip.store.replace(CRON_KEY, record.as_bytes()).unwrap();
    let chip = reboot(chip);
    let (mut cron, bad) = Cron::load(&chip);
    assert!(bad.is_empty(), "{bad:?}");
    let mut chip = chip;
    let job = due_at(&mut cron, &mut chip, &clock, 1);
    let maker = job.maker().to_string();
    (cron.route(&job, config, on(config), true), maker)
}

#[test]
fn a_maker_on_another_channel_is_not_honoured() {
    let fs = config(FEISHU);
    // A record whose maker is a Telegram chat on a Feishu group's job (the owner's id on
    // Telegram is allowed there, but it is not who may act in Feishu).
    let (r, _) = run_stored(&stored("feishu", "oc_group", Some(r#"{"channel":"telegram","chat_id":"42"}"#)), &fs);
    assert_eq!(
        r,
        Err(Some("job-1: it names a maker on telegram, not on its own chat's channel; skipped (said once)".into()))
    );
    let (r, _) = run_stored(&stored("feishu", "oc_group", Some(r#"{"channel":"sms","chat_id":"ou_owner"}"#)), &fs);
    assert!(r.unwrap_err().unwrap().contains("names a maker on sms"));
    // The same record with the maker on Feishu runs.
    let (r, maker) =
        run_stored(&stored("feishu", "oc_group", Some(r#"{"channel":"feishu","chat_id":"ou_owner"}"#)), &fs);
    assert_eq!((r, maker.as_str()), (Ok(Route::Feishu("oc_group".into())), "ou_owner"));
}

#[test]
fn a_job_stored_without_a_maker_runs_only_where_its_chat_is_who_made_it() {
    let fs = config(FEISHU);
    // A Feishu chat: anyone in it could have made it; refused until it is made again.
    let (r, _) = run_stored(&stored("feishu", "oc_group", None), &fs);
    let said = r.unwrap_err().unwrap();
    assert!(said.starts_with("job-1: it was stored before the device recorded who makes a job"), "{said}");
    assert!(said.contains("make it again"), "{said}");
    // A Feishu user's chat: the chat is the person, allowed or not.
    let (r, maker) = run_stored(&stored("feishu", "ou_friend", None), &fs);
    assert_eq!((r, maker.as_str()), (Ok(Route::Feishu("ou_friend".into())), "ou_friend"));
    assert!(run_stored(&stored("feishu", "ou_gone", None), &fs).0.unwrap_err().unwrap().contains("feishu_allow"));
    // Telegram: tg_allow names the chat, which route checks.
    let tg = config(TELEGRAM);
    let (r, maker) = run_stored(&stored("telegram", "7", None), &tg);
    assert_eq!((r, maker.as_str()), (Ok(Route::Telegram(7)), "7"));
    assert!(run_stored(&stored("telegram", "99", None), &tg).0.is_err());
}
