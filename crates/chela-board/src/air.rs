//! SGP30 air-quality sensor (I2C, address 0x58), through the `sgp30` crate.
//!
//! After `init_air_quality` (`20 03`) the sensor reports fixed values (400 ppm CO₂eq, 0 ppb
//! TVOC) for its first 15 measurements while its baseline settles; [`Reading::warming_up`]
//! says so. Every word it sends carries a CRC-8, which the crate checks.

use embedded_hal::delay::DelayNs;
use embedded_hal::i2c::I2c;

use crate::fault::{Fault, from_i2c};

/// The sensor's fixed address.
pub const ADDRESS: u8 = 0x58;
/// Measurements after init during which the values are the fixed warm-up ones (datasheet).
pub const WARMUP_MEASUREMENTS: u32 = 15;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    pub co2eq_ppm: u16,
    pub tvoc_ppb: u16,
    /// Within the first [`WARMUP_MEASUREMENTS`] after init: the values are placeholders.
    pub warming_up: bool,
}

pub struct Sgp30<I: I2c, D: DelayNs> {
    inner: sgp30::Sgp30<I, D>,
    measured: u32,
}

impl<I: I2c, D: DelayNs> Sgp30<I, D> {
    pub fn new(i2c: I, delay: D) -> Self {
        Sgp30 { inner: sgp30::Sgp30::new(i2c, ADDRESS, delay), measured: 0 }
    }

    /// Starts the air-quality algorithm on first use, then measures.
    pub fn measure(&mut self) -> Result<Reading, Fault> {
        self.inner.init().map_err(map)?;
        let m = self.inner.measure().map_err(map)?;
        self.measured = self.measured.saturating_add(1);
        Ok(Reading { co2eq_ppm: m.co2eq_ppm, tvoc_ppb: m.tvoc_ppb, warming_up: self.measured <= WARMUP_MEASUREMENTS })
    }
}

fn map<E: embedded_hal::i2c::Error>(e: sgp30::Error<E>) -> Fault {
    match e {
        sgp30::Error::I2cWrite(e) | sgp30::Error::I2cRead(e) => from_i2c(ADDRESS, &e),
        sgp30::Error::Crc => Fault::Crc { device: "SGP30" },
        sgp30::Error::NotInitialized => Fault::Protocol { device: "SGP30", what: "measured before init" },
    }
}
