//! When to retry, as pure functions of the attempt: [`Exponential`], the one bounded
//! exponential back-off every retry loop of Chela steps through (the provider calls, the
//! Telegram poll and sends, the Feishu long connection, MCP server restarts), and [`Backoff`],
//! the provider calls' policy on top of it (a retry limit, jitter and the server's
//! `retry-after`). The driver supplies the randomness and does the waiting.

use core::time::Duration;

/// `base` doubled with each failure, never over `cap`: wait number `n` (0 for the first) of a
/// bounded exponential back-off. No limit on the retries and no jitter: loops that never give
/// up (a reconnect, a poll) use it as it is; [`Backoff`] adds both for provider calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exponential {
    pub base: Duration,
    pub cap: Duration,
}

impl Exponential {
    pub const fn new(base: Duration, cap: Duration) -> Exponential {
        Exponential { base, cap }
    }

    /// The wait before retry `n` (0 for the first): `base * 2^n`, at most `cap`.
    pub fn step(&self, n: u32) -> Duration {
        self.base.saturating_mul(1u32.checked_shl(n).unwrap_or(u32::MAX)).min(self.cap)
    }
}

/// The retry policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First delay; it doubles with each retry.
    pub base: Duration,
    /// Largest computed delay.
    pub cap: Duration,
    /// Longest `retry-after` Chela will wait for; a longer one ends the retries so a person is
    /// not left staring at a silent terminal.
    pub max_retry_after: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            max_retries: 4,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// How long to wait before retry number `retry` (0 for the first retry), or `None` to stop.
    ///
    /// `jitter` is a random number in `[0, 1)`; the delay is spread over the upper half of the
    /// exponential step ("equal jitter"), so clients that failed together do not retry together.
    /// A server's `retry-after` wins when it is longer.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>, jitter: f64) -> Option<Duration> {
        if retry >= self.max_retries {
            return None;
        }
        if let Some(ra) = retry_after
            && ra > self.max_retry_after
        {
            return None;
        }
        let step = Exponential::new(self.base, self.cap).step(retry);
        let half = step / 2;
        let jitter = jitter.clamp(0.0, 1.0);
        let computed = half + half.mul_f64(jitter);
        Some(retry_after.map_or(computed, |ra| ra.max(computed.min(Duration::from_millis(100)))))
    }
}

/// Parses a `retry-after` header (delay seconds, at most a day; HTTP dates are not worth a date
/// parser here and fall back to the computed backoff) or OpenAI's `retry-after-ms`. Both are
/// read as plain decimals (`2`, `0.5`, `150`), exactly, without a float parser (core's is about
/// 15 KB of the firmware, which must stay under 1 MB); anything else is no hint.
pub fn parse_retry_after(seconds: Option<&str>, millis: Option<&str>) -> Option<Duration> {
    if let Some(ms) = millis.and_then(|v| decimal(v, 1_000_000)) {
        return Some(ms);
    }
    decimal(seconds?, 1_000_000_000).map(|s| s.min(Duration::from_secs(86_400)))
}

/// `text` as a non-negative decimal (`[+]digits[.digits]`, at least one digit) of units of
/// `unit_ns` nanoseconds (at most a second), saturating at `u64::MAX` nanoseconds; digits past
/// the nanosecond are dropped.
fn decimal(text: &str, unit_ns: u64) -> Option<Duration> {
    let text = text.trim();
    let text = text.strip_prefix('+').unwrap_or(text);
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty() || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = |s: &str| s.bytes().fold(0u64, |n, b| n.saturating_mul(10).saturating_add(u64::from(b - b'0')));
    // Nine fraction digits reach a nanosecond of a unit up to a second, and keep the product
    // under 10^18.
    let fraction = &fraction[..fraction.len().min(9)];
    let part = digits(fraction) * unit_ns / 10u64.pow(fraction.len() as u32);
    Some(Duration::from_nanos(digits(whole).saturating_mul(unit_ns).saturating_add(part)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_stay_within_the_cap() {
        let b = Backoff::default();
        let d0 = b.delay(0, None, 0.0).unwrap();
        let d1 = b.delay(1, None, 0.0).unwrap();
        assert_eq!(d0, Duration::from_millis(250));
        assert_eq!(d1, Duration::from_millis(500));
        assert_eq!(b.delay(0, None, 0.999_999).unwrap().as_millis(), 499);
        assert!(b.delay(3, None, 1.0).unwrap() <= b.cap);
        let wide = Backoff { max_retries: 40, ..b };
        assert!(wide.delay(39, None, 0.5).unwrap() <= b.cap);
        assert_eq!(b.delay(4, None, 0.0), None);
    }

    #[test]
    fn the_exponential_doubles_from_its_base_and_stops_at_its_cap() {
        let e = Exponential::new(Duration::from_secs(1), Duration::from_secs(60));
        let secs: alloc::vec::Vec<u64> = (0..8).map(|n| e.step(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(e.step(31), Duration::from_secs(60));
        assert_eq!(e.step(u32::MAX), Duration::from_secs(60), "no overflow past any count");
        let huge = Exponential::new(Duration::from_secs(u64::MAX / 2), Duration::MAX);
        assert_eq!(huge.step(3), Duration::MAX, "saturates instead of overflowing");
    }

    #[test]
    fn retry_after_is_honoured_unless_too_long() {
        let b = Backoff::default();
        assert_eq!(b.delay(0, Some(Duration::from_secs(3)), 0.0), Some(Duration::from_secs(3)));
        assert_eq!(b.delay(0, Some(Duration::from_secs(61)), 0.0), None);
        // A zero retry-after still waits a little.
        assert_eq!(b.delay(2, Some(Duration::ZERO), 0.9), Some(Duration::from_millis(100)));
    }

    #[test]
    fn headers_parse() {
        assert_eq!(parse_retry_after(Some("2"), None), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(Some("2"), Some("150")), Some(Duration::from_millis(150)));
        assert_eq!(parse_retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT"), None), None);
        assert_eq!(parse_retry_after(Some("-1"), None), None);
        assert_eq!(parse_retry_after(None, None), None);
        // Decimals, exactly; a day at most for seconds; what is not a plain decimal is no hint.
        assert_eq!(parse_retry_after(Some(" 1.5 "), None), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after(Some("+.25"), None), Some(Duration::from_millis(250)));
        assert_eq!(parse_retry_after(Some("3."), None), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(Some("999999999999999999999999"), None), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_retry_after(None, Some("0.000001")), Some(Duration::from_nanos(1)));
        assert_eq!(parse_retry_after(None, Some("20.123456789")), Some(Duration::from_nanos(20_123_456)));
        assert_eq!(parse_retry_after(Some("0"), Some("0")), Some(Duration::ZERO));
        for bad in ["", ".", "+", "1e3", "inf", "NaN", "-0.5", "1.2.3", "0x10", "1 2", "٣"] {
            assert_eq!(parse_retry_after(Some(bad), None), None, "{bad:?}");
            assert_eq!(parse_retry_after(Some("7"), Some(bad)), Some(Duration::from_secs(7)), "{bad:?}");
        }
        // A hostile header cannot overflow the Duration (from_secs_f64 would panic).
        let huge = "9".repeat(5000);
        assert_eq!(parse_retry_after(None, Some(&huge)), Some(Duration::from_nanos(u64::MAX)));
        assert_eq!(parse_retry_after(None, Some(&alloc::format!("1.{huge}"))), Some(Duration::from_nanos(1_999_999)));
    }
}
