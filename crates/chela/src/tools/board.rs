//! The `board` group: the board's devices (board.json) and the tools that sense and act on
//! them. Hidden from the model until the built-in skill `board_hardware_info` is active in a
//! conversation (skill-gated), as hardware is something to reach for on purpose.
//!
//! Every call goes through [`crate::board::Host`]: a bad board.json makes each tool answer with
//! its problems (and their lines) instead of failing the daemon.

use std::sync::Arc;

use serde::Deserialize;

use super::{Group, Tool, ToolCtx, ToolError, ToolResult};
use crate::board::Host;

pub const GROUP: &str = "board";

pub fn group(host: &Arc<Host>) -> Group {
    let h = || Arc::clone(host);
    Group::new(GROUP, "The board's hardware: sensors, LEDs, a servo and allowlisted GPIO pins (board.json).")
        .hidden()
        .guidance(
            "BOARD: board_list_devices first; sensor_read {device} gives values with units; led_set, servo_set, \
             gpio_read and gpio_write act on the devices and allowlisted pins board.json names, nothing else.",
        )
        .with(ListDevices(h()))
        .with(GetDevice(h()))
        .with(QueryPeripheral(h()))
        .with(Schema)
        .with(Reload(h()))
        .with(GpioRead(h()))
        .with(GpioWrite(h()))
        .with(LedSet(h()))
        .with(ServoSet(h()))
        .with(SensorRead(h()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceArgs {
    device: String,
}

fn failed(msg: String) -> ToolError {
    ToolError::new(msg)
}

fn device_json(d: &chela_board::spec::Device) -> serde_json::Value {
    serde_json::json!({
        "id": d.id,
        "type": d.kind.name(),
        "bus": d.bus,
        "address": d.address.map(|a| format!("{a:#04x}")),
        "pins": d.pins,
    })
}

pub struct ListDevices(Arc<Host>);

impl Tool for ListDevices {
    const NAME: &'static str = "board_list_devices";
    const DESCRIPTION: &'static str =
        "The board (name, chip, where board.json was read) and its devices and allowlisted GPIO pins.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{}}"#;
    const BLOCKING: bool = true;
    type Args = NoArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, _: NoArgs) -> ToolResult {
        self.0.with(&ctx.ws, |l| {
            let s = l.spec.as_ref().map_err(|_| failed(l.problems_text().unwrap_or_default()))?;
            let gpio: Vec<_> = s
                .gpio
                .iter()
                .map(|g| serde_json::json!({ "pin": g.pin, "direction": g.direction.as_str(), "label": g.label }))
                .collect();
            Ok(serde_json::json!({
                "board": s.name,
                "chip": s.chip.name,
                "source": l.source,
                "devices": s.devices.iter().map(device_json).collect::<Vec<_>>(),
                "gpio": gpio,
            })
            .to_string())
        })
    }
}

pub struct GetDevice(Arc<Host>);

impl Tool for GetDevice {
    const NAME: &'static str = "board_get_device";
    const DESCRIPTION: &'static str = "One device in full: type, bus and address or pins, driver parameters, and its state now (LED colours, servo angle).";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"device":{"type":"string","description":"The device id from board_list_devices."}},"required":["device"]}"#;
    const BLOCKING: bool = true;
    type Args = DeviceArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: DeviceArgs) -> ToolResult {
        let (mut out, kind) = self.0.with(&ctx.ws, |l| {
            let s = l.spec.as_ref().map_err(|_| failed(l.problems_text().unwrap_or_default()))?;
            let d = s.device(&a.device).ok_or_else(|| {
                let ids: Vec<&str> = s.devices.iter().map(|d| d.id.as_str()).collect();
                ToolError::invalid_args(format!(
                    "There is no device `{}`. Devices: {}.",
                    chela_board::spec::printable(&a.device),
                    ids.join(", ")
                ))
            })?;
            let mut v = device_json(d);
            v["chip"] = s.chip.name.into();
            v["params"] = serde_json::Value::Object(d.params.clone());
            if let chela_board::spec::Kind::Servo(l) = &d.kind {
                v["limits"] = serde_json::json!({ "min_angle": l.min_angle, "max_angle": l.max_angle });
            }
            Ok::<_, ToolError>((v, d.kind.name()))
        })?;
        // The state, where this host drives the board.
        let state = self.0.act(&ctx.ws, |b| {
            Ok(match kind {
                "ws2812" => b.led_state(&a.device).map(|c| {
                    let hex: Vec<String> = c.iter().map(|c| format!("#{:02x}{:02x}{:02x}", c.r, c.g, c.b)).collect();
                    serde_json::json!({ "leds": hex })
                }),
                "servo" => Some(serde_json::json!({ "angle": b.servo_angle(&a.device) })),
                _ => None,
            })
        });
        if let Ok(Some(state)) = state {
            out["state"] = state;
        }
        Ok(out.to_string())
    }
}

pub struct QueryPeripheral(Arc<Host>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeripheralArgs {
    kind: String,
}

impl Tool for QueryPeripheral {
    const NAME: &'static str = "board_query_peripheral";
    const DESCRIPTION: &'static str = "Whether the chip has a kind of peripheral (i2c, pwm, gpio), how many, which are in use, and which pins are free.";
    const SCHEMA: &'static str =
        r#"{"type":"object","properties":{"kind":{"type":"string","enum":["i2c","pwm","gpio"]}},"required":["kind"]}"#;
    const BLOCKING: bool = true;
    type Args = PeripheralArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: PeripheralArgs) -> ToolResult {
        self.0.with(&ctx.ws, |l| {
            let s = l.spec.as_ref().map_err(|_| failed(l.problems_text().unwrap_or_default()))?;
            let used = s.used_pins();
            let free: Vec<u8> = (0..s.chip.pins)
                .filter(|p| !s.chip.reserved.contains(p) && !used.iter().any(|(u, _)| u == p))
                .collect();
            let (instances, in_use): (u8, Vec<String>) = match a.kind.as_str() {
                "i2c" => (s.chip.i2c_buses, s.buses.iter().map(|b| b.id.clone()).collect()),
                "pwm" => (
                    s.chip.pwm_channels,
                    s.devices.iter().filter(|d| d.pins.contains_key("pwm")).map(|d| d.id.clone()).collect(),
                ),
                "gpio" => (s.chip.pins, used.iter().map(|(p, who)| format!("GPIO{p}: {who}")).collect()),
                other => {
                    return Err(ToolError::invalid_args(format!(
                        "Unknown peripheral `{other}`; use i2c, pwm or gpio."
                    )));
                }
            };
            Ok(serde_json::json!({
                "chip": s.chip.name,
                "kind": a.kind,
                "available": instances > 0,
                "instances": instances,
                "in_use": in_use,
                "free_pins": free,
                "reserved_pins": s.chip.reserved,
            })
            .to_string())
        })
    }
}

pub struct Schema;

impl Tool for Schema {
    const NAME: &'static str = "board_schema";
    const DESCRIPTION: &'static str = "How board.json is written: its fields, the chips and device types Chela knows, and the wiring rules it checks.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{}}"#;
    type Args = NoArgs;

    async fn call<'a>(&'a self, _: &'a ToolCtx, _: NoArgs) -> ToolResult {
        Ok(chela_board::spec::schema().to_string())
    }
}

pub struct Reload(Arc<Host>);

impl Tool for Reload {
    const NAME: &'static str = "board_reload";
    const DESCRIPTION: &'static str = "Read board.json again after it was edited; reports its problems if it has any.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{}}"#;
    const BLOCKING: bool = true;
    type Args = NoArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, _: NoArgs) -> ToolResult {
        self.0.reload(&ctx.ws);
        self.0.with(&ctx.ws, |l| match &l.spec {
            Ok(s) => Ok(format!(
                "Loaded \"{}\" ({}) from {}: {} device(s), {} allowlisted pin(s).",
                s.name,
                s.chip.name,
                l.source,
                s.devices.len(),
                s.gpio.len()
            )),
            Err(_) => Err(failed(l.problems_text().unwrap_or_default())),
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinArgs {
    pin: u8,
}

pub struct GpioRead(Arc<Host>);

impl Tool for GpioRead {
    const NAME: &'static str = "gpio_read";
    const DESCRIPTION: &'static str =
        "The level of an allowlisted GPIO pin (an output pin reads back what was last written).";
    const SCHEMA: &'static str =
        r#"{"type":"object","properties":{"pin":{"type":"integer","minimum":0,"maximum":255}},"required":["pin"]}"#;
    const BLOCKING: bool = true;
    type Args = PinArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: PinArgs) -> ToolResult {
        let high = self.0.act(&ctx.ws, |b| b.gpio_read(a.pin)).map_err(refused_or_failed)?;
        Ok(serde_json::json!({ "pin": a.pin, "level": if high { "high" } else { "low" }, "value": u8::from(high) })
            .to_string())
    }
}

/// Allowlist and direction refusals are refusals; the rest are failures.
fn refused_or_failed(msg: String) -> ToolError {
    if msg.contains("allowlist") { ToolError::refused(msg) } else { ToolError::new(msg) }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    pin: u8,
    value: Level,
}

/// A level as the model may write it: 1 or 0, true or false, "high" or "low".
pub struct Level(bool);

impl<'de> Deserialize<'de> for Level {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Level, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        match &v {
            serde_json::Value::Bool(b) => Some(*b),
            serde_json::Value::Number(n) => match n.as_u64() {
                Some(1) => Some(true),
                Some(0) => Some(false),
                _ => None,
            },
            serde_json::Value::String(s) if s.eq_ignore_ascii_case("high") => Some(true),
            serde_json::Value::String(s) if s.eq_ignore_ascii_case("low") => Some(false),
            _ => None,
        }
        .map(Level)
        .ok_or_else(|| {
            serde::de::Error::custom(format!("{v} is not a level; use 1 or 0, true or false, \"high\" or \"low\""))
        })
    }
}

pub struct GpioWrite(Arc<Host>);

impl Tool for GpioWrite {
    const NAME: &'static str = "gpio_write";
    const DESCRIPTION: &'static str = "Drive an allowlisted output pin high or low. Pins not in board.json's gpio allowlist, and input pins, are refused.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"pin":{"type":"integer","minimum":0,"maximum":255},"value":{"type":"integer","enum":[1,0],"description":"1 (high) or 0 (low); true, false, \"high\" and \"low\" are taken too"}},"required":["pin","value"]}"#;
    const BLOCKING: bool = true;
    type Args = WriteArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: WriteArgs) -> ToolResult {
        let high = a.value.0;
        self.0.act(&ctx.ws, |b| b.gpio_write(a.pin, high)).map_err(refused_or_failed)?;
        Ok(format!("GPIO{} is {}.", a.pin, if high { "high" } else { "low" }))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedArgs {
    device: String,
    #[serde(default)]
    color: Option<String>,
    #[serde(default)]
    brightness: Option<u8>,
    #[serde(default)]
    pattern: Option<String>,
}

pub struct LedSet(Arc<Host>);

impl Tool for LedSet {
    const NAME: &'static str = "led_set";
    const DESCRIPTION: &'static str =
        "Light a WS2812 strip: a colour, a brightness in percent and a pattern (solid, off, rainbow, alternate).";
    const SCHEMA: &'static str = r##"{"type":"object","properties":{"device":{"type":"string"},"color":{"type":"string","description":"#rrggbb or a name (red, green, blue, white, yellow, cyan, magenta, orange); default white"},"brightness":{"type":"integer","minimum":0,"maximum":100,"description":"percent, default 100"},"pattern":{"type":"string","enum":["solid","off","rainbow","alternate"],"description":"default solid"}},"required":["device"]}"##;
    const BLOCKING: bool = true;
    type Args = LedArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: LedArgs) -> ToolResult {
        let color_text = a.color.as_deref().unwrap_or("white");
        let color = chela_board::led::parse_color(color_text).ok_or_else(|| {
            ToolError::invalid_args(format!(
                "`{}` is not a colour; use #rrggbb or a name like red.",
                chela_board::spec::printable(color_text)
            ))
        })?;
        let percent = a.brightness.unwrap_or(100);
        if percent > 100 {
            return Err(ToolError::invalid_args(format!("brightness {percent} is over 100 (percent).")));
        }
        let level = ((u16::from(percent) * 255 + 50) / 100) as u8;
        let pattern = a.pattern.as_deref().unwrap_or("solid");
        let shown = self.0.act(&ctx.ws, |b| b.set_led(&a.device, color, level, pattern)).map_err(failed)?;
        let hex: Vec<String> = shown.iter().map(|c| format!("#{:02x}{:02x}{:02x}", c.r, c.g, c.b)).collect();
        Ok(serde_json::json!({ "device": a.device, "pattern": pattern, "brightness": percent, "leds": hex })
            .to_string())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServoArgs {
    device: String,
    angle: f32,
}

pub struct ServoSet(Arc<Host>);

impl Tool for ServoSet {
    const NAME: &'static str = "servo_set";
    const DESCRIPTION: &'static str =
        "Turn a servo to an angle in degrees, within the limits board.json gives it (board_get_device shows them).";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"device":{"type":"string"},"angle":{"type":"number"}},"required":["device","angle"]}"#;
    const BLOCKING: bool = true;
    type Args = ServoArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: ServoArgs) -> ToolResult {
        self.0.act(&ctx.ws, |b| b.set_servo(&a.device, a.angle)).map_err(failed)?;
        Ok(format!("Servo `{}` is at {} degrees.", a.device, a.angle))
    }
}

pub struct SensorRead(Arc<Host>);

impl Tool for SensorRead {
    const NAME: &'static str = "sensor_read";
    const DESCRIPTION: &'static str = "Read a sensor now: its values with units and the time of the reading.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"device":{"type":"string","description":"A sensor's id from board_list_devices."}},"required":["device"]}"#;
    const BLOCKING: bool = true;
    type Args = DeviceArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: DeviceArgs) -> ToolResult {
        let r = self.0.read(&ctx.ws, &a.device, &ctx.clock).map_err(failed)?;
        Ok(r.to_json().to_string())
    }
}

#[cfg(test)]
mod tests;
