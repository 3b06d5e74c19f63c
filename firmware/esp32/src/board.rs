//! The board's clock and console: embassy's monotonic time, the wall clock once SNTP set it,
//! and the USB-serial/UART console through esp-println.

use core::cell::Cell;
use core::fmt;

use chela_chip::Board;
use critical_section::Mutex;

/// Unix seconds and the monotonic milliseconds at the last SNTP answer.
static WALL: Mutex<Cell<Option<(u64, u64)>>> = Mutex::new(Cell::new(None));

#[derive(Clone, Copy, Debug, Default)]
pub struct Esp;

impl Esp {
    /// Sets the wall clock from an SNTP answer received now.
    pub fn set_unix(&self, unix: u64) {
        let now = self.now_ms();
        critical_section::with(|cs| WALL.borrow(cs).set(Some((unix, now))));
    }
}

impl Board for Esp {
    fn now_ms(&self) -> u64 {
        embassy_time::Instant::now().as_millis()
    }

    fn unix(&self) -> Option<u64> {
        let (unix, at) = critical_section::with(|cs| WALL.borrow(cs).get())?;
        Some(unix + (self.now_ms().saturating_sub(at)) / 1000)
    }

    fn print(&self, args: fmt::Arguments<'_>) {
        esp_println::print!("{args}");
    }
}
