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
#[cfg(feature = "connected")]
use core::cell::Cell;

use chela_board::led::{self, Strip};
use chela_chip::Board;
use chela_chip::tools::Toolbox;
use chela_chip::turn::Chip;
use chela_core::contract::Args;
use chela_core::contract::board::LedArgs;
use chela_core::flash::Flash;
use chela_proto::chat::ToolSpec;
#[cfg(feature = "connected")]
use critical_section::Mutex;
use esp_hal::Blocking;
use esp_hal_smartled::{RmtSmartLeds, buffer_size, color_order};
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

/// A state shown over whatever the main loop shows, until a time (the board's `now_ms`): an
/// update being written by a gateway task, or refused.
#[cfg(feature = "connected")]
static HOLD: Mutex<Cell<Option<(State, u64)>>> = Mutex::new(Cell::new(None));

/// Shows `state` over the main loop's until `until_ms`.
#[cfg(feature = "connected")]
pub fn hold(state: State, until_ms: u64) {
    critical_section::with(|cs| HOLD.borrow(cs).set(Some((state, until_ms))));
}

/// The held state at `now_ms`, if any.
#[cfg(feature = "connected")]
pub fn held(now_ms: u64) -> Option<State> {
    critical_section::with(|cs| HOLD.borrow(cs).get()).filter(|(_, until)| now_ms < *until).map(|(s, _)| s)
}

/// Nothing holds the LED in an image without updates.
#[cfg(not(feature = "connected"))]
pub fn held(_: u64) -> Option<State> {
    None
}

type Ws2812 = RmtSmartLeds<'static, { buffer_size::<RGB8>(1) }, Blocking, RGB8, color_order::Grb>;

/// The LED and the `led_set` tool.
pub struct Led {
    strip: Option<Strip<Ws2812>>,
    chosen: Option<Vec<RGB8>>,
    state: State,
}

/// The id the one LED answers to (`device` may be left out).
const LED_ID: &str = "led";

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

    fn set(&mut self, a: LedArgs) -> Result<String, String> {
        if let Some(other) = a.device.as_deref().filter(|d| *d != LED_ID) {
            return Err(format!("This device has one LED, `{LED_ID}`, not `{other}`."));
        }
        let pattern = a.pattern();
        if pattern == "status" {
            self.chosen = None;
            self.paint()?;
            return Ok("The LED shows the device's state again.".into());
        }
        let color = match a.color.as_deref() {
            None if pattern == "off" => RGB8::default(),
            _ => led::parse_color(a.color())
                .ok_or_else(|| format!("`{}` is not a colour: use a name or #rrggbb.", a.color()))?,
        };
        // A status LED at full power dazzles: a quarter unless asked.
        let (percent, brightness) = a.brightness(25)?;
        let colors = match pattern {
            "solid" | "off" => led::render(pattern, color, brightness, 1).unwrap_or_default(),
            other => return Err(format!("`{other}` is not a pattern here (one LED): use solid, off or status.")),
        };
        let before = self.chosen.replace(colors);
        // The chosen colour shows now, whatever the state; it is the idle colour from now on.
        let shown = self.chosen.clone().unwrap_or_default();
        match self.strip.as_mut().ok_or_else(|| String::from("The LED's RMT channel did not start.")) {
            Ok(strip) => strip.show(&shown).map_err(|e| format!("{e}")),
            Err(e) => Err(e),
        }
        .inspect_err(|_| self.chosen = before)?;
        Ok(format!("The LED is {} at {percent} % brightness.", if pattern == "off" { "off" } else { "set" }))
    }
}

impl<F: Flash, B: Board> Toolbox<F, B> for Led {
    fn specs(&self) -> &[ToolSpec<'static>] {
        if self.strip.is_some() { &chela_chip::tools::LED } else { &[] }
    }

    fn guidance(&self) -> &str {
        if self.strip.is_some() { " The device has an RGB LED you can set with led_set." } else { "" }
    }

    fn run(&mut self, _: &mut Chip<F, B>, name: &str, input: &str) -> Option<Result<String, String>> {
        (name == "led_set").then(|| LedArgs::parse(input).and_then(|a| self.set(a)))
    }
}
