use alloc::string::{String, ToString};
use alloc::vec::Vec;
use alloc::{format, vec};

use proptest::prelude::*;

use super::*;

const TAGS: &[&str] = &["b", "i", "u", "s", "code", "pre", "a", "blockquote"];

/// Checks `html` as Telegram's parser would: known tags only, properly nested, every `<` and
/// `&` in text part of a tag or a known entity, no raw `>` either (we escape it everywhere).
/// Written apart from the splitter so that a bug in one is not mirrored in the other.
fn check_valid(html: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => {
                let end = rest.find('>').ok_or_else(|| format!("unclosed tag in {html:?}"))?;
                let inner = &rest[1..end];
                if let Some(name) = inner.strip_prefix('/') {
                    let top = stack.pop().ok_or_else(|| format!("</{name}> closes nothing in {html:?}"))?;
                    if top != name {
                        return Err(format!("</{name}> closes <{top}> in {html:?}"));
                    }
                } else {
                    let name = inner.split(' ').next().unwrap_or("");
                    if !TAGS.contains(&name) {
                        return Err(format!("unknown tag <{inner}> in {html:?}"));
                    }
                    let attrs = inner[name.len()..].trim();
                    if !attrs.is_empty() {
                        let value = attrs
                            .strip_prefix("href=\"")
                            .or_else(|| attrs.strip_prefix("class=\""))
                            .and_then(|v| v.strip_suffix('"'))
                            .ok_or_else(|| format!("bad attributes {attrs:?} in {html:?}"))?;
                        if value.contains(['"', '<', '>']) {
                            return Err(format!("unescaped attribute {value:?}"));
                        }
                    }
                    stack.push(name);
                }
                rest = &rest[end + 1..];
            }
            '&' => {
                let end = rest.find(';').ok_or_else(|| format!("bare & in {html:?}"))?;
                if !["&lt", "&gt", "&amp", "&quot"].contains(&&rest[..end]) {
                    return Err(format!("unknown entity {:?} in {html:?}", &rest[..=end]));
                }
                rest = &rest[end + 1..];
            }
            '>' => return Err(format!("raw > in {html:?}")),
            c => rest = &rest[c.len_utf8()..],
        }
    }
    match stack.last() {
        Some(open) => Err(format!("<{open}> never closed in {html:?}")),
        None => Ok(()),
    }
}

fn html(md: &str) -> String {
    let out = markdown_to_html(md);
    check_valid(&out).unwrap();
    out
}

#[test]
fn inline_styles() {
    assert_eq!(
        html("**bold** and *it* or _it_ and `x < y` ~~gone~~"),
        "<b>bold</b> and <i>it</i> or <i>it</i> and <code>x &lt; y</code> <s>gone</s>"
    );
    assert_eq!(html("__bold__ ***both***"), "<b>bold</b> <b><i>both</i></b>");
    assert_eq!(html("**`code` inside**"), "<b><code>code</code> inside</b>");
}

#[test]
fn escapes_everywhere_and_quotes_in_href() {
    assert_eq!(html("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d");
    assert_eq!(
        html("[x<y](https://e.com/?q=\"1\"&r=2)"),
        "<a href=\"https://e.com/?q=&quot;1&quot;&amp;r=2\">x&lt;y</a>"
    );
    assert_eq!(html("<b>not a tag</b>"), "&lt;b&gt;not a tag&lt;/b&gt;");
}

#[test]
fn unmatched_and_intraword_markers_stay_text() {
    assert_eq!(html("snake_case_name and 2 * 3 * 4"), "snake_case_name and 2 * 3 * 4");
    assert_eq!(html("**open only"), "**open only");
    assert_eq!(html("`unclosed and [text](no-scheme)"), "`unclosed and [text](no-scheme)");
    assert_eq!(html(r"\*not italic\*"), "*not italic*");
}

#[test]
fn links_only_for_linkable_schemes() {
    assert_eq!(html("[site](https://example.com/a_(b))"), "<a href=\"https://example.com/a_(b)\">site</a>");
    assert_eq!(html("[bad](javascript:alert(1))"), "[bad](javascript:alert(1))");
    assert_eq!(html("[**b**](http://x.y)"), "<a href=\"http://x.y\"><b>b</b></a>");
}

#[test]
fn blocks() {
    assert_eq!(
        html("# Title\n\n- one\n* two\n  + three\n\n> quoted *a*\n> more\nafter"),
        "<b>Title</b>\n\n• one\n• two\n  • three\n\n<blockquote>quoted <i>a</i>\nmore</blockquote>\nafter"
    );
    assert_eq!(
        html("```rust\nfn f() -> &'a str {}\n**not bold**\n```\ndone"),
        "<pre><code class=\"language-rust\">fn f() -&gt; &amp;'a str {}\n**not bold**</code></pre>\ndone"
    );
    assert_eq!(html("~~~\nunclosed <x>"), "<pre>unclosed &lt;x&gt;</pre>");
    assert_eq!(html("```\"><b>\nx\n```"), "<pre>x</pre>");
    assert_eq!(html("---"), "———");
    // No empty entities: an empty fence or quote leaves its lines, not a tag pair.
    assert_eq!(html("```\n```"), "");
    assert_eq!(html("a\n```\n\n```\nb"), "a\n\nb");
    assert_eq!(html(">\n> x"), "&gt;\n<blockquote>x</blockquote>");
    assert_eq!(split_html("<pre></pre>", 10), Vec::<String>::new());
}

#[test]
fn a_long_line_of_markers_is_linear() {
    // Quadratic matching would take minutes here; the closer table makes it instant.
    let line = "*a ".repeat(100_000);
    let out = html(&line);
    assert_eq!(out, line);
    let brackets = "[".repeat(100_000) + "]";
    assert_eq!(html(&brackets), brackets);
    let unclosed = "[a ".repeat(100_000);
    assert_eq!(html(&unclosed), unclosed);
    let ticks = "` `` ".repeat(50_000);
    check_valid(&html(&ticks)).unwrap();
}

fn check_chunks(html: &str, chunks: &[String], limit: usize) {
    for chunk in chunks {
        check_valid(chunk).unwrap();
        let text = visible_text(chunk);
        assert!(utf16_len(&text) <= limit, "a chunk of {} units over {limit}: {chunk:?}", utf16_len(&text));
        assert!(!text.is_empty(), "an empty chunk in {chunks:?}");
    }
    let joined: String = chunks.iter().map(|c| visible_text(c)).collect();
    assert_eq!(joined, visible_text(html), "the chunks lost or changed text");
}

#[test]
fn splits_on_paragraphs_then_lines_then_spaces() {
    let para = "a".repeat(60);
    let text = format!("{para}\n\n{para}");
    assert_eq!(split_plain(&text, 100), vec![format!("{para}\n\n"), para.clone()]);
    let text = format!("{para}\n{para}");
    assert_eq!(split_plain(&text, 100), vec![format!("{para}\n"), para.clone()]);
    let text = format!("{para} {para}");
    assert_eq!(split_plain(&text, 100), vec![format!("{para} "), para.clone()]);
    let word = "b".repeat(250);
    assert_eq!(split_plain(&word, 100), vec!["b".repeat(100), "b".repeat(100), "b".repeat(50)]);
    // Plain text keeps its `<` and `&` as they are.
    assert_eq!(split_plain("a < b & c", 4096), vec!["a < b & c".to_string()]);
}

#[test]
fn never_splits_a_surrogate_pair_or_an_entity() {
    let text = "😀".repeat(5);
    let chunks = split_plain(&text, 3);
    assert_eq!(chunks, vec!["😀", "😀", "😀", "😀", "😀"]);
    let html = "&lt;".repeat(10);
    let chunks = split_html(&html, 4);
    assert_eq!(chunks, vec!["&lt;&lt;&lt;&lt;", "&lt;&lt;&lt;&lt;", "&lt;&lt;"]);
}

#[test]
fn tags_are_closed_and_reopened_with_their_attributes() {
    let html = markdown_to_html(&format!("```py\n{}\n{}\n```", "x".repeat(8), "y".repeat(8)));
    let chunks = split_html(&html, 10);
    assert_eq!(
        chunks,
        vec![
            "<pre><code class=\"language-py\">xxxxxxxx\n</code></pre>",
            "<pre><code class=\"language-py\">yyyyyyyy</code></pre>"
        ]
    );
    let chunks = split_html("<b>bold <a href=\"https://x.y\">link text</a></b> tail", 12);
    check_chunks("<b>bold <a href=\"https://x.y\">link text</a></b> tail", &chunks, 12);
    assert_eq!(chunks[1], "<b><a href=\"https://x.y\">text</a></b> tail");
}

#[test]
fn a_9000_character_reply_becomes_three_valid_messages() {
    let md: String = (0..300).map(|n| format!("**Point {n}:** see `x<{n}>` & more text here.\n")).collect();
    let chunks = render_chunks(&md);
    check_chunks(&markdown_to_html(&md), &chunks, MAX_MESSAGE_UNITS);
    assert!(chunks.len() >= 3, "{} chunks", chunks.len());
    // Cut at line ends, not mid-line.
    for c in &chunks[..chunks.len() - 1] {
        assert!(visible_text(c).ends_with('\n'), "{c:?}");
    }
}

/// Pieces of Markdown-ish text, chosen to collide: markers, brackets, entities, multi-unit
/// characters, breaks.
fn piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "**",
        "*",
        "_",
        "__",
        "`",
        "```",
        "```py\n",
        "~~",
        "[",
        "]",
        "](",
        "(",
        ")",
        "https://x.y/?a=\"1\"&b",
        "<",
        ">",
        "&",
        "&amp;",
        "<b>",
        "\n",
        "\n\n",
        "# ",
        "> ",
        "- ",
        "1. ",
        " ",
        "a",
        "word",
        "é",
        "😀",
        "日本",
        "\\*",
        "\r\n",
        "\u{200d}",
        "x_y",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn rendered_markdown_is_valid_and_its_chunks_are_too(
        pieces in prop::collection::vec(piece(), 0..300),
        limit in 2usize..200,
    ) {
        let md: String = pieces.concat();
        let html = markdown_to_html(&md);
        prop_assert!(check_valid(&html).is_ok(), "{:?}", check_valid(&html));
        let chunks = split_html(&html, limit);
        check_chunks(&html, &chunks, limit);
        let plain = split_plain(&md, limit);
        prop_assert_eq!(plain.concat(), md.clone());
        for chunk in &plain {
            prop_assert!(utf16_len(chunk) <= limit);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn long_replies_fit_telegram(pieces in prop::collection::vec(piece(), 2000..6000)) {
        let md: String = pieces.concat();
        let html = markdown_to_html(&md);
        let chunks = split_html(&html, MAX_MESSAGE_UNITS);
        check_chunks(&html, &chunks, MAX_MESSAGE_UNITS);
    }
}
