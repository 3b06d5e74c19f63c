//! The board layer on the chip: the sensors a build-time `board.json` names, run
//! by chela-board's drivers over whatever [`Backend`] the chip gives (esp-hal's I²C on the
//! ESP32, chela-board's simulated bus in the host tests), and the `board_list_devices` and
//! `sensor_read` tools over them.
//!
//! On the chip only the I²C sensors of the description are driven: the on-board WS2812 is the
//! status LED (`led_set`), servos have no driver there, and GPIO stays with the firmware's own
//! allowlist (`CHELA_GPIO_ALLOW`). What is left out is said once, at boot, in the notes
//! [`Sensors::open`] returns.
//!
//! The description is checked when the image is built, not on the chip: [`plan::check`] runs
//! chela-board's checker in the firmware's `build.rs` (a description that does not pass, or is
//! for another chip, fails the build) and [`plan::to_rust`] embeds the result as a
//! [`Compiled`], plain statics, so the image carries no board.json parser or checker.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_board::board::{Backend, Board as Devices, Quantity};
use chela_board::spec::{self, Bus, Device, Driven, Kind, Spec};
use chela_core::contract::{Args, board};
use chela_core::flash::Flash;
use chela_proto::chat::ToolSpec;

use crate::Board;
use crate::tools::Toolbox;
use crate::turn::Chip;

pub mod plan;

pub use plan::MAX_BOARD_JSON;

/// A board description checked at build time ([`plan::check`]), as statics: the board's name
/// and chip, the notes to print at boot, and the sensors and buses the chip drives.
#[derive(Debug)]
pub struct Compiled {
    pub name: &'static str,
    pub chip: &'static str,
    pub notes: &'static [&'static str],
    pub buses: &'static [CompiledBus],
    pub devices: &'static [CompiledDevice],
}

/// A bus of a [`Compiled`] description (chela-board's [`Bus`]).
#[derive(Debug)]
pub struct CompiledBus {
    pub id: &'static str,
    pub pins: &'static [(&'static str, u8)],
    pub path: Option<&'static str>,
}

/// A sensor of a [`Compiled`] description (chela-board's [`Device`]; sensors take no params).
#[derive(Debug)]
pub struct CompiledDevice {
    pub id: &'static str,
    pub kind: Kind,
    pub bus: Option<&'static str>,
    pub address: Option<u8>,
    pub pins: &'static [(&'static str, u8)],
    pub line: usize,
}

impl Compiled {
    /// The description as chela-board's [`Spec`], for its [`Devices::open`]; `None` for a chip
    /// chela-board does not know (the build's checker refused those).
    pub fn spec(&self) -> Option<Spec> {
        // Inserted one by one: `collect` into a map sorts first, a few KB of sort code.
        let pins = |pins: &[(&str, u8)]| {
            let mut map = BTreeMap::new();
            for &(role, pin) in pins {
                map.insert(String::from(role), pin);
            }
            map
        };
        Some(Spec {
            name: self.name.into(),
            chip: spec::chip(self.chip)?,
            backend: Driven::Firmware,
            simulate: Default::default(),
            seed: 1,
            buses: self
                .buses
                .iter()
                .map(|b| Bus { id: b.id.into(), pins: pins(b.pins), path: b.path.map(String::from) })
                .collect(),
            devices: self
                .devices
                .iter()
                .map(|d| Device {
                    id: d.id.into(),
                    kind: d.kind.clone(),
                    bus: d.bus.map(String::from),
                    address: d.address,
                    pins: pins(d.pins),
                    params: Default::default(),
                    line: d.line,
                })
                .collect(),
            gpio: Vec::new(),
        })
    }
}

/// The sensor tools: the core's contract, as the host offers them.
pub const SPECS: [ToolSpec<'static>; 2] = [board::LIST_DEVICES, board::SENSOR_READ];

/// The board's sensors, and the tools over them.
pub struct Sensors<B: Backend> {
    devices: Option<Devices<B>>,
}

impl<B: Backend> Sensors<B> {
    /// No board: no tools.
    pub fn none() -> Sensors<B> {
        Sensors { devices: None }
    }

    /// The sensors of `board` (the build's checked description; `None` when it was built with
    /// none) on `backend`, and the notes to print: what was left out, and how many sensors
    /// opened or why none did.
    pub fn open(board: Option<&Compiled>, backend: &mut B) -> (Sensors<B>, Vec<String>) {
        let Some(board) = board else {
            return (Sensors::none(), Vec::new());
        };
        let mut notes: Vec<String> = board.notes.iter().map(|&n| String::from(n)).collect();
        let Some(spec) = board.spec() else {
            notes.push(format!("[board] chip {} is unknown: no sensors", board.chip));
            return (Sensors::none(), notes);
        };
        match Devices::open(spec, backend) {
            Ok(d) => {
                notes.push(format!("[board] {}: {} sensors", d.spec().name, d.spec().devices.len()));
                (Sensors { devices: Some(d) }, notes)
            }
            Err(e) => {
                notes.push(format!("[board] not opened: {e}"));
                (Sensors::none(), notes)
            }
        }
    }

    /// The sensors' ids and types, one a line.
    fn list(devices: &Devices<B>) -> String {
        devices.spec().devices.iter().map(|d| format!("{} ({})", d.id, d.kind.name())).collect::<Vec<_>>().join("\n")
    }
}

/// `value` with one decimal, rounded half away from zero (a sensor's resolution as a person
/// reads it; the same text on every platform).
pub fn tenths(value: f32) -> String {
    if !value.is_finite() {
        return "(no value)".into();
    }
    let scaled = value * 10.0;
    let t = (if scaled < 0.0 { scaled - 0.5 } else { scaled + 0.5 }) as i64;
    let sign = if t < 0 { "-" } else { "" };
    format!("{sign}{}.{}", t.unsigned_abs() / 10, t.unsigned_abs() % 10)
}

/// A reading as the model gets it: `name: value unit`, comma-separated, then the time.
pub fn render(values: &[Quantity], unix: Option<u64>) -> String {
    let mut out =
        values.iter().map(|q| format!("{}: {} {}", q.name, tenths(q.value), q.unit)).collect::<Vec<_>>().join(", ");
    match unix {
        Some(secs) => out.push_str(&format!(" (read at {})", crate::time::utc(secs).0)),
        None => out.push_str(" (read now; the device clock is not set yet)"),
    }
    out
}

impl<F: Flash, Bo: Board, B: Backend> Toolbox<F, Bo> for Sensors<B> {
    fn specs(&self) -> &[ToolSpec<'static>] {
        if self.devices.as_ref().is_some_and(|d| !d.spec().devices.is_empty()) { &SPECS } else { &[] }
    }

    fn guidance(&self) -> &str {
        if self.devices.as_ref().is_some_and(|d| !d.spec().devices.is_empty()) {
            " Read the attached sensors with sensor_read (board_list_devices lists them)."
        } else {
            ""
        }
    }

    fn run(&mut self, chip: &mut Chip<F, Bo>, name: &str, input: &str) -> Option<Result<String, String>> {
        if name != "board_list_devices" && name != "sensor_read" {
            return None;
        }
        let Some(devices) = self.devices.as_mut() else {
            return Some(Err("This device has no sensors (it was built without a board description).".into()));
        };
        Some(match name {
            "board_list_devices" => Ok(Self::list(devices)),
            _ => board::DeviceArgs::parse(input)
                .and_then(|a| devices.read_sensor(&a.device).map_err(|e| format!("{e}")))
                .map(|values| render(&values, chip.board.unix())),
        })
    }
}
