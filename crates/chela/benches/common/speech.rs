//! Speech for the voice benches: a sentence spoken by espeak-ng at 16 kHz, and that audio as
//! the 60 ms Opus packets a device sends. Included by `voice.rs` and `xiaozhi_ws.rs`.

use chela::voice::{resample, wav};

/// `text` spoken by espeak-ng (Debian `espeak-ng`), resampled to 16 kHz mono.
pub fn espeak_16k(text: &str) -> Vec<i16> {
    let out = std::process::Command::new("espeak-ng")
        .args(["--stdout", "-v", "en", text])
        .output()
        .expect("the voice benches need espeak-ng (Debian: apt-get install espeak-ng)");
    let (rate, pcm) = wav::decode(&out.stdout).expect("espeak-ng's WAV");
    resample::resample(&pcm, rate, 16_000)
}

/// 16 kHz PCM as 60 ms Opus packets (the last one padded with silence).
pub fn packets(pcm: &[i16]) -> Vec<Vec<u8>> {
    let mut enc = chela::voice::opus::Encoder::device(16_000).unwrap();
    enc.packets(pcm).unwrap().into_iter().map(Vec::from).collect()
}
