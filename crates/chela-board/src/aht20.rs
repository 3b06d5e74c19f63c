//! AHT20 temperature and humidity sensor (I2C, address 0x38).
//!
//! Protocol (ASAIR datasheet v1.0): read one status byte; if bit 3 (calibrated) is clear, send
//! `BE 08 00` and wait 10 ms. A measurement is `AC 33 00`, then after 80 ms seven bytes: status
//! (bit 7 = busy), 20 bits of humidity, 20 bits of temperature, and a CRC-8 of the first six.
//! RH = S_rh / 2²⁰ × 100 %; T = S_t / 2²⁰ × 200 − 50 °C.
//!
//! Our own driver (not `aht20-driver`): the busy wait is bounded ([`MAX_POLLS`]) and a sensor
//! stuck busy is a [`Fault::Timeout`], not a hang.

use embedded_hal::delay::DelayNs;
use embedded_hal::i2c::I2c;

use crate::crc::crc8;
use crate::fault::{Fault, from_i2c};

/// The sensor's fixed address.
pub const ADDRESS: u8 = 0x38;
/// Calibrate (initialise) command.
pub const CMD_INIT: [u8; 3] = [0xBE, 0x08, 0x00];
/// Trigger a measurement.
pub const CMD_MEASURE: [u8; 3] = [0xAC, 0x33, 0x00];
/// Status bit: a measurement is running.
pub const STATUS_BUSY: u8 = 0x80;
/// Status bit: the calibration coefficients are loaded.
pub const STATUS_CALIBRATED: u8 = 0x08;
/// How long a measurement takes (datasheet: "wait 80 ms").
pub const MEASURE_MS: u32 = 80;
/// How many more times the status is polled (every [`POLL_MS`]) before giving up.
pub const MAX_POLLS: u32 = 10;
pub const POLL_MS: u32 = 10;

/// One reading.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measurement {
    pub celsius: f32,
    pub humidity_percent: f32,
}

/// The raw 20-bit values of a frame to physical units (datasheet section 6).
pub fn convert(raw_humidity: u32, raw_temperature: u32) -> Measurement {
    const FULL: f32 = (1u32 << 20) as f32;
    Measurement {
        humidity_percent: raw_humidity as f32 / FULL * 100.0,
        celsius: raw_temperature as f32 / FULL * 200.0 - 50.0,
    }
}

/// Splits the six data bytes of a frame (status first) into the raw humidity and temperature.
pub fn split(frame: &[u8; 7]) -> (u32, u32) {
    let h = (u32::from(frame[1]) << 12) | (u32::from(frame[2]) << 4) | (u32::from(frame[3]) >> 4);
    let t = ((u32::from(frame[3]) & 0x0F) << 16) | (u32::from(frame[4]) << 8) | u32::from(frame[5]);
    (h, t)
}

/// An AHT20 on bus `I` with delay source `D`.
pub struct Aht20<I, D> {
    i2c: I,
    delay: D,
    calibrated: bool,
}

impl<I: I2c, D: DelayNs> Aht20<I, D> {
    pub fn new(i2c: I, delay: D) -> Self {
        Aht20 { i2c, delay, calibrated: false }
    }

    fn status(&mut self) -> Result<u8, Fault> {
        let mut b = [0u8];
        self.i2c.read(ADDRESS, &mut b).map_err(|e| from_i2c(ADDRESS, &e))?;
        Ok(b[0])
    }

    /// Loads the calibration if the sensor says it has not (after power-up).
    fn ensure_calibrated(&mut self) -> Result<(), Fault> {
        if self.calibrated {
            return Ok(());
        }
        if self.status()? & STATUS_CALIBRATED == 0 {
            self.i2c.write(ADDRESS, &CMD_INIT).map_err(|e| from_i2c(ADDRESS, &e))?;
            self.delay.delay_ms(10);
            if self.status()? & STATUS_CALIBRATED == 0 {
                return Err(Fault::Protocol { device: "AHT20", what: "still not calibrated after the init command" });
            }
        }
        self.calibrated = true;
        Ok(())
    }

    /// Triggers a measurement, waits for it (bounded) and checks its CRC.
    pub fn measure(&mut self) -> Result<Measurement, Fault> {
        self.ensure_calibrated()?;
        self.i2c.write(ADDRESS, &CMD_MEASURE).map_err(|e| from_i2c(ADDRESS, &e))?;
        self.delay.delay_ms(MEASURE_MS);
        let mut frame = [0u8; 7];
        let mut waited = MEASURE_MS;
        for poll in 0..=MAX_POLLS {
            self.i2c.read(ADDRESS, &mut frame).map_err(|e| from_i2c(ADDRESS, &e))?;
            if frame[0] & STATUS_BUSY == 0 {
                break;
            }
            if poll == MAX_POLLS {
                return Err(Fault::Timeout { device: "AHT20", waited_ms: waited });
            }
            self.delay.delay_ms(POLL_MS);
            waited += POLL_MS;
        }
        if crc8(&frame[..6]) != frame[6] {
            return Err(Fault::Crc { device: "AHT20" });
        }
        let (h, t) = split(&frame);
        Ok(convert(h, t))
    }

    /// Gives the bus back.
    pub fn release(self) -> I {
        self.i2c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Packing two 20-bit values the way the sensor does and splitting them again gives
        /// them back, and the conversion follows the datasheet's formulas and ranges.
        #[test]
        fn frame_packing_and_conversion(h in 0u32..(1 << 20), t in 0u32..(1 << 20)) {
            let frame = [
                0x18,
                (h >> 12) as u8,
                (h >> 4) as u8,
                (((h & 0x0F) << 4) as u8) | ((t >> 16) as u8 & 0x0F),
                (t >> 8) as u8,
                t as u8,
                0,
            ];
            prop_assert_eq!(split(&frame), (h, t));
            let m = convert(h, t);
            let want_rh = f64::from(h) * 100.0 / 1_048_576.0;
            let want_t = f64::from(t) * 200.0 / 1_048_576.0 - 50.0;
            prop_assert!((f64::from(m.humidity_percent) - want_rh).abs() < 1e-3);
            prop_assert!((f64::from(m.celsius) - want_t).abs() < 1e-3);
            prop_assert!((0.0..100.0).contains(&m.humidity_percent));
            prop_assert!((-50.0..150.0).contains(&m.celsius));
        }
    }
}
