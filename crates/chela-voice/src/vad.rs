//! End of speech: the `auto` and `realtime` listening modes end an utterance after a stretch
//! of silence, found with earshot (a small pure-Rust voice detector whose network is compiled
//! in: no model file, no download, ~8 KiB per instance).
//!
//! The [`Endpointer`] eats 16 kHz PCM in pieces of any size, scores it in earshot's 16 ms
//! frames, and reports when speech starts and when an utterance is complete: after
//! `silence` without voice, or at `max_utterance` (a stream that never pauses is cut there, so
//! memory stays bounded). The utterance keeps a little audio from before the detected start,
//! so the first syllable reaches ASR whole.

use std::time::Duration;

use earshot::Detector;

use super::UPLINK_RATE;

/// earshot's frame: 256 samples, 16 ms at 16 kHz.
const FRAME: usize = 256;
const FRAME_MS: u64 = 16;
/// A frame at or above this score is voice.
const VOICE: f32 = 0.5;
/// Below this a frame counts towards the closing silence (between the two it does neither).
const QUIET: f32 = 0.3;
/// Voiced frames in a row that start an utterance (64 ms: longer than a click).
const START_FRAMES: u32 = 4;
/// Audio kept from before the start.
const PRE_ROLL_FRAMES: usize = 20;

/// What one `push` found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Speech began in this piece (a barge-in cue in `realtime` mode).
    pub started: bool,
    /// A complete utterance, if one ended in this piece.
    pub ended: Option<Utterance>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Utterance {
    /// 16 kHz mono.
    pub pcm: Vec<i16>,
    /// Cut at the length limit rather than ended by silence.
    pub cut: bool,
}

pub struct Endpointer {
    detector: Box<Detector>,
    /// Less than one frame waiting for the rest.
    partial: Vec<i16>,
    /// Idle: the last frames (pre-roll). In speech: the utterance so far.
    audio: Vec<i16>,
    in_speech: bool,
    voiced_run: u32,
    quiet_run: u32,
    silence_frames: u32,
    max_samples: usize,
}

impl std::fmt::Debug for Endpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpointer").field("in_speech", &self.in_speech).field("samples", &self.audio.len()).finish()
    }
}

impl Endpointer {
    pub fn new(silence: Duration, max_utterance: Duration) -> Endpointer {
        let silence_frames = u32::try_from(silence.as_millis() as u64 / FRAME_MS).unwrap_or(u32::MAX).max(1);
        let max_samples = (max_utterance.as_millis() as usize * UPLINK_RATE as usize / 1000).max(FRAME);
        Endpointer {
            detector: Detector::default_boxed(),
            partial: Vec::with_capacity(FRAME),
            audio: Vec::new(),
            in_speech: false,
            voiced_run: 0,
            quiet_run: 0,
            silence_frames,
            max_samples,
        }
    }

    pub fn in_speech(&self) -> bool {
        self.in_speech
    }

    /// Feeds 16 kHz PCM.
    pub fn push(&mut self, mut pcm: &[i16]) -> Outcome {
        let mut outcome = Outcome::default();
        while !pcm.is_empty() {
            let take = (FRAME - self.partial.len()).min(pcm.len());
            self.partial.extend_from_slice(&pcm[..take]);
            pcm = &pcm[take..];
            if self.partial.len() < FRAME {
                break;
            }
            let frame = std::mem::take(&mut self.partial);
            self.frame(&frame, &mut outcome);
            self.partial = frame;
            self.partial.clear();
        }
        outcome
    }

    /// Ends the utterance now (`listen stop` in manual mode, or the device closing): what was
    /// heard since speech started, if any.
    pub fn take(&mut self) -> Option<Utterance> {
        let speech = self.in_speech;
        self.reset();
        self.in_speech = false;
        // In manual mode the whole recording is the utterance; `start_manual` made it speech.
        speech.then(|| Utterance { pcm: std::mem::take(&mut self.audio), cut: false })
    }

    /// Manual mode: everything from now on is the utterance, whatever the detector says,
    /// until `take` (or the length limit).
    pub fn start_manual(&mut self) {
        self.reset();
        self.audio.clear();
        self.in_speech = true;
        self.voiced_run = START_FRAMES;
        // Silence never ends a manual utterance.
        self.quiet_run = 0;
        self.silence_frames = u32::MAX;
    }

    /// Back to listening for speech with `silence` ending it (`auto`/`realtime`).
    pub fn start_auto(&mut self, silence: Duration) {
        self.reset();
        self.audio.clear();
        self.in_speech = false;
        self.silence_frames = u32::try_from(silence.as_millis() as u64 / FRAME_MS).unwrap_or(u32::MAX).max(1);
    }

    fn reset(&mut self) {
        self.detector.reset();
        self.partial.clear();
        self.voiced_run = 0;
        self.quiet_run = 0;
    }

    fn frame(&mut self, frame: &[i16], outcome: &mut Outcome) {
        let score = self.detector.predict_i16(frame);
        self.audio.extend_from_slice(frame);
        if score >= VOICE {
            self.voiced_run = self.voiced_run.saturating_add(1);
            self.quiet_run = 0;
        } else {
            self.voiced_run = 0;
            if score < QUIET {
                self.quiet_run = self.quiet_run.saturating_add(1);
            }
        }
        if !self.in_speech {
            if self.voiced_run >= START_FRAMES {
                self.in_speech = true;
                self.quiet_run = 0;
                outcome.started = true;
            } else if self.audio.len() > PRE_ROLL_FRAMES * FRAME {
                self.audio.drain(..self.audio.len() - PRE_ROLL_FRAMES * FRAME);
            }
            return;
        }
        let cut = self.audio.len() >= self.max_samples;
        if cut || self.quiet_run >= self.silence_frames {
            if !cut {
                // Keep a little of the closing silence, not all of it.
                let keep = self.audio.len() - (self.quiet_run as usize).saturating_sub(10) * FRAME;
                self.audio.truncate(keep);
            }
            let pcm = std::mem::take(&mut self.audio);
            self.in_speech = false;
            self.voiced_run = 0;
            self.quiet_run = 0;
            // An utterance cut at the limit goes on being heard; one ended by silence starts
            // the next from a clean detector state.
            if !cut {
                self.detector.reset();
            }
            outcome.ended = Some(Utterance { pcm, cut });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::espeak_16k;

    fn silence(ms: usize) -> Vec<i16> {
        vec![0; ms * 16]
    }

    fn feed(ep: &mut Endpointer, pcm: &[i16]) -> (usize, Vec<(usize, Utterance)>) {
        let mut starts = 0;
        let mut ends = Vec::new();
        // 60 ms pieces, as the device sends.
        for (k, piece) in pcm.chunks(960).enumerate() {
            let o = ep.push(piece);
            starts += usize::from(o.started);
            if let Some(u) = o.ended {
                ends.push((k * 60, u));
            }
        }
        (starts, ends)
    }

    #[test]
    fn espeak_speech_then_silence_ends_after_the_silence_setting() {
        let speech = espeak_16k("Hello Chela, what is the weather like today?");
        let speech_ms = speech.len() / 16;
        // espeak-ng ends its audio with some quiet of its own: time from the last loud sample.
        let voiced_ms = speech.iter().rposition(|s| s.unsigned_abs() > 300).unwrap() / 16;
        for silence_ms in [700u64, 1000] {
            let mut ep = Endpointer::new(Duration::from_millis(silence_ms), Duration::from_secs(30));
            let mut audio = silence(500);
            audio.extend_from_slice(&speech);
            audio.extend(silence(3000));
            let (starts, ends) = feed(&mut ep, &audio);
            assert_eq!(starts, 1);
            assert_eq!(ends.len(), 1, "one utterance");
            let (at_ms, u) = &ends[0];
            assert!(!u.cut);
            let after_speech = *at_ms as i64 - (500 + voiced_ms) as i64;
            // Ended by the silence rule: not before `silence` has passed, and not much after
            // (espeak's trailing quiet and one 60 ms piece of slack).
            assert!(after_speech >= silence_ms as i64 - 100, "ended {after_speech} ms after speech");
            assert!(after_speech <= silence_ms as i64 + 250, "ended {after_speech} ms after speech");
            // The utterance holds the speech, not the half second of silence before it (beyond the pre-roll).
            let ms = u.pcm.len() / 16;
            assert!(ms >= speech_ms * 3 / 4 && ms <= speech_ms + 800, "{ms} ms kept of {speech_ms}");
        }
    }

    #[test]
    fn silence_alone_is_no_utterance() {
        let mut ep = Endpointer::new(Duration::from_millis(800), Duration::from_secs(30));
        let (starts, ends) = feed(&mut ep, &silence(5000));
        assert_eq!((starts, ends.len()), (0, 0));
        assert!(ep.audio.len() <= PRE_ROLL_FRAMES * FRAME, "idle audio is bounded");
    }

    #[test]
    fn speech_without_pauses_is_cut_at_the_limit() {
        let speech = espeak_16k("one two three four five six seven eight nine ten");
        let mut ep = Endpointer::new(Duration::from_millis(800), Duration::from_secs(2));
        let mut audio = Vec::new();
        while audio.len() < 16_000 * 12 {
            audio.extend_from_slice(&speech);
        }
        let (_, ends) = feed(&mut ep, &audio);
        assert!(ends.len() >= 3, "{} utterances", ends.len());
        for (_, u) in &ends {
            assert!(u.pcm.len() <= 2 * 16_000 + FRAME);
        }
        assert!(ends.iter().any(|(_, u)| u.cut));
    }

    #[test]
    fn manual_mode_keeps_everything_until_take() {
        let mut ep = Endpointer::new(Duration::from_millis(800), Duration::from_secs(30));
        ep.start_manual();
        let (_, ends) = feed(&mut ep, &silence(2000));
        assert!(ends.is_empty(), "silence does not end a manual utterance");
        let u = ep.take().unwrap();
        assert_eq!(u.pcm.len(), 2000 * 16 / FRAME * FRAME);
        assert!(ep.take().is_none());
    }
}
