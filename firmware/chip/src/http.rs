//! The chip's HTTP/1.1 client side, as pure functions over bytes: the request head it writes,
//! the response head it reads (status, framing, a header's value) and a chunked body's decoder.
//! The firmware runs them over its TLS connection (`firmware/esp32/src/net.rs`); what comes
//! back is the server's (or whoever sits on the path before the TLS check's verdict is known),
//! so every length is bounded and malformed framing is an error, never a panic.

use alloc::format;
use alloc::string::String;

/// How a response's body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// After this many bytes (`Content-Length`; 0 for 1xx, 204 and 304).
    Length(u64),
    /// `Transfer-Encoding: chunked`: [`Chunked`] finds the end.
    Chunked,
    /// When the server closes the connection.
    ToEnd,
}

/// What is wrong with a response's framing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpError(pub &'static str);

impl core::fmt::Display for HttpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.0)
    }
}

/// The request head: method, path, `Host`, `Content-Length` (always sent, 0 for no body, as
/// before), then `headers`.
pub fn request_head(method: &str, host: &str, path: &str, headers: &[(&str, &str)], length: usize) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {length}\r\n");
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head
}

/// The length of the response head in `buf` (through its blank line), once it is all there.
pub fn head_len(buf: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    for (i, &b) in buf.iter().enumerate() {
        if b == b'\n' {
            let line = &buf[line_start..i];
            if line.is_empty() || line == b"\r" {
                return Some(i + 1);
            }
            line_start = i + 1;
        }
    }
    None
}

/// The lines of a head after its status line, each without its line end.
fn header_lines(head: &[u8]) -> impl Iterator<Item = &[u8]> {
    head.split(|&b| b == b'\n').skip(1).map(|l| l.strip_suffix(b"\r").unwrap_or(l)).take_while(|l| !l.is_empty())
}

/// The value of the first header `name` (any case) in `head`, trimmed; `None` if absent or not
/// UTF-8.
pub fn header<'a>(head: &'a [u8], name: &str) -> Option<&'a str> {
    header_lines(head).find_map(|line| {
        let colon = line.iter().position(|&b| b == b':')?;
        if !line[..colon].eq_ignore_ascii_case(name.as_bytes()) {
            return None;
        }
        core::str::from_utf8(&line[colon + 1..]).ok().map(str::trim)
    })
}

/// The status code and how the body ends, from a whole response head.
pub fn parse_head(head: &[u8]) -> Result<(u16, Framing), HttpError> {
    let status_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let status = match status_line.strip_prefix(b"HTTP/1.") {
        Some([b'0' | b'1', b' ', a, b, c, rest @ ..])
            if [a, b, c].iter().all(|d| d.is_ascii_digit()) && matches!(rest.first(), None | Some(b' ' | b'\r')) =>
        {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => return Err(HttpError("the answer is not an HTTP/1.x response")),
    };
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok((status, Framing::Length(0)));
    }
    // Chunked wins over a length (RFC 9112, 6.3).
    if header_lines(head).any(|l| {
        let colon = l.iter().position(|&b| b == b':').unwrap_or(l.len());
        l[..colon].eq_ignore_ascii_case(b"transfer-encoding")
            && l[colon..].windows(7).any(|w| w.eq_ignore_ascii_case(b"chunked"))
    }) {
        return Ok((status, Framing::Chunked));
    }
    match header(head, "content-length") {
        None => Ok((status, Framing::ToEnd)),
        Some(v) if !v.is_empty() && v.len() <= 12 && v.bytes().all(|b| b.is_ascii_digit()) => {
            Ok((status, Framing::Length(v.parse().unwrap_or(u64::MAX))))
        }
        Some(_) => Err(HttpError("the answer's Content-Length is not a number")),
    }
}

/// Longest chunk size line (digits and extensions) and trailer section taken.
const MAX_SIZE_LINE: u32 = 256;
const MAX_TRAILER: u32 = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In the size's hex digits (`digits` so far).
    Size {
        digits: u8,
    },
    /// After the digits: extensions or spaces up to the line's end.
    SizeRest,
    /// In a chunk's data.
    Data,
    /// After a chunk's data: its CRLF (`cr` seen).
    DataEnd {
        cr: bool,
    },
    /// In the trailer section (`empty`: at the start of a line).
    Trailer {
        empty: bool,
    },
    Done,
}

/// A chunked body's decoder: [`Chunked::next`] takes what arrived and gives the data in it.
#[derive(Clone, Debug)]
pub struct Chunked {
    state: State,
    /// The chunk size being read, then the data left in the chunk.
    left: u64,
    /// Bytes of the current size line or trailer section.
    taken: u32,
}

impl Default for Chunked {
    fn default() -> Self {
        Chunked::new()
    }
}

impl Chunked {
    pub fn new() -> Chunked {
        Chunked { state: State::Size { digits: 0 }, left: 0, taken: 0 }
    }

    /// Whether the last chunk and the trailer have been read.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes `input` up to the next data: `Some(data)` (a piece of the body, taken off
    /// `input`), or `None` once `input` is used up or the body is done.
    pub fn next<'a>(&mut self, input: &mut &'a [u8]) -> Result<Option<&'a [u8]>, HttpError> {
        while let Some((&b, rest)) = input.split_first() {
            if self.state == State::Data {
                let n = usize::try_from(self.left).unwrap_or(usize::MAX).min(input.len());
                let (data, rest) = input.split_at(n);
                *input = rest;
                self.left -= n as u64;
                if self.left == 0 {
                    self.state = State::DataEnd { cr: false };
                }
                return Ok(Some(data));
            }
            *input = rest;
            self.state = match self.state {
                State::Size { digits } => match (b as char).to_digit(16) {
                    Some(d) if digits < 15 => {
                        self.left = self.left * 16 + u64::from(d);
                        self.taken += 1;
                        State::Size { digits: digits + 1 }
                    }
                    Some(_) => return Err(HttpError("a chunk's size is too large")),
                    None if digits == 0 => return Err(HttpError("a chunk has no size")),
                    None if b == b'\n' => self.size_done(),
                    None if matches!(b, b'\r' | b';' | b' ' | b'\t') => State::SizeRest,
                    None => return Err(HttpError("a chunk's size is not hexadecimal")),
                },
                State::SizeRest if b == b'\n' => self.size_done(),
                State::SizeRest => {
                    self.taken += 1;
                    if self.taken > MAX_SIZE_LINE {
                        return Err(HttpError("a chunk's size line is too long"));
                    }
                    State::SizeRest
                }
                State::DataEnd { cr: false } if b == b'\r' => State::DataEnd { cr: true },
                State::DataEnd { .. } if b == b'\n' => {
                    self.taken = 0;
                    State::Size { digits: 0 }
                }
                State::DataEnd { .. } => return Err(HttpError("a chunk is longer than its size")),
                State::Trailer { empty } => {
                    self.taken += 1;
                    if self.taken > MAX_TRAILER {
                        return Err(HttpError("the chunked body's trailer is too long"));
                    }
                    match b {
                        b'\n' if empty => State::Done,
                        b'\n' => State::Trailer { empty: true },
                        b'\r' => State::Trailer { empty },
                        _ => State::Trailer { empty: false },
                    }
                }
                State::Data => unreachable!("data is taken above"),
                State::Done => {
                    // What follows the body is not ours to read.
                    *input = &[];
                    State::Done
                }
            };
            if self.state == State::Done {
                return Ok(None);
            }
        }
        Ok(None)
    }

    fn size_done(&mut self) -> State {
        self.taken = 0;
        if self.left == 0 { State::Trailer { empty: true } } else { State::Data }
    }
}
