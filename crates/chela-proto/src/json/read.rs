//! A pull reader of JSON text: the chip's JSON without serde.
//!
//! Why not serde_json: every type read through a serde derive links its own visitor code and a
//! monomorph of serde_json's parser; on the ESP32-C3 that was tens of kilobytes for a handful of
//! small wire types. This reader is one non-generic piece of code; a type reads itself by pulling
//! tokens (`begin_object`, `next_key`, `str`, `u64`, `skip`, ...) in a few lines.
//!
//! It accepts exactly the JSON that `serde_json::from_slice::<serde_json::Value>` accepts (RFC
//! 8259: no trailing commas, no leading zeros, no control characters in strings, escapes and
//! surrogate pairs checked, nesting at most [`MAX_DEPTH`] deep) and reads the same values; the
//! property tests in `read/tests.rs` and the `json_read` fuzz target hold it to that. Skipped
//! values are checked as strictly as read ones (serde_json lets an ignored string carry a lone
//! surrogate; this does not). Nothing here recurses, so the stack it takes does not grow with
//! the input's nesting, and it allocates only for a string with escapes in it.

use alloc::borrow::Cow;
use alloc::string::String;
use core::fmt;

/// The deepest nesting accepted: serde_json's (its depth counter starts at 128 and refuses the
/// container that brings it to 0).
pub const MAX_DEPTH: u32 = 127;

/// Why JSON text was refused, and the byte offset where it was noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error {
    pub what: &'static str,
    pub offset: usize,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.offset)
    }
}

pub type Result<T> = core::result::Result<T, Error>;

/// The kind of the next value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

/// A number as JSON text wrote it, classified as serde_json classifies it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// A non-negative integer that fits a `u64`.
    U64(u64),
    /// A negative integer that fits an `i64`.
    I64(i64),
    /// Anything else: a fraction, an exponent, `-0`, or an integer out of range.
    F64(f64),
}

/// Reads one JSON text from a byte slice, token by token.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    src: &'a [u8],
    pos: usize,
    depth: u32,
    /// Bit `d` is set when the container at depth `d + 1` is an object.
    objects: u128,
    /// No element of the innermost container has been read yet.
    first: bool,
}

impl<'a> Reader<'a> {
    pub fn new(src: &'a [u8]) -> Reader<'a> {
        Reader { src, pos: 0, depth: 0, objects: 0, first: true }
    }

    /// The byte offset of the next unread byte.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// An error at the current offset.
    pub fn error(&self, what: &'static str) -> Error {
        Error { what, offset: self.pos }
    }

    fn ws(&mut self) {
        while let Some(&b) = self.src.get(self.pos) {
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.pos += 1;
        }
    }

    /// The next non-whitespace byte, not consumed.
    fn next_byte(&mut self) -> Result<u8> {
        self.ws();
        self.src.get(self.pos).copied().ok_or_else(|| self.error("EOF while parsing a value"))
    }

    /// The kind of the next value, without reading it.
    pub fn peek(&mut self) -> Result<Kind> {
        Ok(match self.next_byte()? {
            b'n' => Kind::Null,
            b't' | b'f' => Kind::Bool,
            b'-' | b'0'..=b'9' => Kind::Number,
            b'"' => Kind::String,
            b'[' => Kind::Array,
            b'{' => Kind::Object,
            _ => return Err(self.error("expected value")),
        })
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<()> {
        for &want in word {
            match self.src.get(self.pos) {
                Some(&b) if b == want => self.pos += 1,
                Some(_) => return Err(self.error("expected ident")),
                None => return Err(self.error("EOF while parsing a value")),
            }
        }
        Ok(())
    }

    /// Reads `null`.
    pub fn null(&mut self) -> Result<()> {
        if self.next_byte()? != b'n' {
            return Err(self.error("invalid type: expected null"));
        }
        self.literal(b"null")
    }

    /// Reads a `null` if one is next (true), or leaves the value to be read (false): an
    /// `Option` field.
    pub fn take_null(&mut self) -> Result<bool> {
        if self.peek()? == Kind::Null {
            self.literal(b"null")?;
            return Ok(true);
        }
        Ok(false)
    }

    pub fn bool(&mut self) -> Result<bool> {
        match self.next_byte()? {
            b't' => self.literal(b"true").map(|()| true),
            b'f' => self.literal(b"false").map(|()| false),
            _ => Err(self.error("invalid type: expected a boolean")),
        }
    }

    /// Reads a string, borrowed from the input unless it holds escapes.
    pub fn str(&mut self) -> Result<Cow<'a, str>> {
        if self.next_byte()? != b'"' {
            return Err(self.error("invalid type: expected a string"));
        }
        self.string(true)
    }

    /// Reads a string into an owned `String`.
    pub fn string_owned(&mut self) -> Result<String> {
        self.str().map(Cow::into_owned)
    }

    /// Reads a string at `self.pos` (on its opening quote); with `keep` false it is only checked.
    fn string(&mut self, keep: bool) -> Result<Cow<'a, str>> {
        self.pos += 1;
        let src = self.src;
        let mut owned: Option<String> = None;
        let mut start = self.pos;
        self.pos = plain_run(src, self.pos);
        loop {
            let Some(&b) = src.get(self.pos) else {
                return Err(self.error("EOF while parsing a string"));
            };
            match b {
                b'"' | b'\\' => {
                    let piece = core::str::from_utf8(&src[start..self.pos])
                        .map_err(|e| Error { what: "invalid unicode code point", offset: start + e.valid_up_to() })?;
                    if b == b'"' {
                        self.pos += 1;
                        return Ok(match owned {
                            Some(mut s) => {
                                s.push_str(piece);
                                Cow::Owned(s)
                            }
                            None if keep => Cow::Borrowed(piece),
                            None => Cow::Borrowed(""),
                        });
                    }
                    if keep {
                        owned.get_or_insert_with(String::new).push_str(piece);
                    }
                    self.pos += 1;
                    let c = self.escape()?;
                    if keep {
                        owned.get_or_insert_with(String::new).push(c);
                    }
                    start = self.pos;
                }
                0x00..=0x1f => {
                    return Err(self.error("control character (\\u0000-\\u001F) found while parsing a string"));
                }
                _ => self.pos = plain_run(src, self.pos + 1),
            }
        }
    }

    /// Decodes the escape after a backslash.
    fn escape(&mut self) -> Result<char> {
        let Some(&b) = self.src.get(self.pos) else {
            return Err(self.error("EOF while parsing a string"));
        };
        self.pos += 1;
        Ok(match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                match hi {
                    0xD800..=0xDBFF => {
                        if self.src.get(self.pos..self.pos + 2) != Some(b"\\u") {
                            return Err(self.error("lone leading surrogate in hex escape"));
                        }
                        self.pos += 2;
                        let lo = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&lo) {
                            return Err(self.error("lone leading surrogate in hex escape"));
                        }
                        let c = 0x10000 + ((u32::from(hi) - 0xD800) << 10) + (u32::from(lo) - 0xDC00);
                        char::from_u32(c).ok_or_else(|| self.error("invalid unicode code point"))?
                    }
                    0xDC00..=0xDFFF => return Err(self.error("lone trailing surrogate in hex escape")),
                    _ => char::from_u32(u32::from(hi)).ok_or_else(|| self.error("invalid unicode code point"))?,
                }
            }
            _ => {
                self.pos -= 1;
                return Err(self.error("invalid escape"));
            }
        })
    }

    fn hex4(&mut self) -> Result<u16> {
        let mut v: u16 = 0;
        for _ in 0..4 {
            let Some(&b) = self.src.get(self.pos) else {
                return Err(self.error("EOF while parsing a string"));
            };
            let d = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return Err(self.error("invalid escape")),
            };
            v = (v << 4) | u16::from(d);
            self.pos += 1;
        }
        Ok(v)
    }

    /// Reads a number's text, checked against JSON's grammar.
    pub fn number_text(&mut self) -> Result<&'a str> {
        let b = self.next_byte()?;
        if b != b'-' && !b.is_ascii_digit() {
            return Err(self.error("invalid type: expected a number"));
        }
        let start = self.pos;
        if b == b'-' {
            self.pos += 1;
        }
        match self.src.get(self.pos) {
            Some(b'0') => {
                self.pos += 1;
                if self.src.get(self.pos).is_some_and(u8::is_ascii_digit) {
                    return Err(self.error("invalid number"));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            Some(_) => return Err(self.error("invalid number")),
            None => return Err(self.error("EOF while parsing a value")),
        }
        if self.src.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            self.at_least_one_digit()?;
        }
        if matches!(self.src.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.src.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.at_least_one_digit()?;
        }
        // Only ASCII was consumed.
        core::str::from_utf8(&self.src[start..self.pos]).map_err(|_| self.error("invalid number"))
    }

    fn digits(&mut self) {
        while self.src.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
    }

    fn at_least_one_digit(&mut self) -> Result<()> {
        match self.src.get(self.pos) {
            Some(b) if b.is_ascii_digit() => {
                self.digits();
                Ok(())
            }
            Some(_) => Err(self.error("invalid number")),
            None => Err(self.error("EOF while parsing a value")),
        }
    }

    /// Reads a number that is an integer in JSON's writing (no fraction, no exponent) and whose
    /// magnitude fits a `u64`: `(negative, magnitude)`; `None` for any other number. No float
    /// is parsed: the float parser and its tables (about 14 KB) stay out of an image whose
    /// integers are read through here.
    fn integer(&mut self) -> Result<Option<(bool, u64)>> {
        let text = self.number_text()?;
        let (neg, digits) = match text.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, text),
        };
        let mut m: u64 = 0;
        for b in digits.bytes() {
            if !b.is_ascii_digit() {
                return Ok(None);
            }
            let Some(next) = m.checked_mul(10).and_then(|m| m.checked_add(u64::from(b - b'0'))) else {
                return Ok(None);
            };
            m = next;
        }
        Ok(Some((neg, m)))
    }

    /// Reads a number, classified as serde_json classifies it.
    pub fn number(&mut self) -> Result<Number> {
        let at = self.pos;
        let mut probe = self.clone();
        match probe.integer()? {
            Some((false, m)) => {
                *self = probe;
                return Ok(Number::U64(m));
            }
            // `-0` is a float to serde_json; `-2^63` is the one magnitude past i64::MAX.
            Some((true, m)) if m != 0 && m <= 1 << 63 => {
                *self = probe;
                return Ok(Number::I64((m as i64).wrapping_neg()));
            }
            _ => {}
        }
        let text = self.number_text()?;
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Number::F64(f)),
            _ => Err(Error { what: "number out of range", offset: at }),
        }
    }

    /// Reads a non-negative integer.
    pub fn u64(&mut self) -> Result<u64> {
        match self.integer()? {
            Some((false, n)) => Ok(n),
            _ => Err(self.error("invalid type: expected u64")),
        }
    }

    /// Reads a non-negative integer that fits a `u32`.
    pub fn u32(&mut self) -> Result<u32> {
        u32::try_from(self.u64()?).map_err(|_| self.error("invalid value: expected u32"))
    }

    /// Reads an integer.
    pub fn i64(&mut self) -> Result<i64> {
        match self.integer()? {
            Some((false, n)) => i64::try_from(n).map_err(|_| self.error("invalid value: expected i64")),
            Some((true, n)) if n != 0 && n <= 1 << 63 => Ok((n as i64).wrapping_neg()),
            _ => Err(self.error("invalid type: expected i64")),
        }
    }

    /// Reads any number as a float.
    pub fn f64(&mut self) -> Result<f64> {
        Ok(match self.number()? {
            Number::U64(n) => n as f64,
            Number::I64(n) => n as f64,
            Number::F64(f) => f,
        })
    }

    fn open(&mut self, byte: u8, object: bool) -> Result<()> {
        if self.next_byte()? != byte {
            return Err(self.error(if object {
                "invalid type: expected an object"
            } else {
                "invalid type: expected an array"
            }));
        }
        if self.depth >= MAX_DEPTH {
            return Err(self.error("recursion limit exceeded"));
        }
        self.pos += 1;
        let bit = 1u128 << self.depth;
        if object {
            self.objects |= bit;
        } else {
            self.objects &= !bit;
        }
        self.depth += 1;
        self.first = true;
        Ok(())
    }

    fn close(&mut self) {
        self.pos += 1;
        self.depth -= 1;
        // The closed container was an element of its parent.
        self.first = false;
    }

    fn in_object(&self) -> bool {
        self.depth > 0 && self.objects & (1u128 << (self.depth - 1)) != 0
    }

    /// Opens an object; read its members with [`Reader::next_key`] and a value read after each.
    pub fn begin_object(&mut self) -> Result<()> {
        self.open(b'{', true)
    }

    /// Opens an array; read its items with [`Reader::next_item`] and a value read after each.
    pub fn begin_array(&mut self) -> Result<()> {
        self.open(b'[', false)
    }

    /// Steps past the comma before the next element or the closing byte; true when an element
    /// follows.
    fn step(&mut self, close: u8) -> Result<bool> {
        let b = self.next_byte()?;
        if b == close {
            self.close();
            return Ok(false);
        }
        if self.first {
            self.first = false;
            return Ok(true);
        }
        if b != b',' {
            return Err(self.error(if close == b'}' { "expected `,` or `}`" } else { "expected `,` or `]`" }));
        }
        self.pos += 1;
        if self.next_byte()? == close {
            return Err(self.error("trailing comma"));
        }
        Ok(true)
    }

    /// The next key of the open object, its colon read; `None` once the object is closed.
    pub fn next_key(&mut self) -> Result<Option<Cow<'a, str>>> {
        self.key(true)
    }

    fn key(&mut self, keep: bool) -> Result<Option<Cow<'a, str>>> {
        if !self.in_object() {
            return Err(self.error("next_key outside an object"));
        }
        if !self.step(b'}')? {
            return Ok(None);
        }
        if self.next_byte()? != b'"' {
            return Err(self.error("key must be a string"));
        }
        let key = self.string(keep)?;
        if self.next_byte()? != b':' {
            return Err(self.error("expected `:`"));
        }
        self.pos += 1;
        Ok(Some(key))
    }

    /// True when the open array has another item to read; false once it is closed.
    pub fn next_item(&mut self) -> Result<bool> {
        if self.depth == 0 || self.in_object() {
            return Err(self.error("next_item outside an array"));
        }
        self.step(b']')
    }

    /// Reads and checks one value of any kind, keeping nothing; iterative, so nesting costs no
    /// stack.
    pub fn skip(&mut self) -> Result<()> {
        let base = self.depth;
        loop {
            match self.peek()? {
                Kind::Object => self.begin_object()?,
                Kind::Array => self.begin_array()?,
                Kind::String => {
                    self.string(false)?;
                }
                // The grammar only, as serde_json's skipping (and its RawValue) checks a number:
                // no float is parsed, so `1e400` passes here though `number` refuses it.
                Kind::Number => {
                    self.number_text()?;
                }
                Kind::Bool => {
                    self.bool()?;
                }
                Kind::Null => self.null()?,
            }
            // Close what has ended; stop at the next value to read.
            loop {
                if self.depth == base {
                    return Ok(());
                }
                let more = if self.in_object() { self.key(false)?.is_some() } else { self.next_item()? };
                if more {
                    break;
                }
            }
        }
    }

    /// Reads one value of any kind and gives its text, as it stands in the input.
    pub fn raw(&mut self) -> Result<&'a str> {
        self.ws();
        let start = self.pos;
        self.skip()?;
        // A checked value is valid UTF-8 and ends on a byte of its own.
        core::str::from_utf8(&self.src[start..self.pos]).map_err(|_| self.error("invalid unicode code point"))
    }

    /// Checks that only whitespace follows the value read.
    pub fn end(&mut self) -> Result<()> {
        self.ws();
        if self.pos < self.src.len() {
            return Err(self.error("trailing characters"));
        }
        Ok(())
    }
}

/// The offset of the first byte at or after `pos` that a string must stop at (`"`, `\` or a
/// control character), a machine word at a time; where less than a word is left it stops
/// early, for the caller's byte loop. Why: strings are most of a session file, and a byte loop
/// made reading one a third slower than serde_json, which scans the same way. A word, not a
/// `u64`: the chip's 32-bit core would take twice the code for a `u64`.
fn plain_run(src: &[u8], mut pos: usize) -> usize {
    const W: usize = core::mem::size_of::<usize>();
    const ONES: usize = usize::MAX / 0xff;
    while let Some(chunk) = src.get(pos..pos + W) {
        let mut word = [0u8; W];
        word.copy_from_slice(chunk);
        let x = usize::from_le_bytes(word);
        // Each term sets a byte's high bit where that byte is a control character, `"` or `\`;
        // borrows only run upward, so the lowest set bit is exact (later ones may not be).
        let ctrl = x.wrapping_sub(ONES * 0x20) & !x;
        let q = x ^ (ONES * usize::from(b'"'));
        let quote = q.wrapping_sub(ONES) & !q;
        let b = x ^ (ONES * usize::from(b'\\'));
        let backslash = b.wrapping_sub(ONES) & !b;
        let hit = (ctrl | quote | backslash) & (ONES << 7);
        if hit != 0 {
            return pos + (hit.trailing_zeros() / 8) as usize;
        }
        pos += W;
    }
    pos
}

/// Reads a whole text with `read`, which reads one value: nothing but whitespace may follow it.
pub fn read_all<'a, T>(src: &'a [u8], read: impl FnOnce(&mut Reader<'a>) -> Result<T>) -> Result<T> {
    let mut r = Reader::new(src);
    let v = read(&mut r)?;
    r.end()?;
    Ok(v)
}

/// Reads an object's members with `member`, which must read (or [`Reader::skip`]) the value of
/// every key it is given.
pub fn object<'a>(r: &mut Reader<'a>, mut member: impl FnMut(&mut Reader<'a>, &str) -> Result<()>) -> Result<()> {
    r.begin_object()?;
    while let Some(key) = r.next_key()? {
        member(r, &key)?;
    }
    Ok(())
}

/// Reads a struct field's value with `read`, refusing a second field of the same name as serde's
/// derive does: `bit` is the field's own bit in `seen`.
pub fn field<'a, T>(
    r: &mut Reader<'a>,
    seen: &mut u32,
    bit: u32,
    read: impl FnOnce(&mut Reader<'a>) -> Result<T>,
) -> Result<T> {
    if *seen & bit != 0 {
        return Err(r.error("duplicate field"));
    }
    *seen |= bit;
    read(r)
}

/// Reads an `Option`: `null` is `None`.
pub fn opt<'a, T>(r: &mut Reader<'a>, read: impl FnOnce(&mut Reader<'a>) -> Result<T>) -> Result<Option<T>> {
    if r.take_null()? { Ok(None) } else { read(r).map(Some) }
}

impl<'a> Reader<'a> {
    /// Reads a `usize`: on the 32-bit chip a count past `u32::MAX` is refused, as serde does there.
    pub fn usize(&mut self) -> Result<usize> {
        let n = self.u64()?;
        usize::try_from(n).map_err(|_| self.error("invalid value: expected usize"))
    }

    pub fn str_opt(&mut self) -> Result<Option<Cow<'a, str>>> {
        opt(self, Reader::str)
    }

    pub fn string_opt(&mut self) -> Result<Option<String>> {
        opt(self, Reader::string_owned)
    }

    pub fn u64_opt(&mut self) -> Result<Option<u64>> {
        opt(self, Reader::u64)
    }
}

mod deep;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod oracle;
pub mod value;

#[cfg(test)]
mod tests;
