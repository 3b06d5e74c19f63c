//! What every Chela chip build shares: the ESP32 firmware (`firmware/esp32`) and the emulator
//! turn (`firmware/qemu`) run the same code from here, so what the emulator proves is what
//! the chip runs.
//!
//! What it is: the turn driver ([`turn`]: `chela-core`'s agent run stepped to its end, each
//! model call made through the core's exchange, the request body sent in fixed windows and
//! the answer fed to the stream decoder piece by piece), the chip's tools ([`tools`]: memory,
//! time, plus whatever the board adds), and power on/off over the core's flash store
//! ([`boot`]). What it is not: a board. The board gives the clock and the console
//! ([`Board`]), the network ([`Link`]) and the flash partition (`chela_core::flash::Flash`).
#![no_std]

extern crate alloc;

pub mod board;
pub mod boot;
pub mod console;
pub mod cron;
pub mod dhcp;
pub mod ed25519;
pub mod feishu;
pub mod gateway;
pub mod heartbeat;
pub mod http;
pub mod link;
pub mod ota;
#[cfg(feature = "tls")]
pub mod pki;
pub mod portal;
pub mod proxy;
pub mod search;
pub mod telegram;
pub mod time;
#[cfg(feature = "tls")]
pub mod tls;
pub mod tools;
pub mod turn;

use core::fmt;

pub use link::{Answer, Link, LinkError};
pub use turn::{Chip, Turn};

/// The board's clock and console.
pub trait Board {
    /// Milliseconds since boot: the monotonic time the core's exchange takes.
    fn now_ms(&self) -> u64;
    /// Unix seconds, once known (SNTP on the chip); `None` before.
    fn unix(&self) -> Option<u64>;
    /// Writes to the serial console.
    fn print(&self, args: fmt::Arguments<'_>);
}

/// `say!(board, "...", args)`: a line on the board's console.
#[macro_export]
macro_rules! say {
    ($board:expr, $($arg:tt)*) => {{
        $crate::Board::print($board, format_args!($($arg)*));
        $crate::Board::print($board, format_args!("\n"));
    }};
}
