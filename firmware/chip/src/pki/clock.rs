//! When the chip's clock may date certificates. SNTP is unauthenticated: whoever controls the
//! network picks its answer, and with it which expired certificates pass. So SNTP's time dates
//! certificates only once an authenticated time agrees with it: the `Date` header of an HTTPS
//! response from a pinned host, read after that server's chain verified. Until they agree the
//! checker gets a floor (the image's build time, raised by the authenticated time less the
//! tolerance), which refuses what expired before it and trusts nothing of the network's.
//!
//! Pure bookkeeping over Unix seconds and the board's monotonic milliseconds, so the firmware
//! only reports what it saw and asks for the [`Clock`] to check with.

use super::Clock;

/// How far SNTP and an HTTPS `Date` may differ and still agree: the `Date` is whole seconds,
/// taken when the server answered, and a response may take a while on a slow link.
pub const TOLERANCE_SECS: u64 = 300;

/// Whether SNTP's time is believed, for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agreement {
    /// SNTP, an authenticated time, or both are still missing.
    Waiting,
    /// They agree within [`TOLERANCE_SECS`]: certificates are dated by SNTP's time.
    Agreed,
    /// They differ by this many seconds: SNTP is not believed for certificates.
    Disagree { by: u64 },
}

/// What the chip knows of the time, and from where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeCheck {
    floor: u64,
    /// Unix seconds and the monotonic milliseconds when they were true.
    sntp: Option<(u64, u64)>,
    https: Option<(u64, u64)>,
}

impl TimeCheck {
    /// Nothing known yet but the image's build time (`floor`).
    pub const fn new(floor: u64) -> Self {
        TimeCheck { floor, sntp: None, https: None }
    }

    /// An SNTP answer, received at `now_ms`.
    pub fn sntp(&mut self, unix: u64, now_ms: u64) {
        self.sntp = Some((unix, now_ms));
    }

    /// A `Date` header, received at `now_ms` over HTTPS whose chain verified. The newest wins.
    /// Returns whether the header was a date at all.
    pub fn https_date(&mut self, header: &str, now_ms: u64) -> bool {
        match super::time::http_date(header) {
            Some(unix) => {
                self.https = Some((unix, now_ms));
                true
            }
            None => false,
        }
    }

    fn at(known: Option<(u64, u64)>, now_ms: u64) -> Option<u64> {
        known.map(|(unix, at)| unix.saturating_add(now_ms.saturating_sub(at) / 1000))
    }

    /// Whether SNTP is believed now.
    pub fn agreement(&self, now_ms: u64) -> Agreement {
        match (Self::at(self.sntp, now_ms), Self::at(self.https, now_ms)) {
            (Some(sntp), Some(https)) => match sntp.abs_diff(https) {
                by if by <= TOLERANCE_SECS => Agreement::Agreed,
                by => Agreement::Disagree { by },
            },
            _ => Agreement::Waiting,
        }
    }

    /// The clock to check certificates with at `now_ms`.
    pub fn clock(&self, now_ms: u64) -> Clock {
        let https = Self::at(self.https, now_ms);
        match (self.agreement(now_ms), Self::at(self.sntp, now_ms)) {
            // A time before the image was built is wrong, however many sources say it.
            (Agreement::Agreed, Some(sntp)) if sntp >= self.floor => Clock::Known(sntp),
            _ => Clock::AtLeast(self.floor.max(https.map_or(0, |t| t.saturating_sub(TOLERANCE_SECS)))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUILT: u64 = 1_790_000_000;
    /// `Thu, 03 Dec 2026 12:00:00 GMT`.
    const DATE: u64 = 1_796_299_200;
    const DATE_TEXT: &str = "Thu, 03 Dec 2026 12:00:00 GMT";

    #[test]
    fn sntp_alone_is_not_believed() {
        let mut t = TimeCheck::new(BUILT);
        assert_eq!(t.clock(0), Clock::AtLeast(BUILT));
        // Whatever SNTP says, early or late, certificates keep the build-time floor.
        for lie in [0, BUILT - 86_400 * 365, DATE, u64::MAX / 2] {
            t.sntp(lie, 1000);
            assert_eq!(t.clock(2000), Clock::AtLeast(BUILT), "{lie}");
            assert_eq!(t.agreement(2000), Agreement::Waiting);
        }
    }

    #[test]
    fn sntp_agreeing_with_an_authenticated_date_is_believed() {
        let mut t = TimeCheck::new(BUILT);
        assert!(t.https_date(DATE_TEXT, 10_000));
        // The authenticated time alone raises the floor (less the tolerance).
        assert_eq!(t.clock(10_000), Clock::AtLeast(DATE - TOLERANCE_SECS));
        // SNTP a minute later by the monotonic clock, 30 s ahead of the Date: believed, and
        // it runs on with the monotonic clock.
        t.sntp(DATE + 90, 70_000);
        assert_eq!(t.agreement(70_000), Agreement::Agreed);
        assert_eq!(t.clock(70_000), Clock::Known(DATE + 90));
        assert_eq!(t.clock(80_000), Clock::Known(DATE + 100));
        // At the edge of the tolerance, and past it.
        t.sntp(DATE + 60 + TOLERANCE_SECS, 70_000);
        assert_eq!(t.agreement(70_000), Agreement::Agreed);
        t.sntp(DATE + 61 + TOLERANCE_SECS, 70_000);
        assert_eq!(t.agreement(70_000), Agreement::Disagree { by: TOLERANCE_SECS + 1 });
    }

    #[test]
    fn sntp_disagreeing_keeps_the_floor() {
        let mut t = TimeCheck::new(BUILT);
        // A network that sets the clock years ahead, to make an expired certificate look fine
        // or a valid one expired, or back, to revive a revoked-and-expired one.
        for lie in [DATE + 86_400 * 400, DATE - 86_400 * 400] {
            t.sntp(lie, 0);
            assert!(t.https_date(DATE_TEXT, 0));
            assert!(matches!(t.agreement(0), Agreement::Disagree { .. }), "{lie}");
            assert_eq!(t.clock(0), Clock::AtLeast(DATE - TOLERANCE_SECS), "{lie}");
        }
        // A newer Date that agrees fixes it; a garbled one changes nothing.
        assert!(!t.https_date("yesterday", 5000));
        assert!(matches!(t.agreement(5000), Agreement::Disagree { .. }));
        t.sntp(DATE, 0);
        assert_eq!(t.clock(5000), Clock::Known(DATE + 5));
    }

    #[test]
    fn an_authenticated_date_before_the_build_never_lowers_the_floor() {
        let mut t = TimeCheck::new(BUILT);
        assert!(t.https_date("Sun, 06 Nov 1994 08:49:37 GMT", 0));
        assert_eq!(t.clock(0), Clock::AtLeast(BUILT));
        t.sntp(784_111_777, 0);
        // They agree with each other, both before the build: still not believed.
        assert_eq!(t.agreement(0), Agreement::Agreed);
        assert_eq!(t.clock(0), Clock::AtLeast(BUILT));
    }
}
