//! A board at run time: the devices a [`Spec`] names, built on a [`Backend`], and the
//! operations the tools offer (read a sensor, set a strip, move a servo, read or write an
//! allowlisted pin).
//!
//! Calling order: [`Board::open`] once (it makes every driver; nothing touches a bus yet), then
//! any operation in any order. Each operation does its bus work to the end before it returns.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use embedded_hal::delay::DelayNs;
use embedded_hal::digital::{InputPin, OutputPin};
use embedded_hal::i2c::I2c;
use embedded_hal::pwm::SetDutyCycle;
use smart_leds_trait::{RGB8, SmartLedsWrite};

use crate::aht20::Aht20;
use crate::air::Sgp30;
use crate::fault::Fault;
use crate::led::Strip;
use crate::light::Bh1750;
use crate::servo::Servo;
use crate::spec::{Bus, Device, Direction, Kind, Spec};

/// What a platform provides: handles onto its buses and pins. The simulated board
/// ([`crate::sim`]), Linux and esp-hal each implement it once.
pub trait Backend {
    /// A handle on one I2C bus; several devices each hold one (the bus is shared).
    type I2c: I2c;
    type Delay: DelayNs;
    type Led: SmartLedsWrite<Color = RGB8>;
    type Pwm: SetDutyCycle;
    type Input: InputPin;
    type Output: OutputPin;

    fn i2c(&mut self, bus: &Bus) -> Result<Self::I2c, Fault>;
    fn delay(&mut self) -> Self::Delay;
    fn led(&mut self, device: &Device, data_pin: u8) -> Result<Self::Led, Fault>;
    fn pwm(&mut self, device: &Device, pin: u8) -> Result<Self::Pwm, Fault>;
    fn input(&mut self, pin: u8) -> Result<Self::Input, Fault>;
    fn output(&mut self, pin: u8) -> Result<Self::Output, Fault>;
}

/// A value with its unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantity {
    pub name: &'static str,
    pub value: f32,
    pub unit: &'static str,
}

/// Why an operation did not happen, as a sentence.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum BoardError {
    NoDevice { id: String, known: Vec<String> },
    WrongKind { id: String, kind: &'static str, wanted: &'static str },
    PinNotAllowed { pin: u8, allowed: Vec<u8> },
    WrongDirection { pin: u8, direction: Direction },
    BadValue(String),
    Fault { device: String, fault: Fault },
}

impl fmt::Display for BoardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoardError::NoDevice { id, known } => {
                // The id is the caller's: shown bounded and with its control characters escaped.
                let id = crate::spec::printable(id);
                write!(f, "There is no device `{id}` on this board. Devices: {}.", known.join(", "))
            }
            BoardError::WrongKind { id, kind, wanted } => write!(f, "`{id}` is a {kind}, not a {wanted}."),
            BoardError::PinNotAllowed { pin, allowed } => {
                let list: Vec<String> = allowed.iter().map(|p| alloc::format!("GPIO{p}")).collect();
                write!(
                    f,
                    "GPIO{pin} is not in board.json's gpio allowlist, so it may not be used. Allowed: {}.",
                    if list.is_empty() { String::from("none") } else { list.join(", ") }
                )
            }
            BoardError::WrongDirection { pin, direction } => {
                write!(f, "GPIO{pin} is allowlisted as an {} pin; it cannot be written.", direction.as_str())
            }
            BoardError::BadValue(s) => f.write_str(s),
            BoardError::Fault { device, fault } => write!(f, "`{device}`: {fault}."),
        }
    }
}

impl core::error::Error for BoardError {}

enum Driver<B: Backend> {
    Aht20(Aht20<B::I2c, B::Delay>),
    Sgp30(Box<Sgp30<B::I2c, B::Delay>>),
    Bh1750(Bh1750<B::I2c, B::Delay>),
    Led(Strip<B::Led>),
    Servo(Servo<B::Pwm>),
}

enum Pin<B: Backend> {
    In(B::Input),
    Out(B::Output, bool),
}

pub struct Board<B: Backend> {
    spec: Spec,
    drivers: Vec<Driver<B>>,
    pins: Vec<(u8, Pin<B>)>,
}

impl<B: Backend> Board<B> {
    /// Makes a driver for every device in `spec` and a handle for every allowlisted pin.
    pub fn open(spec: Spec, backend: &mut B) -> Result<Board<B>, BoardError> {
        let mut drivers = Vec::with_capacity(spec.devices.len());
        for d in &spec.devices {
            let fault = |fault| BoardError::Fault { device: d.id.clone(), fault };
            let bus = || {
                let id = d.bus.as_deref().unwrap_or_default();
                spec.buses
                    .iter()
                    .find(|b| b.id == id)
                    .ok_or_else(|| BoardError::BadValue(alloc::format!("no bus `{id}`")))
            };
            let pin = |role: &str| d.pins.get(role).copied().unwrap_or_default();
            drivers.push(match &d.kind {
                Kind::Aht20 => Driver::Aht20(Aht20::new(backend.i2c(bus()?).map_err(fault)?, backend.delay())),
                Kind::Sgp30 => {
                    Driver::Sgp30(Box::new(Sgp30::new(backend.i2c(bus()?).map_err(fault)?, backend.delay())))
                }
                Kind::Bh1750 => {
                    let addr = d.address.unwrap_or(crate::light::ADDRESS_LOW);
                    Driver::Bh1750(Bh1750::new(backend.i2c(bus()?).map_err(fault)?, backend.delay(), addr))
                }
                Kind::Ws2812 { count } => Driver::Led(Strip::new(backend.led(d, pin("data")).map_err(fault)?, *count)),
                Kind::Servo(limits) => Driver::Servo(Servo::new(backend.pwm(d, pin("pwm")).map_err(fault)?, *limits)),
            });
        }
        let mut pins = Vec::with_capacity(spec.gpio.len());
        for g in &spec.gpio {
            let fault = |fault| BoardError::Fault { device: alloc::format!("GPIO{}", g.pin), fault };
            pins.push((
                g.pin,
                match g.direction {
                    Direction::Input => Pin::In(backend.input(g.pin).map_err(fault)?),
                    Direction::Output => Pin::Out(backend.output(g.pin).map_err(fault)?, false),
                },
            ));
        }
        Ok(Board { spec, drivers, pins })
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    fn find(&mut self, id: &str) -> Result<(usize, &Device), BoardError> {
        self.spec.devices.iter().position(|d| d.id == id).map(|i| (i, &self.spec.devices[i])).ok_or_else(|| {
            BoardError::NoDevice { id: id.into(), known: self.spec.devices.iter().map(|d| d.id.clone()).collect() }
        })
    }

    /// Reads sensor `id`: its quantities with units.
    pub fn read_sensor(&mut self, id: &str) -> Result<Vec<Quantity>, BoardError> {
        let (i, d) = self.find(id)?;
        let kind = d.kind.name();
        let fault = |fault| BoardError::Fault { device: id.into(), fault };
        let q = |name, value, unit| Quantity { name, value, unit };
        match &mut self.drivers[i] {
            Driver::Aht20(s) => {
                let m = s.measure().map_err(fault)?;
                Ok(alloc::vec![q("temperature", m.celsius, "°C"), q("humidity", m.humidity_percent, "%RH")])
            }
            Driver::Sgp30(s) => {
                let m = s.measure().map_err(fault)?;
                Ok(alloc::vec![
                    q("co2eq", f32::from(m.co2eq_ppm), "ppm"),
                    q("tvoc", f32::from(m.tvoc_ppb), "ppb"),
                    q("warming_up", if m.warming_up { 1.0 } else { 0.0 }, "bool"),
                ])
            }
            Driver::Bh1750(s) => Ok(alloc::vec![q("illuminance", s.measure().map_err(fault)?, "lx")]),
            Driver::Led(_) | Driver::Servo(_) => Err(BoardError::WrongKind { id: id.into(), kind, wanted: "sensor" }),
        }
    }

    /// Shows `pattern` in `color` at `brightness` on strip `id`; returns the colours sent.
    pub fn set_led(&mut self, id: &str, color: RGB8, brightness: u8, pattern: &str) -> Result<Vec<RGB8>, BoardError> {
        let (i, d) = self.find(id)?;
        let kind = d.kind.name();
        let Driver::Led(strip) = &mut self.drivers[i] else {
            return Err(BoardError::WrongKind { id: id.into(), kind, wanted: "LED strip" });
        };
        let colors = crate::led::render(pattern, color, brightness, strip.len()).ok_or_else(|| {
            BoardError::BadValue(alloc::format!(
                "Unknown pattern `{}`; use one of: {}.",
                crate::spec::printable(pattern),
                crate::led::PATTERNS.join(", ")
            ))
        })?;
        strip.show(&colors).map_err(|fault| BoardError::Fault { device: id.into(), fault })?;
        Ok(colors)
    }

    /// What strip `id` shows now.
    pub fn led_state(&self, id: &str) -> Option<&[RGB8]> {
        let i = self.spec.devices.iter().position(|d| d.id == id)?;
        match &self.drivers[i] {
            Driver::Led(s) => Some(s.shown()),
            _ => None,
        }
    }

    /// Moves servo `id` to `angle` (degrees), within its limits.
    pub fn set_servo(&mut self, id: &str, angle: f32) -> Result<(), BoardError> {
        let (i, d) = self.find(id)?;
        let kind = d.kind.name();
        let Driver::Servo(s) = &mut self.drivers[i] else {
            return Err(BoardError::WrongKind { id: id.into(), kind, wanted: "servo" });
        };
        s.set_angle(angle).map_err(|fault| BoardError::Fault { device: id.into(), fault })
    }

    /// The angle servo `id` was last moved to.
    pub fn servo_angle(&self, id: &str) -> Option<f32> {
        let i = self.spec.devices.iter().position(|d| d.id == id)?;
        match &self.drivers[i] {
            Driver::Servo(s) => s.angle(),
            _ => None,
        }
    }

    fn pin(&mut self, pin: u8) -> Result<&mut Pin<B>, BoardError> {
        let allowed: Vec<u8> = self.pins.iter().map(|p| p.0).collect();
        self.pins.iter_mut().find(|p| p.0 == pin).map(|p| &mut p.1).ok_or(BoardError::PinNotAllowed { pin, allowed })
    }

    /// The level of allowlisted `pin` (an output reads back what was last written).
    pub fn gpio_read(&mut self, pin: u8) -> Result<bool, BoardError> {
        let fault = |fault| BoardError::Fault { device: alloc::format!("GPIO{pin}"), fault };
        match self.pin(pin)? {
            Pin::In(p) => crate::gpio::read(p).map_err(fault),
            Pin::Out(_, level) => Ok(*level),
        }
    }

    /// Drives allowlisted output `pin`.
    pub fn gpio_write(&mut self, pin: u8, high: bool) -> Result<(), BoardError> {
        let fault = |fault| BoardError::Fault { device: alloc::format!("GPIO{pin}"), fault };
        match self.pin(pin)? {
            Pin::In(_) => Err(BoardError::WrongDirection { pin, direction: Direction::Input }),
            Pin::Out(p, level) => {
                crate::gpio::write(p, high).map_err(fault)?;
                *level = high;
                Ok(())
            }
        }
    }
}
