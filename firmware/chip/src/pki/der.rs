//! A DER reader: one TLV at a time over a borrowed slice, never recursing.
//!
//! Only what X.509 needs: single-byte tags, definite lengths of at most 4 length bytes in
//! their shortest form, every length checked against what is left. Nesting is walked by the
//! caller opening a new [`Reader`] on a value, so the depth is the caller's code, not the input.

/// What went wrong, for the error message: a short phrase.
pub(crate) type Why = &'static str;

/// One tag-length-value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tlv<'a> {
    pub tag: u8,
    /// The contents.
    pub value: &'a [u8],
    /// Tag, length and contents: the exact bytes (what a signature covers).
    pub whole: &'a [u8],
}

pub(crate) const BOOLEAN: u8 = 0x01;
pub(crate) const INTEGER: u8 = 0x02;
pub(crate) const BIT_STRING: u8 = 0x03;
pub(crate) const OCTET_STRING: u8 = 0x04;
pub(crate) const NULL: u8 = 0x05;
pub(crate) const OID: u8 = 0x06;
pub(crate) const UTC_TIME: u8 = 0x17;
pub(crate) const GENERALIZED_TIME: u8 = 0x18;
pub(crate) const SEQUENCE: u8 = 0x30;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// The next TLV, whatever its tag.
    pub fn next(&mut self) -> Result<Tlv<'a>, Why> {
        let bytes = self.rest;
        let (&tag, after) = bytes.split_first().ok_or("the DER ends early")?;
        if tag & 0x1f == 0x1f {
            return Err("a DER tag is in the multi-byte form");
        }
        let (&first, mut after) = after.split_first().ok_or("the DER ends inside a length")?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 {
                return Err("a DER length is indefinite");
            }
            if count > 4 {
                return Err("a DER length has more than 4 bytes");
            }
            if after.len() < count {
                return Err("the DER ends inside a length");
            }
            let (digits, rest) = after.split_at(count);
            after = rest;
            if digits[0] == 0 {
                return Err("a DER length is not in its shortest form");
            }
            let len = digits.iter().fold(0u64, |acc, &d| (acc << 8) | u64::from(d));
            if len < 0x80 {
                return Err("a DER length is not in its shortest form");
            }
            usize::try_from(len).map_err(|_| "a DER length is too large")?
        };
        if len > after.len() {
            return Err("a DER length runs past the end");
        }
        let header = bytes.len() - after.len();
        let (value, rest) = after.split_at(len);
        self.rest = rest;
        Ok(Tlv { tag, value, whole: &bytes[..header + len] })
    }

    /// The next TLV, which must carry `tag`.
    pub fn expect(&mut self, tag: u8, what: Why) -> Result<Tlv<'a>, Why> {
        let tlv = self.next().map_err(|_| what)?;
        if tlv.tag == tag { Ok(tlv) } else { Err(what) }
    }

    /// The next TLV if it carries `tag`; nothing read otherwise.
    pub fn optional(&mut self, tag: u8, what: Why) -> Result<Option<Tlv<'a>>, Why> {
        if self.peek_tag() == Some(tag) { self.expect(tag, what).map(Some) } else { Ok(None) }
    }

    /// Fails unless everything was read.
    pub fn finish(&self, what: Why) -> Result<(), Why> {
        if self.rest.is_empty() { Ok(()) } else { Err(what) }
    }
}

/// The contents of a BIT STRING with no unused bits (keys, signatures).
pub(crate) fn whole_bits<'a>(tlv: &Tlv<'a>, what: Why) -> Result<&'a [u8], Why> {
    match tlv.value.split_first() {
        Some((0, bits)) => Ok(bits),
        _ => Err(what),
    }
}

/// A non-negative INTEGER's magnitude, big-endian, without the sign byte; refuses negative
/// and non-minimal encodings.
pub(crate) fn unsigned<'a>(tlv: &Tlv<'a>, what: Why) -> Result<&'a [u8], Why> {
    match tlv.value {
        [] => Err(what),
        [first, ..] if first & 0x80 != 0 => Err(what),
        [0, second, ..] if second & 0x80 == 0 => Err(what),
        [0, rest @ ..] if !rest.is_empty() => Ok(rest),
        value => Ok(value),
    }
}

/// A small non-negative INTEGER (path lengths, exponents).
pub(crate) fn small_unsigned(tlv: &Tlv<'_>, what: Why) -> Result<u32, Why> {
    let digits = unsigned(tlv, what)?;
    if digits.len() > 4 {
        return Err(what);
    }
    Ok(digits.iter().fold(0u32, |acc, &d| (acc << 8) | u32::from(d)))
}

/// A BOOLEAN (DER says 0xff for true; BER's other non-zero values are taken as true).
pub(crate) fn boolean(tlv: &Tlv<'_>, what: Why) -> Result<bool, Why> {
    match tlv.value {
        [b] => Ok(*b != 0),
        _ => Err(what),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_checked() {
        assert_eq!(Reader::new(&[0x30, 0x02, 1, 2]).next().unwrap().value, &[1, 2]);
        assert!(Reader::new(&[0x30, 0x03, 1, 2]).next().is_err(), "past the end");
        assert!(Reader::new(&[0x30, 0x80, 0, 0]).next().is_err(), "indefinite");
        assert!(Reader::new(&[0x30, 0x81, 0x05, 1, 2, 3, 4, 5]).next().is_err(), "not shortest");
        assert!(Reader::new(&[0x30, 0x82, 0x00, 0x80]).next().is_err(), "leading zero");
        assert!(Reader::new(&[0x30, 0x85, 1, 0, 0, 0, 0]).next().is_err(), "five length bytes");
        assert!(Reader::new(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).next().is_err(), "huge");
        assert!(Reader::new(&[0x1f, 0x01, 0x00]).next().is_err(), "multi-byte tag");
        let long: alloc::vec::Vec<u8> = [0x04, 0x81, 0x80].into_iter().chain([7u8; 0x80]).collect();
        let tlv = Reader::new(&long).next().unwrap();
        assert_eq!((tlv.value.len(), tlv.whole.len()), (0x80, 0x83));
    }

    #[test]
    fn integers() {
        let int = |v: &'static [u8]| Tlv { tag: INTEGER, value: v, whole: v };
        assert_eq!(unsigned(&int(&[0x00, 0x80]), "x"), Ok(&[0x80][..]));
        assert_eq!(unsigned(&int(&[0x00]), "x"), Ok(&[0x00][..]));
        assert!(unsigned(&int(&[0x80]), "x").is_err(), "negative");
        assert!(unsigned(&int(&[0x00, 0x01]), "x").is_err(), "not minimal");
        assert_eq!(small_unsigned(&int(&[0x01, 0x00, 0x01]), "x"), Ok(65537));
        assert!(small_unsigned(&int(&[0x01, 0, 0, 0, 0]), "x").is_err());
    }
}
