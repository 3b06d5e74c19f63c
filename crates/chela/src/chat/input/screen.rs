//! Drawing the line being edited: bytes for the terminal from what is shown, with no IO.
//!
//! The prompt and the text are laid out in rows of the terminal's width; the text wraps (a wide
//! character that does not fit goes to the next row, as terminals do) and a newline (from a
//! paste) starts a row. Each drawing starts from the first row it drew last time ([`Drawn`]),
//! clears to the end of the screen and writes everything again: simple, and right after any
//! edit. Rows are ended with `\r\n` rather than left to the terminal's wrapping, so the layout
//! does not depend on how a terminal handles its last column. A text taller than the screen is
//! shown as a window of rows around the cursor; the finished line is drawn whole.
//!
//! Nothing of the text reaches the terminal as a control: `^X` stands for a control character
//! (as in shells), a tab is four spaces, so neither a paste nor a hand-edited history file can
//! move the cursor or send a sequence to the terminal.

use std::fmt::Write as _;

/// The terminal's size in character cells.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    pub cols: usize,
    pub rows: usize,
}

/// What to show: the prompt (ours: it may hold colour sequences and is written as it is), a label
/// after it (shown escaped, as the text is; the search shows its query there), and the text with
/// the cursor (a byte offset on a character boundary).
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    pub prompt: &'a str,
    pub label: &'a str,
    pub text: &'a str,
    pub cursor: usize,
}

/// Where the last drawing left the cursor: its row, counted from the first row drawn.
#[derive(Debug, Default)]
pub struct Drawn {
    cursor_row: usize,
}

impl Drawn {
    /// The screen was cleared and the cursor is at its top-left corner.
    pub fn cleared(&mut self) {
        self.cursor_row = 0;
    }
}

/// How wide the terminal shows `c`, in cells: 2 for East Asian wide and fullwidth characters
/// (and most emoji), 0 for combining marks and zero-width characters, 1 otherwise.
pub fn width(c: char) -> usize {
    let c = u32::from(c);
    if c < 0x300 {
        return 1;
    }
    if ZERO.iter().any(|&(lo, hi)| (lo..=hi).contains(&c)) {
        return 0;
    }
    if WIDE.iter().any(|&(lo, hi)| (lo..=hi).contains(&c)) {
        return 2;
    }
    1
}

/// Combining marks and zero-width characters (the common blocks).
const ZERO: &[(u32, u32)] = &[
    (0x0300, 0x036f),
    (0x0483, 0x0489),
    (0x0591, 0x05bd),
    (0x0610, 0x061a),
    (0x064b, 0x065f),
    (0x0e31, 0x0e31),
    (0x0e34, 0x0e3a),
    (0x0e47, 0x0e4e),
    (0x1ab0, 0x1aff),
    (0x1dc0, 0x1dff),
    (0x200b, 0x200f),
    (0x202a, 0x202e),
    (0x2060, 0x2064),
    (0x20d0, 0x20ff),
    (0xfe00, 0xfe0f),
    (0xfe20, 0xfe2f),
    (0xfeff, 0xfeff),
    (0xe0100, 0xe01ef),
];

/// East Asian wide and fullwidth ranges (Unicode's EastAsianWidth W and F, merged into blocks),
/// with the emoji blocks terminals draw two cells wide.
const WIDE: &[(u32, u32)] = &[
    (0x1100, 0x115f),
    (0x231a, 0x231b),
    (0x2329, 0x232a),
    (0x23e9, 0x23ec),
    (0x23f0, 0x23f0),
    (0x23f3, 0x23f3),
    (0x25fd, 0x25fe),
    (0x2614, 0x2615),
    (0x2648, 0x2653),
    (0x267f, 0x267f),
    (0x2693, 0x2693),
    (0x26a1, 0x26a1),
    (0x26aa, 0x26ab),
    (0x26bd, 0x26be),
    (0x26c4, 0x26c5),
    (0x26ce, 0x26ce),
    (0x26d4, 0x26d4),
    (0x26ea, 0x26ea),
    (0x26f2, 0x26f3),
    (0x26f5, 0x26f5),
    (0x26fa, 0x26fa),
    (0x26fd, 0x26fd),
    (0x2705, 0x2705),
    (0x270a, 0x270b),
    (0x2728, 0x2728),
    (0x274c, 0x274c),
    (0x274e, 0x274e),
    (0x2753, 0x2755),
    (0x2757, 0x2757),
    (0x2795, 0x2797),
    (0x27b0, 0x27b0),
    (0x27bf, 0x27bf),
    (0x2b1b, 0x2b1c),
    (0x2b50, 0x2b50),
    (0x2b55, 0x2b55),
    (0x2e80, 0x303e),
    (0x3041, 0x33ff),
    (0x3400, 0x4dbf),
    (0x4e00, 0x9fff),
    (0xa000, 0xa4cf),
    (0xa960, 0xa97f),
    (0xac00, 0xd7a3),
    (0xf900, 0xfaff),
    (0xfe10, 0xfe19),
    (0xfe30, 0xfe6f),
    (0xff00, 0xff60),
    (0xffe0, 0xffe6),
    (0x16fe0, 0x16fe4),
    (0x17000, 0x18cff),
    (0x1b000, 0x1b2ff),
    (0x1f004, 0x1f004),
    (0x1f0cf, 0x1f0cf),
    (0x1f18e, 0x1f18e),
    (0x1f191, 0x1f19a),
    (0x1f200, 0x1f251),
    (0x1f300, 0x1f320),
    (0x1f32d, 0x1f335),
    (0x1f337, 0x1f37c),
    (0x1f37e, 0x1f393),
    (0x1f3a0, 0x1f3ca),
    (0x1f3cf, 0x1f3d3),
    (0x1f3e0, 0x1f3f0),
    (0x1f3f4, 0x1f3f4),
    (0x1f3f8, 0x1f43e),
    (0x1f440, 0x1f440),
    (0x1f442, 0x1f4fc),
    (0x1f4ff, 0x1f53d),
    (0x1f54b, 0x1f54e),
    (0x1f550, 0x1f567),
    (0x1f57a, 0x1f57a),
    (0x1f595, 0x1f596),
    (0x1f5a4, 0x1f5a4),
    (0x1f5fb, 0x1f64f),
    (0x1f680, 0x1f6c5),
    (0x1f6cc, 0x1f6cc),
    (0x1f6d0, 0x1f6d2),
    (0x1f6d5, 0x1f6d7),
    (0x1f6dc, 0x1f6df),
    (0x1f6eb, 0x1f6ec),
    (0x1f6f4, 0x1f6fc),
    (0x1f7e0, 0x1f7eb),
    (0x1f7f0, 0x1f7f0),
    (0x1f90c, 0x1f93a),
    (0x1f93c, 0x1f945),
    (0x1f947, 0x1f9ff),
    (0x1fa70, 0x1faff),
    (0x20000, 0x2fffd),
    (0x30000, 0x3fffd),
];

/// How `c` is shown: what is written and how many cells it takes.
fn shown(c: char, buf: &mut [u8; 4]) -> (&str, usize) {
    match c {
        '\t' => ("    ", 4),
        // `^@`..`^_` and `^?`, as shells show them.
        '\0'..='\x1f' | '\x7f' => {
            buf[0] = b'^';
            buf[1] = (c as u8) ^ 0x40;
            (std::str::from_utf8(&buf[..2]).unwrap_or("^?"), 2)
        }
        // C1 controls: some terminals act on them.
        '\u{80}'..='\u{9f}' => ("\u{fffd}", 1),
        _ => {
            let w = width(c);
            (c.encode_utf8(buf), w)
        }
    }
}

/// The cells `s` takes on screen; `ESC [ ... final` sequences (colours) take none.
pub fn visible_width(s: &str) -> usize {
    let mut w = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('\x40'..='\x7e').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            w += shown(c, &mut [0; 4]).1;
        }
    }
    w
}

/// A position in the layout: row (from the prompt's first row) and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pos {
    row: usize,
    col: usize,
}

/// Lays out the label and the text after a prompt `prompt_width` wide, calling `each` with every
/// character, where it goes and how it is shown, and with `None` for the cursor's place.
fn lay_out(view: &View<'_>, prompt_width: usize, cols: usize, mut each: impl FnMut(Pos, Option<(&str, usize)>)) -> Pos {
    let mut at = Pos { row: prompt_width / cols, col: prompt_width % cols };
    let mut buf = [0; 4];
    let label = view.label.char_indices().map(|(_, c)| (None, c));
    let text = view.text.char_indices().map(|(i, c)| (Some(i), c));
    for (i, c) in label.chain(text) {
        if c == '\n' {
            if i == Some(view.cursor) {
                each(at, None);
            }
            at = Pos { row: at.row + 1, col: 0 };
            continue;
        }
        let (s, w) = shown(c, &mut buf);
        if at.col + w > cols {
            at = Pos { row: at.row + 1, col: 0 };
        }
        if i == Some(view.cursor) {
            each(at, None);
        }
        each(at, Some((s, w)));
        at.col += w;
        // A full row: what follows starts the next one.
        if at.col >= cols {
            at = Pos { row: at.row + 1, col: 0 };
        }
    }
    if view.cursor >= view.text.len() {
        each(at, None);
    }
    at
}

/// Appends to `out` what redraws `view` in place of the last drawing. `whole`: every row, even
/// past the screen's height (for the finished line, which stays on screen as it was sent).
pub fn draw(out: &mut Vec<u8>, view: &View<'_>, size: Size, drawn: &mut Drawn, whole: bool) {
    let cols = size.cols.max(8);
    let prompt_width = visible_width(view.prompt);
    let mut cursor = Pos { row: 0, col: 0 };
    let end = lay_out(view, prompt_width, cols, |at, c| {
        if c.is_none() {
            cursor = at;
        }
    });
    // The rows shown: all that fit, or a window that holds the cursor.
    let height = size.rows.max(1);
    let first = if whole || end.row < height { 0 } else { cursor.row.saturating_sub(height - 1) };
    let last = if whole { usize::MAX } else { first + height - 1 };

    if drawn.cursor_row > 0 {
        let _ = write!(Str(out), "\x1b[{}A", drawn.cursor_row);
    }
    out.extend_from_slice(b"\r\x1b[J");
    // The terminal's cursor row, counted from `first`.
    let mut row = 0;
    if first == 0 {
        out.extend_from_slice(view.prompt.as_bytes());
    }
    lay_out(view, prompt_width, cols, |at, c| {
        if let Some((s, _)) = c
            && (first..=last).contains(&at.row)
        {
            go_down_to(out, at.row - first, &mut row);
            out.extend_from_slice(s.as_bytes());
        }
    });
    // The rows the text ends with (after a newline or a full row) exist once drawn.
    go_down_to(out, end.row.min(last) - first, &mut row);
    out.push(b'\r');
    let cursor_row = cursor.row.clamp(first, last) - first;
    if row > cursor_row {
        let _ = write!(Str(out), "\x1b[{}A", row - cursor_row);
    }
    if cursor.col > 0 {
        let _ = write!(Str(out), "\x1b[{}C", cursor.col);
    }
    drawn.cursor_row = cursor_row;
}

/// Moves the terminal's cursor down to `target` (from `row`), making the rows as it goes.
fn go_down_to(out: &mut Vec<u8>, target: usize, row: &mut usize) {
    while *row < target {
        out.extend_from_slice(b"\r\n");
        *row += 1;
    }
}

/// `write!` into a byte buffer.
struct Str<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Str<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny terminal: enough of one to check what the drawing leaves on screen. It knows
    /// `\r`, `\n`, cursor up and right, clear to the end of the screen, wide characters and
    /// the last column's pending wrap.
    struct Term {
        cols: usize,
        cells: Vec<Vec<char>>,
        row: usize,
        col: usize,
    }

    impl Term {
        fn new(cols: usize) -> Term {
            Term { cols, cells: vec![vec![' '; cols]], row: 0, col: 0 }
        }

        fn feed(&mut self, bytes: &[u8]) {
            let s = std::str::from_utf8(bytes).unwrap();
            let mut chars = s.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\r' => self.col = 0,
                    '\n' => {
                        self.row += 1;
                        if self.row == self.cells.len() {
                            self.cells.push(vec![' '; self.cols]);
                        }
                    }
                    '\x1b' => {
                        assert_eq!(chars.next(), Some('['));
                        let mut n = String::new();
                        let fin = loop {
                            let c = chars.next().unwrap();
                            if c.is_ascii_digit() {
                                n.push(c);
                            } else {
                                break c;
                            }
                        };
                        let n: usize = n.parse().unwrap_or(1);
                        match fin {
                            'A' => self.row -= n,
                            'C' => self.col = (self.col + n).min(self.cols - 1),
                            'J' => {
                                self.cells[self.row][self.col..].fill(' ');
                                self.cells.truncate(self.row + 1);
                            }
                            other => panic!("unexpected sequence {other}"),
                        }
                    }
                    c => {
                        assert!(!c.is_control(), "a control reached the terminal: {c:?}");
                        let w = width(c);
                        if self.col + w > self.cols {
                            panic!("the drawing relied on the terminal's wrapping at {c:?}");
                        }
                        if w > 0 {
                            self.cells[self.row][self.col] = c;
                            if w == 2 {
                                self.cells[self.row][self.col + 1] = '\0';
                            }
                            self.col += w;
                        }
                    }
                }
            }
        }

        fn rows(&self) -> Vec<String> {
            self.cells
                .iter()
                .map(|r| r.iter().filter(|&&c| c != '\0').collect::<String>().trim_end().to_owned())
                .collect()
        }
    }

    fn show(term: &mut Term, drawn: &mut Drawn, text: &str, cursor: usize, rows: usize, whole: bool) {
        let mut out = Vec::new();
        let view = View { prompt: "\x1b[1m› \x1b[0m", label: "", text, cursor };
        draw(&mut out, &view, Size { cols: term.cols, rows }, drawn, whole);
        // The colour sequences are not this terminal's business.
        let out = String::from_utf8(out).unwrap().replace("\x1b[1m", "").replace("\x1b[0m", "");
        term.feed(out.as_bytes());
    }

    fn any_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        proptest::collection::vec(
            prop::sample::select(vec!['a', 'b', 'é', '中', '🦀', '\u{301}', '\n', '\x1b', '\x07', '\u{85}']),
            0..40,
        )
        .prop_map(|cs| cs.into_iter().collect())
    }

    proptest::proptest! {
        /// Any text, cursor and size: the drawing stays within its rows (never moves above where
        /// it began, never taller than the screen), sends no control, never leans on the
        /// terminal's wrapping, and redrawn whole
        /// leaves exactly the prompt and the text on screen, nothing of the drawings before.
        #[test]
        fn any_text_is_drawn_in_place(
            before in any_text(),
            text in any_text(),
            cut in 0usize..40,
            cols in 8usize..20,
            rows in 1usize..5,
        ) {
            let mut t = Term::new(cols);
            let mut d = Drawn::default();
            let at = |s: &str| s.char_indices().map(|(i, _)| i).chain([s.len()]).nth(cut).unwrap_or(s.len());
            show(&mut t, &mut d, &before, at(&before), rows, false);
            show(&mut t, &mut d, &text, at(&text), rows, false);
            proptest::prop_assert!(t.cells.len() <= rows, "the drawing is taller than the screen");
            show(&mut t, &mut d, &text, text.len(), rows, true);
            let mut expected = String::from("›");
            let mut buf = [0; 4];
            for c in text.chars().filter(|&c| c != '\n') {
                let (s, w) = shown(c, &mut buf);
                if w > 0 {
                    expected.push_str(s);
                }
            }
            let on_screen: String = t.rows().concat().chars().filter(|&c| c != ' ').collect();
            let expected: String = expected.chars().filter(|&c| c != ' ').collect();
            proptest::prop_assert_eq!(on_screen, expected);
        }
    }

    #[test]
    fn widths() {
        assert_eq!(width('a'), 1);
        assert_eq!(width('é'), 1);
        assert_eq!(width('\u{301}'), 0);
        assert_eq!(width('中'), 2);
        assert_eq!(width('한'), 2);
        assert_eq!(width('ｱ'), 1, "halfwidth katakana");
        assert_eq!(width('Ａ'), 2, "fullwidth latin");
        assert_eq!(width('🦀'), 2);
        assert_eq!(visible_width("\x1b[1m› \x1b[0m"), 2);
        assert_eq!(visible_width("a\x01"), 3);
    }

    #[test]
    fn a_short_line_and_its_cursor() {
        let mut t = Term::new(20);
        let mut d = Drawn::default();
        show(&mut t, &mut d, "hello", 2, 10, false);
        assert_eq!(t.rows(), ["› hello"]);
        assert_eq!((t.row, t.col), (0, 4));
        // Redrawn shorter: nothing of the old text stays.
        show(&mut t, &mut d, "he", 2, 10, false);
        assert_eq!(t.rows(), ["› he"]);
        assert_eq!((t.row, t.col), (0, 4));
    }

    #[test]
    fn long_lines_wrap_and_wide_characters_never_straddle_a_row() {
        let mut t = Term::new(10);
        let mut d = Drawn::default();
        let text = "abcdefgh中文字ok";
        show(&mut t, &mut d, text, text.len(), 10, false);
        // `› ` + 8 letters fill the first row; 中文字 take 6 cells, `ok` 2.
        assert_eq!(t.rows(), ["› abcdefgh", "中文字ok"]);
        assert_eq!((t.row, t.col), (1, 8));
        // One cell less: 中 does not fit in the last cell and goes to the next row.
        let text = "abcdefg中文字ok";
        show(&mut t, &mut d, text, text.find('中').unwrap(), 10, false);
        assert_eq!(t.rows(), ["› abcdefg", "中文字ok"]);
        assert_eq!((t.row, t.col), (1, 0), "the cursor on 中");
        // Exactly a full row with the cursor at its end: the cursor waits on the next row.
        show(&mut t, &mut d, "abcdefgh", 8, 10, false);
        assert_eq!(t.rows(), ["› abcdefgh", ""]);
        assert_eq!((t.row, t.col), (1, 0));
        // Back to one row from there: the drawing starts from the prompt's row.
        show(&mut t, &mut d, "x", 0, 10, false);
        assert_eq!(t.rows(), ["› x"]);
        assert_eq!((t.row, t.col), (0, 2));
    }

    #[test]
    fn newlines_start_rows_and_controls_are_shown_not_sent() {
        let mut t = Term::new(20);
        let mut d = Drawn::default();
        let text = "one\ntwo\x1b[2J\tend";
        show(&mut t, &mut d, text, 1, 10, false);
        assert_eq!(t.rows(), ["› one", "two^[[2J    end"]);
        assert_eq!((t.row, t.col), (0, 3));
    }

    #[test]
    fn a_text_taller_than_the_screen_shows_the_rows_around_the_cursor() {
        let mut t = Term::new(10);
        let mut d = Drawn::default();
        let text: String = (0..10).map(|i| format!("line {i}\n")).collect();
        show(&mut t, &mut d, &text, text.find("line 5").unwrap(), 3, false);
        assert_eq!(t.rows(), ["line 3", "line 4", "line 5"]);
        assert_eq!((t.row, t.col), (2, 0));
        show(&mut t, &mut d, &text, 0, 3, false);
        assert_eq!(t.rows(), ["› line 0", "line 1", "line 2"]);
        // The finished line is drawn whole, from the same place.
        show(&mut t, &mut d, &text, text.len(), 3, true);
        assert_eq!(t.rows().len(), 11);
        assert_eq!(t.rows()[0], "› line 0");
        assert_eq!(t.rows()[9], "line 9");
        assert_eq!((t.row, t.col), (10, 0));
    }
}
