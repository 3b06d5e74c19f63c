//! Markdown as models write it, rendered to Telegram's HTML subset.
//!
//! Not CommonMark: a line-based renderer for what replies contain. Blocks: ``` and ~~~ fences
//! (with a language), `#` headings (bold), `>` quotes, `-`/`*`/`+` list items (a bullet),
//! rules. Inline: `code`, **bold**/__bold__, *italic*/_italic_, ~~strike~~, [text](url) and
//! backslash escapes. Inline spans never cross a line, which keeps the work linear: each
//! line is cut into tokens once, and each delimiter's closer is found from a table built in
//! one backward pass (so a line of ten thousand unmatched `*` costs ten thousand steps, not
//! fifty million).
//!
//! Whatever the input, the output is valid for Telegram: every tag opened is closed in order,
//! `<`, `>` and `&` in text are escaped, and `"` too inside `href`. Syntax that does not match
//! stays as literal text.

use alloc::string::String;
use alloc::vec::Vec;

/// Renders `md` to Telegram HTML (for `parse_mode=HTML`).
pub fn markdown_to_html(md: &str) -> String {
    let mut out = String::with_capacity(md.len() + md.len() / 8);
    let lines: Vec<&str> = md.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let mut i = 0;
    while i < lines.len() {
        if i > 0 {
            out.push('\n');
        }
        let line = lines[i];
        if let Some((fence, lang)) = fence_open(line) {
            let mut end = i + 1;
            while end < lines.len() && !fence_closes(lines[end], fence) {
                end += 1;
            }
            write_pre(&lines[i + 1..end], lang, &mut out);
            // An unclosed fence runs to the end of the reply, as Markdown renderers do.
            i = (end + 1).min(lines.len());
            continue;
        }
        let blank_quote = |l: &&str| quoted(l).is_some_and(|r| r.trim().is_empty());
        if quoted(line).is_some() && !blank_quote(&line) {
            out.push_str("<blockquote>");
            let mut first = true;
            while let Some(rest) = lines.get(i).and_then(|l| quoted(l)) {
                if !first {
                    out.push('\n');
                }
                first = false;
                block_line(rest, &mut out);
                i += 1;
            }
            out.push_str("</blockquote>");
            continue;
        }
        block_line(line, &mut out);
        i += 1;
    }
    out
}

/// `<`, `>` and `&` as entities: all Telegram needs in text.
pub fn escape_into(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
}

/// As [`escape_into`], and `"` too: for an attribute value in double quotes.
fn escape_attr_into(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("&quot;"),
            c => escape_into(c.encode_utf8(&mut [0; 4]), out),
        }
    }
}

/// The fence (its character and length) and language of a line opening a code block.
fn fence_open(line: &str) -> Option<((u8, usize), &str)> {
    let t = line.trim_start();
    let c = *t.as_bytes().first()?;
    if c != b'`' && c != b'~' {
        return None;
    }
    let n = t.bytes().take_while(|&b| b == c).count();
    let info = t[n..].trim();
    // A backtick in the info string means an inline code span, not a fence.
    if n < 3 || (c == b'`' && info.contains('`')) {
        return None;
    }
    Some(((c, n), info.split_whitespace().next().unwrap_or("")))
}

fn fence_closes(line: &str, (c, n): (u8, usize)) -> bool {
    let t = line.trim();
    t.len() >= n && t.bytes().all(|b| b == c)
}

fn write_pre(body: &[&str], lang: &str, out: &mut String) {
    // An empty block would be an empty entity; its blank lines are kept as text.
    if body.iter().all(|l| l.trim().is_empty()) {
        out.push_str(&"\n".repeat(body.len().saturating_sub(1)));
        return;
    }
    // Only a plain language name goes into the attribute; anything else is dropped, not escaped,
    // since Telegram uses it for highlighting only.
    let named = !lang.is_empty() && lang.bytes().all(|b| b.is_ascii_alphanumeric() || b"+#._-".contains(&b));
    out.push_str("<pre>");
    if named {
        out.push_str("<code class=\"language-");
        out.push_str(lang);
        out.push_str("\">");
    }
    for (k, line) in body.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        escape_into(line, out);
    }
    if named {
        out.push_str("</code>");
    }
    out.push_str("</pre>");
}

/// The rest of a `>` quote line.
fn quoted(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('>')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// One line outside fences and quotes: a heading, a list item, a rule, or text.
fn block_line(line: &str, out: &mut String) {
    let t = line.trim_start();
    let hashes = t.bytes().take_while(|&b| b == b'#').count();
    if (1..=6).contains(&hashes) && (t.len() == hashes || t.as_bytes()[hashes] == b' ') {
        let title = t[hashes..].trim().trim_end_matches('#').trim_end();
        if !title.is_empty() {
            out.push_str("<b>");
            inline(title, out);
            out.push_str("</b>");
        }
        return;
    }
    let rule = |c: char| t.chars().filter(|&x| x == c).count() >= 3 && t.chars().all(|x| x == c || x == ' ');
    if rule('-') || rule('*') || rule('_') {
        out.push_str("———");
        return;
    }
    let indent = &line[..line.len() - t.len()];
    if let Some(item) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")).or_else(|| t.strip_prefix("+ ")) {
        out.push_str(indent);
        out.push_str("• ");
        inline(item, out);
        return;
    }
    inline(line, out);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Star2,
    Under2,
    Star1,
    Under1,
    Tilde2,
}

impl Kind {
    const ALL: usize = 5;

    fn index(self) -> usize {
        self as usize
    }

    fn tag(self) -> &'static str {
        match self {
            Kind::Star2 | Kind::Under2 => "b",
            Kind::Star1 | Kind::Under1 => "i",
            Kind::Tilde2 => "s",
        }
    }

    fn raw(self) -> &'static str {
        match self {
            Kind::Star2 => "**",
            Kind::Under2 => "__",
            Kind::Star1 => "*",
            Kind::Under1 => "_",
            Kind::Tilde2 => "~~",
        }
    }
}

enum Tok<'a> {
    Text(&'a str),
    Code(&'a str),
    Link { text: &'a str, url: &'a str },
    Delim { kind: Kind, open: bool, close: bool },
}

/// Renders one line's inline syntax.
fn inline(line: &str, out: &mut String) {
    let toks = tokens(line);
    // next_close[k]: the first token after k that can close k's kind (usize::MAX if none).
    let mut next_close = alloc::vec![usize::MAX; toks.len()];
    let mut last = [usize::MAX; Kind::ALL];
    for k in (0..toks.len()).rev() {
        if let Tok::Delim { kind, close, .. } = toks[k] {
            next_close[k] = last[kind.index()];
            if close {
                last[kind.index()] = k;
            }
        }
    }
    emit(&toks, &next_close, 0, toks.len(), out);
}

/// Writes `toks[lo..hi]`. A delimiter opens a span when its kind's next closer is inside the
/// range and something lies between; the span's inside is written recursively. A kind cannot
/// nest inside itself (its first closer ends the span), so the depth is at most [`Kind::ALL`].
fn emit(toks: &[Tok], next_close: &[usize], lo: usize, hi: usize, out: &mut String) {
    let mut k = lo;
    while k < hi {
        match toks[k] {
            Tok::Text(t) => escape_into(t, out),
            Tok::Code(c) => {
                out.push_str("<code>");
                escape_into(c, out);
                out.push_str("</code>");
            }
            Tok::Link { text, url } => {
                out.push_str("<a href=\"");
                escape_attr_into(url, out);
                out.push_str("\">");
                // The text holds no `]`, so no link nests inside it.
                inline(if text.trim().is_empty() { url } else { text }, out);
                out.push_str("</a>");
            }
            Tok::Delim { kind, open, .. } => {
                let m = next_close[k];
                if open && m < hi && m > k + 1 {
                    out.push('<');
                    out.push_str(kind.tag());
                    out.push('>');
                    emit(toks, next_close, k + 1, m, out);
                    out.push_str("</");
                    out.push_str(kind.tag());
                    out.push('>');
                    k = m + 1;
                    continue;
                }
                out.push_str(kind.raw());
            }
        }
        k += 1;
    }
}

/// Cuts a line into text, code spans, links and emphasis delimiters.
fn tokens<'a>(s: &'a str) -> Vec<Tok<'a>> {
    let b = s.as_bytes();
    let mut toks = Vec::new();
    let mut text_from = 0;
    let mut i = 0;
    // Backtick run lengths known to have no closing run after the current position (runs
    // longer than the table are always literal): a failed search is never repeated.
    let mut no_code_close = [false; 16];
    // The first `]` at or after the position, once found, and whether its `(url)` failed.
    let mut bracket: Option<(usize, bool)> = None;
    let flush = |toks: &mut Vec<Tok<'a>>, from: usize, to: usize| {
        if to > from {
            toks.push(Tok::Text(&s[from..to]));
        }
    };
    while i < b.len() {
        match b[i] {
            b'\\' if b.get(i + 1).is_some_and(u8::is_ascii_punctuation) => {
                flush(&mut toks, text_from, i);
                toks.push(Tok::Text(&s[i + 1..i + 2]));
                i += 2;
                text_from = i;
            }
            b'`' => {
                let n = run(b, i);
                let close = if n < no_code_close.len() && !no_code_close[n] { code_close(b, i + n, n) } else { None };
                match close {
                    Some(j) => {
                        flush(&mut toks, text_from, i);
                        toks.push(Tok::Code(&s[i + n..j]));
                        i = j + n;
                        text_from = i;
                    }
                    None => {
                        if n < no_code_close.len() {
                            no_code_close[n] = true;
                        }
                        i += n;
                    }
                }
            }
            c @ (b'*' | b'_' | b'~') => {
                let n = run(b, i);
                let prev = s[..i].chars().next_back();
                let next = s[i + n..].chars().next();
                let mut open = next.is_some_and(|c| !c.is_whitespace());
                let mut close = prev.is_some_and(|c| !c.is_whitespace());
                if c == b'_' {
                    // Inside a word (snake_case, __init__) an underscore is a letter.
                    open &= !prev.is_some_and(char::is_alphanumeric);
                    close &= !next.is_some_and(char::is_alphanumeric);
                }
                let (one, two) = match c {
                    b'*' => (Some(Kind::Star1), Kind::Star2),
                    b'_' => (Some(Kind::Under1), Kind::Under2),
                    _ => (None, Kind::Tilde2),
                };
                let kinds: &[Kind] = match (n, one) {
                    (1, Some(k)) => &[k],
                    (2, _) => &[two],
                    // `***x***`: bold outside, italic inside, so the closing run is reversed.
                    (3, Some(k)) if open && !close => &[two, k],
                    (3, Some(k)) if close && !open => &[k, two],
                    _ => &[],
                };
                if !kinds.is_empty() {
                    flush(&mut toks, text_from, i);
                    toks.extend(kinds.iter().map(|&kind| Tok::Delim { kind, open, close }));
                    text_from = i + n;
                }
                i += n;
            }
            b'[' => {
                if bracket.is_none_or(|(q, _)| q < i) {
                    // None found: no `[` from here on can start a link; remember that too.
                    bracket = Some(s[i..].find(']').map_or((usize::MAX, true), |q| (i + q, false)));
                }
                match bracket {
                    Some((q, false)) => match link_url(s, q) {
                        Some((url, end)) => {
                            flush(&mut toks, text_from, i);
                            toks.push(Tok::Link { text: &s[i + 1..q], url });
                            i = end;
                            text_from = i;
                        }
                        None => {
                            bracket = Some((q, true));
                            i += 1;
                        }
                    },
                    _ => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    flush(&mut toks, text_from, b.len());
    toks
}

/// Length of the run of `b[i]` starting at `i`.
fn run(b: &[u8], i: usize) -> usize {
    b[i..].iter().take_while(|&&x| x == b[i]).count()
}

/// Start of the next run of exactly `n` backticks at or after `from`.
fn code_close(b: &[u8], mut from: usize, n: usize) -> Option<usize> {
    while from < b.len() {
        if b[from] == b'`' {
            let m = run(b, from);
            if m == n {
                return Some(from);
            }
            from += m;
        } else {
            from += 1;
        }
    }
    None
}

/// After the `]` at `q`: `(url)` with a scheme Telegram links, and the index past `)`.
fn link_url(s: &str, q: usize) -> Option<(&str, usize)> {
    let rest = s[q + 1..].strip_prefix('(')?;
    let mut depth = 0usize;
    for (k, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                let url = &rest[..k];
                let linkable = ["http://", "https://", "tg://", "mailto:"]
                    .iter()
                    .any(|p| url.len() > p.len() && url.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p)));
                return linkable.then_some((url, q + 2 + k + 1));
            }
            ')' => depth -= 1,
            c if c.is_whitespace() => return None,
            _ => {}
        }
    }
    None
}
