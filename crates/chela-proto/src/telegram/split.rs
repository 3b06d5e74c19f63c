//! Splitting Telegram HTML into messages Telegram accepts.
//!
//! Telegram limits a message to 4096 characters *after entity parsing*, counted in UTF-16 code
//! units: tags count nothing, `&lt;` counts one. [`split_html`] counts the same way and cuts on
//! the last paragraph break, else line break, else space, else character boundary that fits
//! (a break found in the first half of the budget is passed over for a finer one further on,
//! so a short first paragraph does not become a message of its own). A cut never falls inside
//! a tag, an entity or a surrogate pair: those are atoms. The tags open at a cut are closed at
//! the end of the chunk and opened again, attributes and all, at the start of the next, so
//! every chunk is valid HTML by itself.
//!
//! Every character of the input is in exactly one chunk: the break characters stay at the end
//! of the chunk before the cut (Telegram trims them when it shows the message).

use alloc::string::String;
use alloc::vec::Vec;

use super::markdown::escape_into;

/// Telegram's limit on a message's text, in UTF-16 code units.
pub const MAX_MESSAGE_UNITS: usize = 4096;

#[derive(Clone, Copy)]
enum Atom {
    /// An opening tag; the name is `html[name.0..name.1]`.
    Open(usize, usize),
    /// A closing tag.
    Close(usize, usize),
    /// One character of text, written as itself or as an entity.
    Char { units: usize, ch: char },
}

/// The atoms of `html` with their byte ranges.
fn atoms(html: &str) -> Vec<(usize, usize, Atom)> {
    let b = html.as_bytes();
    let mut out = Vec::with_capacity(html.len());
    let mut i = 0;
    while i < b.len() {
        let c = html[i..].chars().next().unwrap_or('\0');
        let tag = (c == '<').then(|| html[i..].find('>')).flatten();
        // An `&` that starts no known entity is text (only in input this module did not write).
        let entity = (c == '&')
            .then(|| html[i..].find(';').filter(|&n| n <= 10 && decode_entity(&html[i + 1..i + n]).is_some()))
            .flatten();
        if let Some(n) = tag {
            let inner = &html[i + 1..i + n];
            let (closing, name) = match inner.strip_prefix('/') {
                Some(rest) => (true, rest.trim()),
                None => (false, inner.split(|c: char| c.is_whitespace()).next().unwrap_or("")),
            };
            let start = name.as_ptr() as usize - html.as_ptr() as usize;
            let name = (start, start + name.len());
            out.push((i, i + n + 1, if closing { Atom::Close(name.0, name.1) } else { Atom::Open(name.0, name.1) }));
            i += n + 1;
        } else if let Some(n) = entity {
            let ch = decode_entity(&html[i + 1..i + n]).unwrap_or('&');
            out.push((i, i + n + 1, Atom::Char { units: ch.len_utf16(), ch }));
            i += n + 1;
        } else {
            out.push((i, i + c.len_utf8(), Atom::Char { units: c.len_utf16(), ch: c }));
            i += c.len_utf8();
        }
    }
    out
}

fn decode_entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "quot" => Some('"'),
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}

/// Splits Telegram HTML (valid, as [`super::markdown_to_html`] writes it) into chunks of at
/// most `limit` UTF-16 units of text each (a `limit` under 2 is taken as 2, the width of one
/// character outside the Basic Multilingual Plane).
pub fn split_html(html: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(2);
    let atoms = atoms(html);
    let mut chunks = Vec::new();
    // The opening tags in force at `pos`, as indices into `atoms`.
    let mut open: Vec<usize> = Vec::new();
    let mut pos = 0;
    while pos < atoms.len() {
        let mut cut = cut_point(&atoms, pos, limit);
        // Keep a tag's end with its text, and a tag's start with its text.
        while cut < atoms.len() && matches!(atoms[cut].2, Atom::Close(..)) {
            cut += 1;
        }
        while cut > pos + 1 && matches!(atoms[cut - 1].2, Atom::Open(..)) {
            cut -= 1;
        }
        let mut chunk = String::new();
        for &k in &open {
            chunk.push_str(&html[atoms[k].0..atoms[k].1]);
        }
        chunk.push_str(&html[atoms[pos].0..atoms[cut - 1].1]);
        for k in pos..cut {
            match atoms[k].2 {
                Atom::Open(..) => open.push(k),
                Atom::Close(s, e) => {
                    let name = &html[s..e];
                    if let Some(at) =
                        open.iter().rposition(|&o| matches!(atoms[o].2, Atom::Open(s, e) if &html[s..e] == name))
                    {
                        open.truncate(at);
                    }
                }
                Atom::Char { .. } => {}
            }
        }
        for &k in open.iter().rev() {
            if let Atom::Open(s, e) = atoms[k].2 {
                chunk.push_str("</");
                chunk.push_str(&html[s..e]);
                chunk.push('>');
            }
        }
        // A chunk of tags alone (an empty `<pre></pre>`) would be an empty message: Telegram
        // refuses those, and it carries no text.
        if atoms[pos..cut].iter().any(|a| matches!(a.2, Atom::Char { .. })) {
            chunks.push(chunk);
        }
        pos = cut;
    }
    chunks
}

/// Where the chunk starting at `pos` ends (exclusive atom index).
fn cut_point(atoms: &[(usize, usize, Atom)], pos: usize, limit: usize) -> usize {
    // The last cut after a paragraph break, a line break, a space; with the units before it.
    let mut best: [Option<(usize, usize)>; 3] = [None; 3];
    let mut units = 0;
    let mut prev = '\0';
    for (j, atom) in atoms.iter().enumerate().skip(pos) {
        let Atom::Char { units: u, ch } = atom.2 else { continue };
        if units + u > limit {
            let late = best.iter().flatten().find(|&&(_, at)| at >= limit / 2);
            // Any break at all beats cutting a word in two.
            let any = best.iter().flatten().max_by_key(|&&(cut, _)| cut);
            return late.or(any).map_or(j, |&(cut, _)| cut);
        }
        units += u;
        let class = match ch {
            '\n' if prev == '\n' => Some(0),
            '\n' => Some(1),
            c if c.is_whitespace() => Some(2),
            _ => None,
        };
        if let Some(class) = class {
            best[class] = Some((j + 1, units));
        }
        prev = ch;
    }
    atoms.len()
}

/// Splits plain text (sent without `parse_mode`) by the same rules as [`split_html`].
pub fn split_plain(text: &str, limit: usize) -> Vec<String> {
    let mut escaped = String::with_capacity(text.len());
    escape_into(text, &mut escaped);
    split_html(&escaped, limit).iter().map(|chunk| visible_text(chunk)).collect()
}

/// The text of Telegram HTML as Telegram shows it: tags removed, entities decoded.
pub fn visible_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    for (_, _, atom) in atoms(html) {
        if let Atom::Char { ch, .. } = atom {
            out.push(ch);
        }
    }
    out
}

/// Length of `text` as Telegram counts it.
pub fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}
