//! BH1750 ambient-light sensor (I2C, address 0x23 with ADDR low, 0x5C with ADDR high), through
//! the `bh1750` crate: a one-time high-resolution measurement (`20`, 120 ms typical), two bytes
//! back, lux = raw / 1.2 (datasheet, default measurement time 69).

use embedded_hal::delay::DelayNs;
use embedded_hal::i2c::I2c;

use crate::fault::{Fault, from_i2c};

pub const ADDRESS_LOW: u8 = 0x23;
pub const ADDRESS_HIGH: u8 = 0x5C;

pub struct Bh1750<I, D> {
    inner: bh1750::BH1750<I, D>,
    addr: u8,
}

impl<I: I2c, D: DelayNs> Bh1750<I, D> {
    pub fn new(i2c: I, delay: D, addr: u8) -> Self {
        Bh1750 { inner: bh1750::BH1750::new_custom_address(i2c, delay, addr), addr }
    }

    /// One measurement in lux.
    pub fn measure(&mut self) -> Result<f32, Fault> {
        self.inner.get_one_time_measurement(bh1750::Resolution::High).map_err(|e| match e {
            bh1750::BH1750Error::I2C(e) => from_i2c(self.addr, &e),
            bh1750::BH1750Error::MeasurementTimeOutOfRange => {
                Fault::Protocol { device: "BH1750", what: "measurement time register out of range" }
            }
        })
    }
}

/// The datasheet's conversion for the default measurement time in H-resolution mode.
pub fn lux(raw: u16) -> f32 {
    f32::from(raw) / 1.2
}
