//! The simulated board (host, feature `sim`): a model of each sensor's register protocol on a
//! virtual I2C bus, a WS2812 data line that decodes what the SPI driver sends, PWM channels and
//! GPIO levels, all on one virtual clock.
//!
//! Deterministic: readings are a function of the seed and the virtual time, which moves only
//! when a driver waits ([`SimDelay`]) or the owner calls [`Sim::advance_ms`]. The room
//! responds to the actuators: the lit LEDs add to the light sensor's lux.
//!
//! Fault injection ([`Inject`]) per device: NACK, bad CRC (the CRC-8 byte inverted), stuck busy;
//! and a busy bus ([`Sim::set_bus_busy`]).

use std::collections::BTreeMap;
use std::string::String;
use std::sync::{Arc, Mutex, PoisonError};
use std::vec::Vec;

use embedded_hal::i2c::{self, ErrorKind, NoAcknowledgeSource, Operation};
use smart_leds_trait::RGB8;

use crate::board::Backend;
use crate::crc::crc8;
use crate::fault::Fault;
use crate::spec::{Bus, Device, Kind, SimFault, Spec};

/// A fault to inject into one simulated device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// The device does not acknowledge its address: as if unplugged.
    Nack,
    /// Every CRC byte it sends is wrong.
    BadCrc,
    /// Its busy bit never clears (AHT20).
    StuckBusy,
}

/// PWM full scale: one step per microsecond of a 20 ms servo period.
pub const PWM_MAX_DUTY: u16 = 20_000;

#[derive(Default)]
struct Aht20Model {
    calibrated: bool,
    started_ms: Option<u64>,
}

#[derive(Default)]
struct Sgp30Model {
    initialized: bool,
    measured: u32,
    ready_at: Option<u64>,
}

#[derive(Default)]
struct Bh1750Model {
    powered: bool,
    raw: u16,
}

enum Model {
    Aht20(Aht20Model),
    Sgp30(Sgp30Model),
    Bh1750(Bh1750Model),
}

struct Chip {
    model: Model,
    inject: Option<Inject>,
}

#[derive(Default)]
struct World {
    seed: u64,
    humidity: f64,
    celsius: f64,
    now_ms: u64,
    chips: BTreeMap<(String, u8), Chip>,
    busy_buses: Vec<String>,
    /// LED data pin -> (bytes since the last reset, the latched frame).
    leds: BTreeMap<u8, (Vec<u8>, Vec<RGB8>)>,
    pwm: BTreeMap<u8, u16>,
    levels: BTreeMap<u8, bool>,
    transactions: u64,
}

/// The simulated hardware, shared by every handle onto it. Cheap to clone.
#[derive(Clone, Default)]
pub struct Sim(Arc<Mutex<World>>);

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl World {
    /// Noise in [-1, 1) for `channel`, constant within each simulated second.
    fn noise(&self, channel: u64) -> f64 {
        let r = splitmix(self.seed ^ channel.wrapping_mul(0x1000_0000_01B3) ^ (self.now_ms / 1000));
        (r >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    fn wave(&self, period_s: f64, channel: u64) -> f64 {
        let phase = (splitmix(self.seed ^ channel) % 1000) as f64 / 1000.0;
        (core::f64::consts::TAU * (self.now_ms as f64 / 1000.0 / period_s + phase)).sin()
    }

    fn celsius(&self) -> f64 {
        self.celsius + 1.5 * self.wave(3600.0, 1) + 0.1 * self.noise(1)
    }

    fn humidity(&self) -> f64 {
        (self.humidity + 8.0 * self.wave(7200.0, 2) + 0.5 * self.noise(2)).clamp(0.0, 100.0)
    }

    /// Daylight plus what the LEDs add.
    fn lux(&self) -> f64 {
        let leds: f64 = self
            .leds
            .values()
            .flat_map(|(_, frame)| frame.iter())
            .map(|c| (f64::from(c.r) + f64::from(c.g) + f64::from(c.b)) / (3.0 * 255.0) * 40.0)
            .sum();
        (300.0 + 80.0 * self.wave(1800.0, 3) + 2.0 * self.noise(3)).max(0.0) + leds
    }

    fn air(&self) -> (u16, u16) {
        let co2 = 450.0 + 120.0 * (self.wave(900.0, 4) + 1.0) + 5.0 * self.noise(4);
        let tvoc = 30.0 + 25.0 * (self.wave(600.0, 5) + 1.0) + 2.0 * self.noise(5);
        (co2 as u16, tvoc as u16)
    }
}

impl Sim {
    /// A simulated board with `seed`, holding the devices `spec` names.
    pub fn new(spec: &Spec) -> Sim {
        let mut w = World {
            seed: spec.seed,
            humidity: spec.simulate.humidity.map_or(48.0, f64::from),
            celsius: spec.simulate.celsius.map_or(21.5, f64::from),
            ..World::default()
        };
        for d in &spec.devices {
            let model = match d.kind {
                Kind::Aht20 => Model::Aht20(Aht20Model::default()),
                Kind::Sgp30 => Model::Sgp30(Sgp30Model::default()),
                Kind::Bh1750 => Model::Bh1750(Bh1750Model::default()),
                Kind::Ws2812 { .. } => {
                    if let Some(&p) = d.pins.get("data") {
                        w.leds.insert(p, Default::default());
                    }
                    continue;
                }
                Kind::Servo(_) => continue,
            };
            if let (Some(bus), Some(addr)) = (&d.bus, d.address) {
                w.chips.insert((bus.clone(), addr), Chip { model, inject: None });
            }
        }
        for g in &spec.gpio {
            // Inputs start at a level the seed decides, so a read is not always "low".
            w.levels.insert(g.pin, splitmix(spec.seed ^ u64::from(g.pin)) & 1 == 1);
        }
        let sim = Sim(Arc::new(Mutex::new(w)));
        for (id, fault) in &spec.simulate.faults {
            let inject = match fault {
                SimFault::Busy => {
                    sim.set_bus_busy(id, true);
                    continue;
                }
                SimFault::Nack => Inject::Nack,
                SimFault::BadCrc => Inject::BadCrc,
                SimFault::StuckBusy => Inject::StuckBusy,
            };
            if let Some(d) = spec.device(id)
                && let (Some(bus), Some(addr)) = (&d.bus, d.address)
            {
                sim.inject(bus, addr, Some(inject));
            }
        }
        sim
    }

    fn with<R>(&self, f: impl FnOnce(&mut World) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Injects `fault` into the device at `addr` on `bus` (`None` clears it).
    pub fn inject(&self, bus: &str, addr: u8, fault: Option<Inject>) {
        self.with(|w| {
            if let Some(c) = w.chips.get_mut(&(bus.into(), addr)) {
                c.inject = fault;
            }
        });
    }

    /// Makes `bus` report arbitration loss on every transaction (another controller holds it).
    pub fn set_bus_busy(&self, bus: &str, busy: bool) {
        self.with(|w| {
            w.busy_buses.retain(|b| b != bus);
            if busy {
                w.busy_buses.push(bus.into());
            }
        });
    }

    pub fn advance_ms(&self, ms: u64) {
        self.with(|w| w.now_ms = w.now_ms.saturating_add(ms));
    }

    pub fn now_ms(&self) -> u64 {
        self.with(|w| w.now_ms)
    }

    /// The colours latched on the strip on data pin `pin`.
    pub fn led_frame(&self, pin: u8) -> Vec<RGB8> {
        self.with(|w| w.leds.get(&pin).map(|l| l.1.clone()).unwrap_or_default())
    }

    /// The duty on PWM pin `pin` (of [`PWM_MAX_DUTY`]).
    pub fn duty(&self, pin: u8) -> Option<u16> {
        self.with(|w| w.pwm.get(&pin).copied())
    }

    pub fn level(&self, pin: u8) -> Option<bool> {
        self.with(|w| w.levels.get(&pin).copied())
    }

    /// Sets what input `pin` reads (a button pressed).
    pub fn set_level(&self, pin: u8, high: bool) {
        self.with(|w| w.levels.insert(pin, high));
    }

    /// I2C transactions so far (for tests that check a refusal touched no bus).
    pub fn transactions(&self) -> u64 {
        self.with(|w| w.transactions)
    }

    /// What the sensors would read now, from the environment model (for tests).
    pub fn truth(&self) -> (f64, f64, f64, (u16, u16)) {
        self.with(|w| (w.celsius(), w.humidity(), w.lux(), w.air()))
    }
}

/// An I2C error with the kind a real controller reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimI2cError(pub ErrorKind);

impl i2c::Error for SimI2cError {
    fn kind(&self) -> ErrorKind {
        self.0
    }
}

/// A handle on one simulated I2C bus.
#[derive(Clone)]
pub struct SimI2c {
    sim: Sim,
    bus: String,
}

impl i2c::ErrorType for SimI2c {
    type Error = SimI2cError;
}

const NACK_ADDR: SimI2cError = SimI2cError(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address));
const NACK_DATA: SimI2cError = SimI2cError(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Data));

impl i2c::I2c for SimI2c {
    fn transaction(&mut self, address: u8, operations: &mut [Operation<'_>]) -> Result<(), SimI2cError> {
        let bus = self.bus.clone();
        self.sim.with(|w| {
            w.transactions += 1;
            if w.busy_buses.contains(&bus) {
                return Err(SimI2cError(ErrorKind::ArbitrationLoss));
            }
            let now = w.now_ms;
            let (celsius, humidity, lux, air) = (w.celsius(), w.humidity(), w.lux(), w.air());
            let chip = w.chips.get_mut(&(bus, address)).ok_or(NACK_ADDR)?;
            if chip.inject == Some(Inject::Nack) {
                return Err(NACK_ADDR);
            }
            let inject = chip.inject;
            for op in operations {
                match (&mut chip.model, op) {
                    (Model::Aht20(m), Operation::Write(bytes)) => match *bytes {
                        [0xBE, 0x08, 0x00] => m.calibrated = true,
                        [0xAC, 0x33, 0x00] => m.started_ms = Some(now),
                        [0xBA] => *m = Aht20Model::default(),
                        [0x71] | [] => {}
                        _ => return Err(NACK_DATA),
                    },
                    (Model::Aht20(m), Operation::Read(buf)) => {
                        let busy = inject == Some(Inject::StuckBusy)
                            || m.started_ms.is_some_and(|t| now < t + u64::from(crate::aht20::MEASURE_MS));
                        let mut frame = [0u8; 7];
                        frame[0] = 0x10 | if busy { 0x80 } else { 0 } | if m.calibrated { 0x08 } else { 0 };
                        let h =
                            (humidity / 100.0 * f64::from(1u32 << 20)).round().min(f64::from((1u32 << 20) - 1)) as u32;
                        let t = ((celsius + 50.0) / 200.0 * f64::from(1u32 << 20)).round() as u32 & 0xF_FFFF;
                        frame[1] = (h >> 12) as u8;
                        frame[2] = (h >> 4) as u8;
                        frame[3] = ((h as u8 & 0x0F) << 4) | ((t >> 16) as u8 & 0x0F);
                        frame[4] = (t >> 8) as u8;
                        frame[5] = t as u8;
                        frame[6] = crc8(&frame[..6]) ^ if inject == Some(Inject::BadCrc) { 0xFF } else { 0 };
                        let n = buf.len().min(7);
                        buf[..n].copy_from_slice(&frame[..n]);
                    }
                    (Model::Sgp30(m), Operation::Write(bytes)) => match *bytes {
                        [0x20, 0x03] => {
                            m.initialized = true;
                            m.measured = 0;
                        }
                        [0x20, 0x08] => {
                            m.measured += 1;
                            m.ready_at = Some(now + 12);
                        }
                        _ => return Err(NACK_DATA),
                    },
                    (Model::Sgp30(m), Operation::Read(buf)) => {
                        // No result waiting, or not yet done: the SGP30 does not acknowledge
                        // a read header.
                        let ready = m.ready_at.take().filter(|&t| now >= t).ok_or(NACK_ADDR)?;
                        let _ = ready;
                        let (co2, tvoc) = if !m.initialized || m.measured <= crate::air::WARMUP_MEASUREMENTS {
                            (400, 0)
                        } else {
                            air
                        };
                        let mut out = [0u8; 6];
                        for (i, word) in [co2, tvoc].into_iter().enumerate() {
                            let b = word.to_be_bytes();
                            out[i * 3] = b[0];
                            out[i * 3 + 1] = b[1];
                            out[i * 3 + 2] = crc8(&b) ^ if inject == Some(Inject::BadCrc) { 0xFF } else { 0 };
                        }
                        let n = buf.len().min(6);
                        buf[..n].copy_from_slice(&out[..n]);
                    }
                    (Model::Bh1750(m), Operation::Write(bytes)) => match *bytes {
                        [0x00] => m.powered = false,
                        [0x01] => m.powered = true,
                        [0x07] => m.raw = 0,
                        [0x10 | 0x11 | 0x13 | 0x20 | 0x21 | 0x23] => {
                            m.raw = (lux * 1.2).round().min(f64::from(u16::MAX)) as u16;
                        }
                        [0x40..=0x47 | 0x60..=0x7F] => {}
                        _ => return Err(NACK_DATA),
                    },
                    (Model::Bh1750(m), Operation::Read(buf)) => {
                        let b = m.raw.to_be_bytes();
                        let n = buf.len().min(2);
                        buf[..n].copy_from_slice(&b[..n]);
                    }
                }
            }
            Ok(())
        })
    }
}

/// A delay that moves the virtual clock instead of sleeping.
#[derive(Clone)]
pub struct SimDelay(Sim);

impl embedded_hal::delay::DelayNs for SimDelay {
    fn delay_ns(&mut self, ns: u32) {
        self.0.with(|w| w.now_ms = w.now_ms.saturating_add(u64::from(ns).div_ceil(1_000_000)));
    }
}

/// The SPI bus behind a WS2812 data pin: decodes each 4-bit-per-bit pattern back into colours
/// and latches a frame at the low reset.
pub struct SimSpi {
    sim: Sim,
    pin: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimSpiError;

impl embedded_hal::spi::Error for SimSpiError {
    fn kind(&self) -> embedded_hal::spi::ErrorKind {
        embedded_hal::spi::ErrorKind::Other
    }
}

impl embedded_hal::spi::ErrorType for SimSpi {
    type Error = SimSpiError;
}

/// The 2-bit group a WS2812-over-SPI byte stands for.
fn ws2812_bits(b: u8) -> Option<u8> {
    match b {
        0b1000_1000 => Some(0),
        0b1000_1110 => Some(1),
        0b1110_1000 => Some(2),
        0b1110_1110 => Some(3),
        _ => None,
    }
}

/// The frame in `bytes` (four SPI bytes per data byte, green-red-blue), or `None` when a byte
/// is not a WS2812 pattern or the length is not whole LEDs.
pub fn decode_ws2812(bytes: &[u8]) -> Option<Vec<RGB8>> {
    if !bytes.len().is_multiple_of(12) {
        return None;
    }
    let mut data = Vec::with_capacity(bytes.len() / 4);
    for quad in bytes.chunks(4) {
        let mut v = 0u8;
        for &b in quad {
            v = (v << 2) | ws2812_bits(b)?;
        }
        data.push(v);
    }
    Some(data.chunks(3).map(|c| RGB8 { g: c[0], r: c[1], b: c[2] }).collect())
}

impl embedded_hal::spi::SpiBus<u8> for SimSpi {
    fn read(&mut self, words: &mut [u8]) -> Result<(), SimSpiError> {
        words.fill(0);
        Ok(())
    }

    fn write(&mut self, words: &[u8]) -> Result<(), SimSpiError> {
        let pin = self.pin;
        self.sim.with(|w| {
            let (pending, frame) = w.leds.entry(pin).or_default();
            for &b in words {
                if b != 0 {
                    // A strip longer than any board.json allows is garbage on the line.
                    if pending.len() >= crate::spec::MAX_LEDS * 12 {
                        pending.clear();
                        return Err(SimSpiError);
                    }
                    pending.push(b);
                } else if !pending.is_empty() {
                    let bytes = core::mem::take(pending);
                    *frame = decode_ws2812(&bytes).ok_or(SimSpiError)?;
                }
            }
            Ok(())
        })
    }

    fn transfer(&mut self, read: &mut [u8], write: &[u8]) -> Result<(), SimSpiError> {
        self.write(write)?;
        read.fill(0);
        Ok(())
    }

    fn transfer_in_place(&mut self, words: &mut [u8]) -> Result<(), SimSpiError> {
        self.write(words)?;
        words.fill(0);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SimSpiError> {
        Ok(())
    }
}

/// A simulated PWM channel or GPIO pin.
pub struct SimPin {
    sim: Sim,
    pin: u8,
}

impl embedded_hal::digital::ErrorType for SimPin {
    type Error = core::convert::Infallible;
}

impl embedded_hal::digital::InputPin for SimPin {
    fn is_high(&mut self) -> Result<bool, Self::Error> {
        Ok(self.sim.level(self.pin).unwrap_or(false))
    }

    fn is_low(&mut self) -> Result<bool, Self::Error> {
        self.is_high().map(|h| !h)
    }
}

impl embedded_hal::digital::OutputPin for SimPin {
    fn set_low(&mut self) -> Result<(), Self::Error> {
        self.sim.set_level(self.pin, false);
        Ok(())
    }

    fn set_high(&mut self) -> Result<(), Self::Error> {
        self.sim.set_level(self.pin, true);
        Ok(())
    }
}

impl embedded_hal::pwm::ErrorType for SimPin {
    type Error = core::convert::Infallible;
}

impl embedded_hal::pwm::SetDutyCycle for SimPin {
    fn max_duty_cycle(&self) -> u16 {
        PWM_MAX_DUTY
    }

    fn set_duty_cycle(&mut self, duty: u16) -> Result<(), Self::Error> {
        let pin = self.pin;
        self.sim.with(|w| w.pwm.insert(pin, duty.min(PWM_MAX_DUTY)));
        Ok(())
    }
}

impl Backend for Sim {
    type I2c = SimI2c;
    type Delay = SimDelay;
    type Led = ws2812_spi::Ws2812<SimSpi>;
    type Pwm = SimPin;
    type Input = SimPin;
    type Output = SimPin;

    fn i2c(&mut self, bus: &Bus) -> Result<SimI2c, Fault> {
        Ok(SimI2c { sim: self.clone(), bus: bus.id.clone() })
    }

    fn delay(&mut self) -> SimDelay {
        SimDelay(self.clone())
    }

    fn led(&mut self, _: &Device, data_pin: u8) -> Result<Self::Led, Fault> {
        Ok(ws2812_spi::Ws2812::new(SimSpi { sim: self.clone(), pin: data_pin }))
    }

    fn pwm(&mut self, _: &Device, pin: u8) -> Result<SimPin, Fault> {
        Ok(SimPin { sim: self.clone(), pin })
    }

    fn input(&mut self, pin: u8) -> Result<SimPin, Fault> {
        Ok(SimPin { sim: self.clone(), pin })
    }

    fn output(&mut self, pin: u8) -> Result<SimPin, Fault> {
        self.set_level(pin, false);
        Ok(SimPin { sim: self.clone(), pin })
    }
}

#[cfg(test)]
mod tests;
