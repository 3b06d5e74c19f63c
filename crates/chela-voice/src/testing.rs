//! Speech for the tests of the pipeline and of the host's xiaozhi endpoint (feature `testing`).

use std::process::Command;

use crate::UPLINK_RATE;

/// `text` spoken by espeak-ng, as 16 kHz mono PCM (espeak's 22.05 kHz resampled). Panics when
/// espeak-ng is not installed (the CI installs it; see .ci/run).
pub fn espeak_16k(text: &str) -> Vec<i16> {
    let out = Command::new("espeak-ng")
        .args(["--stdout", "-v", "en", text])
        .output()
        .expect("espeak-ng is needed by the voice tests (Debian: apt-get install espeak-ng)");
    assert!(out.status.success());
    let (rate, pcm) = crate::wav::decode(&out.stdout).unwrap();
    crate::resample::resample(&pcm, rate, UPLINK_RATE)
}
