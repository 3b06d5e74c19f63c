//! Finds the rules in `rules.json` without trusting the whole file to be valid JSON.
//!
//! A hand-edited file may hold one broken rule among good ones. Parsing the file whole would
//! lose every rule for one stray quote, so this scanner only follows the file's structure
//! (`{"rules": [ … ]}`: strings, brackets, commas), cuts out each element of the `rules` array
//! with the line it starts on, and leaves parsing each element to `serde_json`. Only a broken
//! structure (an unclosed bracket, a missing comma between rules) stops the scan; the rules
//! before the break are still returned.

use alloc::string::String;
use alloc::vec::Vec;

/// One element of the `rules` array: its text and the line (from 1) it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Element<'a> {
    pub(crate) text: &'a str,
    pub(crate) line: u32,
}

/// What the scan found: the elements, and complaints about the file's structure (with lines).
#[derive(Debug, Default)]
pub(crate) struct Scan<'a> {
    pub(crate) elements: Vec<Element<'a>>,
    pub(crate) problems: Vec<(u32, String)>,
}

struct Scanner<'a> {
    src: &'a str,
    pos: usize,
    line: u32,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn bump(&mut self) {
        if self.peek() == Some(b'\n') {
            self.line += 1;
        }
        self.pos += 1;
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.peek() {
            self.bump();
        }
    }

    /// Past a string whose opening quote is at `pos`; false if the file ends inside it.
    fn string(&mut self) -> bool {
        self.bump();
        while let Some(b) = self.peek() {
            self.bump();
            match b {
                b'"' => return true,
                b'\\' => {
                    if self.peek().is_none() {
                        return false;
                    }
                    self.bump();
                }
                _ => {}
            }
        }
        false
    }

    /// Past one value of any kind, up to the `,`, `]`, `}` or blank that ends it outside any
    /// bracket. Brackets are only counted (whether `{` closes with `}` is for the element's own
    /// parse to judge), so garbage such as `0[]` or `{}{}` stays one element. False if the file
    /// ends inside a string or a bracket.
    fn value(&mut self) -> bool {
        let mut depth = 0usize;
        loop {
            match self.peek() {
                None => return depth == 0,
                Some(b'"') => {
                    if !self.string() {
                        return false;
                    }
                }
                Some(b'{' | b'[') => {
                    depth += 1;
                    self.bump();
                }
                Some(b'}' | b']') => {
                    if depth == 0 {
                        return true;
                    }
                    depth -= 1;
                    self.bump();
                }
                Some(b',' | b' ' | b'\t' | b'\r' | b'\n') if depth == 0 => return true,
                Some(_) => self.bump(),
            }
        }
    }

    fn describe(&self) -> String {
        match self.src[self.pos..].chars().next() {
            None => "the end of the file".into(),
            Some(c) => alloc::format!("`{c}`"),
        }
    }
}

/// Scans `src`; at most `max_elements` elements are returned, the rest reported.
pub(crate) fn scan(src: &str, max_elements: usize) -> Scan<'_> {
    let mut s = Scanner { src, pos: 0, line: 1 };
    let mut out = Scan::default();
    // A byte-order mark from a Windows editor is not an error.
    if src.starts_with('\u{feff}') {
        s.pos = 3;
    }
    s.skip_ws();
    if s.peek() != Some(b'{') {
        let found = s.describe();
        out.problems.push((s.line, alloc::format!("expected `{{\"rules\": [ … ]}}`, found {found}")));
        return out;
    }
    s.bump();
    let mut saw_rules = false;
    loop {
        s.skip_ws();
        match s.peek() {
            Some(b'}') => break,
            Some(b'"') => {}
            _ => {
                let found = s.describe();
                out.problems.push((s.line, alloc::format!("expected a key or `}}` at the top level, found {found}")));
                return out;
            }
        }
        let (key_start, key_line) = (s.pos, s.line);
        if !s.string() {
            out.problems.push((key_line, "a string is never closed".into()));
            return out;
        }
        let key = &src[key_start + 1..s.pos - 1];
        s.skip_ws();
        if s.peek() != Some(b':') {
            let found = s.describe();
            out.problems.push((s.line, alloc::format!("expected `:` after the key `{key}`, found {found}")));
            return out;
        }
        s.bump();
        s.skip_ws();
        if key == "rules" && !saw_rules {
            saw_rules = true;
            if !elements(&mut s, &mut out, max_elements) {
                return out;
            }
        } else {
            let line = s.line;
            let what = if key == "rules" { "a second `rules` key is ignored" } else { "unknown top-level key ignored" };
            out.problems
                .push((line, alloc::format!("`{}`: {what}; only `rules` is read", crate::text::prefix(key, 64))));
            if !s.value() {
                out.problems.push((line, "the file ends inside this value".into()));
                return out;
            }
        }
        s.skip_ws();
        match s.peek() {
            Some(b',') => s.bump(),
            Some(b'}') => break,
            _ => {
                let found = s.describe();
                out.problems.push((s.line, alloc::format!("expected `,` or `}}` at the top level, found {found}")));
                return out;
            }
        }
    }
    s.bump();
    s.skip_ws();
    if s.peek().is_some() {
        out.problems.push((s.line, "text after the closing `}` is ignored".into()));
    }
    if !saw_rules {
        out.problems.push((1, "no `rules` array in the file".into()));
    }
    out
}

/// The `rules` array, with the scanner at its `[`. False when the structure broke.
fn elements<'a>(s: &mut Scanner<'a>, out: &mut Scan<'a>, max: usize) -> bool {
    if s.peek() != Some(b'[') {
        let found = s.describe();
        out.problems.push((s.line, alloc::format!("`rules` must be an array `[ … ]`, found {found}")));
        return false;
    }
    s.bump();
    let mut index = 0usize;
    loop {
        s.skip_ws();
        if s.peek() == Some(b']') {
            s.bump();
            return true;
        }
        let (start, line) = (s.pos, s.line);
        if !s.value() {
            out.problems.push((line, alloc::format!("rule {} never ends: the file ends inside it", index + 1)));
            return false;
        }
        let text = &s.src[start..s.pos];
        if text.is_empty() {
            let found = s.describe();
            out.problems.push((s.line, alloc::format!("expected a rule, found {found}")));
            return false;
        }
        if index < max {
            out.elements.push(Element { text, line });
        } else {
            out.problems.push((line, alloc::format!("rule {}: more than {max} rules; this one is ignored", index + 1)));
        }
        index += 1;
        s.skip_ws();
        match s.peek() {
            Some(b',') => s.bump(),
            Some(b']') => {
                s.bump();
                return true;
            }
            _ => {
                let found = s.describe();
                out.problems.push((
                    s.line,
                    alloc::format!("expected `,` or `]` after rule {} (line {line}), found {found}", index),
                ));
                return false;
            }
        }
    }
}
