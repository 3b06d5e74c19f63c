//! An incremental Server-Sent Events parser (the WHATWG `text/event-stream` rules).
//!
//! Feed bytes as they arrive with [`Parser::handle_bytes`], then call [`Parser::poll_event`]
//! until it returns `Ok(None)`. Bytes may be split anywhere, even inside a UTF-8 character or
//! between the `\r` and `\n` of a line break: the events that come out are the same.
//!
//! Handled: `\n`, `\r\n` and lone `\r` line ends, a leading byte-order mark, comments (`:` lines),
//! multi-line `data:` joined with `\n`, `event:` names, fields without a colon, one optional space
//! after the colon, and unknown fields (ignored). An event without any `data:` line is not
//! dispatched. At the end of the stream an unfinished event is dropped, as the standard says.
//!
//! Bounded: a line or an event's data longer than `max_event_bytes` is an error, so a hostile
//! or broken server cannot make the buffer grow without limit.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Event {
    /// The `event:` name, empty when the server sent none (the standard's "message").
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Why the stream cannot be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A line or an event grew past the bound given to [`Parser::new`].
    TooLarge { limit: usize },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::TooLarge { limit } => {
                write!(f, "a server-sent event is larger than {limit} bytes")
            }
        }
    }
}

impl core::error::Error for Error {}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The parser state. See the module docs for the calling order.
#[derive(Debug)]
pub struct Parser {
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pos: usize,
    /// The previous line ended with `\r` at the end of a chunk: a `\n` that follows belongs to it.
    skip_lf: bool,
    bom_done: bool,
    event: String,
    data: String,
    has_data: bool,
    max: usize,
}

impl Parser {
    pub fn new(max_event_bytes: usize) -> Parser {
        Parser {
            buf: Vec::new(),
            pos: 0,
            skip_lf: false,
            bom_done: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            max: max_event_bytes,
        }
    }

    /// Appends bytes from the stream.
    pub fn handle_bytes(&mut self, bytes: &[u8]) {
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet part of a complete line.
    pub fn pending_bytes(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next complete event, `Ok(None)` when more bytes are needed.
    pub fn poll_event(&mut self) -> Result<Option<Event>, Error> {
        if !self.bom_done {
            let rest = &self.buf[self.pos..];
            if rest.len() >= BOM.len() {
                if rest.starts_with(BOM) {
                    self.pos += BOM.len();
                }
                self.bom_done = true;
            } else if !rest.is_empty() && BOM.starts_with(rest) {
                return Ok(None);
            } else if !rest.is_empty() {
                self.bom_done = true;
            } else {
                return Ok(None);
            }
        }
        loop {
            if self.skip_lf && self.pos < self.buf.len() {
                if self.buf[self.pos] == b'\n' {
                    self.pos += 1;
                }
                self.skip_lf = false;
            }
            let rest = &self.buf[self.pos..];
            let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                if rest.len() > self.max {
                    return Err(Error::TooLarge { limit: self.max });
                }
                return Ok(None);
            };
            let line_start = self.pos;
            let mut next = self.pos + end + 1;
            if rest[end] == b'\r' {
                match rest.get(end + 1) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            self.pos = next;
            let line_end = line_start + end;
            if let Some(ev) = self.process_line(line_start, line_end)? {
                return Ok(Some(ev));
            }
        }
    }

    fn process_line(&mut self, start: usize, end: usize) -> Result<Option<Event>, Error> {
        // The same bound as for a line still arriving, so whether a long line is refused does
        // not depend on how the stream was split.
        if end - start > self.max {
            return Err(Error::TooLarge { limit: self.max });
        }
        let line = &self.buf[start..end];
        if line.is_empty() {
            if !self.has_data {
                self.event.clear();
                return Ok(None);
            }
            // The data buffer ends with the `\n` added after its last line.
            self.data.pop();
            self.has_data = false;
            let ev = Event { event: core::mem::take(&mut self.event), data: core::mem::take(&mut self.data) };
            return Ok(Some(ev));
        }
        if line[0] == b':' {
            return Ok(None);
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        match field {
            b"event" => {
                self.event.clear();
                self.event.push_str(&String::from_utf8_lossy(value));
            }
            b"data" => {
                // Counted after decoding: each invalid byte becomes a 3-byte U+FFFD, so the raw
                // length would let the data grow to three times the bound.
                let value = String::from_utf8_lossy(value);
                if self.data.len() + value.len() + 1 > self.max {
                    return Err(Error::TooLarge { limit: self.max });
                }
                self.data.push_str(&value);
                self.data.push('\n');
                self.has_data = true;
            }
            // `id` and `retry` matter to a reconnecting browser, not to a one-shot API stream.
            _ => {}
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;
    use proptest::prelude::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<Event> {
        let mut p = Parser::new(1 << 16);
        let mut out = Vec::new();
        for c in chunks {
            p.handle_bytes(c);
            while let Some(ev) = p.poll_event().unwrap() {
                out.push(ev);
            }
        }
        out
    }

    fn ev(event: &str, data: &str) -> Event {
        Event { event: event.into(), data: data.into() }
    }

    #[test]
    fn named_events_and_multiline_data() {
        let got = parse_all(&[b"event: ping\ndata: {}\n\ndata: a\ndata:b\ndata\n\n"]);
        assert_eq!(got, vec![ev("ping", "{}"), ev("", "a\nb\n")]);
    }

    #[test]
    fn crlf_lone_cr_comments_and_unknown_fields() {
        let got = parse_all(&[b": keep-alive\r\nevent:x\r\nid: 7\r\nretry: 10\r\nfoo: bar\r\ndata:  two spaces\r\r\n"]);
        assert_eq!(got, vec![ev("x", " two spaces")]);
        let got = parse_all(&[b"data: a\rdata: b\r\r"]);
        assert_eq!(got, vec![ev("", "a\nb")]);
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_resets_the_name() {
        let got = parse_all(&[b"event: lonely\n\ndata: x\n\n"]);
        assert_eq!(got, vec![ev("", "x")]);
    }

    #[test]
    fn bom_is_skipped_even_when_split() {
        let got = parse_all(&[b"\xEF", b"\xBB", b"\xBFdata: x\n\n"]);
        assert_eq!(got, vec![ev("", "x")]);
    }

    #[test]
    fn unfinished_event_at_end_is_not_dispatched() {
        let got = parse_all(&[b"data: x\n"]);
        assert!(got.is_empty());
    }

    #[test]
    fn a_cr_at_a_chunk_end_does_not_make_an_empty_line() {
        let got = parse_all(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(got, vec![ev("", "a\nb")]);
    }

    #[test]
    fn oversized_lines_and_events_are_errors() {
        let mut p = Parser::new(16);
        p.handle_bytes(&[b'x'; 17]);
        assert_eq!(p.poll_event(), Err(Error::TooLarge { limit: 16 }));
        let mut p = Parser::new(16);
        p.handle_bytes(b"data: 0123456789\ndata: 0123456789\n");
        assert_eq!(p.poll_event(), Err(Error::TooLarge { limit: 16 }));
    }

    #[test]
    fn a_long_line_is_refused_however_it_was_split() {
        let text = b": a comment longer than the bound\n\ndata: x\n\n";
        for split in [text.len(), 20, 1] {
            let mut p = Parser::new(16);
            let mut got = Ok(None);
            for piece in text.chunks(split) {
                p.handle_bytes(piece);
                got = p.poll_event();
                if got.is_err() {
                    break;
                }
            }
            assert_eq!(got, Err(Error::TooLarge { limit: 16 }), "pieces of {split} bytes");
        }
    }

    #[test]
    fn the_data_bound_counts_replacement_characters() {
        // 10 invalid bytes are 30 bytes of U+FFFD: over a bound of 16 although the line is not.
        let mut p = Parser::new(16);
        p.handle_bytes(b"data: \xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\n\n");
        assert_eq!(p.poll_event(), Err(Error::TooLarge { limit: 16 }));
    }

    #[test]
    fn utf8_split_inside_a_character() {
        let s = "data: héllo 世界\n\n".as_bytes();
        let got = parse_all(&[&s[..8], &s[8..15], &s[15..]]);
        assert_eq!(got, vec![ev("", "héllo 世界")]);
    }

    fn split_at_points(bytes: &[u8], mut points: Vec<usize>) -> Vec<&[u8]> {
        points.retain(|&p| p <= bytes.len());
        points.sort_unstable();
        let mut out = Vec::new();
        let mut last = 0;
        for p in points {
            out.push(&bytes[last..p]);
            last = p;
        }
        out.push(&bytes[last..]);
        out
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(
            lines in proptest::collection::vec(
                prop_oneof![
                    Just("data: {\"a\":1}".to_string()),
                    Just("event: message_start".to_string()),
                    Just(": comment".to_string()),
                    Just("".to_string()),
                    Just("data:".to_string()),
                    "data: [a-zé世 ]{0,12}",
                ], 0..30),
            ends in proptest::collection::vec(prop_oneof![Just("\n"), Just("\r\n"), Just("\r")], 30),
            points in proptest::collection::vec(0usize..600, 0..12),
        ) {
            let mut text = String::new();
            for (i, l) in lines.iter().enumerate() {
                text.push_str(l);
                text.push_str(ends[i]);
            }
            text.push_str("\n\n");
            let bytes = text.as_bytes();
            let whole = parse_all(&[bytes]);
            let split = parse_all(&split_at_points(bytes, points));
            prop_assert_eq!(&whole, &split);
            let one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
            prop_assert_eq!(&whole, &parse_all(&one_by_one));
        }
    }
}
