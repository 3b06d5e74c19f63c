//! The voice pipeline for xiaozhi devices: Opus in, speech detection, speech recognition, the
//! reply cut into sentences, speech synthesis, Opus out, paced in real time.
//!
//! What it is: the parts ([`opus`], [`resample`], [`wav`], [`vad`], [`asr`], [`tts`],
//! [`sentence`], [`pacer`]) and the per-device [`pipeline::Pipeline`] that ties them together.
//! What it is not: the WebSocket endpoint, the xiaozhi wire codec or the turn runner. The
//! endpoint owns one `Pipeline` per connected device and drives it: it feeds uplink Opus packets
//! and control events (`handle_*`), starts a reply writer when a turn begins, and awaits
//! [`pipeline::Pipeline::next_output`] for what to send the device (see the type's docs for the
//! calling order).
//!
//! Audio formats: uplink is decoded at 16 kHz mono (Opus decodes any packet at the rate asked
//! for, so a device that encodes at 24 kHz needs no resampler); ASR gets that PCM as a WAV file;
//! downlink is 24 kHz mono in 60 ms Opus packets. Every buffer has a bound (see the constants).

pub mod asr;
pub mod opus;
pub mod pacer;
pub mod pipeline;
pub mod resample;
pub mod sentence;
pub mod tts;
pub mod vad;
pub mod wav;

#[cfg(test)]
mod tests_pipeline;
// Test speech, for this crate's tests and the host's (`features = ["testing"]`).
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Uplink PCM rate: what the VAD and ASR see.
pub const UPLINK_RATE: u32 = 16_000;
/// Downlink PCM rate, as the server's `hello` announces it.
pub const DOWNLINK_RATE: u32 = 24_000;
/// Both directions use 60 ms Opus frames.
pub const FRAME_MS: u32 = 60;
/// Samples in one downlink frame (60 ms at 24 kHz).
pub const DOWNLINK_FRAME_SAMPLES: usize = (DOWNLINK_RATE * FRAME_MS / 1000) as usize;

/// Where the speech recognition goes: an OpenAI-compatible `/audio/transcriptions` endpoint
/// (`voice.asr_base_url`, `voice.asr_api_key`, `voice.asr_model`).
#[derive(Clone)]
pub struct AsrConfig {
    /// Up to and including the version, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: String,
    pub model: String,
    /// The whole request, from connect to the last byte of the answer.
    pub timeout: Duration,
}

/// Which speech synthesis speaks the replies (`voice.tts_provider`).
#[derive(Clone)]
pub enum TtsConfig {
    /// An OpenAI-compatible `/audio/speech` endpoint (`voice.tts_base_url`, `voice.tts_api_key`,
    /// `voice.tts_model`, `voice.tts_voice`).
    OpenAi { base_url: String, api_key: String, model: String, voice: String, timeout: Duration },
    /// Debian's `espeak-ng`, run locally (`voice.tts_voice` is its voice name, e.g. `en` or `cmn`).
    Espeak { program: PathBuf, voice: String, timeout: Duration },
}

/// Keys never reach a log: `Debug` says only whether one is set.
fn key_state(key: &str) -> &'static str {
    if key.is_empty() { "(none)" } else { "(set)" }
}

impl fmt::Debug for AsrConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsrConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &key_state(&self.api_key))
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl fmt::Debug for TtsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TtsConfig::OpenAi { base_url, api_key, model, voice, timeout } => f
                .debug_struct("OpenAi")
                .field("base_url", base_url)
                .field("api_key", &key_state(api_key))
                .field("model", model)
                .field("voice", voice)
                .field("timeout", timeout)
                .finish(),
            TtsConfig::Espeak { program, voice, timeout } => f
                .debug_struct("Espeak")
                .field("program", program)
                .field("voice", voice)
                .field("timeout", timeout)
                .finish(),
        }
    }
}

/// Everything a device's pipeline needs. The endpoint builds it from the `voice.*` settings;
/// tests and benchmarks build it directly.
#[derive(Clone, Debug)]
pub struct VoiceConfig {
    pub asr: AsrConfig,
    pub tts: TtsConfig,
    /// Silence after speech that ends an utterance in `auto` and `realtime` modes.
    pub silence: Duration,
    /// The longest utterance kept; longer speech is cut there and sent to ASR as it is.
    pub max_utterance: Duration,
}

impl VoiceConfig {
    /// The defaults around the given providers: 800 ms of silence ends an utterance (xiaozhi
    /// servers use 700–1000 ms), 30 s is the longest one.
    pub fn new(asr: AsrConfig, tts: TtsConfig) -> VoiceConfig {
        VoiceConfig { asr, tts, silence: Duration::from_millis(800), max_utterance: Duration::from_secs(30) }
    }
}

/// Longest a speech recognition or synthesis request may take, from connect to the last byte.
pub const PROVIDER_TIMEOUT: Duration = Duration::from_secs(30);
/// Where a provider URL is empty.
const OPENAI_BASE: &str = "https://api.openai.com/v1";

impl VoiceConfig {
    /// The `voice.*` settings: the providers a device's pipeline uses, read through `get` (the
    /// host's configuration lookup, so this crate knows no configuration layers).
    pub fn from_settings<'a>(get: impl Fn(&'static chela_core::config::Key) -> &'a str) -> VoiceConfig {
        use chela_core::config as keys;
        let or = |v: &str, d: &str| if v.trim().is_empty() { d.to_owned() } else { v.trim().to_owned() };
        let asr = AsrConfig {
            base_url: or(get(keys::VOICE_ASR_BASE_URL), OPENAI_BASE),
            api_key: get(keys::VOICE_ASR_API_KEY).to_owned(),
            model: or(get(keys::VOICE_ASR_MODEL), "whisper-1"),
            timeout: PROVIDER_TIMEOUT,
        };
        let voice = get(keys::VOICE_TTS_VOICE);
        let tts = if get(keys::VOICE_TTS_PROVIDER) == "espeak" {
            TtsConfig::Espeak { program: PathBuf::from("espeak-ng"), voice: or(voice, "en"), timeout: PROVIDER_TIMEOUT }
        } else {
            TtsConfig::OpenAi {
                base_url: or(get(keys::VOICE_TTS_BASE_URL), OPENAI_BASE),
                api_key: get(keys::VOICE_TTS_API_KEY).to_owned(),
                model: or(get(keys::VOICE_TTS_MODEL), "tts-1"),
                voice: or(voice, "alloy"),
                timeout: PROVIDER_TIMEOUT,
            }
        };
        VoiceConfig::new(asr, tts)
    }
}

/// What went wrong in the pipeline. [`VoiceError::spoken`] is the short sentence the device
/// shows or says; `Display` is the full story for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VoiceError {
    /// An uplink packet that is not Opus, too large, or longer than 120 ms.
    BadAudio(String),
    /// The ASR provider failed (network, status, body); `retryable` as `NetError` says.
    Asr { reason: String, retryable: bool },
    /// The TTS provider failed.
    Tts { reason: String },
    /// A provider answered more than the pipeline keeps.
    TooLarge { what: &'static str, limit: usize },
    /// The local TTS program could not be started.
    EspeakMissing { program: String, reason: String },
    /// The Opus codec refused a setting or a frame (a bug, not bad input).
    Codec(String),
}

impl VoiceError {
    /// One short sentence for the person at the device.
    pub fn spoken(&self) -> &'static str {
        match self {
            VoiceError::BadAudio(_) => "Sorry, I could not hear that clearly.",
            VoiceError::Asr { .. } => "Sorry, speech recognition is not working right now.",
            VoiceError::Tts { .. } | VoiceError::EspeakMissing { .. } => "Sorry, I cannot speak right now.",
            VoiceError::TooLarge { .. } => "Sorry, that answer was too long to speak.",
            VoiceError::Codec(_) => "Sorry, something went wrong with the audio.",
        }
    }
}

impl fmt::Display for VoiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VoiceError::BadAudio(why) => write!(f, "bad uplink audio: {why}"),
            VoiceError::Asr { reason, .. } => write!(f, "speech recognition failed: {reason}"),
            VoiceError::Tts { reason } => write!(f, "speech synthesis failed: {reason}"),
            VoiceError::TooLarge { what, limit } => write!(f, "{what} is larger than the {limit}-byte limit"),
            VoiceError::EspeakMissing { program, reason } => write!(
                f,
                "cannot run the local TTS program `{program}` ({reason}); install it (Debian: `apt-get install espeak-ng`) or set voice.tts_provider = \"openai\""
            ),
            VoiceError::Codec(why) => write!(f, "opus codec error: {why}"),
        }
    }
}

impl std::error::Error for VoiceError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_masks_the_keys() {
        let asr = AsrConfig {
            base_url: "http://x/v1".into(),
            api_key: "sk-secret-asr".into(),
            model: "m".into(),
            timeout: Duration::from_secs(1),
        };
        let tts = TtsConfig::OpenAi {
            base_url: "http://x/v1".into(),
            api_key: "sk-secret-tts".into(),
            model: "m".into(),
            voice: "v".into(),
            timeout: Duration::from_secs(1),
        };
        let shown = format!("{:?}", VoiceConfig::new(asr, tts));
        assert!(!shown.contains("secret") && shown.contains("(set)"), "{shown}");
    }
}
