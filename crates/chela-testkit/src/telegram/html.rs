//! Telegram's `parse_mode=HTML` parser, as the Bot API documents it and as its server (TDLib's
//! `parse_html`) behaves: the supported tags, properly nested; `&lt;`, `&gt;`, `&amp;`,
//! `&quot;` and numeric entities decoded; a `&` that starts no entity and a raw `>` kept as
//! text; any other `<` the start of a tag. The error texts are Telegram's, so that a client
//! that matches on "can't parse entities" sees exactly what it would see in production.
//!
//! Written from the documentation, sharing nothing with `chela-proto::telegram`.

/// What a message's HTML parses to: the text as shown, and its entities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub text: String,
    /// `(type, offset, length)` in UTF-16 units, in order of their start tags.
    pub entities: Vec<(String, usize, usize)>,
}

const TAGS: &[(&str, &str)] = &[
    ("b", "bold"),
    ("strong", "bold"),
    ("i", "italic"),
    ("em", "italic"),
    ("u", "underline"),
    ("ins", "underline"),
    ("s", "strikethrough"),
    ("strike", "strikethrough"),
    ("del", "strikethrough"),
    ("a", "text_link"),
    ("code", "code"),
    ("pre", "pre"),
    ("blockquote", "blockquote"),
    ("tg-spoiler", "spoiler"),
    ("span", "spoiler"),
    ("tg-emoji", "custom_emoji"),
];

fn decode_entity(s: &str) -> Option<(char, usize)> {
    let end = s.find(';').filter(|&e| e <= 10)?;
    let name = &s[1..end];
    let ch = match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(code).filter(|&c| c != '\0')?
        }
    };
    Some((ch, end + 1))
}

fn utf16(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// Parses `html`, or says why not in Telegram's words (without the "Bad Request: can't parse
/// entities: " prefix the Bot API adds).
pub fn parse(html: &str) -> Result<Parsed, String> {
    let mut text = String::with_capacity(html.len());
    let mut entities = Vec::new();
    // (tag name, entity type, offset in UTF-16 units, index in `entities`)
    let mut open: Vec<(String, &str, usize, usize)> = Vec::new();
    let b = html.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let rest = &html[i..];
        if b[i] == b'&'
            && let Some((ch, len)) = decode_entity(rest)
        {
            text.push(ch);
            i += len;
            continue;
        }
        if b[i] != b'<' {
            let c = rest.chars().next().unwrap_or('\0');
            text.push(c);
            i += c.len_utf8();
            continue;
        }
        let begin = i;
        i += 1;
        if b.get(i) != Some(&b'/') {
            while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' {
                i += 1;
            }
            if i >= b.len() {
                return Err(format!("Unclosed start tag at byte offset {begin}"));
            }
            let name = html[begin + 1..i].to_ascii_lowercase();
            let Some(&(_, kind)) = TAGS.iter().find(|(t, _)| *t == name) else {
                return Err(format!("Unsupported start tag \"{name}\" at byte offset {begin}"));
            };
            let mut attrs = Vec::new();
            loop {
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                if i >= b.len() {
                    return Err(format!("Unclosed start tag at byte offset {begin}"));
                }
                if b[i] == b'>' {
                    i += 1;
                    break;
                }
                let at = i;
                while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' && b[i] != b'>' {
                    i += 1;
                }
                let attr = html[at..i].to_ascii_lowercase();
                if b.get(i) != Some(&b'=') {
                    return Err(format!("Expected equal sign in declaration of an attribute of the tag \"{name}\""));
                }
                i += 1;
                let value = match b.get(i) {
                    Some(&q @ (b'"' | b'\'')) => {
                        let Some(end) = html[i + 1..].find(q as char) else {
                            return Err(format!("Unclosed end tag at byte offset {begin}"));
                        };
                        let raw = &html[i + 1..i + 1 + end];
                        i += end + 2;
                        unescape(raw)
                    }
                    _ => {
                        let at = i;
                        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' {
                            i += 1;
                        }
                        unescape(&html[at..i])
                    }
                };
                attrs.push((attr, value));
            }
            if kind == "spoiler" && name == "span" && !attrs.iter().any(|(a, v)| a == "class" && v == "tg-spoiler") {
                return Err(format!("Tag \"span\" must have class \"tg-spoiler\" at byte offset {begin}"));
            }
            if let Some((parent, ..)) = open.iter().find(|(t, ..)| t == "pre" || t == "code")
                && !(parent == "pre" && name == "code")
            {
                // Telegram ignores tags inside code; the fake is stricter so that a client that
                // nests formatting in code is noticed.
                return Err(format!("Can't use tag \"{name}\" inside tag \"{parent}\""));
            }
            open.push((name, kind, utf16(&text), entities.len()));
            entities.push((kind.to_string(), 0, 0));
        } else {
            if open.is_empty() {
                return Err(format!("Unexpected end tag at byte offset {begin}"));
            }
            i += 1;
            let at = i;
            while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' {
                i += 1;
            }
            let end_name = html[at..i].to_ascii_lowercase();
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if b.get(i) != Some(&b'>') {
                return Err(format!("Unclosed end tag at byte offset {begin}"));
            }
            i += 1;
            let (name, kind, offset, index) = open.pop().unwrap_or_default();
            if !end_name.is_empty() && end_name != name {
                return Err(format!(
                    "Unmatched end tag at byte offset {begin}, expected \"</{name}>\", found \"</{end_name}>\""
                ));
            }
            entities[index] = (kind.to_string(), offset, utf16(&text) - offset);
        }
    }
    if let Some((name, ..)) = open.last() {
        return Err(format!("Can't find end tag corresponding to start tag \"{name}\""));
    }
    entities.retain(|(_, _, len)| *len > 0);
    Ok(Parsed { text, entities })
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s.as_bytes()[i] == b'&'
            && let Some((ch, len)) = decode_entity(&s[i..])
        {
            out.push(ch);
            i += len;
            continue;
        }
        let c = s[i..].chars().next().unwrap_or('\0');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_subset() {
        let p = parse("<b>bold</b> <a href=\"https://x.y/?a=1&amp;b\">l</a> &lt;&amp;&gt; 😀<i>x</i>").unwrap();
        assert_eq!(p.text, "bold l <&> 😀x");
        assert_eq!(p.entities[0], ("bold".into(), 0, 4));
        assert_eq!(p.entities[2], ("italic".into(), 13, 1));
        assert_eq!(parse("AT&T > 1").unwrap().text, "AT&T > 1");
    }

    #[test]
    fn rejects_bad_markup_in_telegrams_words() {
        assert_eq!(parse("a < b").unwrap_err(), "Unsupported start tag \"\" at byte offset 2");
        assert_eq!(parse("<b>x").unwrap_err(), "Can't find end tag corresponding to start tag \"b\"");
        assert_eq!(parse("x</b>").unwrap_err(), "Unexpected end tag at byte offset 1");
        assert_eq!(parse("<foo>x</foo>").unwrap_err(), "Unsupported start tag \"foo\" at byte offset 0");
        assert!(parse("<b><i>x</b></i>").unwrap_err().starts_with("Unmatched end tag at byte offset 7"));
        assert_eq!(parse("<b").unwrap_err(), "Unclosed start tag at byte offset 0");
    }
}
