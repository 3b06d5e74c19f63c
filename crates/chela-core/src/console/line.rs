//! Serial bytes into command lines, and a line into its words.
//!
//! A serial terminal sends what the person types, byte by byte: `\r`, `\n` or `\r\n` ends a
//! line, backspace (`0x08`, `0x7F`) takes back a character, Ctrl-C (`0x03`) drops the line.
//! Anything else below `0x20` (arrow keys' escapes, noise on the wire) makes the line garbage;
//! it is refused whole when it ends, as is a line longer than the bound. Nothing is echoed.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// The longest command line, in bytes: a 63-byte WiFi passphrase, a Telegram token or an API
/// key with their quotes fit many times over; `memory_write` text up to this bound.
pub const MAX_LINE: usize = 1024;

/// The most words in one line (a command and its arguments).
pub const MAX_ARGS: usize = 16;

/// Why a line was refused. The messages never quote the line: it may hold a secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineError {
    /// The line passed [`MAX_LINE`] bytes; the rest of it, up to its end, was dropped.
    TooLong { max: usize },
    /// The line held control bytes (other than tab and backspace).
    Control,
    /// The line is not UTF-8.
    NotText,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineError::TooLong { max } => write!(f, "line too long (at most {max} bytes); nothing was done"),
            LineError::Control => f.write_str("control characters in the line; nothing was done"),
            LineError::NotText => f.write_str("the line is not UTF-8 text; nothing was done"),
        }
    }
}

/// Gathers bytes into lines. Holds at most [`MAX_LINE`] bytes, whatever it is fed.
#[derive(Debug, Default)]
pub struct LineReader {
    buf: Vec<u8>,
    too_long: bool,
    control: bool,
    /// The last byte ended a line with `\r`: a `\n` right after it is the same end.
    after_cr: bool,
}

impl LineReader {
    pub fn new() -> LineReader {
        LineReader::default()
    }

    /// Takes `bytes`; hands each line that ends in them to `line`, in order. An empty line is
    /// not handed on (a bare Enter does nothing).
    pub fn feed(&mut self, bytes: &[u8], line: &mut dyn FnMut(Result<&str, LineError>)) {
        for &b in bytes {
            let after_cr = core::mem::replace(&mut self.after_cr, b == b'\r');
            match b {
                b'\n' if after_cr => {}
                b'\r' | b'\n' => self.end(line),
                0x08 | 0x7F => {
                    // Back one character: drop continuation bytes, then the lead byte.
                    while self.buf.pop().is_some_and(|c| c & 0xC0 == 0x80) {}
                }
                0x03 => self.clear(),
                b'\t' => self.push(b' '),
                0..0x20 => self.control = true,
                _ => self.push(b),
            }
        }
    }

    /// Bytes held for the line not yet ended.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    fn push(&mut self, b: u8) {
        if self.buf.len() < MAX_LINE {
            self.buf.push(b);
        } else {
            self.too_long = true;
        }
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.too_long = false;
        self.control = false;
    }

    fn end(&mut self, line: &mut dyn FnMut(Result<&str, LineError>)) {
        let result = if self.too_long {
            Err(LineError::TooLong { max: MAX_LINE })
        } else if self.control {
            Err(LineError::Control)
        } else {
            core::str::from_utf8(&self.buf).map_err(|_| LineError::NotText)
        };
        match result {
            Ok(text) if text.trim().is_empty() => {}
            r => line(r),
        }
        self.clear();
    }
}

/// Why a line could not be split into words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// A quote was opened and never closed.
    OpenQuote,
    /// More than [`MAX_ARGS`] words.
    TooMany { max: usize },
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::OpenQuote => f.write_str("a quote is not closed"),
            ArgError::TooMany { max } => write!(f, "too many words (at most {max})"),
        }
    }
}

/// Splits `line` into words at spaces. `"…"` and `'…'` keep spaces in a word (an SSID such as
/// `"My Home"`, an empty `""`); inside double quotes, and outside quotes, `\` takes the next
/// character as it is, and `\n` is a newline (for `memory_write`). Single quotes take
/// everything literally.
pub fn split_args(line: &str) -> Result<Vec<String>, ArgError> {
    let mut words = Vec::new();
    let mut word = String::new();
    // Whether a word is open: `""` is a word even though it is empty.
    let mut open = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if open {
                    push_word(&mut words, &mut word)?;
                    open = false;
                }
            }
            '\'' => {
                open = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(ArgError::OpenQuote),
                    }
                }
            }
            '"' => {
                open = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => word.push(unescape(chars.next().ok_or(ArgError::OpenQuote)?)),
                        Some(c) => word.push(c),
                        None => return Err(ArgError::OpenQuote),
                    }
                }
            }
            '\\' => {
                open = true;
                // A trailing backslash stands for itself.
                word.push(chars.next().map_or('\\', unescape));
            }
            c => {
                open = true;
                word.push(c);
            }
        }
    }
    if open {
        push_word(&mut words, &mut word)?;
    }
    Ok(words)
}

fn unescape(c: char) -> char {
    match c {
        'n' => '\n',
        't' => '\t',
        c => c,
    }
}

fn push_word(words: &mut Vec<String>, word: &mut String) -> Result<(), ArgError> {
    if words.len() == MAX_ARGS {
        return Err(ArgError::TooMany { max: MAX_ARGS });
    }
    words.push(core::mem::take(word));
    Ok(())
}

#[cfg(test)]
mod tests;
