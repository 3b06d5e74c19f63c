use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::board::Host;
use crate::testing::Fixture;
use crate::tools::ToolErrorKind;

fn parse(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[tokio::test]
async fn the_built_in_board_is_used_without_a_board_json() {
    let f = Fixture::new(&[]);
    let h = Arc::new(Host::default());
    let v = parse(&f.call(ListDevices(Arc::clone(&h)), json!({})).await.unwrap());
    assert_eq!(v["chip"], "simulated");
    assert_eq!(v["source"], crate::board::BUILT_IN);
    let ids: Vec<&str> = v["devices"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["climate", "air", "light", "strip", "arm"]);
    assert_eq!(v["gpio"][0], json!({"pin": 2, "direction": "output", "label": "relay"}));
}

#[tokio::test]
async fn sensor_read_gives_values_units_and_a_time() {
    let f = Fixture::new(&[]);
    let h = Arc::new(Host::default());
    let before = crate::clock::Clock::system().unix_secs();
    let v = parse(&f.call(SensorRead(Arc::clone(&h)), json!({"device": "climate"})).await.unwrap());
    let after = crate::clock::Clock::system().unix_secs();
    assert_eq!(v["type"], "aht20");
    assert_eq!(v["values"]["temperature"]["unit"], "°C");
    let t = v["values"]["temperature"]["value"].as_f64().unwrap();
    assert!((15.0..30.0).contains(&t), "{v}");
    assert_eq!(v["values"]["humidity"]["unit"], "%RH");
    let at = v["at"].as_str().unwrap();
    assert!((before..=after).any(|s| crate::board::at_text(s) == at), "{at} is not between {before} and {after}");
    let air = parse(&f.call(SensorRead(Arc::clone(&h)), json!({"device": "air"})).await.unwrap());
    assert_eq!(air["values"]["warming_up"], true);
    let e = f.call(SensorRead(Arc::clone(&h)), json!({"device": "strip"})).await.unwrap_err();
    assert!(e.0.contains("not a sensor"), "{e}");
    let e = f.call(SensorRead(h), json!({"device": "kitchen"})).await.unwrap_err();
    assert!(e.0.contains("Devices: climate, air, light, strip, arm"), "{e}");
}

#[tokio::test]
async fn the_allowlist_and_directions_are_enforced() {
    let f = Fixture::new(&[]);
    let h = Arc::new(Host::default());
    let e = f.call(GpioWrite(Arc::clone(&h)), json!({"pin": 13, "value": 1})).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::Refused);
    assert!(e.0.contains("GPIO13 is not in board.json's gpio allowlist"), "{e}");
    let e = f.call(GpioWrite(Arc::clone(&h)), json!({"pin": 5, "value": "high"})).await.unwrap_err();
    assert!(e.0.contains("input pin"), "{e}");
    let e = f.call(GpioWrite(Arc::clone(&h)), json!({"pin": 2, "value": 7})).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::InvalidArgs);
    let e = f.call(GpioRead(Arc::clone(&h)), json!({"pin": 300})).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::InvalidArgs, "a pin number past u8 is refused by the schema type");
    f.call(GpioWrite(Arc::clone(&h)), json!({"pin": 2, "value": true})).await.unwrap();
    let v = parse(&f.call(GpioRead(h), json!({"pin": 2})).await.unwrap());
    assert_eq!(v["level"], "high");
}

#[tokio::test]
async fn led_and_servo_state_read_back() {
    let f = Fixture::new(&[]);
    let h = Arc::new(Host::default());
    let v = parse(
        &f.call(LedSet(Arc::clone(&h)), json!({"device": "strip", "color": "#ff0000", "brightness": 50}))
            .await
            .unwrap(),
    );
    assert_eq!(v["leds"][0], "#800000");
    f.call(ServoSet(Arc::clone(&h)), json!({"device": "arm", "angle": 45})).await.unwrap();
    let strip = parse(&f.call(GetDevice(Arc::clone(&h)), json!({"device": "strip"})).await.unwrap());
    assert_eq!(strip["state"]["leds"].as_array().unwrap().len(), 8);
    assert_eq!(strip["state"]["leds"][7], "#800000");
    let arm = parse(&f.call(GetDevice(Arc::clone(&h)), json!({"device": "arm"})).await.unwrap());
    assert_eq!(arm["state"]["angle"], 45.0);
    assert_eq!(arm["limits"]["max_angle"], 180.0);
    let e = f.call(ServoSet(Arc::clone(&h)), json!({"device": "arm", "angle": 190})).await.unwrap_err();
    assert!(e.0.contains("outside the allowed range 0 to 180"), "{e}");
    let e = f.call(LedSet(Arc::clone(&h)), json!({"device": "strip", "color": "ultraviolet"})).await.unwrap_err();
    assert_eq!(e.kind(), ToolErrorKind::InvalidArgs);
    let e = f.call(LedSet(h), json!({"device": "strip", "brightness": 101})).await.unwrap_err();
    assert!(e.0.contains("over 100"), "{e}");
}

/// The shared `led_set` may leave the device out (the chip has one LED): the board's only
/// strip is meant. `gpio_write` reads the chip's first name for the level too.
#[tokio::test]
async fn led_set_without_a_device_lights_the_only_strip_and_gpio_takes_level() {
    let f = Fixture::new(&[]);
    let h = Arc::new(Host::default());
    let v = parse(&f.call(LedSet(Arc::clone(&h)), json!({"color": "blue"})).await.unwrap());
    assert_eq!(v["device"], "strip");
    assert_eq!(v["leds"][0], "#0000ff");
    f.call(GpioWrite(Arc::clone(&h)), json!({"pin": 2, "level": "high"})).await.unwrap();
    let v = parse(&f.call(GpioRead(h), json!({"pin": 2})).await.unwrap());
    assert_eq!(v["level"], "high");
}

#[tokio::test]
async fn a_bad_board_json_is_reported_with_lines_and_reload_picks_up_the_fix() {
    let f = Fixture::new(&[]);
    let h = Arc::new(Host::default());
    let path = f.root().join(crate::board::FILE);
    std::fs::write(
        &path,
        "{\n  \"name\": \"desk\",\n  \"chip\": \"simulated\",\n  \"devices\": [\n    { \"id\": \"t\", \"type\": \"lm35\" }\n  ]\n}\n",
    )
    .unwrap();
    let e = f.call(ListDevices(Arc::clone(&h)), json!({})).await.unwrap_err();
    assert!(e.0.contains("board.json:line 5: device `t`: unknown type `lm35`"), "{e}");
    let e = f.call(SensorRead(Arc::clone(&h)), json!({"device": "t"})).await.unwrap_err();
    assert!(e.0.contains("line 5"), "{e}");
    let schema = parse(&f.call(Schema, json!({})).await.unwrap());
    assert!(schema["device_types"]["aht20"].is_string());
    std::fs::write(&path, chela_board::EXAMPLES[0].1.replace("Chela simulated board", "desk")).unwrap();
    let ok = f.call(Reload(Arc::clone(&h)), json!({})).await.unwrap();
    assert!(ok.contains("Loaded \"desk\""), "{ok}");
    f.call(SensorRead(h), json!({"device": "light"})).await.unwrap();
}

#[tokio::test]
async fn a_board_for_another_chip_is_described_but_not_driven() {
    let f = Fixture::new(&[]);
    let h = Arc::new(Host::default());
    std::fs::write(f.root().join(crate::board::FILE), chela_board::EXAMPLES[2].1).unwrap();
    let v = parse(&f.call(ListDevices(Arc::clone(&h)), json!({})).await.unwrap());
    assert_eq!(v["chip"], "esp32c3");
    let p = parse(&f.call(QueryPeripheral(Arc::clone(&h)), json!({"kind": "gpio"})).await.unwrap());
    let free: Vec<u64> = p["free_pins"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
    assert!(!free.contains(&4) && !free.contains(&12), "used and flash pins are not free: {free:?}");
    assert!(free.contains(&0));
    let e = f.call(SensorRead(h), json!({"device": "climate"})).await.unwrap_err();
    assert!(e.0.contains("esp32c3") && e.0.contains("firmware"), "{e}");
}
