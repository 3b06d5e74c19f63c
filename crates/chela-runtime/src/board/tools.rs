//! The `board` group: the board's devices (board.json) and the tools that sense and act on
//! them. Hidden from the model until the built-in skill `board_hardware_info` is active in a
//! conversation (skill-gated), as hardware is something to reach for on purpose.
//!
//! Every call goes through [`crate::board::Host`]: a bad board.json makes each tool answer with
//! its problems (and their lines) instead of failing the daemon.

use std::sync::Arc;

use chela_core::contract::board::{
    DeviceArgs, GPIO_READ, GPIO_WRITE, LED_SET, LIST_DEVICES, LedArgs, PinArgs, SENSOR_READ, WriteArgs,
};

use crate::board::Host;
use crate::read_args;
use crate::tools::{Group, Tool, ToolCtx, ToolError, ToolResult};

pub const GROUP: &str = "board";

pub fn group(host: &Arc<Host>) -> Group {
    let h = || Arc::clone(host);
    Group::new(GROUP, "The board's hardware: sensors, LEDs, a servo and allowlisted GPIO pins (board.json).")
        .hidden("hardware")
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

pub struct NoArgs {}

read_args!(strict NoArgs {});

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
    const NAME: &'static str = LIST_DEVICES.name;
    const DESCRIPTION: &'static str = LIST_DEVICES.description;
    const SCHEMA: &'static str = LIST_DEVICES.input_schema;
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

pub struct PeripheralArgs {
    kind: String,
}

read_args!(strict PeripheralArgs { kind: need });

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

pub struct GpioRead(Arc<Host>);

impl Tool for GpioRead {
    const NAME: &'static str = GPIO_READ.name;
    const DESCRIPTION: &'static str = GPIO_READ.description;
    const SCHEMA: &'static str = GPIO_READ.input_schema;
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

pub struct GpioWrite(Arc<Host>);

impl Tool for GpioWrite {
    const NAME: &'static str = GPIO_WRITE.name;
    const DESCRIPTION: &'static str = GPIO_WRITE.description;
    const SCHEMA: &'static str = GPIO_WRITE.input_schema;
    const ALIASES: &'static [&'static str] = WriteArgs::ALIASES;
    const BLOCKING: bool = true;
    type Args = WriteArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: WriteArgs) -> ToolResult {
        let high = a.value.0;
        self.0.act(&ctx.ws, |b| b.gpio_write(a.pin, high)).map_err(refused_or_failed)?;
        Ok(format!("GPIO{} is {}.", a.pin, if high { "high" } else { "low" }))
    }
}

pub struct LedSet(Arc<Host>);

impl Tool for LedSet {
    const NAME: &'static str = LED_SET.name;
    const DESCRIPTION: &'static str = LED_SET.description;
    const SCHEMA: &'static str = LED_SET.input_schema;
    const BLOCKING: bool = true;
    type Args = LedArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: LedArgs) -> ToolResult {
        let color_text = a.color();
        let color = chela_board::led::parse_color(color_text).ok_or_else(|| {
            ToolError::invalid_args(format!(
                "`{}` is not a colour; use #rrggbb or a name like red.",
                chela_board::spec::printable(color_text)
            ))
        })?;
        let (percent, level) = a.brightness(100).map_err(ToolError::invalid_args)?;
        let pattern = a.pattern();
        let device = match &a.device {
            Some(d) => d.clone(),
            None => self.only_led(ctx)?,
        };
        let shown = self.0.act(&ctx.ws, |b| b.set_led(&device, color, level, pattern)).map_err(failed)?;
        let hex: Vec<String> = shown.iter().map(|c| format!("#{:02x}{:02x}{:02x}", c.r, c.g, c.b)).collect();
        Ok(serde_json::json!({ "device": device, "pattern": pattern, "brightness": percent, "leds": hex }).to_string())
    }
}

impl LedSet {
    /// The LED a call without `device` means: the board's only WS2812, or a question.
    fn only_led(&self, ctx: &ToolCtx) -> Result<String, ToolError> {
        self.0.with(&ctx.ws, |l| {
            let s = l.spec.as_ref().map_err(|_| failed(l.problems_text().unwrap_or_default()))?;
            let leds: Vec<&str> =
                s.devices.iter().filter(|d| d.kind.name() == "ws2812").map(|d| d.id.as_str()).collect();
            match leds[..] {
                [one] => Ok(one.to_owned()),
                [] => Err(ToolError::invalid_args("This board has no LED (board.json names no ws2812).")),
                _ => Err(ToolError::invalid_args(format!("Name the LED: device is one of {}.", leds.join(", ")))),
            }
        })
    }
}

pub struct ServoArgs {
    device: String,
    angle: f32,
}

read_args!(strict ServoArgs { device: need, angle: need });

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

pub struct SensorRead(pub Arc<Host>);

impl Tool for SensorRead {
    const NAME: &'static str = SENSOR_READ.name;
    const DESCRIPTION: &'static str = SENSOR_READ.description;
    const SCHEMA: &'static str = SENSOR_READ.input_schema;
    const BLOCKING: bool = true;
    type Args = DeviceArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: DeviceArgs) -> ToolResult {
        let r = self.0.read(&ctx.ws, &a.device, &ctx.clock).map_err(failed)?;
        Ok(r.to_json().to_string())
    }
}

#[cfg(test)]
mod tests;
