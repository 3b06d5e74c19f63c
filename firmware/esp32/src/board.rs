//! The board's clock and console: embassy's monotonic time, the wall clock once SNTP set it,
//! and the USB-serial/UART console through esp-println.

use core::cell::{Cell, RefCell};
use core::fmt;

use chela_chip::Board;
use chela_chip::pki::{Agreement, Clock, TimeCheck};
use critical_section::Mutex;

use crate::certs;

/// Unix seconds and the monotonic milliseconds at the last SNTP answer.
static WALL: Mutex<Cell<Option<(u64, u64)>>> = Mutex::new(Cell::new(None));
/// SNTP's time and the authenticated HTTPS `Date`: SNTP dates certificates only once they agree.
static TIME_CHECK: Mutex<RefCell<TimeCheck>> = Mutex::new(RefCell::new(TimeCheck::new(certs::BUILT_UNIX)));

#[derive(Clone, Copy, Debug, Default)]
pub struct Esp;

impl Esp {
    /// Sets the wall clock from an SNTP answer received now.
    pub fn set_unix(&self, unix: u64) {
        let now = self.now_ms();
        critical_section::with(|cs| {
            WALL.borrow(cs).set(Some((unix, now)));
            TIME_CHECK.borrow_ref_mut(cs).sntp(unix, now);
        });
    }

    /// A `Date` header from a server whose chain verified; says so when it and SNTP disagree.
    pub fn https_date(&self, header: &str) {
        let now = self.now_ms();
        let (before, after) = critical_section::with(|cs| {
            let mut check = TIME_CHECK.borrow_ref_mut(cs);
            let before = check.agreement(now);
            check.https_date(header, now);
            (before, check.agreement(now))
        });
        if before != after {
            match after {
                Agreement::Agreed => {
                    esp_println::println!("[time] SNTP agrees with HTTPS: certificates are dated by it")
                }
                Agreement::Disagree { by } => esp_println::println!(
                    "[time] SNTP is {by} s off the time a pinned HTTPS server gave: certificates keep the build-time floor"
                ),
                Agreement::Waiting => {}
            }
        }
    }

    /// The clock certificates are checked with (`chela_chip::pki::TimeCheck`).
    pub fn cert_clock(&self) -> Clock {
        let now = self.now_ms();
        critical_section::with(|cs| TIME_CHECK.borrow_ref(cs).clock(now))
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
