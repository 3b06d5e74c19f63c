use embedded_hal::i2c::I2c as _;

use super::*;
use crate::aht20::Aht20;
use crate::air::Sgp30;
use crate::board::{Board, BoardError};
use crate::light::Bh1750;
use crate::spec::parse;

fn sim() -> (Sim, Spec) {
    let spec = parse(crate::EXAMPLES[0].1).unwrap();
    (Sim::new(&spec), spec)
}

fn bus(sim: &mut Sim, spec: &Spec) -> SimI2c {
    sim.i2c(&spec.buses[0]).unwrap()
}

#[test]
fn aht20_reads_what_the_room_is() {
    let (mut s, spec) = sim();
    let mut d = Aht20::new(bus(&mut s, &spec), s.delay());
    let m = d.measure().unwrap();
    let (c, h, _, _) = s.truth();
    assert!((f64::from(m.celsius) - c).abs() < 0.01, "{m:?} vs {c}");
    assert!((f64::from(m.humidity_percent) - h).abs() < 0.01, "{m:?} vs {h}");
    // The driver waited the datasheet's 80 ms on the virtual clock, and calibrated first.
    assert!(s.now_ms() >= 90, "{}", s.now_ms());
}

#[test]
fn aht20_faults() {
    let (mut s, spec) = sim();
    let mut d = Aht20::new(bus(&mut s, &spec), s.delay());
    s.inject("i2c0", 0x38, Some(Inject::Nack));
    assert_eq!(d.measure(), Err(Fault::Missing { addr: 0x38 }));
    s.inject("i2c0", 0x38, Some(Inject::BadCrc));
    assert_eq!(d.measure(), Err(Fault::Crc { device: "AHT20" }));
    s.inject("i2c0", 0x38, Some(Inject::StuckBusy));
    let before = s.now_ms();
    assert_eq!(d.measure(), Err(Fault::Timeout { device: "AHT20", waited_ms: 180 }));
    assert!(s.now_ms() - before <= 200, "the busy wait is bounded");
    s.set_bus_busy("i2c0", true);
    s.inject("i2c0", 0x38, None);
    assert_eq!(d.measure(), Err(Fault::BusBusy));
    s.set_bus_busy("i2c0", false);
    assert!(d.measure().is_ok(), "recovers once the faults clear");
}

#[test]
fn sgp30_warms_up_then_reads_and_catches_bad_crc() {
    let (mut s, spec) = sim();
    let mut d = Sgp30::new(bus(&mut s, &spec), s.delay());
    for _ in 0..crate::air::WARMUP_MEASUREMENTS {
        let r = d.measure().unwrap();
        assert_eq!((r.co2eq_ppm, r.tvoc_ppb, r.warming_up), (400, 0, true));
        s.advance_ms(1000);
    }
    let r = d.measure().unwrap();
    assert!(!r.warming_up);
    assert_eq!((r.co2eq_ppm, r.tvoc_ppb), s.truth().3);
    s.inject("i2c0", 0x58, Some(Inject::BadCrc));
    assert_eq!(d.measure(), Err(Fault::Crc { device: "SGP30" }));
    s.inject("i2c0", 0x58, Some(Inject::Nack));
    assert_eq!(d.measure(), Err(Fault::Missing { addr: 0x58 }));
}

#[test]
fn sgp30_refuses_a_read_with_no_measurement_pending() {
    let (mut s, spec) = sim();
    let mut b = bus(&mut s, &spec);
    let mut buf = [0u8; 6];
    assert!(b.read(0x58, &mut buf).is_err());
    assert!(b.write(0x58, &[0x12, 0x34]).is_err(), "an unknown command is not acknowledged");
}

#[test]
fn bh1750_reads_lux_and_sees_the_leds() {
    let (mut s, spec) = sim();
    let mut d = Bh1750::new(bus(&mut s, &spec), s.delay(), 0x23);
    let dark = d.measure().unwrap();
    assert!((f64::from(dark) - s.truth().2).abs() < 1.0, "{dark}");
    let mut board = Board::open(spec.clone(), &mut s.clone()).unwrap();
    board.set_led("strip", RGB8 { r: 255, g: 255, b: 255 }, 255, "solid").unwrap();
    let lit = d.measure().unwrap();
    assert!(lit > dark + 250.0, "8 white LEDs add about 320 lx: {dark} -> {lit}");
    s.inject("i2c0", 0x23, Some(Inject::Nack));
    assert_eq!(d.measure(), Err(Fault::Missing { addr: 0x23 }));
    let mut other = Bh1750::new(bus(&mut s, &spec), s.delay(), 0x5C);
    assert_eq!(other.measure(), Err(Fault::Missing { addr: 0x5C }), "nothing wired at the other address");
}

#[test]
fn the_strip_decodes_what_the_spi_driver_sent() {
    let (mut s, spec) = sim();
    let mut board = Board::open(spec, &mut s).unwrap();
    let sent = board.set_led("strip", RGB8 { r: 200, g: 10, b: 0 }, 128, "alternate").unwrap();
    assert_eq!(s.led_frame(10), sent);
    assert_eq!(sent[0], RGB8 { r: 100, g: 5, b: 0 });
    assert_eq!(sent[1], RGB8::default());
    assert_eq!(board.led_state("strip").unwrap(), &sent[..]);
    let err = board.set_led("strip", RGB8::default(), 1, "strobe").unwrap_err();
    assert!(err.to_string().contains("Unknown pattern"), "{err}");
}

#[test]
fn decode_refuses_garbage() {
    assert_eq!(decode_ws2812(&[0x88; 11]), None);
    assert_eq!(decode_ws2812(&[0x81; 12]), None);
    assert_eq!(decode_ws2812(&[0x88; 12]), Some(std::vec![RGB8::default()]));
}

#[test]
fn the_servo_moves_within_its_limits_only() {
    let (mut s, spec) = sim();
    let mut board = Board::open(spec.clone(), &mut s).unwrap();
    board.set_servo("arm", 90.0).unwrap();
    assert_eq!(s.duty(4), Some(1500), "1.5 ms of 20 ms at 90 degrees");
    let limits = match spec.device("arm").unwrap().kind {
        Kind::Servo(l) => l,
        _ => unreachable!(),
    };
    assert!((limits.angle(s.duty(4).unwrap(), PWM_MAX_DUTY) - 90.0).abs() < 0.1);
    let err = board.set_servo("arm", 200.0).unwrap_err();
    assert!(err.to_string().contains("outside the allowed range 0 to 180"), "{err}");
    assert_eq!(s.duty(4), Some(1500), "a refused angle moves nothing");
    assert_eq!(board.servo_angle("arm"), Some(90.0));
}

#[test]
fn gpio_allowlist_and_direction() {
    let (mut s, spec) = sim();
    let mut board = Board::open(spec, &mut s).unwrap();
    board.gpio_write(2, true).unwrap();
    assert_eq!(s.level(2), Some(true));
    assert!(board.gpio_read(2).unwrap());
    s.set_level(5, true);
    assert!(board.gpio_read(5).unwrap());
    s.set_level(5, false);
    assert!(!board.gpio_read(5).unwrap());
    assert!(matches!(board.gpio_write(5, true), Err(BoardError::WrongDirection { pin: 5, .. })));
    let e = board.gpio_write(9, true).unwrap_err();
    assert!(matches!(e, BoardError::PinNotAllowed { pin: 9, .. }));
    assert!(e.to_string().contains("Allowed: GPIO2, GPIO3, GPIO5, GPIO6"), "{e}");
    assert_eq!(s.level(9), None, "a refused pin is never touched");
}

#[test]
fn board_reads_each_sensor_with_units_and_names_faults() {
    let (mut s, spec) = sim();
    let mut board = Board::open(spec, &mut s).unwrap();
    let q = board.read_sensor("climate").unwrap();
    assert_eq!((q[0].name, q[0].unit, q[1].unit), ("temperature", "°C", "%RH"));
    assert_eq!(board.read_sensor("light").unwrap()[0].unit, "lx");
    assert_eq!(board.read_sensor("air").unwrap()[0].unit, "ppm");
    s.inject("i2c0", 0x38, Some(Inject::BadCrc));
    let e = board.read_sensor("climate").unwrap_err().to_string();
    assert!(e.contains("`climate`") && e.contains("CRC-8"), "{e}");
    assert!(board.read_sensor("strip").unwrap_err().to_string().contains("not a sensor"));
    let e = board.read_sensor("nope").unwrap_err().to_string();
    assert!(e.contains("Devices: climate, air, light, strip, arm"), "{e}");
}

#[test]
fn the_same_seed_gives_the_same_readings() {
    let run = || {
        let (mut s, spec) = sim();
        let mut board = Board::open(spec, &mut s).unwrap();
        (0..5)
            .map(|_| {
                s.advance_ms(60_000);
                board.read_sensor("climate").unwrap()[0].value
            })
            .collect::<std::vec::Vec<_>>()
    };
    let a = run();
    assert_eq!(a, run());
    assert!(a.windows(2).any(|w| w[0] != w[1]), "readings change over time: {a:?}");
}
