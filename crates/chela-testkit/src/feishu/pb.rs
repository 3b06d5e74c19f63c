//! The pbbp2 `Frame` written again from its `.proto`, independently of `chela-proto`'s codec so
//! the fake cannot share its bugs. Fields: SeqID=1, LogID=2, service=3, method=4 (varints),
//! headers=5 (`{key=1, value=2}`), payload_encoding=6, payload_type=7, payload=8, LogIDNew=9.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    pub seq_id: u64,
    pub log_id: u64,
    pub service: i32,
    pub method: i32,
    pub headers: Vec<(String, String)>,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (field, v) in
            [(1, self.seq_id), (2, self.log_id), (3, self.service as i64 as u64), (4, self.method as i64 as u64)]
        {
            varint(&mut out, field << 3);
            varint(&mut out, v);
        }
        for (k, v) in &self.headers {
            let mut h = Vec::new();
            bytes_field(&mut h, 1, k.as_bytes());
            bytes_field(&mut h, 2, v.as_bytes());
            bytes_field(&mut out, 5, &h);
        }
        bytes_field(&mut out, 8, &self.payload);
        out
    }

    /// `None` for anything that is not a well-formed frame.
    pub fn decode(mut b: &[u8]) -> Option<Frame> {
        let mut f = Frame::default();
        while !b.is_empty() {
            let tag = read_varint(&mut b)?;
            match (tag >> 3, tag & 7) {
                (1, 0) => f.seq_id = read_varint(&mut b)?,
                (2, 0) => f.log_id = read_varint(&mut b)?,
                (3, 0) => f.service = read_varint(&mut b)? as i32,
                (4, 0) => f.method = read_varint(&mut b)? as i32,
                (5, 2) => {
                    let mut h = read_bytes(&mut b)?;
                    let (mut k, mut v) = (String::new(), String::new());
                    while !h.is_empty() {
                        let tag = read_varint(&mut h)?;
                        let s = String::from_utf8(read_bytes(&mut h)?.to_vec()).ok()?;
                        match tag {
                            0x0a => k = s,
                            0x12 => v = s,
                            _ => return None,
                        }
                    }
                    f.headers.push((k, v));
                }
                (8, 2) => f.payload = read_bytes(&mut b)?.to_vec(),
                (_, 2) => drop(read_bytes(&mut b)?),
                (_, 0) => drop(read_varint(&mut b)?),
                _ => return None,
            }
        }
        Some(f)
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn bytes_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn read_varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn read_bytes<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(read_varint(b)?).ok()?;
    if len > b.len() {
        return None;
    }
    let (head, rest) = b.split_at(len);
    *b = rest;
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chela_proto::feishu::frame::{Frame as ProtoFrame, Header};

    fn sample() -> Frame {
        Frame {
            seq_id: 300,
            log_id: u64::MAX,
            service: -5,
            method: 1,
            headers: vec![("type".into(), "event".into()), ("sum".into(), "2".into())],
            payload: b"{\"a\":1}".to_vec(),
        }
    }

    #[test]
    fn the_fake_and_chela_read_each_others_frames() {
        let ours = sample();
        let theirs = ProtoFrame::decode(&ours.encode(), 1024).unwrap();
        assert_eq!((theirs.seq_id, theirs.log_id, theirs.service, theirs.method), (300, u64::MAX, -5, 1));
        assert_eq!(theirs.header("sum"), Some("2"));
        assert_eq!(theirs.payload, ours.payload);
        let mut back = theirs.ack(3);
        back.headers.push(Header { key: "x".into(), value: "y".into() });
        let decoded = Frame::decode(&back.to_bytes()).unwrap();
        assert_eq!(decoded.header("biz_rt"), Some("3"));
        assert_eq!(decoded.payload, br#"{"code":200}"#);
        assert_eq!(decoded.service, -5);
    }

    #[test]
    fn garbage_is_not_a_frame() {
        assert_eq!(Frame::decode(&[0xff; 11]), None);
        assert_eq!(Frame::decode(&[0x42, 0x05, 1]), None);
    }
}
