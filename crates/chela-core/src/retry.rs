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
mod tests;
