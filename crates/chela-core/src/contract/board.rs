//! The hardware tools: the board's devices and sensors, allowlisted GPIO pins and the RGB LED.
//! The host drives what its board.json names; the chip the sensors its build-time description
//! names, the pins of its build-time allowlist and its one status LED.

use alloc::format;
use alloc::string::String;

use chela_proto::chat::ToolSpec;
use serde::Deserialize;

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
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceArgs {
    pub device: String,
}

/// A pin (`gpio_read`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinArgs {
    pub pin: u8,
}

/// A pin and the level to drive it to (`gpio_write`; `level` is read too).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    pub pin: u8,
    #[serde(alias = "level")]
    pub value: Level,
}

impl WriteArgs {
    /// The name read beside the schema's, from the chip's first `gpio_write`.
    pub const ALIASES: &'static [&'static str] = &["level"];
}

/// A level as the model may write it: 1 or 0, true or false, "high" or "low".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level(pub bool);

/// Read with a visitor rather than through `serde_json::Value`: the chip links this too, and
/// a `Value` would bring its map code into the image for one argument.
impl<'de> Deserialize<'de> for Level {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Level, D::Error> {
        struct Visit;
        fn refuse<E: serde::de::Error>(v: impl core::fmt::Display) -> E {
            E::custom(format!("{v} is not a level; use 1 or 0, true or false, \"high\" or \"low\""))
        }
        impl serde::de::Visitor<'_> for Visit {
            type Value = Level;
            fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str("1 or 0, true or false, \"high\" or \"low\"")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Level, E> {
                Ok(Level(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Level, E> {
                match v {
                    1 => Ok(Level(true)),
                    0 => Ok(Level(false)),
                    _ => Err(refuse(v)),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Level, E> {
                u64::try_from(v).map_err(|_| refuse(v)).and_then(|v| self.visit_u64(v))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Level, E> {
                Err(refuse(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Level, E> {
                if v.eq_ignore_ascii_case("high") {
                    Ok(Level(true))
                } else if v.eq_ignore_ascii_case("low") {
                    Ok(Level(false))
                } else {
                    Err(refuse(format_args!("{v:?}")))
                }
            }
        }
        d.deserialize_any(Visit)
    }
}

/// `led_set`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedArgs {
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub color: Option<String>,
    #[serde(default)]
    pub brightness: Option<u8>,
    #[serde(default)]
    pub pattern: Option<String>,
}

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
