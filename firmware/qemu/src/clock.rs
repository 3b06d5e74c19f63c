//! The emulator's board: a fake clock that moves only when the scripted server advances it,
//! so the run is the same every time, and the UART as the console.

use alloc::rc::Rc;
use core::cell::Cell;
use core::fmt::{self, Write};

use chela_chip::Board;

use crate::console::Uart;

/// Unix seconds at boot: 2026-11-30T11:25:20Z, a Monday.
const BOOT_UNIX: u64 = 1_796_037_920;

/// The clock; clones share the time (the board's and the server's).
#[derive(Clone, Debug, Default)]
pub struct Clock {
    ms: Rc<Cell<u64>>,
}

impl Clock {
    pub fn advance(&self, ms: u64) {
        self.ms.set(self.ms.get() + ms);
    }
}

impl Board for Clock {
    fn now_ms(&self) -> u64 {
        self.ms.get()
    }

    /// As SNTP would give them.
    fn unix(&self) -> Option<u64> {
        Some(BOOT_UNIX + self.ms.get() / 1000)
    }

    fn print(&self, args: fmt::Arguments<'_>) {
        let _ = Uart.write_fmt(args);
    }
}
