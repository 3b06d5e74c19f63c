//! The byte-level pieces of the index files: varints, fixed-width integers, the checksum, and a
//! reader that checks every length and offset against the bytes it has.
//!
//! Everything decoded from disk goes through [`Reader`]: a read past the end, a varint longer
//! than ten bytes or a count larger than the bytes left is a [`damaged`] error, never a panic or
//! an allocation sized by the file.

use std::io;

/// The error for index bytes that fail a check: the caller deletes the index and builds it again.
pub fn damaged(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("memory index damaged: {what}"))
}

/// Whether `e` says an index file failed a check (rather than, say, a full disk).
pub fn is_damaged(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::InvalidData
}

/// A 64-bit checksum of `bytes`, eight bytes at a time (FxHash's step, then a final mix).
/// Each step is a bijection of the running value, so a change confined to one eight-byte word
/// always changes the sum; the length is mixed in, so a cut or an extension does too.
pub fn checksum(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    for w in words {
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        h = (h.rotate_left(5) ^ v).wrapping_mul(K);
    }
    let mut last = [0u8; 8];
    last[..tail.len()].copy_from_slice(tail);
    h = (h.rotate_left(5) ^ u64::from_le_bytes(last)).wrapping_mul(K);
    h = (h.rotate_left(5) ^ bytes.len() as u64).wrapping_mul(K);
    h ^ (h >> 29)
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A string as its byte length (varint) and its bytes.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Checked reads from a byte slice.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    pub fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// Bytes not read yet.
    pub fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn bytes(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if n > self.left() {
            return Err(damaged("a read past the end"));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    pub fn u8(&mut self) -> io::Result<u8> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u32(&mut self) -> io::Result<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> io::Result<u64> {
        let b = self.bytes(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    pub fn varint(&mut self) -> io::Result<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(damaged("a varint over 64 bits"));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(damaged("a varint over ten bytes"))
    }

    /// A varint that must fit `usize` and be at most `max`.
    pub fn count(&mut self, max: usize) -> io::Result<usize> {
        let v = self.varint()?;
        usize::try_from(v).ok().filter(|n| *n <= max).ok_or_else(|| damaged("a count out of range"))
    }

    pub fn str(&mut self) -> io::Result<&'a str> {
        let n = self.count(self.left())?;
        std::str::from_utf8(self.bytes(n)?).map_err(|_| damaged("a string that is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_bad_ones_are_errors() {
        let mut out = Vec::new();
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            out.clear();
            put_varint(&mut out, v);
            let mut r = Reader::new(&out);
            assert_eq!(r.varint().unwrap(), v);
            assert!(r.is_done());
        }
        assert!(Reader::new(&[0x80; 11]).varint().is_err(), "too long");
        assert!(Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).varint().is_err());
        assert!(Reader::new(&[0x80]).varint().is_err(), "cut short");
        assert!(Reader::new(&[5, b'a']).str().is_err(), "a length past the end");
        assert!(is_damaged(&Reader::new(&[]).u32().unwrap_err()));
    }

    #[test]
    fn the_checksum_sees_every_single_bit_flip_and_every_cut() {
        let data: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37)).collect();
        let sum = checksum(&data);
        for i in 0..data.len() {
            for bit in 0..8 {
                let mut d = data.clone();
                d[i] ^= 1 << bit;
                assert_ne!(checksum(&d), sum, "byte {i} bit {bit}");
            }
        }
        for n in 0..data.len() {
            assert_ne!(checksum(&data[..n]), sum, "cut at {n}");
        }
        let mut zeros = data.clone();
        zeros.push(0);
        assert_ne!(checksum(&zeros), sum, "a zero byte more");
    }
}
