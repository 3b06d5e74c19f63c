//! Real-time pacing of downlink audio, as a model of the device's play-out queue.
//!
//! The device plays one 60 ms frame per 60 ms and drops frames beyond 40 queued ones, so a
//! reply must not be burst. The pacer tracks when the device's queue runs dry (`drained_at`)
//! and lets a frame go whenever fewer than `burst` frames would be waiting: the first `burst`
//! frames of a reply leave at once (so playback starts without a gap), the rest every 60 ms,
//! and after a stall (TTS slower than real time) the queue has drained and a new small burst
//! refills it. `burst` is clamped to 1..=[`DEVICE_QUEUE`].
//!
//! No clock is read here: every call takes `now`; the pipeline drives it with tokio's clock.

use std::time::Duration;

use tokio::time::Instant;

use super::FRAME_MS;

/// Frames the device queues before it drops audio.
pub const DEVICE_QUEUE: u32 = 40;
/// Frames sent ahead at the start of a reply (xiaozhi servers send 5).
pub const DEFAULT_BURST: u32 = 5;
pub const FRAME: Duration = Duration::from_millis(FRAME_MS as u64);

#[derive(Debug, Clone)]
pub struct Pacer {
    burst: u32,
    drained_at: Option<Instant>,
}

impl Pacer {
    pub fn new(burst: u32) -> Pacer {
        Pacer { burst: burst.clamp(1, DEVICE_QUEUE), drained_at: None }
    }

    /// The earliest time the next frame may be sent.
    pub fn next_send(&self, now: Instant) -> Instant {
        match self.drained_at {
            None => now,
            Some(drained) => (drained.checked_sub(FRAME * (self.burst - 1)).unwrap_or(now)).max(now),
        }
    }

    /// A frame was sent at `now`.
    pub fn sent(&mut self, now: Instant) {
        let base = self.drained_at.map_or(now, |d| d.max(now));
        self.drained_at = Some(base + FRAME);
    }

    /// Frames the device is thought to hold at `now` (rounded up).
    pub fn queued(&self, now: Instant) -> u32 {
        let left = self.drained_at.map_or(Duration::ZERO, |d| d.saturating_duration_since(now));
        u32::try_from(left.as_micros().div_ceil(FRAME.as_micros())).unwrap_or(u32::MAX)
    }

    /// When the device will have played everything sent so far.
    pub fn drained_at(&self) -> Option<Instant> {
        self.drained_at
    }

    /// Forget the queue (after `abort`: the device drops what it held).
    pub fn reset(&mut self) {
        self.drained_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_one_frame_per_60ms() {
        let t0 = Instant::now();
        let mut p = Pacer::new(DEFAULT_BURST);
        let mut now = t0;
        let mut times = Vec::new();
        for _ in 0..20 {
            now = p.next_send(now);
            p.sent(now);
            times.push(now - t0);
            assert!(p.queued(now) <= DEFAULT_BURST);
        }
        assert!(times[..5].iter().all(|t| t.is_zero()), "{times:?}");
        for (k, t) in times.iter().enumerate().skip(5) {
            assert_eq!(*t, FRAME * (k as u32 - 4), "frame {k}");
        }
    }

    #[test]
    fn after_a_stall_a_small_burst_refills_the_queue() {
        let t0 = Instant::now();
        let mut p = Pacer::new(3);
        for _ in 0..3 {
            p.sent(t0);
        }
        // Nothing to send for a second: the device played all three.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(p.queued(later), 0);
        assert_eq!(p.next_send(later), later);
        for _ in 0..3 {
            assert_eq!(p.next_send(later), later);
            p.sent(later);
        }
        assert_eq!(p.next_send(later), later + FRAME);
    }

    #[test]
    fn the_burst_never_exceeds_the_device_queue() {
        let t0 = Instant::now();
        let mut p = Pacer::new(1000);
        let mut n = 0;
        while p.next_send(t0) == t0 {
            p.sent(t0);
            n += 1;
        }
        assert_eq!(n, DEVICE_QUEUE);
        assert_eq!(Pacer::new(0).burst, 1);
    }
}
