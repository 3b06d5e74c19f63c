//! The board layer on the chip (issue 13 §3): the sensors a build-time `board.json` names, run
//! by chela-board's drivers over whatever [`Backend`] the chip gives (esp-hal's I²C on the
//! ESP32, chela-board's simulated bus in the host tests), and the `board_list_devices` and
//! `sensor_read` tools over them.
//!
//! On the chip only the I²C sensors of the description are driven: the on-board WS2812 is the
//! status LED (`led_set`), servos have no driver there, and GPIO stays with the firmware's own
//! allowlist (`CHELA_GPIO_ALLOW`). What is left out is said once, at boot, in the notes
//! [`Sensors::open`] returns; a description that does not parse, or is for another chip, gives
//! no sensors and says why, and never stops the device.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_board::board::{Backend, Board as Devices, Quantity};
use chela_board::spec;
use chela_core::flash::Flash;
use chela_proto::chat::ToolSpec;
use serde::Deserialize;

use crate::Board;
use crate::tools::Toolbox;
use crate::turn::Chip;

/// The longest board description a build may embed.
pub const MAX_BOARD_JSON: usize = 16 * 1024;

const SPECS: [ToolSpec<'static>; 2] = [
    ToolSpec {
        name: "board_list_devices",
        description: "List the sensors wired to this device: their ids and types.",
        input_schema: r#"{"type":"object","properties":{}}"#,
    },
    ToolSpec {
        name: "sensor_read",
        description: "Read a sensor by its id (see board_list_devices): its values with units, and when they were read.",
        input_schema: r#"{"type":"object","properties":{"device":{"type":"string"}},"required":["device"]}"#,
    },
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    device: String,
}

/// The board's sensors, and the tools over them.
pub struct Sensors<B: Backend> {
    devices: Option<Devices<B>>,
}

impl<B: Backend> Sensors<B> {
    /// No board: no tools.
    pub fn none() -> Sensors<B> {
        Sensors { devices: None }
    }

    /// The sensors `board_json` names for chip `chip` (`esp32c3`, `esp32c6`), on `backend`,
    /// and the notes to print: what was left out, or why there are none. An empty description
    /// means no board and no notes.
    pub fn open(board_json: &str, chip: &str, backend: &mut B) -> (Sensors<B>, Vec<String>) {
        let mut notes = Vec::new();
        if board_json.trim().is_empty() {
            return (Sensors::none(), notes);
        }
        if board_json.len() > MAX_BOARD_JSON {
            notes.push(format!(
                "[board] the description is {} bytes, over {MAX_BOARD_JSON}: not used",
                board_json.len()
            ));
            return (Sensors::none(), notes);
        }
        let mut spec = match spec::parse(board_json) {
            Ok(s) => s,
            Err(problems) => {
                notes.extend(problems.iter().map(|p| format!("[board] board.json line {}: {}", p.line, p.message)));
                notes.push("[board] the description has errors: no sensors".into());
                return (Sensors::none(), notes);
            }
        };
        if spec.chip.name != chip {
            notes.push(format!("[board] the description is for {}, this image for {chip}: not used", spec.chip.name));
            return (Sensors::none(), notes);
        }
        spec.devices.retain(|d| {
            let keep = d.kind.is_sensor();
            if !keep {
                notes.push(format!("[board] {} ({}) is not driven on the chip; left out", d.id, d.kind.name()));
            }
            keep
        });
        if !spec.gpio.is_empty() {
            notes.push("[board] the description's GPIO list is not used on the chip: set CHELA_GPIO_ALLOW".into());
            spec.gpio.clear();
        }
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
            _ => serde_json::from_str::<ReadArgs>(input)
                .map_err(|e| format!("The arguments do not fit the tool's schema: {e}"))
                .and_then(|a| devices.read_sensor(&a.device).map_err(|e| format!("{e}")))
                .map(|values| render(&values, chip.board.unix())),
        })
    }
}
