//! The Telegram renderer and splitter, fed any text: the HTML must be what Telegram's parser
//! accepts, every chunk too and within the limit, and the chunks must keep every character.
#![no_main]

use chela_proto::telegram::{markdown_to_html, split_html, split_plain, utf16_len, visible_text};
use libfuzzer_sys::fuzz_target;

const TAGS: &[&str] = &["b", "i", "u", "s", "code", "pre", "a", "blockquote"];

/// Known tags only, properly nested; no `<`, `>` or `&` in text except as an entity.
fn check_valid(html: &str) {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => {
                let end = rest.find('>').unwrap_or_else(|| panic!("unclosed tag in {html:?}"));
                let inner = &rest[1..end];
                if let Some(name) = inner.strip_prefix('/') {
                    assert_eq!(stack.pop(), Some(name), "misnested </{name}> in {html:?}");
                } else {
                    let name = inner.split(' ').next().unwrap_or("");
                    assert!(TAGS.contains(&name), "unknown tag <{inner}> in {html:?}");
                    let attrs = inner[name.len()..].trim();
                    if !attrs.is_empty() {
                        let value = attrs
                            .strip_prefix("href=\"")
                            .or_else(|| attrs.strip_prefix("class=\""))
                            .and_then(|v| v.strip_suffix('"'))
                            .unwrap_or_else(|| panic!("bad attributes {attrs:?} in {html:?}"));
                        assert!(!value.contains(['"', '<', '>']), "unescaped attribute in {html:?}");
                    }
                    stack.push(name);
                }
                rest = &rest[end + 1..];
            }
            '&' => {
                let end = rest.find(';').unwrap_or_else(|| panic!("bare & in {html:?}"));
                assert!(["&lt", "&gt", "&amp", "&quot"].contains(&&rest[..end]), "bad entity in {html:?}");
                rest = &rest[end + 1..];
            }
            '>' => panic!("raw > in {html:?}"),
            c => rest = &rest[c.len_utf8()..],
        }
    }
    assert!(stack.is_empty(), "unclosed {stack:?} in {html:?}");
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let Ok(md) = std::str::from_utf8(rest) else { return };
    let limit = usize::from(first % 64) + 2;
    let html = markdown_to_html(md);
    check_valid(&html);
    let chunks = split_html(&html, limit);
    for chunk in &chunks {
        check_valid(chunk);
        assert!(utf16_len(&visible_text(chunk)) <= limit, "chunk over {limit}: {chunk:?}");
    }
    let joined: String = chunks.iter().map(|c| visible_text(c)).collect();
    assert_eq!(joined, visible_text(&html), "the chunks lost text");
    let plain = split_plain(md, limit);
    assert!(plain.iter().all(|c| utf16_len(c) <= limit));
    assert_eq!(plain.concat(), md, "the plain chunks lost text");
});
