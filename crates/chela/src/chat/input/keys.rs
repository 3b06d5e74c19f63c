//! The terminal's bytes as keys: a decoder with no IO.
//!
//! Feed it what a read of the terminal gave ([`Decoder::feed`]); it appends the keys those bytes
//! complete. A key may be split across reads (a UTF-8 character, an escape sequence): the rest
//! waits in the decoder. A lone Esc cannot be told from the start of a sequence until the input
//! pauses, so the driver calls [`Decoder::flush`] when [`Decoder::pending`] and nothing more came
//! for a moment.
//!
//! Unknown and malformed sequences are dropped whole (bounded: a sequence's parameters are not
//! kept), so they never show up as stray text. Between the bracketed-paste markers (`Esc [200~`
//! ... `Esc [201~`) everything is text: a newline is inserted, not sent, and `\r\n` is one newline.

/// What the editor is asked to do. Several keys map to one (Ctrl-B and Left are both [`Key::Left`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// Text to insert: typed or pasted characters (printable; a paste may hold `\n` and `\t`).
    Text(String),
    Enter,
    Left,
    Right,
    WordLeft,
    WordRight,
    Home,
    End,
    Up,
    Down,
    Backspace,
    Delete,
    /// Ctrl-K.
    KillToEnd,
    /// Ctrl-U.
    KillToStart,
    /// Ctrl-W: back to the previous blank.
    KillBlankWord,
    /// Alt-Backspace: back to the previous word's start.
    KillWordBack,
    /// Alt-D.
    KillWordForward,
    /// Ctrl-Y: the last killed text back.
    Yank,
    /// Ctrl-T.
    Transpose,
    /// Ctrl-L.
    ClearScreen,
    /// Ctrl-R.
    Search,
    /// Ctrl-G.
    Abort,
    /// A lone Esc.
    Escape,
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D.
    Eof,
    /// Ctrl-Z.
    Suspend,
}

/// The longest run of a sequence's parameter bytes that is looked at; longer ones are skipped
/// to their end and dropped.
const MAX_PARAMS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    /// After Esc.
    Esc,
    /// After `Esc [`: parameters until a final byte.
    Csi,
    /// A sequence with too many parameters: skipped to its final byte.
    CsiSkip,
    /// After `Esc O`: one final byte.
    Ss3,
}

/// Bytes to keys; see the module's doc for the calling order.
#[derive(Debug)]
pub struct Decoder {
    state: State,
    params: [u8; MAX_PARAMS],
    params_len: usize,
    /// A UTF-8 character so far, and how long it will be.
    utf8: [u8; 4],
    utf8_len: usize,
    utf8_need: usize,
    /// Inside a bracketed paste.
    paste: bool,
    /// The last byte was `\r`: a `\n` right after it is part of the same newline.
    after_cr: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            state: State::Ground,
            params: [0; MAX_PARAMS],
            params_len: 0,
            utf8: [0; 4],
            utf8_len: 0,
            utf8_need: 0,
            paste: false,
            after_cr: false,
        }
    }
}

impl Decoder {
    /// Decodes `bytes`, appending the keys they complete to `out`. Adjacent text is one [`Key::Text`].
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Key>) {
        for &b in bytes {
            self.byte(b, out);
        }
    }

    /// Whether a key has begun and not ended (an Esc, a sequence, part of a character).
    pub fn pending(&self) -> bool {
        self.state != State::Ground || self.utf8_len > 0
    }

    /// The input paused: a lone Esc is the Escape key; a partial sequence or character is dropped.
    pub fn flush(&mut self, out: &mut Vec<Key>) {
        if self.state == State::Esc && !self.paste {
            out.push(Key::Escape);
        }
        self.state = State::Ground;
        self.utf8_len = 0;
    }

    /// Leaves a bracketed paste whose end never came (a new line starts out of it).
    pub fn end_paste(&mut self) {
        self.paste = false;
    }

    fn byte(&mut self, b: u8, out: &mut Vec<Key>) {
        let after_cr = std::mem::replace(&mut self.after_cr, false);
        match self.state {
            State::Ground => self.ground(b, after_cr, out),
            State::Esc => {
                self.state = State::Ground;
                match b {
                    b'[' => {
                        self.state = State::Csi;
                        self.params_len = 0;
                    }
                    b'O' => self.state = State::Ss3,
                    // A second Esc: the first was the key itself.
                    0x1b => {
                        if !self.paste {
                            out.push(Key::Escape);
                        }
                        self.state = State::Esc;
                    }
                    _ if self.paste => {}
                    b'b' | b'B' => out.push(Key::WordLeft),
                    b'f' | b'F' => out.push(Key::WordRight),
                    b'd' | b'D' => out.push(Key::KillWordForward),
                    0x7f | 0x08 => out.push(Key::KillWordBack),
                    // Alt with another key is not bound. Not ASCII: Esc, then a typed character.
                    0x80.. => {
                        out.push(Key::Escape);
                        self.ground(b, false, out);
                    }
                    _ => {}
                }
            }
            State::Csi | State::CsiSkip => match b {
                0x20..=0x3f => {
                    if self.params_len < MAX_PARAMS {
                        self.params[self.params_len] = b;
                        self.params_len += 1;
                    } else {
                        self.state = State::CsiSkip;
                    }
                }
                0x40..=0x7e => {
                    if self.state == State::Csi {
                        self.csi(b, out);
                    }
                    self.state = State::Ground;
                }
                // Not part of a sequence: the sequence is dropped and the byte read anew.
                _ => {
                    self.state = State::Ground;
                    self.ground(b, false, out);
                }
            },
            State::Ss3 => {
                self.state = State::Ground;
                if let Some(key) = cursor_key(b, 1).filter(|_| !self.paste) {
                    out.push(key);
                } else if !(0x40..=0x7e).contains(&b) {
                    self.ground(b, false, out);
                }
            }
        }
    }

    fn ground(&mut self, b: u8, after_cr: bool, out: &mut Vec<Key>) {
        if self.utf8_len > 0 {
            if b & 0xc0 == 0x80 {
                self.utf8[self.utf8_len] = b;
                self.utf8_len += 1;
                if self.utf8_len == self.utf8_need {
                    // Overlong forms and surrogates are refused here.
                    if let Ok(s) = std::str::from_utf8(&self.utf8[..self.utf8_len]) {
                        push_text(out, s);
                    }
                    self.utf8_len = 0;
                }
                return;
            }
            // A character cut short: dropped, and this byte read on its own.
            self.utf8_len = 0;
        }
        match b {
            0x20..=0x7e => push_text(out, std::str::from_utf8(&[b]).unwrap_or_default()),
            0xc2..=0xf4 => {
                self.utf8[0] = b;
                self.utf8_len = 1;
                self.utf8_need = match b {
                    0xc2..=0xdf => 2,
                    0xe0..=0xef => 3,
                    _ => 4,
                };
            }
            0x1b => self.state = State::Esc,
            b'\r' | b'\n' if self.paste => {
                self.after_cr = b == b'\r';
                if !(b == b'\n' && after_cr) {
                    push_text(out, "\n");
                }
            }
            b'\t' if self.paste => push_text(out, "\t"),
            _ if self.paste => {}
            b'\r' | b'\n' => {
                self.after_cr = b == b'\r';
                if !(b == b'\n' && after_cr) {
                    out.push(Key::Enter);
                }
            }
            b'\t' => push_text(out, "\t"),
            _ => {
                if let Some(key) = control_key(b) {
                    out.push(key);
                }
            }
        }
    }

    /// A complete `Esc [ params final`.
    fn csi(&mut self, fin: u8, out: &mut Vec<Key>) {
        let params = &self.params[..self.params_len];
        let mut numbers = params.split(|&c| c == b';').map(|n| {
            n.iter().try_fold(0u32, |acc, &d| {
                d.is_ascii_digit().then(|| acc.saturating_mul(10).saturating_add(u32::from(d - b'0')))
            })
        });
        let first = numbers.next().flatten().unwrap_or(1);
        let modifier = numbers.next().flatten().unwrap_or(1);
        if fin == b'~' {
            match first {
                200 => self.paste = true,
                201 => self.paste = false,
                _ if self.paste => {}
                1 | 7 => out.push(Key::Home),
                4 | 8 => out.push(Key::End),
                3 => out.push(Key::Delete),
                _ => {}
            }
        } else if let Some(key) = cursor_key(fin, modifier).filter(|_| !self.paste) {
            out.push(key);
        }
    }
}

/// Appends `s` to the text at the end of `out`, or starts a new one.
fn push_text(out: &mut Vec<Key>, s: &str) {
    if let Some(Key::Text(t)) = out.last_mut() {
        t.push_str(s);
    } else {
        out.push(Key::Text(s.to_owned()));
    }
}

/// The arrows, Home and End (`Esc [ 1 ; m X` or `Esc O X`); with Alt (m = 3) or Ctrl (m = 5) the
/// side arrows move by words.
fn cursor_key(fin: u8, modifier: u32) -> Option<Key> {
    let word = matches!(modifier, 3 | 5);
    Some(match fin {
        b'A' => Key::Up,
        b'B' => Key::Down,
        b'C' if word => Key::WordRight,
        b'D' if word => Key::WordLeft,
        b'C' => Key::Right,
        b'D' => Key::Left,
        b'H' => Key::Home,
        b'F' => Key::End,
        _ => return None,
    })
}

/// The Ctrl keys bound to something; the others are ignored.
fn control_key(b: u8) -> Option<Key> {
    Some(match b {
        0x01 => Key::Home,
        0x02 => Key::Left,
        0x03 => Key::Interrupt,
        0x04 => Key::Eof,
        0x05 => Key::End,
        0x06 => Key::Right,
        0x07 => Key::Abort,
        0x08 | 0x7f => Key::Backspace,
        0x0b => Key::KillToEnd,
        0x0c => Key::ClearScreen,
        0x0e => Key::Down,
        0x10 => Key::Up,
        0x12 => Key::Search,
        0x14 => Key::Transpose,
        0x15 => Key::KillToStart,
        0x17 => Key::KillBlankWord,
        0x19 => Key::Yank,
        0x1a => Key::Suspend,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(chunks: &[&[u8]]) -> Vec<Key> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out);
        }
        out
    }

    fn text(s: &str) -> Key {
        Key::Text(s.to_owned())
    }

    #[test]
    fn control_keys_and_their_sequences() {
        use Key::*;
        let cases: &[(&[u8], Key)] = &[
            (b"\x01", Home),
            (b"\x05", End),
            (b"\x02", Left),
            (b"\x06", Right),
            (b"\x1b[D", Left),
            (b"\x1b[C", Right),
            (b"\x1bOD", Left),
            (b"\x1b[A", Up),
            (b"\x1bOB", Down),
            (b"\x10", Up),
            (b"\x0e", Down),
            (b"\x1b[H", Home),
            (b"\x1b[F", End),
            (b"\x1b[1~", Home),
            (b"\x1b[7~", Home),
            (b"\x1b[4~", End),
            (b"\x1b[8~", End),
            (b"\x1bOH", Home),
            (b"\x1b[3~", Delete),
            (b"\x1bb", WordLeft),
            (b"\x1bf", WordRight),
            (b"\x1b[1;5D", WordLeft),
            (b"\x1b[1;3C", WordRight),
            (b"\x1bd", KillWordForward),
            (b"\x1b\x7f", KillWordBack),
            (b"\x7f", Backspace),
            (b"\x08", Backspace),
            (b"\x0b", KillToEnd),
            (b"\x15", KillToStart),
            (b"\x17", KillBlankWord),
            (b"\x19", Yank),
            (b"\x14", Transpose),
            (b"\x0c", ClearScreen),
            (b"\x12", Search),
            (b"\x07", Abort),
            (b"\x03", Interrupt),
            (b"\x04", Eof),
            (b"\x1a", Suspend),
            (b"\r", Enter),
            (b"\n", Enter),
        ];
        for (bytes, key) in cases {
            assert_eq!(decode(&[bytes]), std::slice::from_ref(key), "{bytes:?}");
        }
    }

    #[test]
    fn text_is_gathered_and_characters_may_be_split_across_reads() {
        assert_eq!(decode(&[b"hi there"]), [text("hi there")]);
        let wide = "日本語 é 🦀".as_bytes();
        // Every split of the bytes gives the same text.
        for cut in 0..wide.len() {
            let keys = decode(&[&wide[..cut], &wide[cut..]]);
            let joined: String = keys
                .iter()
                .map(|k| match k {
                    Key::Text(t) => t.as_str(),
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(joined, "日本語 é 🦀", "cut at {cut}");
        }
    }

    #[test]
    fn a_newline_after_a_return_is_the_same_enter() {
        assert_eq!(decode(&[b"a\r\nb\n\n"]), [text("a"), Key::Enter, text("b"), Key::Enter, Key::Enter]);
        assert_eq!(decode(&[b"a\r", b"\nb"]), [text("a"), Key::Enter, text("b")]);
    }

    #[test]
    fn unknown_and_broken_sequences_leave_no_garbage() {
        // F1, F5, Insert, PgUp, a mouse report, Shift-Tab, Alt-x: nothing.
        assert_eq!(decode(&[b"\x1bOP\x1b[15~\x1b[2~\x1b[5~\x1b[<0;12;5M\x1b[Z\x1bx"]), []);
        // A sequence split across reads is still one key.
        assert_eq!(decode(&[b"\x1b", b"[", b"1;5", b"C"]), [Key::WordRight]);
        // Far too many parameters: skipped to the final byte, then typing goes on.
        let long = format!("\x1b[{}mok", "1;".repeat(100));
        assert_eq!(decode(&[long.as_bytes()]), [text("ok")]);
        // A control byte inside a sequence ends it and counts.
        assert_eq!(decode(&[b"\x1b[1\x03"]), [Key::Interrupt]);
        // Invalid UTF-8 is dropped; what follows is intact.
        assert_eq!(decode(&[b"\xff\xc3a\xed\xa0\x80b"]), [text("ab")]);
        // A lone Esc waits for more, and is Escape once the input pauses.
        let mut d = Decoder::default();
        let mut out = Vec::new();
        d.feed(b"\x1b", &mut out);
        assert!(out.is_empty() && d.pending());
        d.flush(&mut out);
        assert_eq!(out, [Key::Escape]);
        assert!(!d.pending());
        d.feed(b"[A", &mut out);
        assert_eq!(out, [Key::Escape, text("[A")], "after the pause the bytes are typed text");
    }

    #[test]
    fn a_bracketed_paste_is_text_with_its_newlines() {
        let keys = decode(&[b"\x1b[200~one\r\ntwo\tx\rthree\x03\x1b[A\x1b[201~\r"]);
        assert_eq!(keys, [text("one\ntwo\tx\nthree"), Key::Enter]);
        // The end marker split across reads.
        assert_eq!(decode(&[b"\x1b[200~a\n", b"\x1b[20", b"1~\n"]), [text("a\n"), Key::Enter]);
    }

    fn texts(keys: &[Key]) -> String {
        keys.iter().filter_map(|k| if let Key::Text(t) = k { Some(t.as_str()) } else { None }).collect()
    }

    /// Printable text: what a person types, any script.
    fn typed() -> impl Strategy<Value = String> {
        proptest::collection::vec(any::<char>().prop_filter("printable", |c| !c.is_control()), 0..40)
            .prop_map(|cs| cs.into_iter().collect())
    }

    proptest! {
        #[test]
        fn any_bytes_decode_without_panic_and_typed_text_survives_them(
            garbage in proptest::collection::vec(any::<u8>(), 0..200),
            cuts in proptest::collection::vec(0usize..300, 0..8),
            text in typed(),
        ) {
            let mut d = Decoder::default();
            let mut out = Vec::new();
            d.feed(&garbage, &mut out);
            // Whatever came before, once the input has paused the next typed text comes out whole,
            // however the reads split it.
            d.flush(&mut out);
            prop_assert!(!d.pending());
            let mut keys = Vec::new();
            let bytes = text.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut from = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                d.feed(&bytes[from..cut], &mut keys);
                from = cut;
            }
            prop_assert_eq!(texts(&keys), text.clone());
            prop_assert!(keys.iter().all(|k| matches!(k, Key::Text(_))), "{:?}", keys);
        }

        #[test]
        fn a_paste_gives_back_exactly_its_text(text in typed(), lines in proptest::collection::vec(typed(), 0..4)) {
            let mut pasted = text.clone();
            for l in &lines {
                pasted.push_str("\r\n");
                pasted.push_str(l);
            }
            let keys = decode(&[b"\x1b[200~", pasted.as_bytes(), b"\x1b[201~"]);
            prop_assert_eq!(texts(&keys), pasted.replace("\r\n", "\n"));
        }
    }
}
