//! A streaming linear-interpolation resampler for mono 16-bit PCM.
//!
//! Used for TTS output that is not at 24 kHz (espeak-ng's 22.05 kHz, a WAV at another rate).
//! Linear interpolation is enough for upsampling speech by small ratios; nothing here
//! downsamples music. Pieces may be any size: the position is kept across calls in exact
//! integer arithmetic, so a long stream never drifts.

/// Converts a stream from `from` Hz to `to` Hz.
#[derive(Debug, Clone)]
pub struct Resampler {
    from: u64,
    to: u64,
    /// One period: `period_in` input samples make exactly `period_out` output samples.
    period_in: u64,
    period_out: u64,
    /// Input samples seen before the current piece (less whole periods already done).
    seen: u64,
    /// Output samples made (less whole periods).
    made: u64,
    /// The last input sample, at index `seen - 1`.
    last: i16,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Resampler {
    /// # Panics
    /// If a rate is zero.
    pub fn new(from: u32, to: u32) -> Resampler {
        assert!(from > 0 && to > 0, "sample rates must be positive");
        let (from, to) = (u64::from(from), u64::from(to));
        let g = gcd(from, to);
        Resampler { from, to, period_in: from / g, period_out: to / g, seen: 0, made: 0, last: 0 }
    }

    /// Appends the resampled `input` to `out`. The output lags the input by at most one sample.
    pub fn process(&mut self, input: &[i16], out: &mut Vec<i16>) {
        if self.from == self.to {
            out.extend_from_slice(input);
            return;
        }
        let n = input.len() as u64;
        let end = self.seen + n;
        let sample = |i: u64| if i + 1 == self.seen { self.last } else { input[(i - self.seen) as usize] };
        out.reserve((n * self.to / self.from + 1) as usize);
        loop {
            let t = self.made * self.from;
            let (idx, frac) = (t / self.to, t % self.to);
            // Interpolation needs the sample after `idx`; the very first output needs only idx 0.
            if idx + 1 >= end && !(frac == 0 && idx < end) {
                break;
            }
            let a = i64::from(sample(idx));
            let b = if frac == 0 { a } else { i64::from(sample(idx + 1)) };
            let y = a + (b - a) * frac as i64 / self.to as i64;
            out.push(y as i16);
            self.made += 1;
        }
        if let Some(&l) = input.last() {
            self.last = l;
        }
        self.seen = end;
        // Drop whole periods so the counters stay small; `seen` keeps at least the last sample.
        if self.seen > 0 {
            let k = ((self.seen - 1) / self.period_in).min(self.made / self.period_out);
            self.seen -= k * self.period_in;
            self.made -= k * self.period_out;
        }
    }
}

/// Resamples a whole buffer.
pub fn resample(input: &[i16], from: u32, to: u32) -> Vec<i16> {
    let mut out = Vec::new();
    Resampler::new(from, to).process(input, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_second_of_22050_becomes_a_second_of_24000() {
        let input: Vec<i16> = (0..22_050).map(|i| (i % 1000) as i16).collect();
        let out = resample(&input, 22_050, 24_000);
        assert!((23_998..=24_000).contains(&out.len()), "{}", out.len());
    }

    #[test]
    fn a_ramp_stays_a_ramp() {
        // Linear interpolation of a straight line is exact.
        let input: Vec<i16> = (0..441).map(|i| (i * 10) as i16).collect();
        let out = resample(&input, 441, 480);
        for (k, &y) in out.iter().enumerate() {
            let expect = (k as f64 * 441.0 / 480.0 * 10.0) as i64;
            assert!((i64::from(y) - expect).abs() <= 1, "sample {k}: {y} vs {expect}");
        }
    }

    #[test]
    fn same_rate_is_a_copy() {
        assert_eq!(resample(&[1, 2, 3], 24_000, 24_000), vec![1, 2, 3]);
    }

    proptest! {
        /// Pieces of any size give exactly what the whole buffer gives.
        #[test]
        fn streaming_equals_whole(
            input in proptest::collection::vec(any::<i16>(), 0..3000),
            cuts in proptest::collection::vec(1usize..700, 1..20),
            rates in prop_oneof![Just((22_050u32, 24_000u32)), Just((16_000, 24_000)), Just((24_000, 16_000)), Just((8_000, 48_000))],
        ) {
            let whole = resample(&input, rates.0, rates.1);
            let mut r = Resampler::new(rates.0, rates.1);
            let mut pieces = Vec::new();
            let mut rest = &input[..];
            for c in cuts.iter().cycle() {
                if rest.is_empty() { break; }
                let c = (*c).min(rest.len());
                r.process(&rest[..c], &mut pieces);
                rest = &rest[c..];
            }
            prop_assert_eq!(whole, pieces);
        }

        /// The length matches the ratio to within one sample, and values stay within the input's range.
        #[test]
        fn length_and_range(input in proptest::collection::vec(any::<i16>(), 1..3000)) {
            let out = resample(&input, 22_050, 24_000);
            let expect = input.len() as f64 * 24_000.0 / 22_050.0;
            prop_assert!((out.len() as f64 - expect).abs() <= 2.0, "{} vs {}", out.len(), expect);
            let (lo, hi) = (*input.iter().min().unwrap(), *input.iter().max().unwrap());
            prop_assert!(out.iter().all(|&y| y >= lo && y <= hi));
        }
    }
}
