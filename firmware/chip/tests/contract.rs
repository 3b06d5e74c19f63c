//! The chip advertises the tools it shares with the host exactly as the core's contract gives
//! them (`chela_core::contract::SHARED`), byte for byte. The host's
//! `shared_tools_are_advertised_as_the_core_contract` checks its side against the same list,
//! so a spec copied by hand on either side, and drifting, fails one of the two.

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;

use chela_chip::cron::Cron;
use chela_chip::tools::{self, Toolbox};
use chela_chip::turn::Chip;
use chela_chip::{Board, boot};
use chela_core::agent::{ToolCall, ToolResult};
use chela_core::console::ChipDefaults;
use chela_core::contract::SHARED;
use chela_core::flash::RamFlash;
use chela_proto::chat::{Json, ToolSpec};

/// 2026-12-03T12:00:00+00:00, a Thursday.
const NOON: u64 = 1_796_299_200;

#[derive(Clone, Default)]
struct Clock(Rc<Cell<Option<u64>>>);

impl Board for Clock {
    fn now_ms(&self) -> u64 {
        0
    }
    fn unix(&self) -> Option<u64> {
        self.0.get()
    }
    fn print(&self, _: fmt::Arguments<'_>) {}
}

fn chip(unix: Option<u64>) -> Chip<RamFlash, Clock> {
    let clock = Clock::default();
    clock.0.set(unix);
    boot::power_on(RamFlash::new(4096, 8), clock, 1, ChipDefaults::default()).unwrap()
}

/// Runs `name` as the model would call it, through the chip's tool dispatch.
fn call(chip: &mut Chip<RamFlash, Clock>, cron: &mut Cron, name: &str, input: &str) -> ToolResult {
    let call = ToolCall { id: "t1".into(), name: name.into(), input: Json::parse(input).unwrap() };
    tools::run(chip, cron, &call)
}

#[test]
fn every_tool_the_chip_shares_with_the_host_is_the_core_contract() {
    let chip = chip(None);
    let (cron, _) = Cron::load(&chip);
    // Every list the chip's toolboxes advertise from: the turn's own (memory, time), cron,
    // the sensors, and the firmware's GPIO pins and status LED.
    let advertised: Vec<ToolSpec<'static>> = tools::MEMORY
        .iter()
        .chain([&tools::TIME])
        .chain(Toolbox::<RamFlash, Clock>::specs(&cron))
        .chain(&chela_chip::board::SPECS)
        .chain(&tools::GPIO)
        .chain(&tools::LED)
        .chain(&chela_chip::search::SPECS)
        .copied()
        .collect();
    for spec in &advertised {
        let shared = SHARED.iter().find(|s| s.name == spec.name);
        assert_eq!(Some(spec), shared, "{} differs from the contract", spec.name);
    }
    let mut names: Vec<&str> = advertised.iter().map(|s| s.name).collect();
    let mut shared: Vec<&str> = SHARED.iter().map(|s| s.name).collect();
    names.sort_unstable();
    shared.sort_unstable();
    assert_eq!(names, shared, "the chip offers every shared tool");
}

/// The host's argument names work on the chip: MimiClaw's `cron_add` and `cron_remove`
/// arguments, `tags` as one string, and `get_current_time` answered in the host's JSON.
#[test]
fn the_chip_takes_the_hosts_arguments_and_answers_in_its_shapes() {
    let mut chip = chip(Some(NOON));
    let (mut cron, _) = Cron::load(&chip);
    cron.set_origin("telegram", "42", "42");
    let add = r#"{"name":"tea","schedule_type":"at","message":"tea is ready","delay_s":300}"#;
    let r = call(&mut chip, &mut cron, "cron_add", add);
    assert!(!r.is_error && r.content.starts_with("Scheduled job-1; next run 2026-12-03T12:05:00"), "{r:?}");
    let every = r#"{"name":"w","schedule_type":"every","message":"water","interval_s":3600}"#;
    assert!(!call(&mut chip, &mut cron, "cron_add", every).is_error);
    let elsewhere = r#"{"name":"x","schedule_type":"every","message":"x","interval_s":3600,"chat_id":"7"}"#;
    let r = call(&mut chip, &mut cron, "cron_add", elsewhere);
    assert!(r.is_error && r.content.contains("the chat it is made in"), "{r:?}");
    assert_eq!(cron.len(), 2);
    let r = call(&mut chip, &mut cron, "cron_remove", r#"{"job_id":"job-1"}"#);
    assert_eq!(r.content, "Removed job-1.");
    assert_eq!(cron.len(), 1);

    let r = call(&mut chip, &mut cron, "memory_store", r#"{"content":"Ana lives in Porto","tags":"family, places"}"#);
    assert_eq!(r.content, "stored as m1");
    let r = call(&mut chip, &mut cron, "memory_recall", r#"{"query":"Ana"}"#);
    assert_eq!(r.content, "[m1] Ana lives in Porto (tags: family, places)");

    let r = call(&mut chip, &mut cron, "get_current_time", "{}");
    let v: serde_json::Value = serde_json::from_str(&r.content).unwrap();
    assert_eq!(v["iso"], "2026-12-03T12:00:00+00:00");
    assert_eq!(v["unix"], NOON);
    assert_eq!(v["timezone"], "UTC");
    assert_eq!(v["weekday"], "Thursday");
    assert!(!call(&mut chip, &mut cron, "get_current_time", r#"{"timezone":"UTC"}"#).is_error);
    let r = call(&mut chip, &mut cron, "get_current_time", r#"{"timezone":"Europe/Paris"}"#);
    assert!(r.is_error && r.content.contains("only UTC"), "{r:?}");
}
