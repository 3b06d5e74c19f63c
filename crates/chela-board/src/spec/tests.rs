use super::*;

fn problems(text: &str) -> Vec<Problem> {
    parse(text).expect_err("the file should be refused")
}

#[test]
fn every_example_board_is_valid() {
    for (name, text) in crate::EXAMPLES {
        let spec = parse(text).unwrap_or_else(|p| panic!("{name}: {p:?}"));
        assert!(!spec.devices.is_empty(), "{name}");
    }
    let sim = parse(crate::EXAMPLES[0].1).unwrap();
    let kinds: Vec<&str> = sim.devices.iter().map(|d| d.kind.name()).collect();
    assert_eq!(kinds, ["aht20", "sgp30", "bh1750", "ws2812", "servo"]);
    assert_eq!(sim.seed, 42);
    assert_eq!(sim.device("light").unwrap().address, Some(0x23));
}

#[test]
fn a_syntax_error_names_its_line() {
    let p = problems("{\n  \"name\": \"x\",\n  \"chip\": \"simulated\"\n  \"devices\": []\n}");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].line, 4, "{p:?}");
}

#[test]
fn an_unknown_field_is_refused_with_its_line() {
    let p = problems("{\n\"name\": \"x\",\n\"chip\": \"simulated\",\n\"devise\": []\n}");
    assert_eq!(p[0].line, 4, "{p:?}");
    assert!(p[0].message.contains("devise"), "{p:?}");
}

const BAD: &str = r#"{
  "name": "bad",
  "chip": "esp32c3",
  "buses": [{ "id": "i2c0", "type": "i2c", "pins": { "sda": 4, "scl": 5 } }],
  "devices": [
    { "id": "t1", "type": "aht20", "bus": "i2c0" },
    { "id": "t2", "type": "aht20", "bus": "i2c0", "address": "0x38" },
    { "id": "x", "type": "thermocouple" },
    { "id": "strip", "type": "ws2812",
      "pins": { "data": 4 } },
    { "id": "arm", "type": "servo", "pins": { "pwm": 40 } }
  ],
  "gpio": [
    { "pin": 13, "direction": "output" },
    { "pin": 7, "direction": "sideways" }
  ]
}"#;

#[test]
fn wiring_problems_each_name_their_line() {
    let p = problems(BAD);
    let find = |needle: &str| {
        p.iter().find(|x| x.message.contains(needle)).unwrap_or_else(|| panic!("no `{needle}` in {p:?}")).clone()
    };
    let dup = find("already taken by `t1`");
    assert_eq!(dup.line, 7, "{dup}");
    let unknown = find("unknown type `thermocouple`");
    assert_eq!(unknown.line, 8);
    let overlap = find("GPIO4 is used twice");
    assert_eq!(overlap.line, 10, "the pins line of the strip: {overlap}");
    assert!(overlap.message.contains("bus i2c0 (sda)"));
    let missing = find("GPIO40 does not exist");
    assert_eq!(missing.line, 11);
    let reserved = find("GPIO13 is reserved");
    assert_eq!(reserved.line, 14);
    let dir = find("sideways");
    assert_eq!(dir.line, 15);
    assert_eq!(p.len(), 6, "{p:?}");
}

#[test]
fn other_refusals() {
    let base = |devices: &str| {
        format!(r#"{{"name":"b","chip":"simulated","buses":[{{"id":"i2c0","type":"i2c"}}],"devices":[{devices}]}}"#)
    };
    let msg = |d: &str| problems(&base(d)).iter().map(|p| p.message.clone()).collect::<Vec<_>>().join(" | ");
    assert!(msg(r#"{"id":"a","type":"bh1750","bus":"i2c0","address":"0x40"}"#).contains("0x23 or 0x5c"));
    assert!(msg(r#"{"id":"a","type":"aht20","bus":"i2c9"}"#).contains("no bus `i2c9`"));
    assert!(msg(r#"{"id":"a","type":"aht20"}"#).contains("needs a bus"));
    assert!(msg(r#"{"id":"a","type":"aht20","bus":"i2c0","address":"0x1ff"}"#).contains("7-bit"));
    assert!(msg(r#"{"id":"a","type":"ws2812","pins":{"data":1},"params":{"count":0}}"#).contains("count"));
    assert!(msg(r#"{"id":"a","type":"ws2812","pins":{"data":1},"params":{"speed":2}}"#).contains("unknown parameter"));
    assert!(
        msg(r#"{"id":"a","type":"servo","pins":{"pwm":1},"params":{"min_angle":90,"max_angle":10}}"#)
            .contains("servo limits")
    );
    assert!(msg(r#"{"id":"a","type":"servo"}"#).contains("needs pins.pwm"));
    assert!(msg(r#"{"id":"a b","type":"aht20","bus":"i2c0"}"#).contains("letters"));
    assert!(
        msg(r#"{"id":"a","type":"aht20","bus":"i2c0"},{"id":"a","type":"sgp30","bus":"i2c0"}"#).contains("used twice")
    );
    let chip = problems(r#"{"name":"b","chip":"esp8266"}"#);
    assert!(chip[0].message.contains("unknown chip `esp8266`"), "{chip:?}");
}

#[test]
fn oversize_and_garbage_are_refused_not_panicking() {
    let big = format!(r#"{{"name":"{}","chip":"simulated"}}"#, "x".repeat(MAX_BYTES));
    assert!(problems(&big)[0].message.contains("limit"));
    for garbage in ["", "[", "\u{0}", "{\"name\":", "nul", "{\"name\":1,\"chip\":2}", &"[".repeat(10_000)] {
        let p = problems(garbage);
        assert!(!p.is_empty() && p[0].line >= 1);
    }
    let many: Vec<String> = (0..65).map(|i| format!(r#"{{"pin":{i},"direction":"input"}}"#)).collect();
    let p = problems(&format!(r#"{{"name":"b","chip":"simulated","gpio":[{}]}}"#, many.join(",")));
    assert!(p.iter().any(|x| x.message.contains("limit")), "{p:?}");
}

proptest::proptest! {
    /// Whatever bytes come in, parse answers (Ok or problems with a line), never panics.
    #[test]
    fn parse_never_panics(text in ".{0,300}") {
        if let Err(p) = parse(&text) {
            proptest::prop_assert!(p.iter().all(|x| x.line >= 1));
        }
    }
}

#[test]
fn the_backend_follows_the_chip_unless_board_json_names_it() {
    let b = |text: &str| parse(text).unwrap_or_else(|p| panic!("{p:?}")).backend;
    assert_eq!(b(r#"{"name": "x", "chip": "simulated"}"#), Driven::Simulated);
    assert_eq!(b(r#"{"name": "x", "chip": "esp32c3"}"#), Driven::Firmware);
    assert_eq!(b(r#"{"name": "x", "chip": "bcm2711"}"#), Driven::Linux(LinuxPaths::default()));
    assert_eq!(b(r#"{"name": "x", "chip": "bcm2711", "backend": "simulated"}"#), Driven::Simulated);
    let pi = parse(crate::EXAMPLES[1].1).unwrap();
    assert_eq!(pi.backend.name(), "linux");
    assert_eq!(pwm_channel(pi.chip, pi.device("arm").unwrap()), Some(0));
}

const BAD_LINUX: &str = r#"{
  "name": "pi",
  "chip": "bcm2711",
  "backend": "linux",
  "linux": {
    "gpiochip": "/dev/../etc/passwd",
    "spidev": "dev/spidev0.0"
  },
  "buses": [{ "id": "i2c1", "type": "i2c", "pins": { "sda": 2, "scl": 3 } }],
  "devices": [
    { "id": "arm", "type": "servo", "pins": { "pwm": 4 } },
    { "id": "arm2", "type": "servo", "pins": { "pwm": 5 }, "params": { "pwm_channel": -1 } }
  ]
}"#;

#[test]
fn linux_wiring_problems_each_name_their_line() {
    let p = problems(BAD_LINUX);
    let line =
        |needle: &str| p.iter().find(|x| x.message.contains(needle)).unwrap_or_else(|| panic!("{needle}: {p:?}")).line;
    assert_eq!(line("linux.gpiochip"), 6);
    assert_eq!(line("linux.spidev"), 7);
    assert_eq!(line("bus `i2c1` needs a path"), 9);
    assert_eq!(line("GPIO4 has no hardware PWM channel"), 11);
    assert_eq!(line("pwm_channel must be a whole number"), 12);
}

#[test]
fn a_backend_the_chip_cannot_have_is_refused() {
    let p = problems("{\"name\": \"x\",\n \"chip\": \"esp32c6\",\n \"backend\": \"linux\"}");
    assert!(p.iter().any(|x| x.line == 3 && x.message.contains("the esp32c6 does not run Linux")), "{p:?}");
    let p = problems("{\"name\": \"x\", \"chip\": \"simulated\",\n \"backend\": \"firmware\"}");
    assert!(p.iter().any(|x| x.line == 2 && x.message.contains("does not run Chela's firmware")), "{p:?}");
    let p = problems("{\"name\": \"x\", \"chip\": \"simulated\",\n \"backend\": \"fpga\"}");
    assert!(p.iter().any(|x| x.line == 2 && x.message.contains("unknown backend `fpga`")), "{p:?}");
    let p = problems("{\"name\": \"x\", \"chip\": \"simulated\",\n \"linux\": {}}");
    assert!(p.iter().any(|x| x.line == 2 && x.message.contains("only used by the linux backend")), "{p:?}");
}
