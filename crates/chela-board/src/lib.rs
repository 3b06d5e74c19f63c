//! Chela's board layer: the device drivers, the board description (`board.json`) and, on the
//! host, a simulated board.
//!
//! What it is: `no_std` + `alloc` code that the host binary and the firmware share. Every driver
//! is generic over the `embedded-hal` 1.0 traits (`I2c`, `SpiBus`, `SetDutyCycle`,
//! `OutputPin`/`InputPin`, `DelayNs`), so a simulated bus, Linux's `/dev/i2c-N` or an esp-hal
//! peripheral all drive the same code. [`board::Board`] builds the devices a [`spec::Spec`]
//! names on a [`board::Backend`] and runs the operations the tools offer.
//!
//! What it is not: an async runtime, a scheduler or a tool registry; the host's `board` tool
//! group and the firmware call into it.
//!
//! Drivers, and why some are our own:
//! - SGP30 uses the `sgp30` crate (embedded-hal 1.0, CRC-checked words); BH1750 the `bh1750`
//!   crate; WS2812 the `ws2812-spi` crate (`smart-leds-trait`). [`fault::Fault`] wraps their
//!   errors.
//! - AHT20 is our own ([`aht20`]): `aht20-driver` 2.0 waits for the busy bit to clear in
//!   unbounded loops, so a sensor stuck busy would hang the caller forever; ours polls a bounded
//!   number of times and reports [`fault::Fault::Timeout`].
//! - The servo ([`servo`]) and plain GPIO ([`gpio`]) are small enough that no crate is needed.
//!
//! Every fault is a typed [`fault::Fault`] whose `Display` is a sentence for the model or a
//! person; nothing here panics on what a device or a file says.
//!
//! With the `sim` feature (std), [`sim`] provides the simulated backend: a bus model that speaks
//! each sensor's real register protocol (commands, status bits, CRC-8), deterministic readings
//! from a seed and a virtual clock, actuators whose state reads back, and fault injection.

#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod aht20;
pub mod air;
pub mod board;
pub mod crc;
pub mod fault;
pub mod gpio;
pub mod led;
pub mod light;
#[cfg(feature = "linux")]
pub mod linux;
pub mod servo;
#[cfg(feature = "sim")]
pub mod sim;
pub mod spec;

pub use fault::Fault;

/// The example boards shipped with Chela (`boards/` in this crate): name and board.json text.
/// The first is the default on a PC.
pub const EXAMPLES: &[(&str, &str)] = &[
    ("simulated", include_str!("../boards/simulated.json")),
    ("raspberry-pi", include_str!("../boards/raspberry-pi.json")),
    ("esp32c3-devkit", include_str!("../boards/esp32c3-devkit.json")),
    ("esp32c6-devkit", include_str!("../boards/esp32c6-devkit.json")),
];
