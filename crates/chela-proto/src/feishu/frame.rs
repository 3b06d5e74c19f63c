//! The `pbbp2.Frame` protobuf message of the long connection, encoded and decoded by hand.
//!
//! The schema (proto2, every field below is on the wire; `headers` repeats):
//!
//! ```text
//! message Header { required string key = 1; required string value = 2; }
//! message Frame {
//!   required uint64 SeqID = 1;  required uint64 LogID = 2;
//!   required int32 service = 3; required int32 method = 4;   // 0 control, 1 data
//!   repeated Header headers = 5;
//!   optional string payload_encoding = 6; optional string payload_type = 7;
//!   optional bytes payload = 8;           optional string LogIDNew = 9;
//! }
//! ```
//!
//! It is small enough that a protobuf crate would cost more than it saves. Decoding is bounded:
//! the whole frame by the caller's `max_frame_bytes`, the header count by [`MAX_HEADERS`], and
//! every length is checked against the bytes actually left, so a hostile length prefix never
//! allocates. Unknown fields are skipped, as protobuf requires; groups are refused.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// `method` of a control frame (ping, pong).
pub const METHOD_CONTROL: i32 = 0;
/// `method` of a data frame (an event, a card action).
pub const METHOD_DATA: i32 = 1;
/// Most headers one frame may carry; the service sends about eight.
pub const MAX_HEADERS: usize = 64;

/// One `key: value` pair of a frame.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Header {
    pub key: String,
    pub value: String,
}

/// One message of the long connection.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Frame {
    pub seq_id: u64,
    pub log_id: u64,
    pub service: i32,
    pub method: i32,
    pub headers: Vec<Header>,
    pub payload_encoding: String,
    pub payload_type: String,
    pub payload: Vec<u8>,
    pub log_id_new: String,
}

/// Why bytes are not a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The frame is longer than the caller's bound.
    TooLarge { limit: usize },
    /// More than [`MAX_HEADERS`] headers.
    TooManyHeaders,
    /// The bytes end inside a field.
    Truncated,
    /// A varint longer than ten bytes.
    BadVarint,
    /// A field number 0, a group, or a known field with the wrong wire type.
    BadField { field: u64, wire_type: u8 },
    /// A string field is not UTF-8.
    NotUtf8 { field: u64 },
    /// A required field is absent.
    Missing { field: &'static str },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooLarge { limit } => write!(f, "a long-connection frame is larger than {limit} bytes"),
            DecodeError::TooManyHeaders => write!(f, "a long-connection frame has more than {MAX_HEADERS} headers"),
            DecodeError::Truncated => f.write_str("a long-connection frame ends inside a field"),
            DecodeError::BadVarint => f.write_str("a long-connection frame has a malformed number"),
            DecodeError::BadField { field, wire_type } => {
                write!(
                    f,
                    "a long-connection frame has field {field} with wire type {wire_type}, which pbbp2 does not allow"
                )
            }
            DecodeError::NotUtf8 { field } => write!(f, "field {field} of a long-connection frame is not UTF-8"),
            DecodeError::Missing { field } => write!(f, "a long-connection frame lacks its required field {field}"),
        }
    }
}

impl core::error::Error for DecodeError {}

impl Frame {
    /// The ping the client sends every `PingInterval`: a control frame for the connection's
    /// `service_id` with the header `type: ping`.
    pub fn ping(service: i32) -> Frame {
        Frame { service, method: METHOD_CONTROL, headers: alloc::vec![header("type", "ping")], ..Frame::default() }
    }

    /// The value of the first header named `key`.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers.iter().find(|h| h.key == key).map(|h| h.value.as_str())
    }

    /// A header's value as a number, `None` when absent or not a number.
    pub fn header_int(&self, key: &str) -> Option<u64> {
        self.header(key)?.parse().ok()
    }

    /// The acknowledgement of this data frame, as the official SDKs send it: the same frame with
    /// a `biz_rt` header (milliseconds spent handling it) and the payload `{"code":200}`.
    pub fn ack(&self, biz_rt_ms: u64) -> Frame {
        let mut ack = self.clone();
        ack.headers.push(header("biz_rt", &alloc::format!("{biz_rt_ms}")));
        ack.payload = br#"{"code":200}"#.to_vec();
        ack
    }

    /// Appends the encoded frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_varint_field(out, 1, self.seq_id);
        put_varint_field(out, 2, self.log_id);
        // int32 is sign-extended to 64 bits on the wire, so a negative value takes ten bytes.
        put_varint_field(out, 3, i64::from(self.service) as u64);
        put_varint_field(out, 4, i64::from(self.method) as u64);
        for h in &self.headers {
            put_tag(out, 5, LEN);
            put_varint(out, (field_len(h.key.len()) + field_len(h.value.len())) as u64);
            put_bytes_field(out, 1, h.key.as_bytes());
            put_bytes_field(out, 2, h.value.as_bytes());
        }
        put_bytes_field(out, 6, self.payload_encoding.as_bytes());
        put_bytes_field(out, 7, self.payload_type.as_bytes());
        put_bytes_field(out, 8, &self.payload);
        put_bytes_field(out, 9, self.log_id_new.as_bytes());
    }

    /// The encoded frame.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes one frame of at most `max_frame_bytes`.
    pub fn decode(bytes: &[u8], max_frame_bytes: usize) -> Result<Frame, DecodeError> {
        if bytes.len() > max_frame_bytes {
            return Err(DecodeError::TooLarge { limit: max_frame_bytes });
        }
        let mut r = Reader { bytes, pos: 0 };
        let mut frame = Frame::default();
        let mut seen = 0u8;
        while !r.done() {
            let (field, wire_type) = r.tag()?;
            match (field, wire_type) {
                (1..=4, VARINT) => {
                    let v = r.varint()?;
                    seen |= 1 << (field - 1);
                    match field {
                        1 => frame.seq_id = v,
                        2 => frame.log_id = v,
                        // protobuf keeps the low 32 bits of an int32, whatever was sent.
                        3 => frame.service = v as u32 as i32,
                        _ => frame.method = v as u32 as i32,
                    }
                }
                (5, LEN) => {
                    if frame.headers.len() == MAX_HEADERS {
                        return Err(DecodeError::TooManyHeaders);
                    }
                    frame.headers.push(decode_header(r.bytes()?)?);
                }
                (6 | 7 | 9, LEN) => {
                    let s = utf8(r.bytes()?, field)?;
                    match field {
                        6 => frame.payload_encoding = s,
                        7 => frame.payload_type = s,
                        _ => frame.log_id_new = s,
                    }
                }
                (8, LEN) => frame.payload = r.bytes()?.to_vec(),
                (1..=9, _) => return Err(DecodeError::BadField { field, wire_type }),
                _ => r.skip(field, wire_type)?,
            }
        }
        for (bit, name) in ["SeqID", "LogID", "service", "method"].iter().enumerate() {
            if seen & (1 << bit) == 0 {
                return Err(DecodeError::Missing { field: name });
            }
        }
        Ok(frame)
    }
}

fn header(key: &str, value: &str) -> Header {
    Header { key: key.into(), value: value.into() }
}

fn decode_header(bytes: &[u8]) -> Result<Header, DecodeError> {
    let mut r = Reader { bytes, pos: 0 };
    let (mut key, mut value) = (None, None);
    while !r.done() {
        match r.tag()? {
            (1, LEN) => key = Some(utf8(r.bytes()?, 1)?),
            (2, LEN) => value = Some(utf8(r.bytes()?, 2)?),
            (field @ (1 | 2), wire_type) => return Err(DecodeError::BadField { field, wire_type }),
            (field, wire_type) => r.skip(field, wire_type)?,
        }
    }
    Ok(Header {
        key: key.ok_or(DecodeError::Missing { field: "Header.key" })?,
        value: value.ok_or(DecodeError::Missing { field: "Header.value" })?,
    })
}

fn utf8(bytes: &[u8], field: u64) -> Result<String, DecodeError> {
    core::str::from_utf8(bytes).map(String::from).map_err(|_| DecodeError::NotUtf8 { field })
}

const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;
const I32: u8 = 5;

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.pos == self.bytes.len()
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = *self.bytes.get(self.pos).ok_or(DecodeError::Truncated)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(DecodeError::BadVarint)
    }

    fn tag(&mut self) -> Result<(u64, u8), DecodeError> {
        let tag = self.varint()?;
        let (field, wire_type) = (tag >> 3, (tag & 7) as u8);
        if field == 0 {
            return Err(DecodeError::BadField { field, wire_type });
        }
        Ok((field, wire_type))
    }

    fn take(&mut self, len: u64) -> Result<&'a [u8], DecodeError> {
        let left = self.bytes.len() - self.pos;
        // Compared before any allocation or slicing: a length prefix is never trusted.
        let len = usize::try_from(len).ok().filter(|&n| n <= left).ok_or(DecodeError::Truncated)?;
        let out = &self.bytes[self.pos..self.pos + len];
        self.pos += len;
        Ok(out)
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.varint()?;
        self.take(len)
    }

    fn skip(&mut self, field: u64, wire_type: u8) -> Result<(), DecodeError> {
        match wire_type {
            VARINT => self.varint().map(drop),
            I64 => self.take(8).map(drop),
            LEN => self.bytes().map(drop),
            I32 => self.take(4).map(drop),
            // Groups (3, 4) are deprecated and pbbp2 has none; 6 and 7 do not exist.
            _ => Err(DecodeError::BadField { field, wire_type }),
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_tag(out: &mut Vec<u8>, field: u64, wire_type: u8) {
    put_varint(out, (field << 3) | u64::from(wire_type));
}

fn put_varint_field(out: &mut Vec<u8>, field: u64, v: u64) {
    put_tag(out, field, VARINT);
    put_varint(out, v);
}

fn put_bytes_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_tag(out, field, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Bytes of a length-delimited field with a one-byte tag (fields below 16).
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    #[test]
    fn a_ping_is_encoded_as_the_sdk_encodes_it() {
        // The Go SDK's encoding of NewPingFrame(3): every scalar and string field present,
        // `payload` absent there (nil) and empty here, which decode alike.
        let bytes = Frame::ping(3).to_bytes();
        let expected_head = [0x08, 0, 0x10, 0, 0x18, 3, 0x20, 0, 0x2a, 12, 0x0a, 4];
        assert_eq!(&bytes[..12], &expected_head);
        assert_eq!(&bytes[12..16], b"type");
        assert_eq!(Frame::decode(&bytes, 1024).unwrap(), Frame::ping(3));
    }

    #[test]
    fn a_negative_int32_takes_ten_bytes_and_comes_back() {
        let f = Frame { service: -1, method: METHOD_DATA, ..Frame::default() };
        let bytes = f.to_bytes();
        assert_eq!(&bytes[4..15], &[0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(Frame::decode(&bytes, 1024).unwrap(), f);
    }

    #[test]
    fn the_ack_keeps_the_frame_and_adds_biz_rt_and_code_200() {
        let mut f = Frame { seq_id: 7, log_id: 9, service: 2, method: METHOD_DATA, ..Frame::default() };
        f.headers.push(header("message_id", "m1"));
        f.payload = b"{\"event\":1}".to_vec();
        let ack = f.ack(12);
        assert_eq!((ack.seq_id, ack.log_id, ack.service, ack.method), (7, 9, 2, METHOD_DATA));
        assert_eq!(ack.header("message_id"), Some("m1"));
        assert_eq!(ack.header("biz_rt"), Some("12"));
        assert_eq!(ack.payload, br#"{"code":200}"#);
    }

    #[test]
    fn unknown_fields_are_skipped_and_groups_refused() {
        let mut bytes = Frame::ping(1).to_bytes();
        bytes.extend_from_slice(&[0x50, 0x05]); // field 10 varint
        bytes.extend_from_slice(&[0x59, 1, 2, 3, 4, 5, 6, 7, 8]); // field 11 fixed64
        bytes.extend_from_slice(&[0x62, 2, b'h', b'i']); // field 12 bytes
        bytes.extend_from_slice(&[0x6d, 1, 2, 3, 4]); // field 13 fixed32
        assert_eq!(Frame::decode(&bytes, 1024).unwrap(), Frame::ping(1));
        bytes.extend_from_slice(&[0x73]); // field 14 start group
        assert_eq!(Frame::decode(&bytes, 1024), Err(DecodeError::BadField { field: 14, wire_type: 3 }));
    }

    #[test]
    fn hostile_frames_are_refused_without_allocating() {
        // A payload length of 2^63 with nothing after it.
        let mut bytes = vec![0x08, 0, 0x10, 0, 0x18, 0, 0x20, 0, 0x42];
        put_varint(&mut bytes, 1 << 63);
        assert_eq!(Frame::decode(&bytes, 1 << 20), Err(DecodeError::Truncated));
        assert_eq!(Frame::decode(&[0xff; 11], 64), Err(DecodeError::BadVarint));
        assert_eq!(Frame::decode(&[0; 65], 64), Err(DecodeError::TooLarge { limit: 64 }));
        assert_eq!(Frame::decode(&[0x08, 1], 64), Err(DecodeError::Missing { field: "LogID" }));
        assert_eq!(Frame::decode(&[0x0a, 0], 64), Err(DecodeError::BadField { field: 1, wire_type: 2 }));
        let mut many = Frame::ping(0);
        many.headers = vec![header("a", "b"); MAX_HEADERS + 1];
        assert_eq!(Frame::decode(&many.to_bytes(), 1 << 20), Err(DecodeError::TooManyHeaders));
        let mut bad_utf8 = Frame::ping(0).to_bytes();
        bad_utf8.extend_from_slice(&[0x32, 1, 0xff]);
        assert_eq!(Frame::decode(&bad_utf8, 64), Err(DecodeError::NotUtf8 { field: 6 }));
    }

    fn any_frame() -> impl Strategy<Value = Frame> {
        let header = ("[a-z_]{0,12}", "\\PC{0,16}").prop_map(|(key, value)| Header { key, value });
        (
            any::<u64>(),
            any::<u64>(),
            any::<i32>(),
            any::<i32>(),
            proptest::collection::vec(header, 0..8),
            ("\\PC{0,8}", "\\PC{0,8}", "\\PC{0,8}"),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(seq_id, log_id, service, method, headers, (enc, ty, new), payload)| Frame {
                seq_id,
                log_id,
                service,
                method,
                headers,
                payload_encoding: enc,
                payload_type: ty,
                payload,
                log_id_new: new,
            })
    }

    proptest! {
        #[test]
        fn every_frame_survives_a_round_trip(f in any_frame()) {
            let bytes = f.to_bytes();
            prop_assert_eq!(Frame::decode(&bytes, bytes.len()).unwrap(), f);
        }

        #[test]
        fn a_frame_cut_short_is_truncated_or_missing_a_field(f in any_frame(), cut in any::<prop::sample::Index>()) {
            let bytes = f.to_bytes();
            let at = cut.index(bytes.len());
            match Frame::decode(&bytes[..at], bytes.len()) {
                // A cut at a field boundary after the four required fields decodes to a prefix.
                Ok(g) => prop_assert!(g.headers.len() <= f.headers.len()),
                Err(e) => prop_assert!(matches!(e, DecodeError::Truncated | DecodeError::Missing { .. }), "{e:?}"),
            }
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Frame::decode(&bytes, 128);
        }
    }
}
