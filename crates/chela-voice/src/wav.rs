//! WAV (RIFF, PCM s16le) in and out: the file sent to ASR, and what espeak-ng and some TTS
//! servers answer.

use super::VoiceError;

/// A mono 16-bit WAV file holding `pcm` at `rate`.
pub fn encode(pcm: &[i16], rate: u32) -> Vec<u8> {
    let data_len = u32::try_from(pcm.len() * 2).unwrap_or(u32::MAX - 36);
    let mut out = Vec::with_capacity(44 + pcm.len() * 2);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for s in pcm {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out
}

/// The rate and samples of a PCM s16le WAV file (stereo is mixed down to mono). Streaming
/// writers such as `espeak-ng --stdout` leave the sizes unknown (0 or 0xFFFFFFFF): a data chunk
/// is taken to run to the end of the file when its size says more than there is.
pub fn decode(bytes: &[u8]) -> Result<(u32, Vec<i16>), VoiceError> {
    let bad = |why: &str| VoiceError::Tts { reason: format!("not a usable WAV file: {why}") };
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err(bad("no RIFF/WAVE header"));
    }
    let mut at = 12;
    let mut format: Option<(u16, u16, u32, u16)> = None;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let len = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]) as usize;
        let body = at + 8;
        if id == b"fmt " {
            if len < 16 || body + 16 > bytes.len() {
                return Err(bad("a short fmt chunk"));
            }
            let u16_at = |i: usize| u16::from_le_bytes([bytes[body + i], bytes[body + i + 1]]);
            let rate = u32::from_le_bytes([bytes[body + 4], bytes[body + 5], bytes[body + 6], bytes[body + 7]]);
            format = Some((u16_at(0), u16_at(2), rate, u16_at(14)));
        } else if id == b"data" {
            let Some((tag, channels, rate, bits)) = format else { return Err(bad("data before fmt")) };
            // 0xFFFE is WAVE_FORMAT_EXTENSIBLE, whose PCM subtype is the common case.
            if !(tag == 1 || tag == 0xFFFE) || bits != 16 || !(1..=2).contains(&channels) || rate == 0 {
                return Err(bad(&format!("format {tag}, {channels} channels, {bits} bits (need 16-bit PCM)")));
            }
            let end = if len == 0 || body + len > bytes.len() { bytes.len() } else { body + len };
            let samples = bytes[body..end].chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]]));
            let pcm = if channels == 1 {
                samples.collect()
            } else {
                let all: Vec<i16> = samples.collect();
                all.chunks_exact(2).map(|p| ((i32::from(p[0]) + i32::from(p[1])) / 2) as i16).collect()
            };
            return Ok((rate, pcm));
        }
        // Chunks are padded to an even length.
        at = body.saturating_add(len).saturating_add(len & 1);
    }
    Err(bad("no data chunk"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let pcm: Vec<i16> = (-500..500).collect();
        let file = encode(&pcm, 16_000);
        assert_eq!(file.len(), 44 + 2000);
        assert_eq!(decode(&file).unwrap(), (16_000, pcm));
    }

    #[test]
    fn a_streamed_header_with_unknown_sizes_is_read_to_the_end() {
        let mut file = encode(&[1, 2, 3], 22_050);
        file[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        file[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&file).unwrap(), (22_050, vec![1, 2, 3]));
    }

    #[test]
    fn garbage_and_unsupported_formats_are_errors() {
        assert!(decode(b"").is_err());
        assert!(decode(b"RIFF\0\0\0\0WAVE").is_err());
        assert!(decode(&[0u8; 100]).is_err());
        let mut eight_bit = encode(&[0; 4], 8000);
        eight_bit[34] = 8;
        assert!(decode(&eight_bit).is_err());
        // A chunk length that points past the end does not loop or panic.
        let mut huge = b"RIFF\0\0\0\0WAVEjunk".to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&huge).is_err());
    }
}
