//! The hardware tools: the board's devices and sensors, allowlisted GPIO pins and the RGB LED.
//! The host drives what its board.json names; the chip the sensors its build-time description
//! names, the pins of its build-time allowlist and its one status LED.

use alloc::format;
use alloc::string::String;

use chela_proto::chat::ToolSpec;
use chela_proto::json::read::{self, Kind, Reader, field, object, opt};

use super::{Args, unknown_field};

pub const LIST_DEVICES: ToolSpec<'static> = ToolSpec {
    name: "board_list_devices",
    description: "The board (name, chip) and its devices with their ids and types, and the allowlisted GPIO pins.",
    input_schema: r#"{"type":"object","properties":{}}"#,
};

pub const SENSOR_READ: ToolSpec<'static> = ToolSpec {
    name: "sensor_read",
    description: "Read a sensor now: its values with units and the time of the reading.",
    input_schema: r#"{"type":"object","properties":{"device":{"type":"string","description":"A sensor's id from board_list_devices."}},"required":["device"]}"#,
};

pub const GPIO_READ: ToolSpec<'static> = ToolSpec {
    name: "gpio_read",
    description: "The level of an allowlisted GPIO pin (an output pin reads back what was last written).",
    input_schema: r#"{"type":"object","properties":{"pin":{"type":"integer","minimum":0,"maximum":255}},"required":["pin"]}"#,
};

pub const GPIO_WRITE: ToolSpec<'static> = ToolSpec {
    name: "gpio_write",
    description: "Drive an allowlisted output pin high or low. Pins not on the device's allowlist, and input pins, are refused.",
    input_schema: r#"{"type":"object","properties":{"pin":{"type":"integer","minimum":0,"maximum":255},"value":{"type":"integer","enum":[1,0],"description":"1 (high) or 0 (low); true, false, \"high\" and \"low\" are taken too"}},"required":["pin","value"]}"#,
};

pub const LED_SET: ToolSpec<'static> = ToolSpec {
    name: "led_set",
    description: "Light an RGB LED or WS2812 strip: a colour, a brightness in percent and a pattern (solid, off, rainbow, alternate; status gives a device's status LED back to its state colours).",
    input_schema: r##"{"type":"object","properties":{"device":{"type":"string","description":"The LED's id from board_list_devices; may be left out when there is one"},"color":{"type":"string","description":"#rrggbb or a name (red, green, blue, white, yellow, cyan, magenta, orange); default white"},"brightness":{"type":"integer","minimum":0,"maximum":100,"description":"percent; default 100 on a strip, 25 on a status LED"},"pattern":{"type":"string","enum":["solid","off","rainbow","alternate","status"],"description":"default solid"}}}"##,
};

/// A device id (`sensor_read`).
#[derive(Debug, PartialEq, Eq)]
pub struct DeviceArgs {
    pub device: String,
}

impl Args for DeviceArgs {
    const FIELDS: &'static [&'static str] = &["device"];

    fn read(r: &mut Reader<'_>) -> read::Result<DeviceArgs> {
        let (mut device, mut seen) = (None, 0);
        object(r, |r, key| {
            match key {
                "device" => device = Some(field(r, &mut seen, 1, Reader::string_owned)?),
                _ => return Err(unknown_field(r)),
            }
            Ok(())
        })?;
        Ok(DeviceArgs { device: device.ok_or_else(|| r.error("missing field `device`"))? })
    }
}

crate::serde_args!(DeviceArgs);

/// A pin (`gpio_read`).
#[derive(Debug, PartialEq, Eq)]
pub struct PinArgs {
    pub pin: u8,
}

impl Args for PinArgs {
    const FIELDS: &'static [&'static str] = &["pin"];

    fn read(r: &mut Reader<'_>) -> read::Result<PinArgs> {
        let (mut pin, mut seen) = (None, 0);
        object(r, |r, key| {
            match key {
                "pin" => pin = Some(field(r, &mut seen, 1, u8_of)?),
                _ => return Err(unknown_field(r)),
            }
            Ok(())
        })?;
        Ok(PinArgs { pin: pin.ok_or_else(|| r.error("missing field `pin`"))? })
    }
}

crate::serde_args!(PinArgs);

fn u8_of(r: &mut Reader<'_>) -> read::Result<u8> {
    let n = r.u64()?;
    u8::try_from(n).map_err(|_| r.error("invalid value: expected u8"))
}

/// A pin and the level to drive it to (`gpio_write`; `level` is read too).
#[derive(Debug, PartialEq, Eq)]
pub struct WriteArgs {
    pub pin: u8,
    pub value: Level,
}

impl WriteArgs {
    /// The name read beside the schema's, from the chip's first `gpio_write`.
    pub const ALIASES: &'static [&'static str] = &["level"];
}

impl Args for WriteArgs {
    const FIELDS: &'static [&'static str] = &["pin", "value", "level"];

    fn read(r: &mut Reader<'_>) -> read::Result<WriteArgs> {
        let (mut pin, mut value, mut seen) = (None, None, 0);
        object(r, |r, key| {
            match key {
                "pin" => pin = Some(field(r, &mut seen, 1, u8_of)?),
                "value" | "level" => value = Some(field(r, &mut seen, 2, Level::read)?),
                _ => return Err(unknown_field(r)),
            }
            Ok(())
        })?;
        Ok(WriteArgs {
            pin: pin.ok_or_else(|| r.error("missing field `pin`"))?,
            value: value.ok_or_else(|| r.error("missing field `value`"))?,
        })
    }
}

crate::serde_args!(WriteArgs);

/// A level as the model may write it: 1 or 0, true or false, "high" or "low".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level(pub bool);

impl Level {
    pub fn read(r: &mut Reader<'_>) -> read::Result<Level> {
        let refused = read::Error {
            what: "the value is not a level; use 1 or 0, true or false, \"high\" or \"low\"",
            offset: r.offset(),
        };
        match r.peek()? {
            Kind::Bool => r.bool().map(Level),
            // By its text: parsing it as a number would bring the float parser into the chip's
            // image, and only `1` and `0` are levels.
            Kind::Number => match r.number_text()? {
                "1" => Ok(Level(true)),
                "0" => Ok(Level(false)),
                _ => Err(refused),
            },
            Kind::String => {
                let s = r.str()?;
                if s.eq_ignore_ascii_case("high") {
                    Ok(Level(true))
                } else if s.eq_ignore_ascii_case("low") {
                    Ok(Level(false))
                } else {
                    Err(refused)
                }
            }
            _ => Err(refused),
        }
    }
}

/// `led_set`'s arguments.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LedArgs {
    pub device: Option<String>,
    pub color: Option<String>,
    pub brightness: Option<u8>,
    pub pattern: Option<String>,
}

impl Args for LedArgs {
    const FIELDS: &'static [&'static str] = &["device", "color", "brightness", "pattern"];

    fn read(r: &mut Reader<'_>) -> read::Result<LedArgs> {
        let (mut a, mut seen) = (LedArgs::default(), 0);
        object(r, |r, key| {
            match key {
                "device" => a.device = field(r, &mut seen, 1, Reader::string_opt)?,
                "color" => a.color = field(r, &mut seen, 2, Reader::string_opt)?,
                "brightness" => a.brightness = field(r, &mut seen, 4, |r| opt(r, u8_of))?,
                "pattern" => a.pattern = field(r, &mut seen, 8, Reader::string_opt)?,
                _ => return Err(unknown_field(r)),
            }
            Ok(())
        })?;
        Ok(a)
    }
}

crate::serde_args!(LedArgs);

impl LedArgs {
    /// The pattern, `solid` when left out.
    pub fn pattern(&self) -> &str {
        self.pattern.as_deref().unwrap_or("solid")
    }

    /// The colour's text, `white` when left out.
    pub fn color(&self) -> &str {
        self.color.as_deref().unwrap_or("white")
    }

    /// The brightness in percent (`default` when left out) and as a channel level 0 to 255,
    /// or why it is out of range.
    pub fn brightness(&self, default: u8) -> Result<(u8, u8), String> {
        let percent = self.brightness.unwrap_or(default);
        if percent > 100 {
            return Err(format!("brightness {percent} is over 100 (percent)."));
        }
        Ok((percent, ((u16::from(percent) * 255 + 50) / 100) as u8))
    }
}

#[cfg(test)]
mod tests;
