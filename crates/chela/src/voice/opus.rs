//! Opus through the system's libopus (the `opus` crate): an uplink decoder and a downlink
//! encoder that cuts PCM into 60 ms packets.
//!
//! Bounds: an uplink packet over [`MAX_PACKET_BYTES`] is refused before libopus sees it, and a
//! packet longer than 120 ms does not fit the output buffer, so libopus refuses it too.

use bytes::Bytes;
use opus::{Application, Channels};

use super::{DOWNLINK_FRAME_SAMPLES, DOWNLINK_RATE, VoiceError};

/// libopus's own advice for the largest packet buffer; a 60 ms voice packet is a few hundred bytes.
pub const MAX_PACKET_BYTES: usize = 4000;
/// Opus's longest packet: 120 ms.
const MAX_PACKET_MS: usize = 120;

/// Decodes uplink packets to mono PCM at a fixed rate, whatever rate the device encoded at.
pub struct Decoder {
    inner: opus::Decoder,
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
        let inner = opus::Decoder::new(rate, Channels::Mono).map_err(|e| VoiceError::Codec(e.to_string()))?;
        Ok(Decoder { inner, out: vec![0; rate as usize * MAX_PACKET_MS / 1000] })
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
            .decode(packet, &mut self.out, false)
            .map_err(|e| VoiceError::BadAudio(format!("not an Opus packet: {e}")))?;
        Ok(&self.out[..n])
    }
}

/// Encodes 24 kHz mono PCM into 60 ms packets. PCM arrives in pieces of any size; a packet is
/// made whenever 60 ms are buffered, and `finish` pads the last one with silence.
pub struct Encoder {
    inner: opus::Encoder,
    pending: Vec<i16>,
    packet: Vec<u8>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").field("pending", &self.pending.len()).finish_non_exhaustive()
    }
}

impl Encoder {
    pub fn new() -> Result<Encoder, VoiceError> {
        // Audio, not VoIP: TTS output is clean speech, and the music-capable mode keeps it natural.
        let inner = opus::Encoder::new(DOWNLINK_RATE, Channels::Mono, Application::Audio)
            .map_err(|e| VoiceError::Codec(e.to_string()))?;
        Ok(Encoder { inner, pending: Vec::with_capacity(DOWNLINK_FRAME_SAMPLES), packet: vec![0; MAX_PACKET_BYTES] })
    }

    /// Adds PCM and calls `out` with each packet completed by it.
    pub fn push(&mut self, mut pcm: &[i16], out: &mut impl FnMut(Bytes)) -> Result<(), VoiceError> {
        while !pcm.is_empty() {
            let take = (DOWNLINK_FRAME_SAMPLES - self.pending.len()).min(pcm.len());
            self.pending.extend_from_slice(&pcm[..take]);
            pcm = &pcm[take..];
            if self.pending.len() == DOWNLINK_FRAME_SAMPLES {
                out(self.encode_pending()?);
            }
        }
        Ok(())
    }

    /// Pads what is buffered to a whole frame and encodes it; nothing if nothing is buffered.
    pub fn finish(&mut self, out: &mut impl FnMut(Bytes)) -> Result<(), VoiceError> {
        if !self.pending.is_empty() {
            self.pending.resize(DOWNLINK_FRAME_SAMPLES, 0);
            out(self.encode_pending()?);
        }
        Ok(())
    }

    fn encode_pending(&mut self) -> Result<Bytes, VoiceError> {
        let n = self.inner.encode(&self.pending, &mut self.packet).map_err(|e| VoiceError::Codec(e.to_string()))?;
        self.pending.clear();
        Ok(Bytes::copy_from_slice(&self.packet[..n]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::voice::UPLINK_RATE;

    /// A 440 Hz tone at `rate`.
    pub(crate) fn tone(rate: u32, ms: u32) -> Vec<i16> {
        let n = (rate * ms / 1000) as usize;
        (0..n).map(|i| ((i as f64 * 440.0 * std::f64::consts::TAU / f64::from(rate)).sin() * 8000.0) as i16).collect()
    }

    fn energy(pcm: &[i16]) -> f64 {
        pcm.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / pcm.len().max(1) as f64
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
            assert_eq!(opus::packet::get_nb_samples(p, DOWNLINK_RATE).unwrap(), DOWNLINK_FRAME_SAMPLES);
            back.extend_from_slice(dec.decode(p).unwrap());
        }
        // After the codec's warm-up the tone's energy is there (8000 amplitude → 3.2e7).
        let e = energy(&back[4800..19200]);
        assert!(e > 1.5e7 && e < 6e7, "energy {e}");
    }

    #[test]
    fn uplink_at_16k_and_at_24k_decodes_to_16k() {
        for rate in [16_000, 24_000] {
            let mut enc = opus::Encoder::new(rate, Channels::Mono, Application::Voip).unwrap();
            let frame = (rate * 60 / 1000) as usize;
            let mut dec = Decoder::new(UPLINK_RATE).unwrap();
            let pcm = tone(rate, 600);
            let mut total = 0;
            for chunk in pcm.chunks(frame) {
                let packet = enc.encode_vec(chunk, MAX_PACKET_BYTES).unwrap();
                total += dec.decode(&packet).unwrap().len();
            }
            assert_eq!(total, 9600, "600 ms at 16 kHz from a {rate} Hz encoder");
        }
    }

    #[test]
    fn garbage_empty_and_oversize_packets_are_refused_and_the_decoder_goes_on() {
        let mut dec = Decoder::new(UPLINK_RATE).unwrap();
        assert!(matches!(dec.decode(&[]), Err(VoiceError::BadAudio(_))));
        assert!(matches!(dec.decode(&vec![0u8; MAX_PACKET_BYTES + 1]), Err(VoiceError::BadAudio(_))));
        // A TOC byte announcing a code-3 packet with more frames than the bytes can hold.
        assert!(matches!(dec.decode(&[0xFF, 0xFF, 0x01]), Err(VoiceError::BadAudio(_))));
        let mut enc = opus::Encoder::new(16_000, Channels::Mono, Application::Voip).unwrap();
        let packet = enc.encode_vec(&tone(16_000, 60), MAX_PACKET_BYTES).unwrap();
        assert_eq!(dec.decode(&packet).unwrap().len(), 960);
    }
}
