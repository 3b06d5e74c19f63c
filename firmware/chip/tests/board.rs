//! The board layer on the chip, on the host: a build's board.json opened on chela-board's
//! simulated bus (the same drivers the chip runs over esp-hal's I²C), the tools over it, each
//! fault the drivers report, and the descriptions a build can get wrong.

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;

use chela_board::sim::{Inject, Sim};
use chela_board::spec;
use chela_chip::board::plan::{self, Checked};
use chela_chip::board::{Compiled, CompiledBus, CompiledDevice, MAX_BOARD_JSON, Sensors, tenths};
use chela_chip::tools::Toolbox;
use chela_chip::turn::Chip;
use chela_chip::{Board, boot};
use chela_core::console::ChipDefaults;
use chela_core::flash::RamFlash;

/// 2026-12-03T12:00:00+00:00.
const NOON: u64 = 1_796_299_200;
const DEVKIT: &str = include_str!("../../../crates/chela-board/boards/esp32c3-devkit.json");

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

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

fn leak_pins(pins: &std::collections::BTreeMap<String, u8>) -> &'static [(&'static str, u8)] {
    pins.iter().map(|(role, &pin)| (leak(role), pin)).collect::<Vec<_>>().leak()
}

/// What `to_rust` writes for `checked`, built here at run time (the firmware's build compiles
/// the text itself).
fn compiled(checked: &Checked) -> Compiled {
    let s = &checked.spec;
    Compiled {
        name: leak(&s.name),
        chip: s.chip.name,
        notes: checked.notes.iter().map(|n| leak(n)).collect::<Vec<_>>().leak(),
        buses: s
            .buses
            .iter()
            .map(|b| CompiledBus { id: leak(&b.id), pins: leak_pins(&b.pins), path: b.path.as_deref().map(leak) })
            .collect::<Vec<_>>()
            .leak(),
        devices: s
            .devices
            .iter()
            .map(|d| CompiledDevice {
                id: leak(&d.id),
                kind: d.kind.clone(),
                bus: d.bus.as_deref().map(leak),
                address: d.address,
                pins: leak_pins(&d.pins),
                line: d.line,
            })
            .collect::<Vec<_>>()
            .leak(),
    }
}

/// The devkit's description, checked as the build checks it, on a simulated bus holding its
/// devices.
fn devkit() -> (Sensors<Sim>, Vec<String>, Sim) {
    let mut sim = Sim::new(&spec::parse(DEVKIT).unwrap());
    let board = compiled(&plan::check(DEVKIT, "esp32c3").unwrap().unwrap());
    let (sensors, notes) = Sensors::open(Some(&board), &mut sim);
    (sensors, notes, sim)
}

#[test]
fn the_compact_form_gives_back_the_checked_description() {
    for (name, text) in chela_board::EXAMPLES {
        let Ok(parsed) = spec::parse(text) else { panic!("{name} does not parse") };
        let Some(checked) = plan::check(text, parsed.chip.name).unwrap() else { panic!("{name} is empty") };
        let back = compiled(&checked).spec().unwrap();
        let want = &checked.spec;
        assert_eq!(
            (&back.name, back.chip, &back.buses, &back.devices, &back.gpio),
            (&want.name, want.chip, &want.buses, &want.devices, &want.gpio),
            "{name}"
        );
        assert!(back.devices.iter().all(|d| d.kind.is_sensor()) && back.gpio.is_empty(), "{name}");
    }
}

#[test]
fn the_generated_statics_spell_the_checked_description() {
    let checked = plan::check(DEVKIT, "esp32c3").unwrap().unwrap();
    let b = "chela_chip::board";
    let dev = |id: &str, kind: &str, address: u8, line: usize| {
        format!(
            "{b}::CompiledDevice {{ id: {id:?}, kind: chela_board::spec::Kind::{kind}, bus: Some(\"i2c0\"), \
             address: Some({address}), pins: &[], line: {line} }}, "
        )
    };
    let want = format!(
        "{b}::Compiled {{ name: \"ESP32-C3-DevKitM-1\", chip: \"esp32c3\", notes: &[{:?}, {:?}, {:?}, ], \
         buses: &[{b}::CompiledBus {{ id: \"i2c0\", pins: &[(\"scl\", 5), (\"sda\", 4), ], path: None }}, ], \
         devices: &[{}{}{}] }}",
        checked.notes[0],
        checked.notes[1],
        checked.notes[2],
        dev("climate", "Aht20", 0x38, 8),
        dev("air", "Sgp30", 0x58, 9),
        dev("light", "Bh1750", 0x23, 10),
    );
    assert_eq!(plan::to_rust(&checked), want);

    // A name the build's author wrote is a Rust string literal, whatever it holds.
    let hostile = DEVKIT.replace("ESP32-C3-DevKitM-1", r#"a \" }, evil: 1, \\ x"#);
    let text = plan::to_rust(&plan::check(&hostile, "esp32c3").unwrap().unwrap());
    assert!(text.contains(r#"name: "a \" }, evil: 1, \\ x", chip"#), "{text}");
}

fn call(s: &mut Sensors<Sim>, chip: &mut Chip<RamFlash, Clock>, name: &str, input: &str) -> Result<String, String> {
    Toolbox::run(s, chip, name, input).expect("a board tool")
}

fn value(reply: &str, name: &str) -> f64 {
    let rest = reply.split(&format!("{name}: ")).nth(1).unwrap_or_else(|| panic!("no {name} in {reply}"));
    rest.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn the_devkit_board_gives_its_sensors_and_leaves_out_what_the_chip_does_not_drive() {
    let (mut s, notes, _) = devkit();
    assert_eq!(
        notes,
        [
            "[board] status (ws2812) is not driven on the chip; left out",
            "[board] arm (servo) is not driven on the chip; left out",
            "[board] the description's GPIO list is not used on the chip: set CHELA_GPIO_ALLOW",
            "[board] ESP32-C3-DevKitM-1: 3 sensors",
        ]
    );
    let specs: Vec<&str> = Toolbox::<RamFlash, Clock>::specs(&s).iter().map(|t| t.name).collect();
    assert_eq!(specs, ["board_list_devices", "sensor_read"]);
    assert!(Toolbox::<RamFlash, Clock>::guidance(&s).contains("sensor_read"));
    let mut chip = chip(Some(NOON));
    assert_eq!(
        call(&mut s, &mut chip, "board_list_devices", "{}").unwrap(),
        "climate (aht20)\nair (sgp30)\nlight (bh1750)"
    );
    assert!(Toolbox::run(&mut s, &mut chip, "led_set", "{}").is_none(), "other tools are not the board's");
}

#[test]
fn sensor_read_runs_the_real_drivers_over_the_bus_and_gives_units_and_the_time() {
    let (mut s, _, sim) = devkit();
    let mut chip = chip(Some(NOON));
    let (celsius, humidity, lux, _) = sim.truth();
    let before = sim.transactions();
    let climate = call(&mut s, &mut chip, "sensor_read", r#"{"device":"climate"}"#).unwrap();
    assert!(sim.transactions() > before, "the read went over the bus");
    assert!(
        climate.contains(" °C, humidity: ") && climate.ends_with(" %RH (read at 2026-12-03T12:00:00+00:00)"),
        "{climate}"
    );
    // The AHT20's 20-bit raw values resolve far finer than the one decimal shown.
    assert!((value(&climate, "temperature") - celsius).abs() <= 0.06, "{climate} vs {celsius}");
    assert!((value(&climate, "humidity") - humidity).abs() <= 0.06, "{climate} vs {humidity}");

    let light = call(&mut s, &mut chip, "sensor_read", r#"{"device":"light"}"#).unwrap();
    // BH1750: counts / 1.2, so within a count of the truth.
    assert!((value(&light, "illuminance") - lux).abs() <= 1.0, "{light} vs {lux}");
    assert!(light.contains(" lx (read at "), "{light}");

    // The SGP30 gives its fixed warm-up values for its first 15 measurements (datasheet), and
    // says so; then the air model's.
    let air = call(&mut s, &mut chip, "sensor_read", r#"{"device":"air"}"#).unwrap();
    assert!(air.starts_with("co2eq: 400.0 ppm, tvoc: 0.0 ppb, warming_up: 1.0 bool (read at "), "{air}");
    let air = (0..15).map(|_| call(&mut s, &mut chip, "sensor_read", r#"{"device":"air"}"#).unwrap()).last().unwrap();
    let (_, _, _, (co2, tvoc)) = sim.truth();
    assert!(air.contains(" ppm, tvoc: ") && air.contains(" ppb, warming_up: 0.0 bool"), "{air}");
    assert!(
        (value(&air, "co2eq") - f64::from(co2)).abs() <= 1.0 && (value(&air, "tvoc") - f64::from(tvoc)).abs() <= 1.0,
        "{air}"
    );

    // Before SNTP the reading says the clock is not set instead of a wrong date.
    let mut unset = self::chip(None);
    let r = call(&mut s, &mut unset, "sensor_read", r#"{"device":"climate"}"#).unwrap();
    assert!(r.ends_with("(read now; the device clock is not set yet)"), "{r}");
}

#[test]
fn each_fault_reaches_the_model_as_a_sentence() {
    let (mut s, _, sim) = devkit();
    let mut chip = chip(Some(NOON));
    sim.inject("i2c0", 0x38, Some(Inject::Nack));
    let e = call(&mut s, &mut chip, "sensor_read", r#"{"device":"climate"}"#).unwrap_err();
    assert!(e.starts_with("`climate`: no device answered at I2C address 0x38 (NACK)"), "{e}");
    sim.inject("i2c0", 0x58, Some(Inject::BadCrc));
    let e = call(&mut s, &mut chip, "sensor_read", r#"{"device":"air"}"#).unwrap_err();
    assert!(e.contains("CRC-8 does not match"), "{e}");
    sim.inject("i2c0", 0x38, Some(Inject::StuckBusy));
    let e = call(&mut s, &mut chip, "sensor_read", r#"{"device":"climate"}"#).unwrap_err();
    assert!(e.contains("stayed busy"), "{e}");
    sim.inject("i2c0", 0x38, None);
    sim.set_bus_busy("i2c0", true);
    let e = call(&mut s, &mut chip, "sensor_read", r#"{"device":"light"}"#).unwrap_err();
    assert!(e.contains("the I2C bus is busy"), "{e}");
    sim.set_bus_busy("i2c0", false);
    assert!(
        call(&mut s, &mut chip, "sensor_read", r#"{"device":"climate"}"#).is_ok(),
        "a fault passes when it is gone"
    );
}

#[test]
fn bad_arguments_and_unknown_devices_are_refused_without_touching_the_bus() {
    let (mut s, _, sim) = devkit();
    let mut chip = chip(Some(NOON));
    let before = sim.transactions();
    let e = call(&mut s, &mut chip, "sensor_read", r#"{"device":"status"}"#).unwrap_err();
    assert_eq!(e, "There is no device `status` on this board. Devices: climate, air, light.");
    let e = call(&mut s, &mut chip, "sensor_read", "{\"device\":\"x\\u001b[2J\"}").unwrap_err();
    assert!(!e.contains('\u{1b}'), "control characters are escaped: {e:?}");
    for bad in ["", "{}", r#"{"device":7}"#, r#"{"device":"air","extra":1}"#, "[", &"{".repeat(100_000)] {
        let e = call(&mut s, &mut chip, "sensor_read", bad).unwrap_err();
        assert!(e.starts_with("The arguments do not fit the tool's schema"), "{bad:.40}: {e}");
    }
    assert_eq!(sim.transactions(), before);
}

#[test]
fn a_description_the_build_gets_wrong_fails_the_check_and_says_why() {
    assert!(plan::check("", "esp32c3").unwrap().is_none(), "no board is not an error");
    assert!(plan::check(" \n", "esp32c3").unwrap().is_none());

    let e = plan::check(DEVKIT, "esp32c6").err().unwrap();
    assert_eq!(e, "the description is for esp32c3, this image for esp32c6");

    let broken = DEVKIT.replace(r#""address": "0x58""#, r#""address": "0x38""#);
    let e = plan::check(&broken, "esp32c3").err().unwrap();
    assert!(e.lines().any(|l| l.starts_with("board.json line 9: device `air`: ")), "{e}");

    let e = plan::check("{\"name\": ", "esp32c3").err().unwrap();
    assert!(e.starts_with("board.json line 1: "), "{e}");

    let huge = format!("{DEVKIT}{}", " ".repeat(MAX_BOARD_JSON));
    let e = plan::check(&huge, "esp32c3").err().unwrap();
    assert_eq!(e, format!("the description is {} bytes, over {MAX_BOARD_JSON}", huge.len()));
}

#[test]
fn no_board_gives_no_sensors_and_says_so_to_the_model() {
    let mut chip = chip(Some(NOON));
    let mut sim = Sim::new(&spec::parse(DEVKIT).unwrap());
    let (mut s, notes) = Sensors::open(None, &mut sim);
    assert!(notes.is_empty(), "no board is not an error");
    assert!(Toolbox::<RamFlash, Clock>::specs(&s).is_empty());
    let e = call(&mut s, &mut chip, "sensor_read", r#"{"device":"climate"}"#).unwrap_err();
    assert_eq!(e, "This device has no sensors (it was built without a board description).");
}

#[test]
fn tenths_round_to_one_decimal() {
    for (v, text) in [(0.0, "0.0"), (21.5, "21.5"), (-1.25, "-1.3"), (1.25, "1.3"), (-0.04, "0.0"), (99.96, "100.0")] {
        assert_eq!(tenths(v), text, "{v}");
    }
    assert_eq!(tenths(f32::NAN), "(no value)");
    assert_eq!(tenths(f32::INFINITY), "(no value)");
    // Within half a tenth, plus f32's own rounding of `v * 10`, across a sensor's whole range.
    for k in -400_000..=400_000 {
        let v = k as f32 / 1000.0;
        let shown: f64 = tenths(v).parse().unwrap();
        assert!((shown - f64::from(v)).abs() <= 0.05 + f64::from(v).abs() * 1e-6, "{v} -> {shown}");
    }
}
