//! Inflate (RFC 1951), small: the console page is carried deflated (`build/page.rs`), and this
//! gives it back to a client that does not take gzip. A general decoder (stored, fixed and
//! dynamic blocks) in the manner of zlib's `puff.c`: a Huffman code is decoded a bit at a time
//! from its canonical counts, which is slow next to a table-driven inflater but is a few KB of
//! code instead of eleven, and 59 KB inflate in well under a millisecond. Bounded: the output
//! stops at the length asked for, and bad input is an error, never a panic.
//!
//! The build script compiles this file too and checks that it gives back the page it deflated,
//! so a binary whose page would not inflate is never built.

/// The stream is not deflate, ends early, or inflates to more than was asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct Corrupt;

/// The deflate stream `input` inflated, which must be `len` bytes.
pub fn inflate(input: &[u8], len: usize) -> Result<Vec<u8>, Corrupt> {
    let mut s = State { input, pos: 0, buf: 0, held: 0, out: Vec::with_capacity(len), max: len };
    loop {
        let last = s.bits(1)?;
        match s.bits(2)? {
            0 => s.stored()?,
            1 => s.fixed()?,
            2 => s.dynamic()?,
            _ => return Err(Corrupt),
        }
        if last == 1 {
            break;
        }
    }
    if s.out.len() == len { Ok(s.out) } else { Err(Corrupt) }
}

/// Lengths 257..285: the base and the extra bits.
const LEN_BASE: [u16; 29] =
    [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LEN_EXTRA: [u8; 29] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
/// Distances 0..29: the base and the extra bits.
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
    8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] =
    [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];
/// The order a dynamic block sends its code-length code's lengths in.
const ORDER: [usize; 19] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
const MAX_BITS: usize = 15;

/// A canonical Huffman code: how many codes of each length, and the symbols in code order.
struct Huffman {
    count: [u16; MAX_BITS + 1],
    symbol: Vec<u16>,
}

impl Huffman {
    /// The code with these lengths per symbol (0: unused). An over-subscribed set is refused;
    /// an incomplete one is kept (a single distance code is legal) and fails on a missing code.
    fn new(lengths: &[u8]) -> Result<Huffman, Corrupt> {
        let mut count = [0u16; MAX_BITS + 1];
        for &l in lengths {
            count[usize::from(l)] += 1;
        }
        let mut left = 1i32;
        for &c in &count[1..] {
            left = (left << 1) - i32::from(c);
            if left < 0 {
                return Err(Corrupt);
            }
        }
        let mut offset = [0u16; MAX_BITS + 1];
        for len in 1..MAX_BITS {
            offset[len + 1] = offset[len] + count[len];
        }
        let mut symbol = vec![0u16; lengths.len()];
        for (s, &l) in (0u16..).zip(lengths) {
            if l != 0 {
                symbol[usize::from(offset[usize::from(l)])] = s;
                offset[usize::from(l)] += 1;
            }
        }
        Ok(Huffman { count, symbol })
    }
}

struct State<'a> {
    input: &'a [u8],
    pos: usize,
    /// Bits read from `input` and not used yet, the next one lowest; `held` of them.
    buf: u32,
    held: u32,
    out: Vec<u8>,
    max: usize,
}

impl State<'_> {
    /// The next `n` bits (n <= 16), the first one lowest.
    fn bits(&mut self, n: u32) -> Result<u32, Corrupt> {
        while self.held < n {
            let byte = *self.input.get(self.pos).ok_or(Corrupt)?;
            self.pos += 1;
            self.buf |= u32::from(byte) << self.held;
            self.held += 8;
        }
        let v = self.buf & ((1 << n) - 1);
        self.buf >>= n;
        self.held -= n;
        Ok(v)
    }

    /// One symbol of `h`: codes are sent first bit first, so the code grows a bit at a time
    /// until it falls among the codes of its length.
    fn decode(&mut self, h: &Huffman) -> Result<u16, Corrupt> {
        let (mut code, mut first, mut index) = (0u32, 0u32, 0u32);
        for &count in &h.count[1..] {
            code |= self.bits(1)?;
            let count = u32::from(count);
            if code < first + count {
                return h.symbol.get((index + code - first) as usize).copied().ok_or(Corrupt);
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        Err(Corrupt)
    }

    fn push(&mut self, byte: u8) -> Result<(), Corrupt> {
        if self.out.len() == self.max {
            return Err(Corrupt);
        }
        self.out.push(byte);
        Ok(())
    }

    fn stored(&mut self) -> Result<(), Corrupt> {
        // The rest of the current byte is padding.
        self.buf = 0;
        self.held = 0;
        let head = self.input.get(self.pos..self.pos + 4).ok_or(Corrupt)?;
        let len = u16::from_le_bytes([head[0], head[1]]);
        if len != !u16::from_le_bytes([head[2], head[3]]) {
            return Err(Corrupt);
        }
        self.pos += 4;
        let data = self.input.get(self.pos..self.pos + usize::from(len)).ok_or(Corrupt)?;
        if self.out.len() + data.len() > self.max {
            return Err(Corrupt);
        }
        self.out.extend_from_slice(data);
        self.pos += data.len();
        Ok(())
    }

    fn fixed(&mut self) -> Result<(), Corrupt> {
        let mut lengths = [8u8; 288];
        lengths[144..256].fill(9);
        lengths[256..280].fill(7);
        self.codes(&Huffman::new(&lengths)?, &Huffman::new(&[5; 30])?)
    }

    fn dynamic(&mut self) -> Result<(), Corrupt> {
        let nlen = self.bits(5)? as usize + 257;
        let ndist = self.bits(5)? as usize + 1;
        let ncode = self.bits(4)? as usize + 4;
        if nlen > 286 || ndist > 30 {
            return Err(Corrupt);
        }
        let mut lengths = [0u8; 19];
        for &i in &ORDER[..ncode] {
            lengths[i] = self.bits(3)? as u8;
        }
        let code = Huffman::new(&lengths)?;
        let mut lengths = [0u8; 286 + 30];
        let mut i = 0;
        while i < nlen + ndist {
            let sym = self.decode(&code)?;
            if sym < 16 {
                lengths[i] = sym as u8;
                i += 1;
                continue;
            }
            let (len, repeat) = match sym {
                16 => (*lengths[..i].last().ok_or(Corrupt)?, 3 + self.bits(2)?),
                17 => (0, 3 + self.bits(3)?),
                _ => (0, 11 + self.bits(7)?),
            };
            let end = i + repeat as usize;
            lengths.get_mut(i..end).filter(|_| end <= nlen + ndist).ok_or(Corrupt)?.fill(len);
            i = end;
        }
        // A block must be able to end.
        if lengths[256] == 0 {
            return Err(Corrupt);
        }
        self.codes(&Huffman::new(&lengths[..nlen])?, &Huffman::new(&lengths[nlen..nlen + ndist])?)
    }

    /// A block's literals and matches, up to its end code.
    fn codes(&mut self, lit: &Huffman, dist: &Huffman) -> Result<(), Corrupt> {
        loop {
            let sym = self.decode(lit)?;
            match sym {
                0..=255 => self.push(sym as u8)?,
                256 => return Ok(()),
                _ => {
                    let l = usize::from(sym - 257);
                    let (&base, &extra) = LEN_BASE.get(l).zip(LEN_EXTRA.get(l)).ok_or(Corrupt)?;
                    let len = u32::from(base) + self.bits(u32::from(extra))?;
                    let d = usize::from(self.decode(dist)?);
                    let (&base, &extra) = DIST_BASE.get(d).zip(DIST_EXTRA.get(d)).ok_or(Corrupt)?;
                    let back = (u32::from(base) + self.bits(u32::from(extra))?) as usize;
                    if back > self.out.len() {
                        return Err(Corrupt);
                    }
                    for _ in 0..len {
                        self.push(self.out[self.out.len() - back])?;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text with repeats near and far, and bytes of every value.
    fn sample() -> Vec<u8> {
        let mut data = b"Chela, a personal AI assistant. ".repeat(40);
        data.extend((0..=255u8).cycle().take(3000));
        data.extend(b"<div class=\"row\"><span>row</span></div>\n".repeat(100));
        data
    }

    #[test]
    fn inflates_what_miniz_deflates_at_every_level() {
        // Level 0 writes stored blocks; a short input gets a fixed block; the others dynamic.
        for data in [sample(), b"a short one".to_vec(), Vec::new()] {
            for level in [0, 1, 6, 10] {
                let packed = miniz_oxide::deflate::compress_to_vec(&data, level);
                assert_eq!(inflate(&packed, data.len()), Ok(data.clone()), "level {level}, {} bytes", data.len());
            }
        }
    }

    #[test]
    fn a_fixed_block_inflates() {
        // "abc" in a final fixed-code block (as zlib writes it), then "abcabc" as a match.
        assert_eq!(inflate(&[0x4b, 0x4c, 0x4a, 0x06, 0x00], 3), Ok(b"abc".to_vec()));
        let packed = miniz_oxide::deflate::compress_to_vec(b"abcabcabc", 1);
        assert_eq!(inflate(&packed, 9), Ok(b"abcabcabc".to_vec()));
    }

    #[test]
    fn bad_streams_are_errors_not_panics() {
        let data = sample();
        let packed = miniz_oxide::deflate::compress_to_vec(&data, 10);
        // Cut short, or a length other than the stream's: both refused.
        for cut in [0, 1, packed.len() / 2, packed.len() - 1] {
            assert_eq!(inflate(&packed[..cut], data.len()), Err(Corrupt), "cut at {cut}");
        }
        assert_eq!(inflate(&packed, data.len() - 1), Err(Corrupt));
        assert_eq!(inflate(&packed, data.len() + 1), Err(Corrupt));
        // Block type 3 does not exist; a stored block's length must match its complement.
        assert_eq!(inflate(&[0b111], 0), Err(Corrupt));
        assert_eq!(inflate(&[1, 5, 0, 0, 0, b'x'], 1), Err(Corrupt));
        // Every single-bit flip of a stream: an error or some bytes, never a panic or more than
        // the length asked for.
        for at in 0..packed.len().min(400) {
            for bit in 0..8 {
                let mut bad = packed.clone();
                bad[at] ^= 1 << bit;
                if let Ok(out) = inflate(&bad, data.len()) {
                    assert_eq!(out.len(), data.len());
                }
            }
        }
    }
}
