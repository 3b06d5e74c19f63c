//! The status LED: the dev boards' WS2812 (ESP32-C3-DevKitM-1 and ESP32-C6-DevKitC-1 both wire
//! it to GPIO8), driven by the RMT peripheral through esp-hal-smartled, with chela-board's
//! colour maths (`led::render`, `parse_color`) and strip (`led::Strip`), as on the host.
//!
//! It shows the device's state ([`State`]: connecting, ready, thinking, error) and, through the
//! `led_set` tool, a colour the person asked for, which stays as the "ready" colour until they
//! set it back to `status`.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_board::led::{self, Strip};
use chela_chip::Board;
use chela_chip::tools::Toolbox;
use chela_chip::turn::Chip;
use chela_core::flash::Flash;
use chela_proto::chat::ToolSpec;
use esp_hal::Blocking;
use esp_hal_smartled::{RmtSmartLeds, buffer_size, color_order};
use serde::Deserialize;
use smart_leds_trait::RGB8;

/// The state the LED shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// WiFi or the clock not up yet: dim blue.
    Connecting,
    /// Waiting for a message: dim green, or the colour `led_set` chose.
    Ready,
    /// A turn is running: amber.
    Thinking,
    /// The last turn or poll failed, or safe mode: red.
    Error,
}

type Ws2812 = RmtSmartLeds<'static, { buffer_size::<RGB8>(1) }, Blocking, RGB8, color_order::Grb>;

/// The LED and the `led_set` tool.
pub struct Led {
    strip: Option<Strip<Ws2812>>,
    chosen: Option<Vec<RGB8>>,
    state: State,
}

const SPECS: [ToolSpec<'static>; 1] = [ToolSpec {
    name: "led_set",
    description: "Set the device's RGB status LED. pattern: solid, off, or status (give the LED back to the device's state colours). \
                  color: a name (red, green, blue, white, yellow, cyan, magenta, orange) or #rrggbb.",
    input_schema: r#"{"type":"object","properties":{"color":{"type":"string"},"brightness":{"type":"integer","minimum":0,"maximum":255},"pattern":{"type":"string","enum":["solid","off","status"]}},"required":["pattern"]}"#,
}];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetArgs {
    pattern: String,
    #[serde(default)]
    color: Option<String>,
    #[serde(default)]
    brightness: Option<u8>,
}

impl Led {
    /// The LED on `writer`; `None` when the RMT could not be set up (the tool then says so).
    pub fn new(writer: Option<Ws2812>) -> Led {
        Led { strip: writer.map(|w| Strip::new(w, 1)), chosen: None, state: State::Connecting }
    }

    /// Shows `state` (a no-op when it is already shown).
    pub fn show(&mut self, state: State) {
        if state != self.state {
            self.state = state;
            let _ = self.paint();
        }
    }

    fn paint(&mut self) -> Result<(), String> {
        let colors = match (self.state, &self.chosen) {
            (State::Ready, Some(c)) => c.clone(),
            (State::Ready, None) => alloc::vec![RGB8 { r: 0, g: 24, b: 0 }],
            (State::Connecting, _) => alloc::vec![RGB8 { r: 0, g: 0, b: 24 }],
            (State::Thinking, _) => alloc::vec![RGB8 { r: 40, g: 20, b: 0 }],
            (State::Error, _) => alloc::vec![RGB8 { r: 48, g: 0, b: 0 }],
        };
        let strip = self.strip.as_mut().ok_or("The LED's RMT channel did not start.")?;
        strip.show(&colors).map_err(|e| format!("{e}"))
    }

    fn set(&mut self, a: SetArgs) -> Result<String, String> {
        if a.pattern == "status" {
            self.chosen = None;
            self.paint()?;
            return Ok("The LED shows the device's state again.".into());
        }
        let color = match a.color.as_deref() {
            Some(c) => led::parse_color(c).ok_or_else(|| format!("`{c}` is not a colour: use a name or #rrggbb."))?,
            None if a.pattern == "off" => RGB8::default(),
            None => return Err("Give a color for the solid pattern.".into()),
        };
        let brightness = a.brightness.unwrap_or(64);
        let colors = match a.pattern.as_str() {
            "solid" | "off" => led::render(&a.pattern, color, brightness, 1).unwrap_or_default(),
            other => return Err(format!("`{other}` is not a pattern here: use solid, off or status.")),
        };
        let before = self.chosen.replace(colors);
        // The chosen colour shows now, whatever the state; it is the idle colour from now on.
        let shown = self.chosen.clone().unwrap_or_default();
        match self.strip.as_mut().ok_or_else(|| String::from("The LED's RMT channel did not start.")) {
            Ok(strip) => strip.show(&shown).map_err(|e| format!("{e}")),
            Err(e) => Err(e),
        }
        .inspect_err(|_| self.chosen = before)?;
        Ok(format!("The LED is {} at brightness {brightness}.", if a.pattern == "off" { "off" } else { "set" }))
    }
}

impl<F: Flash, B: Board> Toolbox<F, B> for Led {
    fn specs(&self) -> &[ToolSpec<'static>] {
        if self.strip.is_some() { &SPECS } else { &[] }
    }

    fn guidance(&self) -> &str {
        if self.strip.is_some() { " The device has an RGB LED you can set with led_set." } else { "" }
    }

    fn run(&mut self, _: &mut Chip<F, B>, name: &str, input: &str) -> Option<Result<String, String>> {
        (name == "led_set").then(|| {
            serde_json::from_str::<SetArgs>(input)
                .map_err(|e| format!("The arguments do not fit the tool's schema: {e}"))
                .and_then(|a| self.set(a))
        })
    }
}
