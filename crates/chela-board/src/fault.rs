//! What can go wrong on a bus or a pin, as a value the caller can match on and a sentence a
//! person can read.

use core::fmt;

use embedded_hal::i2c::{ErrorKind, NoAcknowledgeSource};

/// A device or bus fault. `Display` says what happened and what to check.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Fault {
    /// Nobody answered at the address (NACK on the address byte): not connected, wrong
    /// address, or no power.
    Missing { addr: u8 },
    /// The device answered but refused a byte we sent (NACK on data).
    Refused { addr: u8 },
    /// The checksum the device sent does not match its data: noise on the wires or a loose
    /// connection.
    Crc { device: &'static str },
    /// The device stayed busy longer than its datasheet allows.
    Timeout { device: &'static str, waited_ms: u32 },
    /// Another controller holds the bus or won arbitration.
    BusBusy,
    /// Any other bus, SPI, PWM or pin error the peripheral reported.
    Bus { what: &'static str },
    /// A value outside what the device or its configuration allows (a servo angle).
    OutOfRange { what: &'static str, value: f32, min: f32, max: f32 },
    /// The device answered something its protocol does not allow.
    Protocol { device: &'static str, what: &'static str },
    /// The host could not open a device file (the Linux backend): `why` says what to do.
    Open { path: alloc::string::String, why: alloc::string::String },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Missing { addr } => write!(
                f,
                "no device answered at I2C address {addr:#04x} (NACK): check the wiring, the power and the address"
            ),
            Fault::Refused { addr } => {
                write!(f, "the device at I2C address {addr:#04x} refused a command byte (NACK on data)")
            }
            Fault::Crc { device } => {
                write!(f, "the {device} sent data whose CRC-8 does not match: noise or a loose wire; try again")
            }
            Fault::Timeout { device, waited_ms } => {
                write!(f, "the {device} stayed busy for {waited_ms} ms, longer than its datasheet allows")
            }
            Fault::BusBusy => f.write_str("the I2C bus is busy (another controller holds it or won arbitration)"),
            Fault::Bus { what } => write!(f, "the {what} reported an error"),
            Fault::OutOfRange { what, value, min, max } => {
                write!(
                    f,
                    "{what} {} is outside the allowed range {} to {}",
                    Decimal(*value),
                    Decimal(*min),
                    Decimal(*max)
                )
            }
            Fault::Protocol { device, what } => write!(f, "the {device} answered out of protocol: {what}"),
            Fault::Open { path, why } => write!(f, "cannot open {path}: {why}"),
        }
    }
}

impl core::error::Error for Fault {}

/// A value as a person reads it, up to three decimals with trailing zeros dropped (`150`, `2.5`,
/// `inf`; a value past 2^24 exactly, `30000001024`): what `{}` prints for the angles and ranges a fault names, without core's shortest
/// float formatter, which was the only user of its roughly 9 KB in the chip's image.
pub struct Decimal(pub f32);

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v.is_nan() {
            return f.write_str("NaN");
        }
        let sign = if v < 0.0 { "-" } else { "" };
        let a = if v < 0.0 { -v } else { v };
        if a.is_infinite() {
            return write!(f, "{sign}inf");
        }
        // From 2^24 up every f32 is a whole number, and u128 holds the largest.
        if a >= 16_777_216.0 {
            return write!(f, "{sign}{}", a as u128);
        }
        let milli = (a * 1000.0 + 0.5) as u64;
        let (whole, mut frac, mut width) = (milli / 1000, milli % 1000, 3);
        if frac == 0 {
            let sign = if whole == 0 { "" } else { sign };
            return write!(f, "{sign}{whole}");
        }
        while frac % 10 == 0 {
            frac /= 10;
            width -= 1;
        }
        write!(f, "{sign}{whole}.{frac:0width$}")
    }
}

/// The fault for an I2C error at `addr`, by the kind the HAL reports.
pub fn from_i2c<E: embedded_hal::i2c::Error>(addr: u8, e: &E) -> Fault {
    match e.kind() {
        ErrorKind::NoAcknowledge(NoAcknowledgeSource::Data) => Fault::Refused { addr },
        ErrorKind::NoAcknowledge(_) => Fault::Missing { addr },
        ErrorKind::ArbitrationLoss => Fault::BusBusy,
        _ => Fault::Bus { what: "I2C bus" },
    }
}

#[cfg(test)]
mod decimal_tests {
    use super::Decimal;
    use alloc::format;
    use alloc::string::ToString;

    #[test]
    fn reads_as_rusts_own_float_display_for_the_values_a_person_types() {
        for v in [
            0.0f32,
            1.0,
            150.0,
            120.0,
            180.0,
            2.5,
            -2.5,
            0.1,
            0.125,
            -90.0,
            1e7,
            16_777_216.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ] {
            assert_eq!(Decimal(v).to_string(), format!("{v}"), "{v}");
        }
        // Past three decimals it rounds, where Rust prints the shortest exact text.
        assert_eq!(Decimal(1.23456).to_string(), "1.235");
        assert_eq!(Decimal(-0.0004).to_string(), "0");
        // Past 2^24 it prints the float's exact whole value, where Rust prints the shortest.
        assert_eq!(Decimal(3e10).to_string(), "30000001024");
    }
}
