//! The reader: one pass over the bytes, the tree built as it goes. Values nest by recursion,
//! each level counted against [`MAX_DEPTH`] before it is entered.
//!
//! The rules on which table may be added to where follow the `toml` crate this replaces (and
//! the spec's words it quotes): a `[header]` may define a table once, or define once a table
//! that a deeper header made on its way; dotted keys add only to tables that dotted keys made;
//! an inline table or an array written after `=` is closed.

use std::collections::BTreeMap;
use std::ops::Range;

use super::{Error, MAX_DEPTH, Table, Value};

type Result<T> = std::result::Result<T, Error>;

/// A table while the document is read, with what may still be added to it.
#[derive(Default)]
struct Tab {
    map: BTreeMap<String, Node>,
    /// Made on the way to a deeper header or by a dotted key, not by its own header.
    implicit: bool,
    /// Made by a dotted key: only dotted keys add to it.
    dotted: bool,
}

enum Node {
    /// A value written after `=`, closed: an inline table or array takes nothing more.
    Value(Value),
    Table(Tab),
    /// The tables of `[[name]]` headers; deeper headers and dotted keys go into the last.
    Tables(Vec<Tab>),
}

impl Tab {
    fn into_table(self) -> Table {
        let mut out = Table::new();
        for (k, node) in self.map {
            let v = match node {
                Node::Value(v) => v,
                Node::Table(t) => Value::Table(t.into_table()),
                Node::Tables(ts) => Value::Array(ts.into_iter().map(|t| Value::Table(t.into_table())).collect()),
            };
            out.insert(k, v);
        }
        out
    }
}

/// A key's parts, each with its span.
type Key = Vec<(String, Range<usize>)>;

pub(super) fn document(text: &str) -> Result<Table> {
    let mut r = Reader { text, pos: 0 };
    if text.starts_with('\u{feff}') {
        r.pos = 3;
    }
    let mut root = Tab::default();
    // The header path of the table that `key = value` lines go into.
    let mut current: Vec<String> = Vec::new();
    loop {
        r.skip_ws();
        match r.peek() {
            None => break,
            Some(b'#' | b'\r' | b'\n') => {}
            Some(b'[') => current = r.header(&mut root)?,
            Some(_) => {
                let at = r.pos;
                let key = r.key()?;
                r.skip_ws();
                r.expect(b'=', "expected `=` after the key")?;
                r.skip_ws();
                let value = r.value(current.len() + key.len())?;
                let table =
                    walk(&mut root, &current).ok_or_else(|| Error::new("this table cannot take keys", at..at))?;
                put(table, &key, value)?;
            }
        }
        r.end_of_line()?;
    }
    Ok(root.into_table())
}

/// The table at a header path that [`Reader::header`] has made.
fn walk<'t>(mut t: &'t mut Tab, path: &[String]) -> Option<&'t mut Tab> {
    for k in path {
        t = match t.map.get_mut(k)? {
            Node::Table(child) => child,
            Node::Tables(ts) => ts.last_mut()?,
            Node::Value(_) => return None,
        };
    }
    Some(t)
}

/// The table named `key` in `t`, made (implicit) if missing: one step of a header's path
/// (`dotted` false) or of a dotted key (`dotted` true).
fn descend<'t>(t: &'t mut Tab, key: &str, span: &Range<usize>, dotted: bool) -> Result<&'t mut Tab> {
    if !t.map.contains_key(key) {
        t.map.insert(key.to_owned(), Node::Table(Tab { implicit: true, dotted, ..Tab::default() }));
    }
    let refuse = |what: &str| Err(Error::new(what, span.clone()));
    match t.map.get_mut(key) {
        Some(Node::Table(child)) if dotted && !child.implicit => {
            refuse("duplicate key: dotted keys cannot add to a table that has its own [header]")
        }
        Some(Node::Table(child)) => Ok(child),
        Some(Node::Tables(ts)) => ts.last_mut().map_or_else(|| refuse("an empty array of tables"), Ok),
        Some(Node::Value(Value::Table(_))) => refuse("an inline table is closed: nothing can be added to it"),
        Some(Node::Value(Value::Array(_))) => refuse("an array written with `=` is closed: nothing can be added to it"),
        Some(Node::Value(_)) | None => refuse("duplicate key: this key already holds a value, not a table"),
    }
}

/// Sets `key = value` in `table` (the current table or an inline table being read).
fn put(table: &mut Tab, key: &Key, value: Value) -> Result<()> {
    let Some(((last, span), parents)) = key.split_last() else { return Ok(()) };
    let mut t = table;
    for (k, span) in parents {
        t = descend(t, k, span, true)?;
    }
    // Through a table that a header made (an array of tables' last one), dotted keys would
    // add to a table defined in [table] form.
    if t.dotted == parents.is_empty() {
        return Err(Error::new(
            "duplicate key: dotted keys cannot add to a table that has its own [header]",
            span.clone(),
        ));
    }
    if t.map.contains_key(last) {
        return Err(Error::new("duplicate key: this key is already set", span.clone()));
    }
    t.map.insert(last.clone(), Node::Value(value));
    Ok(())
}

struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

fn is_bare(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// A character TOML refuses raw in strings and comments: the C0 controls but tab, and DEL.
fn is_banned(c: char) -> bool {
    (c.is_ascii_control() && c != '\t') || c == '\u{7f}'
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn next_char(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// An error at the current position, spanning its character.
    fn error(&self, message: &str) -> Error {
        let len = self.next_char().map_or(0, char::len_utf8);
        Error::new(message, self.pos..self.pos + len)
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn expect(&mut self, c: u8, message: &str) -> Result<()> {
        if self.eat(c) { Ok(()) } else { Err(self.error(message)) }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// A newline (`\n` or `\r\n`), if one is here.
    fn eat_newline(&mut self) -> Result<bool> {
        match self.peek() {
            Some(b'\n') => self.pos += 1,
            Some(b'\r') if self.rest().starts_with("\r\n") => self.pos += 2,
            Some(b'\r') => return Err(self.error("a carriage return must be followed by a newline")),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A comment, if one is here, up to (not over) its newline.
    fn comment(&mut self) -> Result<()> {
        if self.peek() != Some(b'#') {
            return Ok(());
        }
        while let Some(c) = self.next_char() {
            if c == '\n' || self.rest().starts_with("\r\n") {
                break;
            }
            if is_banned(c) {
                return Err(self.error("a control character is not allowed in a comment"));
            }
            self.pos += c.len_utf8();
        }
        Ok(())
    }

    /// What may end a line: spaces, a comment, then a newline or the end.
    fn end_of_line(&mut self) -> Result<()> {
        self.skip_ws();
        self.comment()?;
        if self.peek().is_none() || self.eat_newline()? {
            return Ok(());
        }
        Err(self.error("expected the end of the line (or a `#` comment) here"))
    }

    /// Spaces, newlines and comments, as they may come between the items of an array or an
    /// inline table.
    fn skip_blank(&mut self) -> Result<()> {
        loop {
            self.skip_ws();
            self.comment()?;
            if !self.eat_newline()? {
                return Ok(());
            }
        }
    }

    /// `[a.b]` or `[[a.b]]`: makes or defines the table, returns its path.
    fn header(&mut self, root: &mut Tab) -> Result<Vec<String>> {
        let open = self.pos;
        self.pos += 1;
        let array = self.eat(b'[');
        let key = self.key()?;
        self.skip_ws();
        self.expect(b']', "expected `]` to close the table header")?;
        if array {
            self.expect(b']', "expected `]]` to close the array-of-tables header")?;
        }
        if key.len() > MAX_DEPTH {
            return Err(Error::new(format!("tables are nested deeper than {MAX_DEPTH} levels"), open..self.pos));
        }
        let Some(((last, span), parents)) = key.split_last() else {
            return Err(Error::new("a header needs a name", open..self.pos));
        };
        let mut t = root;
        for (k, span) in parents {
            t = descend(t, k, span, false)?;
        }
        let refuse = |what: &str| Err(Error::new(what, span.clone()));
        match t.map.get_mut(last) {
            None if array => {
                t.map.insert(last.clone(), Node::Tables(vec![Tab::default()]));
            }
            None => {
                t.map.insert(last.clone(), Node::Table(Tab::default()));
            }
            Some(Node::Tables(ts)) if array => ts.push(Tab::default()),
            Some(_) if array => return refuse("duplicate key: `[[…]]` names a key that holds a table or value"),
            Some(Node::Table(t)) if t.implicit && !t.dotted => t.implicit = false,
            Some(Node::Table(t)) if t.dotted => {
                return refuse("duplicate key: this table is already defined by dotted keys");
            }
            Some(_) => return refuse("duplicate key: this table is already defined"),
        }
        Ok(key.into_iter().map(|(k, _)| k).collect())
    }

    /// A bare, quoted or dotted key.
    fn key(&mut self) -> Result<Key> {
        let mut parts = Vec::new();
        loop {
            self.skip_ws();
            let start = self.pos;
            let part = match self.peek() {
                Some(b'"') if self.rest().starts_with("\"\"\"") => {
                    return Err(self.error("a key cannot be a multi-line string"));
                }
                Some(b'\'') if self.rest().starts_with("'''") => {
                    return Err(self.error("a key cannot be a multi-line string"));
                }
                Some(b'"') => self.basic()?,
                Some(b'\'') => self.literal()?,
                Some(c) if is_bare(c) => {
                    while self.peek().is_some_and(is_bare) {
                        self.pos += 1;
                    }
                    self.text[start..self.pos].to_owned()
                }
                _ => return Err(self.error("expected a key (letters, digits, `_`, `-`, or a quoted string)")),
            };
            parts.push((part, start..self.pos));
            if parts.len() > MAX_DEPTH {
                return Err(Error::new(format!("a key has more than {MAX_DEPTH} parts"), start..self.pos));
            }
            self.skip_ws();
            if !self.eat(b'.') {
                return Ok(parts);
            }
        }
    }

    /// A value `depth` levels down.
    fn value(&mut self, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return Err(self.error(&format!("values are nested deeper than {MAX_DEPTH} levels")));
        }
        let rest = self.rest();
        Ok(match self.peek() {
            Some(b'"') if rest.starts_with("\"\"\"") => Value::String(self.multi_line(b'"')?),
            Some(b'\'') if rest.starts_with("'''") => Value::String(self.multi_line(b'\'')?),
            Some(b'"') => Value::String(self.basic()?),
            Some(b'\'') => Value::String(self.literal()?),
            Some(b'[') => self.array(depth)?,
            Some(b'{') => self.inline_table(depth)?,
            Some(b't') if rest.starts_with("true") => {
                self.pos += 4;
                Value::Boolean(true)
            }
            Some(b'f') if rest.starts_with("false") => {
                self.pos += 5;
                Value::Boolean(false)
            }
            _ => self.scalar()?,
        })
    }

    fn array(&mut self, depth: usize) -> Result<Value> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_blank()?;
            if self.eat(b']') {
                return Ok(Value::Array(items));
            }
            items.push(self.value(depth + 1)?);
            self.skip_blank()?;
            if self.eat(b']') {
                return Ok(Value::Array(items));
            }
            self.expect(b',', "expected `,` or `]` after an array item")?;
        }
    }

    /// `{ k = v, … }`, with newlines, comments and a trailing comma allowed (TOML 1.1).
    fn inline_table(&mut self, depth: usize) -> Result<Value> {
        self.pos += 1;
        let mut table = Tab::default();
        loop {
            self.skip_blank()?;
            if self.eat(b'}') {
                return Ok(Value::Table(table.into_table()));
            }
            let key = self.key()?;
            self.skip_ws();
            self.expect(b'=', "expected `=` after the key")?;
            self.skip_ws();
            let value = self.value(depth + key.len())?;
            put(&mut table, &key, value)?;
            self.skip_blank()?;
            if self.eat(b'}') {
                return Ok(Value::Table(table.into_table()));
            }
            self.expect(b',', "expected `,` or `}` after a value in an inline table")?;
        }
    }

    /// `"…"`: one line, with escapes.
    fn basic(&mut self) -> Result<String> {
        let open = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.next_char() {
                None | Some('\n' | '\r') => {
                    return Err(Error::new("this string is not closed on its line", open..self.pos));
                }
                Some('"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some('\\') => out.push(self.escape()?),
                Some(c) if is_banned(c) => return Err(self.error("a control character must be written as an escape")),
                Some(c) => {
                    out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    /// `'…'`: one line, as written.
    fn literal(&mut self) -> Result<String> {
        let open = self.pos;
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.next_char() {
                None | Some('\n' | '\r') => {
                    return Err(Error::new("this string is not closed on its line", open..self.pos));
                }
                Some('\'') => {
                    self.pos += 1;
                    return Ok(self.text[start..self.pos - 1].to_owned());
                }
                Some(c) if is_banned(c) => {
                    return Err(self.error("a control character is not allowed in a literal string"));
                }
                Some(c) => self.pos += c.len_utf8(),
            }
        }
    }

    /// `"""…"""` (escapes, line-ending backslash) or `'''…'''` (as written).
    fn multi_line(&mut self, quote: u8) -> Result<String> {
        let open = self.pos;
        self.pos += 3;
        // A newline right after the opening quotes is not part of the string.
        self.eat_newline()?;
        let mut out = String::new();
        loop {
            let Some(c) = self.next_char() else {
                return Err(Error::new("this multi-line string is never closed", open..open + 3));
            };
            if c as u32 == u32::from(quote) {
                let run = self.rest().bytes().take_while(|&b| b == quote).count();
                if run >= 3 {
                    // Up to two quotes may sit right before the closing three.
                    if run > 5 {
                        return Err(Error::new(
                            "too many quotes: at most two may come before the closing three",
                            self.pos + 5..self.pos + run,
                        ));
                    }
                    out.extend(std::iter::repeat_n(char::from(quote), run - 3));
                    self.pos += run;
                    return Ok(out);
                }
                out.extend(std::iter::repeat_n(char::from(quote), run));
                self.pos += run;
                continue;
            }
            match c {
                '\\' if quote == b'"' => {
                    let after = self.rest()[1..].trim_start_matches([' ', '\t']);
                    if after.starts_with('\n') || after.starts_with("\r\n") {
                        // A line-ending backslash: it, the newline and the blanks after go.
                        self.pos += 1;
                        self.skip_ws();
                        while self.eat_newline()? {
                            self.skip_ws();
                        }
                    } else {
                        out.push(self.escape()?);
                    }
                }
                '\n' => {
                    out.push('\n');
                    self.pos += 1;
                }
                '\r' => {
                    if !self.eat_newline()? {
                        return Err(self.error("a carriage return must be followed by a newline"));
                    }
                    out.push_str("\r\n");
                }
                c if is_banned(c) => return Err(self.error("a control character must be written as an escape")),
                c => {
                    out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    /// The escape at `\`.
    fn escape(&mut self) -> Result<char> {
        let at = self.pos;
        self.pos += 1;
        let c = match self.peek() {
            Some(b'b') => '\u{8}',
            Some(b't') => '\t',
            Some(b'n') => '\n',
            Some(b'f') => '\u{c}',
            Some(b'r') => '\r',
            Some(b'e') => '\u{1b}',
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b @ (b'x' | b'u' | b'U')) => {
                let digits = match b {
                    b'x' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                let hex = self
                    .text
                    .get(self.pos + 1..self.pos + 1 + digits)
                    .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
                let c = hex.and_then(|h| u32::from_str_radix(h, 16).ok()).and_then(char::from_u32);
                let Some(c) = c else {
                    return Err(Error::new(
                        "an escape names no Unicode scalar value",
                        at..(self.pos + 1 + digits).min(self.text.len()),
                    ));
                };
                self.pos += digits;
                c
            }
            _ => return Err(Error::new("unknown escape: use \\\\ for a backslash", at..self.pos)),
        };
        self.pos += 1;
        Ok(c)
    }

    /// A number, a date or a time.
    fn scalar(&mut self) -> Result<Value> {
        let start = self.pos;
        let token = |r: &mut Self| {
            while r.peek().is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'+' | b'-' | b'.' | b':')) {
                r.pos += 1;
            }
        };
        token(self);
        let b = self.text.as_bytes();
        let is_date =
            self.pos - start >= 10 && b[start..start + 4].iter().all(u8::is_ascii_digit) && b[start + 4] == b'-';
        // A date, a space, a time: one value.
        if is_date
            && self.pos - start == 10
            && b.get(self.pos) == Some(&b' ')
            && b.get(self.pos + 1..self.pos + 3).is_some_and(|d| d.iter().all(u8::is_ascii_digit))
            && b.get(self.pos + 3) == Some(&b':')
        {
            self.pos += 1;
            token(self);
        }
        let text = &self.text[start..self.pos];
        let span = start..self.pos.max(start + 1).min(self.text.len());
        if text.is_empty() {
            return Err(Error::new("expected a value: a string, number, boolean, date, array or inline table", span));
        }
        let value = if is_date || text.contains(':') { datetime(text).map(Value::Datetime) } else { number(text) };
        value.ok_or_else(|| Error::new("this is not a valid value (number, date or time)", span))
    }
}

/// Decimal digits, each `_` between two of them.
fn digits(s: &str, radix: u32) -> Option<String> {
    let ok = !s.is_empty()
        && !s.starts_with('_')
        && !s.ends_with('_')
        && !s.contains("__")
        && s.chars().all(|c| c == '_' || c.is_digit(radix));
    ok.then(|| s.replace('_', ""))
}

fn number(text: &str) -> Option<Value> {
    let (sign, body) = match text.as_bytes().first() {
        Some(b'+' | b'-') => (&text[..1], &text[1..]),
        _ => ("", text),
    };
    match body {
        "inf" => return Some(Value::Float(if sign == "-" { f64::NEG_INFINITY } else { f64::INFINITY })),
        "nan" => return Some(Value::Float(if sign == "-" { -f64::NAN } else { f64::NAN })),
        _ => {}
    }
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(d) = body.strip_prefix(prefix) {
            // No sign on these.
            let d = digits(d, radix).filter(|_| sign.is_empty())?;
            return i64::from_str_radix(&d, radix).ok().map(Value::Integer);
        }
    }
    // The integer part: no leading zero.
    let int_end = body.find(['.', 'e', 'E']).unwrap_or(body.len());
    let int = digits(&body[..int_end], 10)?;
    if int.len() > 1 && int.starts_with('0') {
        return None;
    }
    if int_end == body.len() {
        return format!("{sign}{int}").parse().ok().map(Value::Integer);
    }
    let mut rest = &body[int_end..];
    let mut clean = format!("{sign}{int}");
    if let Some(r) = rest.strip_prefix('.') {
        let end = r.find(['e', 'E']).unwrap_or(r.len());
        clean.push('.');
        clean.push_str(&digits(&r[..end], 10)?);
        rest = &r[end..];
    }
    if let Some(r) = rest.strip_prefix(['e', 'E']) {
        let (esign, e) = match r.as_bytes().first() {
            Some(b'+' | b'-') => (&r[..1], &r[1..]),
            _ => ("", r),
        };
        clean.push('e');
        clean.push_str(esign);
        clean.push_str(&digits(e, 10)?);
        rest = "";
    }
    if !rest.is_empty() {
        return None;
    }
    // A number too large for an f64 is refused, not read as `inf`.
    clean.parse().ok().filter(|f: &f64| f.is_finite()).map(Value::Float)
}

/// `n` ASCII digits at `at` in `b`, as a number.
fn num(b: &[u8], at: usize, n: usize) -> Option<u32> {
    let d = b.get(at..at + n)?;
    d.iter().all(u8::is_ascii_digit).then(|| d.iter().fold(0, |v, c| v * 10 + u32::from(c - b'0')))
}

/// A date-time, date or time in its normal text form, if `text` is one.
fn datetime(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let dated = b.len() >= 10 && b[4] == b'-';
    if dated {
        let (year, month, day) = (num(b, 0, 4)?, num(b, 5, 2)?, num(b, 8, 2)?);
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        let days = match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            1..=12 => 31,
            _ => return None,
        };
        if b[7] != b'-' || day < 1 || day > days {
            return None;
        }
        out.push_str(&text[..10]);
        i = 10;
        if i == b.len() {
            return Some(out);
        }
        if !matches!(b[i], b'T' | b't' | b' ') {
            return None;
        }
        out.push('T');
        i += 1;
    }
    let (hour, minute) = (num(b, i, 2)?, num(b, i + 3, 2)?);
    if b[i + 2] != b':' || hour > 23 || minute > 59 {
        return None;
    }
    out.push_str(&text[i..i + 5]);
    i += 5;
    // Seconds may be left out (TOML 1.1): they are zero.
    if b.get(i) == Some(&b':') {
        if num(b, i + 1, 2)? > 60 {
            return None;
        }
        out.push_str(&text[i..i + 3]);
        i += 3;
        if b.get(i) == Some(&b'.') {
            let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            // Nanoseconds, as the `toml` crate kept them: more digits are cut, trailing zeros go.
            let frac = text[i + 1..i + 1 + n.min(9)].trim_end_matches('0');
            if !frac.is_empty() {
                out.push('.');
                out.push_str(frac);
            }
            i += 1 + n;
        }
    } else {
        out.push_str(":00");
    }
    if dated {
        match b.get(i) {
            Some(b'Z' | b'z') => {
                out.push('Z');
                i += 1;
            }
            Some(b'+' | b'-') => {
                let (h, m) = (num(b, i + 1, 2)?, num(b, i + 4, 2)?);
                if b.get(i + 3) != Some(&b':') || h > 23 || m > 59 {
                    return None;
                }
                let sign = if h == 0 && m == 0 { "+" } else { &text[i..=i] };
                out.push_str(&format!("{sign}{h:02}:{m:02}"));
                i += 6;
            }
            _ => {}
        }
    }
    (i == b.len()).then_some(out)
}
