//! `board.json`: which board this is, what is wired to it, and which GPIO pins the model may
//! touch in which direction.
//!
//! ```json
//! { "name": "desk", "chip": "esp32c3",
//!   "buses":   [{ "id": "i2c0", "type": "i2c", "pins": { "sda": 8, "scl": 9 } }],
//!   "devices": [{ "id": "climate", "type": "aht20", "bus": "i2c0", "address": "0x38" },
//!               { "id": "strip", "type": "ws2812", "pins": { "data": 10 }, "params": { "count": 8 } }],
//!   "gpio":    [{ "pin": 2, "direction": "output", "label": "relay" }] }
//! ```
//!
//! [`parse`] checks the syntax (serde_json's line and column) and then the wiring: unknown
//! chips, types and fields; pins the chip does not have or reserves; one pin used twice;
//! duplicate ids; two devices at one address on one bus; addresses a device cannot have. Each
//! problem names the line of the entry (or field) it is about.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

use serde::Deserialize;
use serde_json::Value;

use crate::servo::Limits;

/// The largest board.json read (a hand-written file is a few KiB).
pub const MAX_BYTES: usize = 64 * 1024;
/// At most this many devices, buses and allowlisted pins each.
pub const MAX_ENTRIES: usize = 64;
/// The longest WS2812 strip.
pub const MAX_LEDS: usize = 1024;

/// A chip's pins, as data (esp-hal style), so checks need no `cfg`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chip {
    pub name: &'static str,
    pub summary: &'static str,
    /// GPIO numbers 0..pins exist.
    pub pins: u8,
    /// Pins that exist but are taken by the module (flash, ID EEPROM).
    pub reserved: &'static [u8],
    pub i2c_buses: u8,
    pub pwm_channels: u8,
}

pub const CHIPS: &[Chip] = &[
    Chip {
        name: "simulated",
        summary: "Chela's simulated board: virtual sensors on a modelled I2C bus (the default on a PC)",
        pins: 40,
        reserved: &[],
        i2c_buses: 2,
        pwm_channels: 8,
    },
    Chip {
        name: "esp32c3",
        summary: "ESP32-C3 (RISC-V, GPIO0-21; GPIO12-17 drive the SPI flash)",
        pins: 22,
        reserved: &[12, 13, 14, 15, 16, 17],
        i2c_buses: 1,
        pwm_channels: 6,
    },
    Chip {
        name: "esp32c6",
        summary: "ESP32-C6 (RISC-V, GPIO0-30; GPIO24-30 drive the SPI flash)",
        pins: 31,
        reserved: &[24, 25, 26, 27, 28, 29, 30],
        i2c_buses: 1,
        pwm_channels: 6,
    },
    Chip {
        name: "bcm2711",
        summary: "Raspberry Pi 4 (BCM GPIO0-27 on the header; GPIO0-1 are the HAT ID EEPROM bus)",
        pins: 28,
        reserved: &[0, 1],
        i2c_buses: 2,
        pwm_channels: 2,
    },
];

pub fn chip(name: &str) -> Option<&'static Chip> {
    CHIPS.iter().find(|c| c.name == name)
}

/// The device types and what each needs.
pub const TYPES: &[(&str, &str)] = &[
    ("aht20", "temperature and humidity, I2C at 0x38"),
    ("sgp30", "air quality (CO2eq, TVOC), I2C at 0x58"),
    ("bh1750", "ambient light in lux, I2C at 0x23 or 0x5c"),
    ("ws2812", "addressable RGB LED strip; pins.data; params.count"),
    ("servo", "hobby servo on PWM; pins.pwm; params min_angle, max_angle, min_pulse_us, max_pulse_us"),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Input,
    Output,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Input => "input",
            Direction::Output => "output",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Aht20,
    Sgp30,
    Bh1750,
    Ws2812 { count: usize },
    Servo(Limits),
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Aht20 => "aht20",
            Kind::Sgp30 => "sgp30",
            Kind::Bh1750 => "bh1750",
            Kind::Ws2812 { .. } => "ws2812",
            Kind::Servo(_) => "servo",
        }
    }

    pub fn is_sensor(&self) -> bool {
        matches!(self, Kind::Aht20 | Kind::Sgp30 | Kind::Bh1750)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Bus {
    pub id: String,
    pub pins: BTreeMap<String, u8>,
    /// On Linux: the character device (`/dev/i2c-1`).
    pub path: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    pub id: String,
    pub kind: Kind,
    pub bus: Option<String>,
    pub address: Option<u8>,
    pub pins: BTreeMap<String, u8>,
    pub params: serde_json::Map<String, Value>,
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Gpio {
    pub pin: u8,
    pub direction: Direction,
    pub label: String,
}

/// What drives the board's devices (board.json `backend`; by default the chip decides: the
/// simulated chip is simulated, a Raspberry Pi's chip is Linux, an ESP32 runs the firmware).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Driven {
    /// The bus model in [`crate::sim`] (any chip may be simulated).
    Simulated,
    /// A Linux single-board computer's device files ([`crate::linux`], feature `linux`).
    Linux(LinuxPaths),
    /// Chela's firmware on the chip itself; the host only describes the board.
    Firmware,
}

impl Driven {
    pub fn name(&self) -> &'static str {
        match self {
            Driven::Simulated => "simulated",
            Driven::Linux(_) => "linux",
            Driven::Firmware => "firmware",
        }
    }
}

/// A fault the simulated backend plays (board.json `simulate.faults`), so a person or a test
/// can see how Chela behaves when the hardware misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimFault {
    /// A sensor: it does not acknowledge its address, as if unplugged.
    Nack,
    /// A sensor: every CRC byte it sends is wrong.
    BadCrc,
    /// A sensor (AHT20): its busy bit never clears.
    StuckBusy,
    /// A bus: another controller holds it.
    Busy,
}

/// The simulated backend's room and faults (board.json `simulate`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Simulate {
    /// The room's mean relative humidity, %RH (48 when not given).
    pub humidity: Option<f32>,
    /// The room's mean temperature, °C (21.5 when not given).
    pub celsius: Option<f32>,
    /// Device or bus id, and the fault it plays.
    pub faults: Vec<(String, SimFault)>,
}

/// The chips whose boards run Linux (the `linux` backend is refused for the others).
pub const LINUX_CHIPS: &[&str] = &["bcm2711"];

/// Where the Linux backend finds its devices (board.json `linux`); each has a default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinuxPaths {
    /// The GPIO character device; allowlisted pin N is line N on it.
    pub gpiochip: String,
    /// The SPI device a WS2812 strip's data line is the MOSI of.
    pub spidev: String,
    /// The sysfs PWM chip directory a servo's channel is exported from.
    pub pwmchip: String,
}

impl Default for LinuxPaths {
    fn default() -> Self {
        LinuxPaths {
            gpiochip: "/dev/gpiochip0".into(),
            spidev: "/dev/spidev0.0".into(),
            pwmchip: "/sys/class/pwm/pwmchip0".into(),
        }
    }
}

/// The PWM channel a servo on `pin` uses on the Linux backend: `params.pwm_channel`, or the
/// channel the chip wires to that pin (BCM GPIO12/18: channel 0, GPIO13/19: channel 1).
pub fn pwm_channel(chip: &Chip, device: &Device) -> Option<u32> {
    if let Some(v) = device.params.get("pwm_channel") {
        return v.as_u64().and_then(|c| u32::try_from(c).ok());
    }
    let pin = *device.pins.get("pwm")?;
    match (chip.name, pin) {
        ("bcm2711", 12 | 18) => Some(0),
        ("bcm2711", 13 | 19) => Some(1),
        _ => None,
    }
}

/// The longest device path board.json may name.
pub const MAX_PATH: usize = 256;

#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    pub name: String,
    pub chip: &'static Chip,
    pub backend: Driven,
    pub simulate: Simulate,
    /// The simulated board's seed: the same seed gives the same readings.
    pub seed: u64,
    pub buses: Vec<Bus>,
    pub devices: Vec<Device>,
    pub gpio: Vec<Gpio>,
}

impl Spec {
    pub fn device(&self, id: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.id == id)
    }

    pub fn gpio(&self, pin: u8) -> Option<&Gpio> {
        self.gpio.iter().find(|g| g.pin == pin)
    }

    /// Every pin in use (buses, devices, allowlist) with what uses it.
    pub fn used_pins(&self) -> Vec<(u8, String)> {
        let mut out = Vec::new();
        for b in &self.buses {
            out.extend(b.pins.iter().map(|(role, &p)| (p, format!("bus {} ({role})", b.id))));
        }
        for d in &self.devices {
            out.extend(d.pins.iter().map(|(role, &p)| (p, format!("device {} ({role})", d.id))));
        }
        out.extend(self.gpio.iter().map(|g| (g.pin, format!("gpio allowlist ({})", g.direction.as_str()))));
        out
    }
}

/// One thing wrong with a board.json, at a line (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: String,
    chip: String,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    linux: Option<RawLinux>,
    #[serde(default)]
    simulate: Option<RawSimulate>,
    #[serde(default)]
    buses: Vec<RawBus>,
    #[serde(default)]
    devices: Vec<RawDevice>,
    #[serde(default)]
    gpio: Vec<RawGpio>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSimulate {
    #[serde(default)]
    humidity: Option<f64>,
    #[serde(default)]
    celsius: Option<f64>,
    #[serde(default)]
    faults: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLinux {
    #[serde(default)]
    gpiochip: Option<String>,
    #[serde(default)]
    spidev: Option<String>,
    #[serde(default)]
    pwmchip: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBus {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    pins: BTreeMap<String, u32>,
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    bus: Option<String>,
    #[serde(default)]
    address: Option<Value>,
    #[serde(default)]
    pins: BTreeMap<String, u32>,
    #[serde(default)]
    params: serde_json::Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGpio {
    pin: u32,
    direction: String,
    #[serde(default)]
    label: String,
}

/// Parses and checks a board.json. All problems found are returned, not just the first.
pub fn parse(text: &str) -> Result<Spec, Vec<Problem>> {
    if text.len() > MAX_BYTES {
        return Err(alloc::vec![Problem {
            line: 1,
            message: format!("the file is {} bytes; the limit is {MAX_BYTES}", text.len()),
        }]);
    }
    let raw: RawSpec = serde_json::from_str(text)
        .map_err(|e| alloc::vec![Problem { line: e.line().max(1), message: printable(&e.to_string()) }])?;
    let mut c = Checker { text, problems: Vec::new() };
    let spec = c.check(raw);
    if c.problems.is_empty() { Ok(spec) } else { Err(c.problems) }
}

struct Checker<'t> {
    text: &'t str,
    problems: Vec<Problem>,
}

impl Checker<'_> {
    fn err(&mut self, line: usize, message: String) {
        self.problems.push(Problem { line, message: printable(&message) });
    }

    /// The line of entry `i` of top-level array `key`, or of its field `field` when present.
    fn line(&self, key: &str, i: usize, field: Option<&str>) -> usize {
        let Some(range) = elements(self.text, key).into_iter().nth(i) else {
            return top_key_line(self.text, key);
        };
        let at =
            field.and_then(|f| find_key(&self.text[range.clone()], f)).map_or(range.start, |off| range.start + off);
        line_at(self.text, at)
    }

    fn pin(&mut self, chip: &Chip, n: u32, line: usize, what: &str) -> Option<u8> {
        if n >= u32::from(chip.pins) {
            self.err(line, format!("{what}: GPIO{n} does not exist on {} (GPIO0-{})", chip.name, chip.pins - 1));
            return None;
        }
        let p = n as u8;
        if chip.reserved.contains(&p) {
            self.err(line, format!("{what}: GPIO{n} is reserved on {} ({})", chip.name, chip.summary));
            return None;
        }
        Some(p)
    }

    fn check(&mut self, raw: RawSpec) -> Spec {
        let chip = match chip(&raw.chip) {
            Some(c) => c,
            None => {
                let names: Vec<&str> = CHIPS.iter().map(|c| c.name).collect();
                self.err(
                    top_key_line(self.text, "chip"),
                    format!("unknown chip `{}`; known: {}", raw.chip, names.join(", ")),
                );
                &CHIPS[0]
            }
        };
        if raw.name.trim().is_empty() {
            self.err(top_key_line(self.text, "name"), "the board needs a name".into());
        }
        for (key, n) in [("buses", raw.buses.len()), ("devices", raw.devices.len()), ("gpio", raw.gpio.len())] {
            if n > MAX_ENTRIES {
                self.err(top_key_line(self.text, key), format!("{n} entries in `{key}`; the limit is {MAX_ENTRIES}"));
            }
        }
        // pin -> (what uses it, line)
        let mut used: BTreeMap<u8, (String, usize)> = BTreeMap::new();
        let mut claim = |c: &mut Self, p: u8, who: String, line: usize| {
            if let Some((first, first_line)) = used.get(&p) {
                c.err(line, format!("GPIO{p} is used twice: by {who} and by {first} (line {first_line})"));
            } else {
                used.insert(p, (who, line));
            }
        };

        let mut buses = Vec::new();
        for (i, b) in raw.buses.into_iter().enumerate() {
            let line = self.line("buses", i, None);
            if !valid_id(&b.id) {
                self.err(line, format!("bus id `{}`: use 1-64 letters, digits, - and _", b.id));
            }
            if b.kind != "i2c" {
                self.err(line, format!("bus `{}`: unknown bus type `{}`; known: i2c", b.id, b.kind));
            }
            if buses.iter().any(|x: &Bus| x.id == b.id) {
                self.err(line, format!("bus id `{}` is used twice", b.id));
            }
            let mut pins = BTreeMap::new();
            for (role, n) in b.pins {
                if role != "sda" && role != "scl" {
                    self.err(line, format!("bus `{}`: unknown pin role `{role}`; an I2C bus has sda and scl", b.id));
                    continue;
                }
                let pl = self.line("buses", i, Some(&role));
                if let Some(p) = self.pin(chip, n, pl, &format!("bus `{}` {role}", b.id)) {
                    claim(self, p, format!("bus {} ({role})", b.id), pl);
                    pins.insert(role, p);
                }
            }
            buses.push(Bus { id: b.id, pins, path: b.path });
        }

        let mut devices: Vec<Device> = Vec::new();
        for (i, d) in raw.devices.into_iter().enumerate() {
            let line = self.line("devices", i, None);
            if !valid_id(&d.id) {
                self.err(line, format!("device id `{}`: use 1-64 letters, digits, - and _", d.id));
            }
            if devices.iter().any(|x| x.id == d.id) {
                self.err(line, format!("device id `{}` is used twice", d.id));
            }
            let Some(kind) = self.kind(&d, i) else { continue };
            let address = self.address(&d, &kind, i, &buses, &devices);
            let mut pins = BTreeMap::new();
            let roles: &[&str] = match kind {
                Kind::Ws2812 { .. } => &["data"],
                Kind::Servo(_) => &["pwm"],
                _ => &[],
            };
            for need in roles {
                if !d.pins.contains_key(*need) {
                    self.err(line, format!("device `{}` ({}) needs pins.{need}", d.id, kind.name()));
                }
            }
            for (role, n) in &d.pins {
                let pl = self.line("devices", i, Some(role));
                if !roles.contains(&role.as_str()) {
                    self.err(pl, format!("device `{}` ({}) has no pin role `{role}`", d.id, kind.name()));
                    continue;
                }
                if let Some(p) = self.pin(chip, *n, pl, &format!("device `{}` {role}", d.id)) {
                    claim(self, p, format!("device {} ({role})", d.id), pl);
                    pins.insert(role.clone(), p);
                }
            }
            devices.push(Device { id: d.id, kind, bus: d.bus, address, pins, params: d.params, line });
        }

        let mut gpio: Vec<Gpio> = Vec::new();
        for (i, g) in raw.gpio.into_iter().enumerate() {
            let line = self.line("gpio", i, None);
            let direction = match g.direction.as_str() {
                "input" => Direction::Input,
                "output" => Direction::Output,
                other => {
                    self.err(line, format!("GPIO{}: direction `{other}`; use input or output", g.pin));
                    continue;
                }
            };
            if let Some(p) = self.pin(chip, g.pin, line, "gpio allowlist") {
                claim(self, p, format!("the gpio allowlist ({})", direction.as_str()), line);
                gpio.push(Gpio { pin: p, direction, label: g.label });
            }
        }

        let backend = self.backend(chip, raw.backend.as_deref(), raw.linux, &buses, &devices);
        let simulate = raw.simulate.map(|s| self.simulate(s, &backend, &buses, &devices)).unwrap_or_default();
        Spec { name: raw.name, chip, backend, simulate, seed: raw.seed.unwrap_or(1), buses, devices, gpio }
    }

    fn simulate(&mut self, raw: RawSimulate, backend: &Driven, buses: &[Bus], devices: &[Device]) -> Simulate {
        let at = top_key_value(self.text, "simulate").unwrap_or_default();
        let line_of =
            |c: &Self, key: &str| find_key(&c.text[at..], key).map_or(line_at(c.text, at), |o| line_at(c.text, at + o));
        if *backend != Driven::Simulated {
            self.err(
                line_at(self.text, at),
                format!("`simulate` is only used by the simulated backend, not {}", backend.name()),
            );
        }
        let mut out = Simulate::default();
        for (key, given, slot, range) in [
            ("humidity", raw.humidity, &mut out.humidity, 0.0..=100.0),
            ("celsius", raw.celsius, &mut out.celsius, -40.0..=85.0),
        ] {
            if let Some(v) = given {
                if range.contains(&v) {
                    *slot = Some(v as f32);
                } else {
                    let l = line_of(self, key);
                    self.err(l, format!("simulate.{key} must be from {} to {}", range.start(), range.end()));
                }
            }
        }
        for (id, fault) in raw.faults {
            let l = line_of(self, &id);
            let is_bus = buses.iter().any(|b| b.id == id);
            let sensor = devices.iter().find(|d| d.id == id).map(|d| d.kind.is_sensor());
            let f = match (fault.as_str(), is_bus, sensor) {
                ("busy", true, _) => SimFault::Busy,
                ("nack", _, Some(true)) => SimFault::Nack,
                ("bad_crc", _, Some(true)) => SimFault::BadCrc,
                ("stuck_busy", _, Some(true)) => SimFault::StuckBusy,
                (_, false, None) => {
                    self.err(l, format!("simulate.faults: there is no sensor or bus `{}`", id.escape_debug()));
                    continue;
                }
                _ => {
                    self.err(
                        l,
                        format!(
                            "simulate.faults `{}`: `{}` is not a fault it can play; a sensor plays nack, bad_crc or stuck_busy, a bus plays busy",
                            id.escape_debug(),
                            fault.escape_debug()
                        ),
                    );
                    continue;
                }
            };
            out.faults.push((id, f));
        }
        out
    }

    /// The backend board.json asks for (or the chip's default), and what it needs: on Linux,
    /// device paths for every bus and a PWM channel for every servo.
    fn backend(
        &mut self,
        chip: &Chip,
        asked: Option<&str>,
        linux: Option<RawLinux>,
        buses: &[Bus],
        devices: &[Device],
    ) -> Driven {
        let line = top_key_line(self.text, "backend");
        let is_linux_chip = LINUX_CHIPS.contains(&chip.name);
        let kind = match asked {
            None if chip.name == "simulated" => "simulated",
            None if is_linux_chip => "linux",
            None => "firmware",
            Some(k @ ("simulated" | "linux" | "firmware")) => k,
            Some(other) => {
                self.err(line, format!("unknown backend `{other}`; use simulated, linux or firmware"));
                "simulated"
            }
        };
        if linux.is_some() && kind != "linux" {
            self.err(
                top_key_line(self.text, "linux"),
                format!("`linux` paths are only used by the linux backend, not {kind}"),
            );
        }
        match kind {
            "simulated" => Driven::Simulated,
            "firmware" => {
                if chip.name == "simulated" || is_linux_chip {
                    self.err(
                        line,
                        format!("the {} does not run Chela's firmware; use the simulated or linux backend", chip.name),
                    );
                }
                Driven::Firmware
            }
            _ => {
                if !is_linux_chip {
                    self.err(
                        line,
                        format!(
                            "the {} does not run Linux; the linux backend is for: {}",
                            chip.name,
                            LINUX_CHIPS.join(", ")
                        ),
                    );
                }
                let mut paths = LinuxPaths::default();
                if let Some(l) = linux {
                    for (key, given, slot) in [
                        ("gpiochip", l.gpiochip, &mut paths.gpiochip),
                        ("spidev", l.spidev, &mut paths.spidev),
                        ("pwmchip", l.pwmchip, &mut paths.pwmchip),
                    ] {
                        if let Some(p) = given {
                            if let Err(why) = check_path(&p) {
                                let at = top_key_value(self.text, "linux")
                                    .and_then(|v| find_key(&self.text[v..], key).map(|o| v + o))
                                    .map_or(line, |b| line_at(self.text, b));
                                self.err(at, format!("linux.{key}: {why}"));
                            }
                            *slot = p;
                        }
                    }
                }
                for (i, b) in buses.iter().enumerate() {
                    let l = self.line("buses", i, Some("path"));
                    match &b.path {
                        None => self.err(
                            self.line("buses", i, None),
                            format!("bus `{}` needs a path (like \"/dev/i2c-1\") on the linux backend", b.id),
                        ),
                        Some(p) => {
                            if let Err(why) = check_path(p) {
                                self.err(l, format!("bus `{}` path: {why}", b.id));
                            }
                        }
                    }
                }
                for d in devices {
                    if matches!(d.kind, Kind::Servo(_)) && pwm_channel(chip, d).is_none() {
                        let pin = d.pins.get("pwm").copied().unwrap_or_default();
                        self.err(
                            d.line,
                            format!(
                                "device `{}`: GPIO{pin} has no hardware PWM channel on {}; use GPIO12/18 (channel 0) \
                                 or GPIO13/19 (channel 1), or set params.pwm_channel",
                                d.id, chip.name
                            ),
                        );
                    }
                }
                Driven::Linux(paths)
            }
        }
    }

    fn kind(&mut self, d: &RawDevice, i: usize) -> Option<Kind> {
        let line = self.line("devices", i, Some("type"));
        let param = |k: &str| d.params.get(k);
        let known: &[&str] = match d.kind.as_str() {
            "aht20" | "sgp30" | "bh1750" => &[],
            "ws2812" => &["count"],
            "servo" => &["min_angle", "max_angle", "min_pulse_us", "max_pulse_us", "range_deg", "pwm_channel"],
            other => {
                let names: Vec<&str> = TYPES.iter().map(|t| t.0).collect();
                self.err(line, format!("device `{}`: unknown type `{other}`; known: {}", d.id, names.join(", ")));
                return None;
            }
        };
        for k in d.params.keys() {
            if !known.contains(&k.as_str()) {
                let pl = self.line("devices", i, Some(k));
                self.err(pl, format!("device `{}` ({}): unknown parameter `{k}`", d.id, d.kind));
            }
        }
        let num = |c: &mut Self, k: &str, default: f64, min: f64, max: f64| -> f64 {
            match param(k) {
                None => default,
                Some(v) => match v.as_f64() {
                    Some(x) if (min..=max).contains(&x) => x,
                    _ => {
                        let pl = c.line("devices", i, Some(k));
                        c.err(pl, format!("device `{}`: {k} must be a number from {min} to {max}", d.id));
                        default
                    }
                },
            }
        };
        Some(match d.kind.as_str() {
            "aht20" => Kind::Aht20,
            "sgp30" => Kind::Sgp30,
            "bh1750" => Kind::Bh1750,
            "ws2812" => Kind::Ws2812 { count: num(self, "count", 1.0, 1.0, MAX_LEDS as f64) as usize },
            _ => {
                let l = Limits {
                    min_angle: num(self, "min_angle", 0.0, 0.0, 360.0) as f32,
                    max_angle: num(self, "max_angle", 180.0, 0.0, 360.0) as f32,
                    min_pulse_us: num(self, "min_pulse_us", 500.0, 100.0, 3000.0) as u32,
                    max_pulse_us: num(self, "max_pulse_us", 2500.0, 100.0, 3000.0) as u32,
                    range_deg: num(self, "range_deg", 180.0, 1.0, 360.0) as f32,
                    period_us: 20_000,
                };
                if let Some(v) = param("pwm_channel")
                    && v.as_u64().is_none_or(|c| c >= 64)
                {
                    let pl = self.line("devices", i, Some("pwm_channel"));
                    self.err(pl, format!("device `{}`: pwm_channel must be a whole number from 0 to 63", d.id));
                }
                if l.min_angle > l.max_angle || l.max_angle > l.range_deg || l.min_pulse_us >= l.max_pulse_us {
                    self.err(
                        self.line("devices", i, None),
                        format!(
                            "device `{}`: servo limits need min_angle <= max_angle <= range_deg and min_pulse_us < max_pulse_us",
                            d.id
                        ),
                    );
                }
                Kind::Servo(l)
            }
        })
    }

    fn address(&mut self, d: &RawDevice, kind: &Kind, i: usize, buses: &[Bus], others: &[Device]) -> Option<u8> {
        let line = self.line("devices", i, Some("address"));
        let allowed: &[u8] = match kind {
            Kind::Aht20 => &[crate::aht20::ADDRESS],
            Kind::Sgp30 => &[crate::air::ADDRESS],
            Kind::Bh1750 => &[crate::light::ADDRESS_LOW, crate::light::ADDRESS_HIGH],
            _ => {
                if d.bus.is_some() || d.address.is_some() {
                    self.err(
                        line,
                        format!("device `{}` ({}) is not on a bus: remove bus and address", d.id, kind.name()),
                    );
                }
                return None;
            }
        };
        match &d.bus {
            None => self.err(self.line("devices", i, None), format!("device `{}` ({}) needs a bus", d.id, kind.name())),
            Some(b) if !buses.iter().any(|x| &x.id == b) => {
                let l = self.line("devices", i, Some("bus"));
                self.err(l, format!("device `{}`: there is no bus `{b}` in `buses`", d.id));
            }
            Some(_) => {}
        }
        let addr = match &d.address {
            None => allowed[0],
            Some(v) => match parse_address(v) {
                Some(a) => a,
                None => {
                    self.err(line, format!("device `{}`: address must be a 7-bit number like \"0x38\"", d.id));
                    return None;
                }
            },
        };
        if !allowed.contains(&addr) {
            let list: Vec<String> = allowed.iter().map(|a| format!("{a:#04x}")).collect();
            self.err(line, format!("device `{}`: a {} answers only at {}", d.id, kind.name(), list.join(" or ")));
        }
        if let Some(o) = others.iter().find(|o| o.bus == d.bus && o.address == Some(addr)) {
            self.err(
                line,
                format!(
                    "device `{}`: address {addr:#04x} on bus is already taken by `{}` (line {})",
                    d.id, o.id, o.line
                ),
            );
        }
        Some(addr)
    }
}

/// The longest problem message, in characters (a message quotes what the file says).
pub const MAX_MESSAGE: usize = 300;

/// `message` as one printable line: control characters escaped (a file's names may hold
/// terminal escapes), at most [`MAX_MESSAGE`] characters.
pub fn printable(message: &str) -> String {
    let mut out = String::new();
    for (n, c) in message.chars().enumerate() {
        if n == MAX_MESSAGE {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A device path board.json may name: absolute, printable, not too long.
fn check_path(p: &str) -> Result<(), String> {
    if p.len() > MAX_PATH {
        return Err(format!("a path of {} bytes; the limit is {MAX_PATH}", p.len()));
    }
    if !p.starts_with('/') || p.chars().any(char::is_control) || p.split('/').any(|c| c == "..") {
        return Err(format!("`{}` is not an absolute path without `..` or control characters", p.escape_debug()));
    }
    Ok(())
}

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn parse_address(v: &Value) -> Option<u8> {
    let n = match v {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => {
            let s = s.trim();
            match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16).ok()?,
                None => s.parse().ok()?,
            }
        }
        _ => return None,
    };
    (n <= 0x7F).then_some(n as u8)
}

fn line_at(text: &str, byte: usize) -> usize {
    text.as_bytes()[..byte.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// A small JSON scanner over already-valid text: the byte ranges of the elements of the
/// top-level array under `key`.
fn elements(text: &str, key: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let Some(start) = top_key_value(text, key) else { return Vec::new() };
    if b.get(start) != Some(&b'[') {
        return Vec::new();
    }
    let mut out = Vec::new();
    let (mut depth, mut i, mut elem_start) = (0usize, start, None);
    while i < b.len() {
        match b[i] {
            b'"' => {
                if depth == 1 && elem_start.is_none() {
                    elem_start = Some(i);
                }
                i = skip_string(b, i);
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth == 2 && elem_start.is_none() {
                    elem_start = Some(i);
                }
            }
            b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    if let Some(s) = elem_start.take() {
                        out.push(s..i);
                    }
                    break;
                }
            }
            b',' if depth == 1 => {
                if let Some(s) = elem_start.take() {
                    out.push(s..i);
                }
            }
            c if depth == 1 && !c.is_ascii_whitespace() && elem_start.is_none() => elem_start = Some(i),
            _ => {}
        }
        i += 1;
    }
    out
}

/// Where the value of the top-level object's `key` starts.
fn top_key_value(text: &str, key: &str) -> Option<usize> {
    let b = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0);
    while i < b.len() {
        match b[i] {
            b'"' => {
                let end = skip_string(b, i);
                if depth == 1 && text.get(i + 1..end.saturating_sub(1)) == Some(key) {
                    let mut j = end;
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if b.get(j) == Some(&b':') {
                        j += 1;
                        while j < b.len() && b[j].is_ascii_whitespace() {
                            j += 1;
                        }
                        return Some(j);
                    }
                }
                i = end;
                continue;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

fn top_key_line(text: &str, key: &str) -> usize {
    top_key_value(text, key).map_or(1, |at| line_at(text, at))
}

/// The offset of `"key"` inside an object's text (first match at any depth).
fn find_key(obj: &str, key: &str) -> Option<usize> {
    let b = obj.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let end = skip_string(b, i);
            if obj.get(i + 1..end.saturating_sub(1)) == Some(key) {
                let rest = obj[end..].trim_start();
                if rest.starts_with(':') {
                    return Some(i);
                }
            }
            i = end;
            continue;
        }
        i += 1;
    }
    None
}

/// The index just past the string starting at `b[i] == '"'`.
fn skip_string(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// A description of board.json for the model (`board_schema`).
pub fn schema() -> Value {
    serde_json::json!({
        "file": "board.json in the workspace",
        "fields": {
            "name": "the board's name",
            "chip": CHIPS.iter().map(|c| (c.name, c.summary)).collect::<BTreeMap<_, _>>(),
            "seed": "simulated backend only: the seed of the virtual sensors' readings",
            "simulate": "simulated backend only: {humidity: %RH, celsius: °C (the room's means), faults: {sensor id: \"nack\"|\"bad_crc\"|\"stuck_busy\", bus id: \"busy\"}}",
            "backend": "\"simulated\" | \"linux\" | \"firmware\"; by default the chip decides (simulated chip: simulated, bcm2711: linux, ESP32: firmware)",
            "linux": "linux backend: {gpiochip: \"/dev/gpiochip0\", spidev: \"/dev/spidev0.0\" (WS2812 data on MOSI), pwmchip: \"/sys/class/pwm/pwmchip0\"}",
            "buses": "[{id, type: \"i2c\", pins: {sda, scl}, path: \"/dev/i2c-1\" (Linux)}]",
            "devices": "[{id, type, bus, address, pins, params}]",
            "gpio": "[{pin, direction: \"input\"|\"output\", label}]: the only pins gpio_read/gpio_write may touch",
        },
        "device_types": TYPES.iter().copied().collect::<BTreeMap<_, _>>(),
        "rules": [
            "every pin exists on the chip and is not reserved",
            "no pin is used twice (buses, devices and the allowlist together)",
            "ids are unique; two devices on one bus never share an address",
            "each sensor is at an address it can have",
            "on the linux backend every bus has a path (/dev/i2c-N) and every servo a hardware PWM channel (params.pwm_channel)",
        ],
    })
}

#[cfg(test)]
mod tests;
