//! A small streaming JSON writer for request bodies; the pull reader is [`read`].
//!
//! Why not `serde_json::to_string`: request bodies embed JSON we already hold as text (tool
//! schemas, tool inputs) and must be producible in pieces on the chip, where the body is written
//! straight to the socket after a counting pass gives the `Content-Length`. A [`Sink`] receives
//! the pieces; [`Counter`] only counts them.
//!
//! The writer tracks commas itself, so callers only say what comes next. Nesting deeper than
//! [`MAX_DEPTH`] is a caller bug and panics in debug builds.

use alloc::string::String;
use alloc::vec::Vec;

pub mod read;
#[cfg(any(test, feature = "strategies"))]
#[doc(hidden)]
pub mod strategies;

/// Where encoded JSON goes.
pub trait Sink {
    /// Appends `s`, which is always valid UTF-8 and a piece of valid JSON text.
    fn push_str(&mut self, s: &str);
}

impl Sink for String {
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }
}

/// A sink that only counts bytes: the first pass of a two-pass, allocation-free body write.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counter(pub usize);

impl Sink for Counter {
    fn push_str(&mut self, s: &str) {
        self.0 += s.len();
    }
}

/// A sink that keeps only the bytes `[start, start + len)` of what is written into it.
///
/// Encoders are deterministic, so encoding the same request again with the next `start` gives the
/// next piece: a driver with a small fixed buffer (the chip) sends a body of any size without ever
/// holding it whole, trading a few encoding passes for memory:
///
/// ```
/// # use chela_proto::json::{Counter, Sink, Window, Writer};
/// # fn encode(s: &mut dyn Sink) { Writer::new(s).begin_array().string("a body longer than one window").end_array(); }
/// let mut total = Counter::default();
/// encode(&mut total); // the Content-Length
/// let (mut sent, mut buf) = (Vec::new(), Vec::with_capacity(8));
/// while sent.len() < total.0 {
///     encode(&mut Window::new(sent.len(), 8, &mut buf));
///     sent.extend_from_slice(&buf); // socket.write_all(&buf).await on the chip
/// }
/// # assert_eq!(sent, br#"["a body longer than one window"]"#);
/// ```
#[derive(Debug)]
pub struct Window<'b> {
    start: usize,
    end: usize,
    /// Bytes written so far.
    pos: usize,
    out: &'b mut Vec<u8>,
}

impl<'b> Window<'b> {
    /// Clears `out` and prepares to collect `len` bytes from offset `start`.
    pub fn new(start: usize, len: usize, out: &'b mut Vec<u8>) -> Window<'b> {
        out.clear();
        Window { start, end: start.saturating_add(len), pos: 0, out }
    }
}

impl Sink for Window<'_> {
    fn push_str(&mut self, s: &str) {
        let from = self.pos;
        self.pos += s.len();
        let lo = self.start.max(from);
        let hi = self.end.min(self.pos);
        if lo < hi {
            self.out.extend_from_slice(&s.as_bytes()[lo - from..hi - from]);
        }
    }
}

/// Deepest nesting the writer tracks.
pub const MAX_DEPTH: u32 = 64;

/// Writes JSON tokens into a [`Sink`], inserting commas and colons.
pub struct Writer<'s, S: Sink + ?Sized> {
    sink: &'s mut S,
    /// Bit `d` is set when the container at depth `d` already holds an element.
    filled: u64,
    depth: u32,
    /// Set right after a key: the next value needs no comma.
    after_key: bool,
}

impl<'s, S: Sink + ?Sized> Writer<'s, S> {
    pub fn new(sink: &'s mut S) -> Self {
        Writer { sink, filled: 0, depth: 0, after_key: false }
    }

    fn sep(&mut self) {
        if self.after_key {
            self.after_key = false;
            return;
        }
        if self.depth == 0 {
            return;
        }
        let bit = 1u64 << (self.depth - 1);
        if self.filled & bit != 0 {
            self.sink.push_str(",");
        } else {
            self.filled |= bit;
        }
    }

    fn open(&mut self, token: &str) {
        self.sep();
        self.sink.push_str(token);
        debug_assert!(self.depth < MAX_DEPTH, "JSON nesting deeper than {MAX_DEPTH}");
        self.depth += 1;
        self.filled &= !(1u64 << (self.depth - 1));
    }

    fn close(&mut self, token: &str) {
        debug_assert!(self.depth > 0, "close without open");
        self.depth -= 1;
        self.sink.push_str(token);
    }

    pub fn begin_object(&mut self) -> &mut Self {
        self.open("{");
        self
    }

    pub fn end_object(&mut self) -> &mut Self {
        self.close("}");
        self
    }

    pub fn begin_array(&mut self) -> &mut Self {
        self.open("[");
        self
    }

    pub fn end_array(&mut self) -> &mut Self {
        self.close("]");
        self
    }

    /// Writes an object key; the next call writes its value.
    pub fn key(&mut self, key: &str) -> &mut Self {
        self.sep();
        write_escaped(self.sink, key);
        self.sink.push_str(":");
        self.after_key = true;
        self
    }

    pub fn string(&mut self, value: &str) -> &mut Self {
        self.sep();
        write_escaped(self.sink, value);
        self
    }

    /// Writes a string value made of several pieces, escaped as one string.
    pub fn string_parts(&mut self, parts: &[&str]) -> &mut Self {
        self.sep();
        self.sink.push_str("\"");
        for part in parts {
            write_escaped_inner(self.sink, part);
        }
        self.sink.push_str("\"");
        self
    }

    /// Writes `json` verbatim. The caller guarantees it is one valid JSON value.
    pub fn raw(&mut self, json: &str) -> &mut Self {
        self.sep();
        self.sink.push_str(json);
        self
    }

    pub fn u64(&mut self, value: u64) -> &mut Self {
        self.sep();
        let mut buf = [0u8; 20];
        let mut i = buf.len();
        let mut v = value;
        loop {
            i -= 1;
            // `v % 10` is below 10, so the cast cannot truncate.
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        // Only ASCII digits were written.
        self.sink.push_str(core::str::from_utf8(&buf[i..]).unwrap_or("0"));
        self
    }

    pub fn bool(&mut self, value: bool) -> &mut Self {
        self.sep();
        self.sink.push_str(if value { "true" } else { "false" });
        self
    }

    pub fn null(&mut self) -> &mut Self {
        self.sep();
        self.sink.push_str("null");
        self
    }

    /// `key` then a string value.
    pub fn field_str(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key).string(value)
    }

    /// `key` then a raw JSON value.
    pub fn field_raw(&mut self, key: &str, json: &str) -> &mut Self {
        self.key(key).raw(json)
    }

    /// `key` then a number.
    pub fn field_u64(&mut self, key: &str, value: u64) -> &mut Self {
        self.key(key).u64(value)
    }

    /// `key` then a boolean.
    pub fn field_bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.key(key).bool(value)
    }
}

/// Writes `s` as a quoted JSON string.
pub fn write_escaped<S: Sink + ?Sized>(sink: &mut S, s: &str) {
    sink.push_str("\"");
    write_escaped_inner(sink, s);
    sink.push_str("\"");
}

/// The bytes a JSON string must escape: `"`, `\` and the control characters.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

fn write_escaped_inner<S: Sink + ?Sized>(sink: &mut S, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        // The common case first, with one table load: a `match` over every byte compiles to a
        // jump table, and escaping is most of a turn's host time (docs/BENCHMARKS.md).
        if !NEEDS_ESCAPE[b as usize] {
            continue;
        }
        let esc: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        // `i` is at an ASCII byte, so both slices end on char boundaries.
        sink.push_str(&s[start..i]);
        if esc.is_empty() {
            let u = [b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 0xf) as usize]];
            sink.push_str(core::str::from_utf8(&u).unwrap_or("?"));
        } else {
            sink.push_str(esc);
        }
        start = i + 1;
    }
    sink.push_str(&s[start..]);
}

/// Encodes a value with `f` into a new `String`.
pub fn to_string(f: impl FnOnce(&mut Writer<'_, String>)) -> String {
    let mut out = String::new();
    f(&mut Writer::new(&mut out));
    out
}

/// Reads JSON text into `T`: `serde_json::from_slice` over the text's bytes.
///
/// Why not `serde_json::from_str`: its reader (`StrRead`) and `from_slice`'s (`SliceRead`) each
/// instantiate the whole parser for every type read, and the chip links both kinds of call: its
/// image held about 32 KB of parser code twice. The text is already UTF-8, so the byte reader
/// gives the same values and the same errors; what the chip links and still reads through serde
/// goes through here (the wire types it reads most are on [`read`] instead).
pub fn from_str<'a, T: serde::Deserialize<'a>>(text: &'a str) -> serde_json::Result<T> {
    serde_json::from_slice(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use proptest::prelude::*;

    #[test]
    fn nested_values_get_commas_in_the_right_places() {
        let s = to_string(|w| {
            w.begin_object()
                .field_str("a", "x")
                .key("b")
                .begin_array()
                .u64(1)
                .u64(20)
                .begin_object()
                .end_object()
                .null()
                .end_array()
                .field_bool("c", false)
                .field_raw("d", r#"{"k":[1,2]}"#)
                .end_object();
        });
        assert_eq!(s, r#"{"a":"x","b":[1,20,{},null],"c":false,"d":{"k":[1,2]}}"#);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["d"]["k"][1], 2);
    }

    #[test]
    fn counter_counts_what_a_string_would_hold() {
        let mut c = Counter::default();
        let mut w = Writer::new(&mut c);
        w.begin_array().string("héllo\n").u64(u64::MAX).end_array();
        let s = to_string(|w| {
            w.begin_array().string("héllo\n").u64(u64::MAX).end_array();
        });
        assert_eq!(c.0, s.len());
        assert_eq!(s, "[\"héllo\\n\",18446744073709551615]");
    }

    #[test]
    fn string_parts_is_one_string() {
        let s = to_string(|w| {
            w.string_parts(&["data:", "image/png", ";base64,", "\"x"]);
        });
        assert_eq!(s, r#""data:image/png;base64,\"x""#);
    }

    #[test]
    fn from_str_borrows_and_refuses_as_serde_json_does() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Args<'a> {
            name: &'a str,
            n: Option<u32>,
        }
        let a: Args<'_> = from_str(r#" {"name":"x","n":3} "#).unwrap();
        assert_eq!(a, Args { name: "x", n: Some(3) });
        for bad in [r#"{"name":"x""#, r#"{"name":"x"} 1"#, r#"{"name":"a\u00"}"#, r#"{"n":-1,"name":"x"}"#, ""] {
            let ours = from_str::<Args<'_>>(bad).unwrap_err().to_string();
            assert_eq!(ours, serde_json::from_str::<Args<'_>>(bad).unwrap_err().to_string(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn windows_of_any_size_put_together_are_the_whole(s in any::<String>(), len in 1usize..40) {
            let encode = |sink: &mut dyn Sink| { Writer::new(sink).begin_object().field_str(&s, &s).key("n").u64(7).end_object(); };
            let mut whole = String::new();
            encode(&mut whole);
            let mut joined = Vec::new();
            let mut buf = Vec::new();
            loop {
                encode(&mut Window::new(joined.len(), len, &mut buf));
                prop_assert!(buf.len() <= len);
                if buf.is_empty() { break; }
                joined.extend_from_slice(&buf);
            }
            prop_assert_eq!(joined, whole.into_bytes());
        }

        #[test]
        fn from_str_reads_any_text_as_serde_json_from_str_does(s in any::<String>(), n in any::<i64>(), x in any::<String>()) {
            let text = alloc::format!("{{\"a\":[{n},{}, null, true],\"b\":{x}}}", to_string(|w| { w.string(&s); }));
            for t in [text.as_str(), s.as_str(), x.as_str()] {
                let ours = from_str::<serde_json::Value>(t).map_err(|e| e.to_string());
                prop_assert_eq!(ours, serde_json::from_str::<serde_json::Value>(t).map_err(|e| e.to_string()));
            }
        }

        #[test]
        fn any_string_round_trips(s in any::<String>()) {
            let out = to_string(|w| { w.begin_object().field_str(&s, &s).end_object(); });
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            prop_assert_eq!(v[&s].as_str().unwrap(), s.as_str());
        }

        #[test]
        fn any_number_round_trips(n in any::<u64>()) {
            let out = to_string(|w| { w.u64(n); });
            prop_assert_eq!(out.parse::<u64>().unwrap(), n);
        }
    }
}
