//! Opus in pure Rust (the `opus-rs` crate, a port of libopus 1.6; RFC 6716): an uplink decoder
//! and a downlink encoder that cuts PCM into 60 ms packets. No C library is linked, so a build
//! needs only a Rust toolchain; packets interoperate with libopus both ways (the
//! tests below decode libopus's packets bit for bit, and the xiaozhi SDK test decodes ours with
//! libopus).
//!
//! Bounds: an uplink packet over [`MAX_PACKET_BYTES`] is refused before the codec sees it, and a
//! packet longer than 120 ms does not fit the output buffer, so the decoder refuses it too.

use bytes::Bytes;
use opus_rs::{Application, OpusDecoder, OpusEncoder};

use super::{DOWNLINK_RATE, FRAME_MS, VoiceError};

/// The largest uplink packet: a TOC byte and RFC 6716's largest frame. A device's 60 ms voice
/// packet is a few hundred bytes. Longer packets (libopus's buffer advice was 4000) are refused
/// before opus-rs sees them: its decoder sizes its range coder for one frame, and random packets
/// over 1276 bytes underflowed its arithmetic (a panic in a debug build, a silently corrupted
/// decoder state in a release one); up to 1276 bytes, 200,000 random packets decoded cleanly.
pub const MAX_PACKET_BYTES: usize = 1276;
/// Opus's longest packet: 120 ms.
const MAX_PACKET_MS: usize = 120;
/// What the encoder writes at most: one frame (RFC 6716).
const MAX_ENCODED_BYTES: usize = 1276;
/// The downlink bitrate: libopus's default for 60 ms mono at 24 kHz (rate + 60·rate/frame), so
/// the wire size stayed what it was when libopus encoded; opus-rs would otherwise pick 64 kb/s.
const DOWNLINK_BITRATE: i32 = 25_000;

/// Decodes uplink packets to mono PCM at a fixed rate, whatever rate the device encoded at.
pub struct Decoder {
    inner: OpusDecoder,
    float: Vec<f32>,
    out: Vec<i16>,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder").finish_non_exhaustive()
    }
}

impl Decoder {
    /// `rate` is one of Opus's rates: 8, 12, 16, 24 or 48 kHz.
    pub fn new(rate: u32) -> Result<Decoder, VoiceError> {
        let inner = i32::try_from(rate)
            .map_err(|_| "Invalid sampling rate")
            .and_then(|r| OpusDecoder::new(r, 1))
            .map_err(|e| VoiceError::Codec(format!("an Opus decoder at {rate} Hz: {e}")))?;
        let max = rate as usize * MAX_PACKET_MS / 1000;
        Ok(Decoder { inner, float: vec![0.0; max], out: vec![0; max] })
    }

    /// The PCM of one packet. A bad packet is an error and leaves the decoder usable.
    pub fn decode(&mut self, packet: &[u8]) -> Result<&[i16], VoiceError> {
        if packet.is_empty() {
            return Err(VoiceError::BadAudio("an empty packet".into()));
        }
        if packet.len() > MAX_PACKET_BYTES {
            return Err(VoiceError::BadAudio(format!("a {}-byte packet (limit {MAX_PACKET_BYTES})", packet.len())));
        }
        let n = self
            .inner
            .decode(packet, self.float.len(), &mut self.float)
            .map_err(|e| VoiceError::BadAudio(format!("not an Opus packet: {e}")))?;
        // libopus's int16 output of its float decoder: scaled, rounded half to even, saturated. With
        // it the PCM is libopus's to the sample (see the tests).
        for (o, &f) in self.out.iter_mut().zip(&self.float[..n]) {
            *o = (f * 32768.0).round_ties_even().clamp(-32768.0, 32767.0) as i16;
        }
        Ok(&self.out[..n])
    }
}

/// Encodes mono PCM into 60 ms packets. PCM arrives in pieces of any size; a packet is made
/// whenever 60 ms are buffered, and `finish` pads the last one with silence.
pub struct Encoder {
    inner: OpusEncoder,
    frame: usize,
    pending: Vec<i16>,
    packet: Vec<u8>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").field("pending", &self.pending.len()).finish_non_exhaustive()
    }
}

impl Encoder {
    /// The downlink encoder: 24 kHz, for speech from TTS.
    pub fn new() -> Result<Encoder, VoiceError> {
        // Audio, not VoIP: TTS output is clean speech, and the music-capable mode keeps it natural.
        let mut e = Encoder::with(DOWNLINK_RATE, Application::Audio)?;
        e.inner.bitrate_bps = DOWNLINK_BITRATE;
        Ok(e)
    }

    /// What a device's microphone sends: VoIP at `rate` (16 or 24 kHz for xiaozhi devices). The
    /// tests, benches and simulators speak as a device with it.
    pub fn device(rate: u32) -> Result<Encoder, VoiceError> {
        Encoder::with(rate, Application::Voip)
    }

    fn with(rate: u32, app: Application) -> Result<Encoder, VoiceError> {
        let inner = i32::try_from(rate)
            .map_err(|_| "Invalid sampling rate")
            .and_then(|r| OpusEncoder::new(r, 1, app))
            .map_err(|e| VoiceError::Codec(format!("an Opus encoder at {rate} Hz: {e}")))?;
        let frame = (rate * FRAME_MS / 1000) as usize;
        Ok(Encoder { inner, frame, pending: Vec::with_capacity(frame), packet: vec![0; MAX_ENCODED_BYTES] })
    }

    /// Adds PCM and calls `out` with each packet completed by it.
    pub fn push(&mut self, mut pcm: &[i16], out: &mut impl FnMut(Bytes)) -> Result<(), VoiceError> {
        while !pcm.is_empty() {
            let take = (self.frame - self.pending.len()).min(pcm.len());
            self.pending.extend_from_slice(&pcm[..take]);
            pcm = &pcm[take..];
            if self.pending.len() == self.frame {
                out(self.encode_pending()?);
            }
        }
        Ok(())
    }

    /// Pads what is buffered to a whole frame and encodes it; nothing if nothing is buffered.
    pub fn finish(&mut self, out: &mut impl FnMut(Bytes)) -> Result<(), VoiceError> {
        if !self.pending.is_empty() {
            self.pending.resize(self.frame, 0);
            out(self.encode_pending()?);
        }
        Ok(())
    }

    /// Each whole 60 ms of `pcm` as one packet, the rest padded with silence: a device's uplink.
    pub fn packets(&mut self, pcm: &[i16]) -> Result<Vec<Bytes>, VoiceError> {
        let mut all = Vec::new();
        self.push(pcm, &mut |p| all.push(p))?;
        self.finish(&mut |p| all.push(p))?;
        Ok(all)
    }

    fn encode_pending(&mut self) -> Result<Bytes, VoiceError> {
        let n = self
            .inner
            .encode_i16(&self.pending, self.frame, &mut self.packet)
            .map_err(|e| VoiceError::Codec(e.to_string()))?;
        self.pending.clear();
        Ok(Bytes::copy_from_slice(&self.packet[..n]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DOWNLINK_FRAME_SAMPLES, UPLINK_RATE};

    /// A 440 Hz tone at `rate`.
    pub(crate) fn tone(rate: u32, ms: u32) -> Vec<i16> {
        let n = (rate * ms / 1000) as usize;
        (0..n).map(|i| ((i as f64 * 440.0 * std::f64::consts::TAU / f64::from(rate)).sin() * 8000.0) as i16).collect()
    }

    fn energy(pcm: &[i16]) -> f64 {
        pcm.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / pcm.len().max(1) as f64
    }

    /// A packet's length in samples at `rate`, from its TOC alone (RFC 6716 §3.1), as libopus's
    /// `opus_packet_get_nb_samples`: the encoder must say 60 ms, not only decode to it.
    fn toc_samples(p: &[u8], rate: u32) -> usize {
        let config = usize::from(p[0] >> 3);
        let tenth_ms = match config {
            0..=11 => [100, 200, 400, 600][config % 4],
            12..=15 => [100, 200][config % 2],
            _ => [25, 50, 100, 200][config % 4],
        };
        let frames = match p[0] & 3 {
            0 => 1,
            1 | 2 => 2,
            _ => usize::from(p[1] & 0x3F),
        };
        frames * tenth_ms * rate as usize / 10_000
    }

    /// 64-bit FNV-1a of PCM as little-endian bytes.
    fn fnv(pcm: &[i16]) -> u64 {
        pcm.iter()
            .flat_map(|s| s.to_le_bytes())
            .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    }

    #[test]
    fn downlink_packets_are_60ms_and_decode_back_to_the_tone() {
        let mut enc = Encoder::new().unwrap();
        let mut packets = Vec::new();
        // Odd piece sizes: the encoder must reassemble whole frames.
        for piece in tone(DOWNLINK_RATE, 1000).chunks(1000) {
            enc.push(piece, &mut |p| packets.push(p)).unwrap();
        }
        enc.finish(&mut |p| packets.push(p)).unwrap();
        assert_eq!(packets.len(), 17, "1 s is 16⅔ frames, the last padded");
        let mut dec = Decoder::new(DOWNLINK_RATE).unwrap();
        let mut back = Vec::new();
        for p in &packets {
            assert!(p.len() < 1000);
            assert_eq!(toc_samples(p, DOWNLINK_RATE), DOWNLINK_FRAME_SAMPLES);
            back.extend_from_slice(dec.decode(p).unwrap());
        }
        // After the codec's warm-up the tone's energy is there (8000 amplitude → 3.2e7).
        let e = energy(&back[4800..19200]);
        assert!(e > 1.5e7 && e < 6e7, "energy {e}");
        // The wire size libopus's default bitrate gave: about 25 kb/s, 190 bytes a packet.
        let bytes: usize = packets.iter().map(|p| p.len()).sum();
        assert!((2_500..=4_000).contains(&bytes), "{bytes} bytes for 1 s");
    }

    #[test]
    fn uplink_at_16k_and_at_24k_decodes_to_16k() {
        for rate in [16_000, 24_000] {
            let mut enc = Encoder::device(rate).unwrap();
            let mut dec = Decoder::new(UPLINK_RATE).unwrap();
            let packets = enc.packets(&tone(rate, 600)).unwrap();
            assert_eq!(packets.len(), 10);
            let mut total = 0;
            for packet in &packets {
                assert_eq!(toc_samples(packet, rate), (rate * 60 / 1000) as usize);
                total += dec.decode(packet).unwrap().len();
            }
            assert_eq!(total, 9600, "600 ms at 16 kHz from a {rate} Hz encoder");
        }
    }

    /// Packets libopus 1.5 made (the `opus` crate, `Application::Voip`, 60 ms, from espeak-ng saying
    /// "Hello, what is the weather like?"), each as a little-endian u16 length and the bytes, and
    /// the FNV-1a of the PCM libopus decodes them to at 16 kHz: ours must give the same PCM.
    const LIBOPUS: [(&[u8], u32, u64); 2] = [
        (include_bytes!("testdata/libopus_16k_voip_60ms.bin"), 16_000, 0x8e50_4b93_ab93_8261),
        (include_bytes!("testdata/libopus_24k_voip_60ms.bin"), 24_000, 0x3c92_9fd9_607a_12b8),
    ];

    #[test]
    fn libopus_packets_decode_to_the_pcm_libopus_decodes_them_to() {
        for (mut file, rate, want) in LIBOPUS {
            let mut dec = Decoder::new(UPLINK_RATE).unwrap();
            let mut pcm = Vec::new();
            while let [lo, hi, rest @ ..] = file {
                let (packet, next) = rest.split_at(usize::from(u16::from_le_bytes([*lo, *hi])));
                pcm.extend_from_slice(dec.decode(packet).unwrap());
                file = next;
            }
            assert_eq!(pcm.len(), 33 * 960, "33 packets of 60 ms from a {rate} Hz device");
            assert!(energy(&pcm) > 1e5, "speech, not silence: {}", energy(&pcm));
            assert_eq!(fnv(&pcm), want, "PCM of libopus's {rate} Hz packets differs from libopus's");
        }
    }

    #[test]
    fn garbage_empty_and_oversize_packets_are_refused_and_the_decoder_goes_on() {
        let mut dec = Decoder::new(UPLINK_RATE).unwrap();
        assert!(matches!(dec.decode(&[]), Err(VoiceError::BadAudio(_))));
        assert!(matches!(dec.decode(&vec![0u8; MAX_PACKET_BYTES + 1]), Err(VoiceError::BadAudio(_))));
        // A TOC byte announcing a code-3 packet with more frames than the bytes can hold.
        assert!(matches!(dec.decode(&[0xFF, 0xFF, 0x01]), Err(VoiceError::BadAudio(_))));
        let packet = Encoder::device(16_000).unwrap().packets(&tone(16_000, 60)).unwrap();
        assert_eq!(dec.decode(&packet[0]).unwrap().len(), 960);
    }

    /// Uplink bytes come from the network: random packets of every size are decoded or refused,
    /// never a panic (a panic would take the device's connection down with it, and the
    /// release-small build aborts on one). Sizes reach 4000 bytes, libopus's bound before.
    #[test]
    fn random_packets_never_panic_the_decoder() {
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for rate in [16_000, 24_000] {
            let mut dec = Decoder::new(rate).unwrap();
            let (mut ok, mut refused) = (0, 0);
            for i in 0..3000 {
                let len = 1 + (next() % if i % 10 == 0 { 4000 } else { 300 }) as usize;
                let packet: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                match dec.decode(&packet) {
                    Ok(pcm) => {
                        assert!(pcm.len() <= rate as usize * MAX_PACKET_MS / 1000);
                        ok += 1;
                    }
                    Err(VoiceError::BadAudio(_)) => refused += 1,
                    Err(e) => panic!("{e:?}"),
                }
            }
            assert!(ok > 0 && refused > 0, "{ok} decoded, {refused} refused");
        }
    }
}
