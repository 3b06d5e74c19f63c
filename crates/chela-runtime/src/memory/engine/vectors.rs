//! The embeddings' vectors on disk: one file of records appended as the background pass
//! embeds texts, read whole by a search that ranks by meaning.
//!
//! A record is `u32` length, body, `u64` checksum of the body; the body is the kind (entry
//! or chunk), the document number, the hash of the text embedded, the model's name, the
//! vector's length and its `f32` values. A document's text never changes (a changed file's
//! text gets new documents), so a record stays true for its document; the text hash still
//! lets a search check that the vector belongs to the text it returns.
//!
//! Appends happen under the store's lock and end with an fsync; the manifest then records the
//! committed length. Readers read only that far, and the next writer cuts off anything after it
//! (what a killed append left) before appending. A rewrite (another model, dead documents)
//! writes a new file under a new number and switches the manifest to it, like a segment.
//! Every record read is checked: a length out of bounds or a failed checksum is
//! [`damaged`](super::codec::damaged).

use std::io::{self, BufReader, Read};

use super::codec::{Reader, checksum, damaged, put_u32, put_u64};

/// The longest vector kept (as `embed::MAX_DIMENSIONS`).
pub const MAX_DIMENSIONS: usize = 4096;

/// The longest model name kept, in bytes.
pub const MAX_MODEL_BYTES: usize = 255;

const MAX_BODY: usize = 1 + 8 + 8 + 1 + MAX_MODEL_BYTES + 2 + MAX_DIMENSIONS * 4;

/// One vector: whose it is, what text it was made from, by which model.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// 0: an entry, 1: a note chunk (`embed::Kind`).
    pub kind: u8,
    pub doc: u64,
    pub hash: i64,
    pub model: String,
    pub vec: Vec<f32>,
}

/// Appends `r`'s bytes to `out`; refuses a model name or vector beyond the bounds.
pub fn encode(r: &Record, out: &mut Vec<u8>) -> io::Result<()> {
    if r.model.len() > MAX_MODEL_BYTES || r.vec.is_empty() || r.vec.len() > MAX_DIMENSIONS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a vector or model name beyond the bounds"));
    }
    let mut body = Vec::with_capacity(20 + r.model.len() + r.vec.len() * 4);
    body.push(r.kind);
    put_u64(&mut body, r.doc);
    put_u64(&mut body, r.hash as u64);
    body.push(r.model.len() as u8);
    body.extend_from_slice(r.model.as_bytes());
    body.extend_from_slice(&(r.vec.len() as u16).to_le_bytes());
    for x in &r.vec {
        body.extend_from_slice(&x.to_le_bytes());
    }
    put_u32(out, body.len() as u32);
    out.extend_from_slice(&body);
    put_u64(out, checksum(&body));
    Ok(())
}

/// A record's fields, borrowed from the bytes read: the values stay little-endian bytes, so a
/// scan that skips most records (another kind or model) never converts them.
pub struct View<'a> {
    pub kind: u8,
    pub doc: u64,
    pub hash: i64,
    pub model: &'a str,
    /// `f32` values, little-endian, four bytes each.
    pub values: &'a [u8],
}

impl View<'_> {
    pub fn to_record(&self) -> Record {
        let vec = self.values.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        Record { kind: self.kind, doc: self.doc, hash: self.hash, model: self.model.to_owned(), vec }
    }
}

fn view(body: &[u8]) -> io::Result<View<'_>> {
    let mut r = Reader::new(body);
    let kind = r.u8()?;
    let doc = r.u64()?;
    let hash = r.u64()? as i64;
    let n = usize::from(r.u8()?);
    let model = std::str::from_utf8(r.bytes(n)?).map_err(|_| damaged("a model name that is not UTF-8"))?;
    let b = r.bytes(2)?;
    let dim = usize::from(u16::from_le_bytes([b[0], b[1]]));
    if kind > 1 || dim == 0 || dim > MAX_DIMENSIONS {
        return Err(damaged("a vector record out of range"));
    }
    let values = r.bytes(dim * 4)?;
    if !r.is_done() {
        return Err(damaged("bytes after a vector"));
    }
    Ok(View { kind, doc, hash, model, values })
}

/// Calls `f` with every record of the first `len` bytes of `src`, in order; the bytes must
/// end exactly at `len` with a whole record.
pub fn scan(src: impl Read, len: u64, mut f: impl FnMut(&View<'_>)) -> io::Result<()> {
    let mut r = BufReader::with_capacity(256 * 1024, src.take(len));
    let mut body = Vec::with_capacity(MAX_BODY);
    let mut at = 0u64;
    while at < len {
        let mut head = [0u8; 4];
        r.read_exact(&mut head).map_err(|_| damaged("a vectors file shorter than its manifest says"))?;
        let n = u32::from_le_bytes(head) as usize;
        if n > MAX_BODY {
            return Err(damaged("a vector record too long"));
        }
        body.resize(n, 0);
        let mut sum = [0u8; 8];
        r.read_exact(&mut body)
            .and_then(|()| r.read_exact(&mut sum))
            .map_err(|_| damaged("a vector record cut short"))?;
        if checksum(&body) != u64::from_le_bytes(sum) {
            return Err(damaged("a vector record that fails its checksum"));
        }
        f(&view(&body)?);
        at += 4 + n as u64 + 8;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn rec(doc: u64) -> Record {
        Record { kind: 1, doc, hash: -5, model: "m".into(), vec: vec![0.5, -0.25, doc as f32] }
    }

    fn all(bytes: &[u8]) -> io::Result<Vec<Record>> {
        let mut out = Vec::new();
        scan(bytes, bytes.len() as u64, |v| out.push(v.to_record()))?;
        Ok(out)
    }

    #[test]
    fn records_round_trip_and_damage_is_an_error() {
        let mut bytes = Vec::new();
        for d in 0..3 {
            encode(&rec(d), &mut bytes).unwrap();
        }
        assert_eq!(all(&bytes).unwrap(), [rec(0), rec(1), rec(2)]);
        let mut head = Vec::new();
        scan(&bytes[..], (bytes.len() / 3) as u64, |v| head.push(v.doc)).unwrap();
        assert_eq!(head, [0], "only the committed length is read");
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x04;
            assert!(all(&bad).is_err(), "byte {i}");
        }
        assert!(all(&bytes[..bytes.len() - 1]).is_err(), "a torn last record");
        let long = Record { model: "x".repeat(300), ..rec(0) };
        assert!(encode(&long, &mut Vec::new()).is_err());
        assert!(encode(&Record { vec: vec![], ..rec(0) }, &mut Vec::new()).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = all(&bytes);
        }

        /// A body of garbage under a valid length and checksum: the field checks hold alone.
        #[test]
        fn sealed_garbage_never_panics(body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut bytes = Vec::new();
            put_u32(&mut bytes, body.len() as u32);
            bytes.extend_from_slice(&body);
            put_u64(&mut bytes, checksum(&body));
            let _ = all(&bytes);
        }
    }
}
