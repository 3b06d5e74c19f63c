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
                write!(f, "{what} {value} is outside the allowed range {min} to {max}")
            }
            Fault::Protocol { device, what } => write!(f, "the {device} answered out of protocol: {what}"),
            Fault::Open { path, why } => write!(f, "cannot open {path}: {why}"),
        }
    }
}

impl core::error::Error for Fault {}

/// The fault for an I2C error at `addr`, by the kind the HAL reports.
pub fn from_i2c<E: embedded_hal::i2c::Error>(addr: u8, e: &E) -> Fault {
    match e.kind() {
        ErrorKind::NoAcknowledge(NoAcknowledgeSource::Data) => Fault::Refused { addr },
        ErrorKind::NoAcknowledge(_) => Fault::Missing { addr },
        ErrorKind::ArbitrationLoss => Fault::BusBusy,
        _ => Fault::Bus { what: "I2C bus" },
    }
}
