//! Binary frames: one Opus packet (or, in version 2, one JSON text) per WebSocket message.
//!
//! ```text
//! v1: payload                                                        (raw Opus, the default)
//! v2: u16 version=2 | u16 type | u32 reserved | u32 timestamp_ms | u32 payload_size | payload
//! v3: u8 type | u8 reserved | u16 payload_size | payload
//! ```
//! Every integer is big-endian; `type` 0 is Opus, 1 is JSON. The declared size must match the
//! bytes that follow exactly: a frame is one whole WebSocket message, so a mismatch is damage,
//! not a partial read. Version 2's timestamp is the device's echo of downlink timing for server
//! AEC; it is carried, not interpreted.

use alloc::vec::Vec;
use core::fmt;

/// Largest payload accepted or written. A 60 ms Opus packet is a few hundred bytes; a JSON
/// message in a version 2 frame is bounded like a text message.
pub const MAX_PAYLOAD: usize = 64 * 1024;

/// Bytes of the version 2 header.
pub const V2_HEADER: usize = 16;
/// Bytes of the version 3 header.
pub const V3_HEADER: usize = 4;

/// The binary protocol version of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    V1,
    V2,
    V3,
}

impl Version {
    /// The version a `Protocol-Version` header or `websocket.version` names; `None` for others.
    pub fn from_number(n: u32) -> Option<Version> {
        match n {
            1 => Some(Version::V1),
            2 => Some(Version::V2),
            3 => Some(Version::V3),
            _ => None,
        }
    }

    pub fn number(self) -> u8 {
        match self {
            Version::V1 => 1,
            Version::V2 => 2,
            Version::V3 => 3,
        }
    }

    /// Header bytes in front of the payload.
    pub fn header_len(self) -> usize {
        match self {
            Version::V1 => 0,
            Version::V2 => V2_HEADER,
            Version::V3 => V3_HEADER,
        }
    }
}

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Opus,
    Json,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Opus => 0,
            Kind::Json => 1,
        }
    }

    fn from_code(code: u16) -> Option<Kind> {
        match code {
            0 => Some(Kind::Opus),
            1 => Some(Kind::Json),
            _ => None,
        }
    }
}

/// One decoded frame, borrowing its payload from the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub kind: Kind,
    /// Version 2 only; 0 in the others.
    pub timestamp: u32,
    pub payload: &'a [u8],
}

impl<'a> Frame<'a> {
    /// An Opus packet with no timestamp.
    pub fn opus(payload: &'a [u8]) -> Frame<'a> {
        Frame { kind: Kind::Opus, timestamp: 0, payload }
    }
}

/// Why a frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// Shorter than the header of its version.
    TooShort { need: usize, got: usize },
    /// The header's payload size is not the number of bytes after it.
    SizeMismatch { declared: usize, actual: usize },
    /// The payload is over [`MAX_PAYLOAD`] (or, in version 3, over the u16 size field).
    TooLarge { len: usize, max: usize },
    /// A type code other than 0 (Opus) or 1 (JSON).
    UnknownType(u16),
    /// A version 2 header whose version field is not 2.
    WrongVersion(u16),
    /// An empty payload: no Opus packet is empty.
    Empty,
    /// Version 1 has no type field: it carries Opus only.
    NotInV1,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooShort { need, got } => {
                write!(f, "a binary frame of {got} bytes is shorter than its {need}-byte header")
            }
            FrameError::SizeMismatch { declared, actual } => {
                write!(f, "the frame header declares {declared} payload bytes but {actual} follow")
            }
            FrameError::TooLarge { len, max } => {
                write!(f, "a frame payload of {len} bytes is over the {max}-byte limit")
            }
            FrameError::UnknownType(t) => write!(f, "frame type {t} is neither Opus (0) nor JSON (1)"),
            FrameError::WrongVersion(v) => write!(f, "a version 2 frame header says version {v}"),
            FrameError::Empty => f.write_str("the frame carries no audio"),
            FrameError::NotInV1 => f.write_str("protocol version 1 frames carry Opus only"),
        }
    }
}

/// Decodes one binary WebSocket message sent with protocol `version`.
pub fn parse(version: Version, bytes: &[u8]) -> Result<Frame<'_>, FrameError> {
    let need = version.header_len();
    if bytes.len() < need {
        return Err(FrameError::TooShort { need, got: bytes.len() });
    }
    let (frame, declared) = match version {
        Version::V1 => (Frame::opus(bytes), bytes.len()),
        Version::V2 => {
            let field = u16::from_be_bytes([bytes[0], bytes[1]]);
            if field != 2 {
                return Err(FrameError::WrongVersion(field));
            }
            let code = u16::from_be_bytes([bytes[2], bytes[3]]);
            let kind = Kind::from_code(code).ok_or(FrameError::UnknownType(code))?;
            let timestamp = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            let size = u32::from_be_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
            let declared = usize::try_from(size).unwrap_or(usize::MAX);
            (Frame { kind, timestamp, payload: &bytes[V2_HEADER..] }, declared)
        }
        Version::V3 => {
            let code = u16::from(bytes[0]);
            let kind = Kind::from_code(code).ok_or(FrameError::UnknownType(code))?;
            let declared = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
            (Frame { kind, timestamp: 0, payload: &bytes[V3_HEADER..] }, declared)
        }
    };
    let actual = frame.payload.len();
    if declared != actual {
        return Err(FrameError::SizeMismatch { declared, actual });
    }
    if actual > MAX_PAYLOAD {
        return Err(FrameError::TooLarge { len: actual, max: MAX_PAYLOAD });
    }
    if actual == 0 {
        return Err(FrameError::Empty);
    }
    Ok(frame)
}

/// Appends `frame` encoded for protocol `version` to `out` (cleared first), so one buffer can
/// be reused for every packet of a reply.
pub fn encode(version: Version, frame: &Frame<'_>, out: &mut Vec<u8>) -> Result<(), FrameError> {
    let len = frame.payload.len();
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if len > MAX_PAYLOAD {
        return Err(FrameError::TooLarge { len, max: MAX_PAYLOAD });
    }
    out.clear();
    out.reserve(version.header_len() + len);
    match version {
        Version::V1 => {
            if frame.kind != Kind::Opus {
                return Err(FrameError::NotInV1);
            }
        }
        Version::V2 => {
            // `len` <= MAX_PAYLOAD, so it fits a u32.
            let size = u32::try_from(len).map_err(|_| FrameError::TooLarge { len, max: MAX_PAYLOAD })?;
            out.extend_from_slice(&2u16.to_be_bytes());
            out.extend_from_slice(&u16::from(frame.kind.code()).to_be_bytes());
            out.extend_from_slice(&0u32.to_be_bytes());
            out.extend_from_slice(&frame.timestamp.to_be_bytes());
            out.extend_from_slice(&size.to_be_bytes());
        }
        Version::V3 => {
            let size = u16::try_from(len).map_err(|_| FrameError::TooLarge { len, max: usize::from(u16::MAX) })?;
            out.extend_from_slice(&[frame.kind.code(), 0]);
            out.extend_from_slice(&size.to_be_bytes());
        }
    }
    out.extend_from_slice(frame.payload);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    #[test]
    fn byte_layouts_are_the_firmware_s() {
        let mut out = Vec::new();
        let f = Frame { kind: Kind::Opus, timestamp: 0x0102_0304, payload: &[0xAA, 0xBB, 0xCC] };
        encode(Version::V2, &f, &mut out).unwrap();
        assert_eq!(out, [0, 2, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 3, 0xAA, 0xBB, 0xCC]);
        encode(Version::V3, &f, &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 3, 0xAA, 0xBB, 0xCC]);
        encode(Version::V1, &f, &mut out).unwrap();
        assert_eq!(out, [0xAA, 0xBB, 0xCC]);
        let json = Frame { kind: Kind::Json, timestamp: 7, payload: b"{}" };
        assert_eq!(encode(Version::V1, &json, &mut out), Err(FrameError::NotInV1));
        encode(Version::V2, &json, &mut out).unwrap();
        assert_eq!(&out[..4], &[0, 2, 0, 1]);
        assert_eq!(parse(Version::V2, &out).unwrap(), json);
    }

    #[test]
    fn damaged_frames_are_named() {
        assert_eq!(parse(Version::V2, &[0, 2, 0]), Err(FrameError::TooShort { need: 16, got: 3 }));
        assert_eq!(parse(Version::V3, &[0, 0, 0, 5, 1]), Err(FrameError::SizeMismatch { declared: 5, actual: 1 }));
        assert_eq!(parse(Version::V3, &[9, 0, 0, 1, 1]), Err(FrameError::UnknownType(9)));
        let mut v2 = vec![0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1];
        assert_eq!(parse(Version::V2, &v2), Err(FrameError::WrongVersion(3)));
        v2[1] = 2;
        v2[15] = 0xFF;
        assert_eq!(parse(Version::V2, &v2), Err(FrameError::SizeMismatch { declared: 255, actual: 1 }));
        // A size field of 4 GiB is compared, never allocated.
        v2[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(parse(Version::V2, &v2), Err(FrameError::SizeMismatch { .. })));
        assert_eq!(parse(Version::V1, &[]), Err(FrameError::Empty));
        assert_eq!(parse(Version::V3, &[0, 0, 0, 0]), Err(FrameError::Empty));
        let big = vec![0u8; MAX_PAYLOAD + 1];
        assert_eq!(parse(Version::V1, &big), Err(FrameError::TooLarge { len: MAX_PAYLOAD + 1, max: MAX_PAYLOAD }));
        assert!(encode(Version::V2, &Frame::opus(&big), &mut Vec::new()).is_err());
    }

    fn version() -> impl Strategy<Value = Version> {
        prop_oneof![Just(Version::V1), Just(Version::V2), Just(Version::V3)]
    }

    proptest! {
        #[test]
        fn frames_round_trip(v in version(), json in any::<bool>(), ts in any::<u32>(),
                             payload in proptest::collection::vec(any::<u8>(), 1..2048)) {
            let kind = if json && v != Version::V1 { Kind::Json } else { Kind::Opus };
            let ts = if v == Version::V2 { ts } else { 0 };
            let f = Frame { kind, timestamp: ts, payload: &payload };
            let mut out = Vec::new();
            encode(v, &f, &mut out).unwrap();
            prop_assert_eq!(out.len(), v.header_len() + payload.len());
            prop_assert_eq!(parse(v, &out).unwrap(), f);
        }

        #[test]
        fn arbitrary_bytes_never_panic(v in version(), bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(f) = parse(v, &bytes) {
                // Whatever parses re-encodes to the same bytes (reserved fields aside).
                let mut out = Vec::new();
                encode(v, &f, &mut out).unwrap();
                prop_assert_eq!(out.len(), bytes.len());
                prop_assert_eq!(&out[v.header_len()..], &bytes[v.header_len()..]);
            }
        }
    }
}
