//! The firmware's own tools, beside the memory and time tools every chip build has: GPIO
//! pins on an allowlist set at build time.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_chip::Board;
use chela_chip::tools::Toolbox;
use chela_chip::turn::Chip;
use chela_core::contract::Args;
use chela_core::contract::board::{PinArgs, WriteArgs};
use chela_core::flash::Flash;
use chela_proto::chat::ToolSpec;
use esp_hal::gpio::{AnyPin, Input, InputConfig, Level, Output, OutputConfig};

/// The GPIO tools with their allowlist.
pub struct Gpio {
    allowed: Vec<u8>,
    guidance: String,
}

impl Gpio {
    /// `allow` is a comma-separated list of pin numbers (`CHELA_GPIO_ALLOW`).
    pub fn new(allow: &str) -> Result<Gpio, String> {
        let allowed = allow
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().parse::<u8>().map_err(|_| format!("`{}` is not a GPIO number", s.trim())))
            .collect::<Result<Vec<u8>, String>>()?;
        if let Some(pin) = allowed.iter().find(|p| !usable(**p)) {
            return Err(format!(
                "GPIO {pin} cannot be offered: it does not exist on this chip or drives the SPI flash"
            ));
        }
        let guidance = if allowed.is_empty() {
            String::new()
        } else {
            format!(" GPIO pins you may use with gpio_write/gpio_read: {allowed:?}.")
        };
        Ok(Gpio { allowed, guidance })
    }
}

/// Pins a tool may drive: those the chip has, minus the SPI flash's.
fn usable(pin: u8) -> bool {
    #[cfg(feature = "esp32c3")]
    return pin <= 21 && !(12..=17).contains(&pin);
    #[cfg(feature = "esp32c6")]
    return pin <= 30 && !(24..=30).contains(&pin);
}

impl<F: Flash, B: Board> Toolbox<F, B> for Gpio {
    fn specs(&self) -> &[ToolSpec<'static>] {
        if self.allowed.is_empty() { &[] } else { &chela_chip::tools::GPIO }
    }

    fn guidance(&self) -> &str {
        &self.guidance
    }

    fn run(&mut self, _: &mut Chip<F, B>, name: &str, input: &str) -> Option<Result<String, String>> {
        let allowed = |pin: u8| {
            if self.allowed.contains(&pin) {
                Ok(())
            } else {
                Err(format!("GPIO {pin} is not on this device's allowlist {:?}.", self.allowed))
            }
        };
        Some(match name {
            "gpio_write" => WriteArgs::parse(input).and_then(|a| {
                allowed(a.pin)?;
                let high = a.value.0;
                let level = if high { Level::High } else { Level::Low };
                // SAFETY: the pin is on the owner's allowlist, which names pins nothing else
                // in the firmware drives; the driver lives only for this call.
                let pin = unsafe { AnyPin::steal(a.pin) };
                let out = Output::new(pin, level, OutputConfig::default());
                core::mem::forget(out); // keep driving the level after the call
                Ok(format!("GPIO {} is {}.", a.pin, if high { "high" } else { "low" }))
            }),
            "gpio_read" => PinArgs::parse(input).and_then(|a| {
                allowed(a.pin)?;
                // SAFETY: as above.
                let pin = unsafe { AnyPin::steal(a.pin) };
                let input = Input::new(pin, InputConfig::default());
                Ok(format!("GPIO {} reads {}.", a.pin, if input.is_high() { "high" } else { "low" }))
            }),
            _ => return None,
        })
    }
}
