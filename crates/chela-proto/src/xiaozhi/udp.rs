//! The audio datagrams of the MQTT + UDP transport, both directions:
//!
//! ```text
//! off 0  u8  type = 0x01
//! off 1  u8  flags = 0
//! off 2  u16 payload_len   (the datagram is exactly 16 + payload_len bytes)
//! off 4  u32 ssrc          (bytes 4..8 of the nonce the server gave in its hello)
//! off 8  u32 timestamp
//! off 12 u32 sequence
//! off 16 payload: AES-128-CTR of one Opus packet, the 16 header bytes as the IV
//! ```
//! Every integer is big-endian. The device builds each header by copying the server's nonce and
//! overwriting [2..4), [8..12) and [12..16), so a nonce must read `01 00` in bytes 0–1 and
//! carry the session's ssrc in bytes 4..8 ([`nonce`]). This module is the layout and the
//! sequence rule only; the cipher is the caller's.

use core::fmt;

/// Bytes of the header (and of the IV it doubles as).
pub const HEADER: usize = 16;
/// The only datagram type.
pub const TYPE_AUDIO: u8 = 0x01;
/// Sequences ahead of the last accepted one a datagram may jump. A device numbers every packet
/// it sends from 1, so a real gap is packets lost on the way; a jump further than this is not a
/// device's, and would otherwise let one forged datagram push the window past every real one.
pub const MAX_JUMP: u32 = 1024;

/// A parsed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub ssrc: u32,
    pub timestamp: u32,
    pub sequence: u32,
}

/// Why a datagram is not one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatagramError {
    Short(usize),
    Type(u8),
    Flags(u8),
    Length { declared: usize, actual: usize },
}

impl fmt::Display for DatagramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatagramError::Short(n) => write!(f, "a datagram of {n} bytes is shorter than its 16-byte header"),
            DatagramError::Type(t) => write!(f, "datagram type {t:#04x} is not audio (0x01)"),
            DatagramError::Flags(x) => write!(f, "datagram flags {x:#04x} are not 0"),
            DatagramError::Length { declared, actual } => {
                write!(f, "a datagram declares {declared} payload bytes but carries {actual}")
            }
        }
    }
}

/// The header and the (still encrypted) payload of `datagram`.
pub fn parse(datagram: &[u8]) -> Result<(Header, &[u8]), DatagramError> {
    if datagram.len() < HEADER {
        return Err(DatagramError::Short(datagram.len()));
    }
    if datagram[0] != TYPE_AUDIO {
        return Err(DatagramError::Type(datagram[0]));
    }
    if datagram[1] != 0 {
        return Err(DatagramError::Flags(datagram[1]));
    }
    let declared = usize::from(u16::from_be_bytes([datagram[2], datagram[3]]));
    let payload = &datagram[HEADER..];
    if payload.len() != declared {
        return Err(DatagramError::Length { declared, actual: payload.len() });
    }
    let word = |at: usize| u32::from_be_bytes([datagram[at], datagram[at + 1], datagram[at + 2], datagram[at + 3]]);
    Ok((Header { ssrc: word(4), timestamp: word(8), sequence: word(12) }, payload))
}

/// The header of a datagram carrying `payload_len` bytes, built the device's way: the session's
/// nonce with the length, timestamp and sequence written over it. `None` past a u16 length.
pub fn header(nonce: &[u8; HEADER], payload_len: usize, timestamp: u32, sequence: u32) -> Option<[u8; HEADER]> {
    let len = u16::try_from(payload_len).ok()?;
    let mut h = *nonce;
    h[2..4].copy_from_slice(&len.to_be_bytes());
    h[8..12].copy_from_slice(&timestamp.to_be_bytes());
    h[12..16].copy_from_slice(&sequence.to_be_bytes());
    Some(h)
}

/// A session's nonce for `ssrc`: `01 00`, then 16 random bits the device overwrites, the ssrc,
/// and 8 random bytes the device overwrites too (they only keep the hex from looking fixed).
pub fn nonce(ssrc: u32, random: [u8; 10]) -> [u8; HEADER] {
    let mut n = [0u8; HEADER];
    n[0] = TYPE_AUDIO;
    n[2..4].copy_from_slice(&random[0..2]);
    n[4..8].copy_from_slice(&ssrc.to_be_bytes());
    n[8..16].copy_from_slice(&random[2..10]);
    n
}

/// What the uplink sequence rule says of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The next one, or a later one after `lost` missing ones.
    Accept { lost: u32 },
    /// At or before the last accepted one: a replay or a late duplicate.
    Old,
    /// Further ahead than [`MAX_JUMP`].
    TooFar,
}

/// The uplink sequence window of one session: strictly increasing from 1, gaps counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    last: u32,
    /// Sequences skipped over so far (lost on the way).
    pub lost: u64,
}

impl Window {
    /// Judges `sequence` without moving the window (the datagram may still be refused).
    pub fn check(&self, sequence: u32) -> Verdict {
        if sequence <= self.last {
            return Verdict::Old;
        }
        let ahead = sequence - self.last;
        if ahead > MAX_JUMP {
            return Verdict::TooFar;
        }
        Verdict::Accept { lost: ahead - 1 }
    }

    /// Moves the window to `sequence` once its datagram was accepted.
    pub fn commit(&mut self, sequence: u32) {
        if let Verdict::Accept { lost } = self.check(sequence) {
            self.lost += u64::from(lost);
            self.last = sequence;
        }
    }

    /// The last accepted sequence (0 before any).
    pub fn last(&self) -> u32 {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    #[test]
    fn the_layout_is_the_firmware_s() {
        let n = nonce(0x0A0B_0C0D, [0xEE; 10]);
        assert_eq!(&n[..2], &[0x01, 0x00], "type and flags are what the device copies");
        assert_eq!(&n[4..8], &[0x0A, 0x0B, 0x0C, 0x0D], "the ssrc sits in bytes 4..8");
        let h = header(&n, 3, 0x0102_0304, 7).unwrap();
        assert_eq!(h, [1, 0, 0, 3, 0x0A, 0x0B, 0x0C, 0x0D, 1, 2, 3, 4, 0, 0, 0, 7]);
        let mut d = h.to_vec();
        d.extend_from_slice(&[9, 9, 9]);
        assert_eq!(
            parse(&d).unwrap(),
            (Header { ssrc: 0x0A0B_0C0D, timestamp: 0x0102_0304, sequence: 7 }, &[9u8, 9, 9][..])
        );
        assert_eq!(header(&n, 70_000, 0, 0), None);
    }

    #[test]
    fn damaged_datagrams_are_refused() {
        let good = {
            let mut d = header(&nonce(5, [0; 10]), 2, 0, 1).unwrap().to_vec();
            d.extend_from_slice(&[1, 2]);
            d
        };
        assert!(parse(&good).is_ok());
        assert_eq!(parse(&good[..15]), Err(DatagramError::Short(15)));
        let mut t = good.clone();
        t[0] = 2;
        assert_eq!(parse(&t), Err(DatagramError::Type(2)));
        let mut f = good.clone();
        f[1] = 1;
        assert_eq!(parse(&f), Err(DatagramError::Flags(1)));
        assert_eq!(parse(&good[..17]), Err(DatagramError::Length { declared: 2, actual: 1 }));
        let mut long = good.clone();
        long.push(0);
        assert_eq!(parse(&long), Err(DatagramError::Length { declared: 2, actual: 3 }));
    }

    #[test]
    fn the_window_drops_replays_and_counts_gaps() {
        let mut w = Window::default();
        assert_eq!(w.check(0), Verdict::Old, "a device's sequences start at 1");
        assert_eq!(w.check(1), Verdict::Accept { lost: 0 });
        w.commit(1);
        assert_eq!(w.check(1), Verdict::Old);
        assert_eq!(w.check(4), Verdict::Accept { lost: 2 });
        w.commit(4);
        assert_eq!(w.lost, 2);
        assert_eq!(w.check(3), Verdict::Old, "late ones are dropped");
        assert_eq!(w.check(4 + MAX_JUMP + 1), Verdict::TooFar);
        w.commit(4 + MAX_JUMP + 1);
        assert_eq!(w.last(), 4, "a refused sequence never moves the window");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_what_parses_rebuilds(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok((h, payload)) = parse(&bytes) {
                let mut n = [0u8; HEADER];
                n.copy_from_slice(&bytes[..HEADER]);
                let rebuilt = header(&n, payload.len(), h.timestamp, h.sequence).unwrap();
                prop_assert_eq!(&rebuilt[..], &bytes[..HEADER]);
            }
        }

        #[test]
        fn the_window_only_ever_moves_forward(seqs in proptest::collection::vec(any::<u32>(), 0..64)) {
            let mut w = Window::default();
            let mut accepted = Vec::new();
            for s in seqs {
                let before = w.last();
                match w.check(s) {
                    Verdict::Accept { lost } => {
                        prop_assert_eq!(u64::from(lost), u64::from(s - before - 1));
                        w.commit(s);
                        accepted.push(s);
                    }
                    Verdict::Old => prop_assert!(s <= before),
                    Verdict::TooFar => prop_assert!(s - before > MAX_JUMP),
                }
            }
            prop_assert!(accepted.windows(2).all(|p| p[0] < p[1]));
        }
    }
}
