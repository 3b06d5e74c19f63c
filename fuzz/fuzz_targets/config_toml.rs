//! Chela's TOML reader on any text: it never panics, never recurses past its depth bound, and
//! either refuses the text with a message and a span inside it, or reads a tree that the writer
//! writes back as text that reads to the same tree.
#![no_main]

use chela::toml::{Value, parse, to_string};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The workspace reader hands the parser a `&str`; bytes that are not UTF-8 never get here.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let table = match parse(text) {
        Ok(table) => table,
        Err(e) => {
            assert!(!e.message().trim().is_empty(), "a refusal without a message");
            let span = e.span();
            assert!(span.start <= span.end && span.end <= text.len(), "span {span:?} outside {} bytes", text.len());
            assert!(text.is_char_boundary(span.start), "span {span:?} starts inside a character");
            return;
        }
    };
    let written = to_string(&table);
    let back = parse(&written).unwrap_or_else(|e| panic!("the writer's text is refused: {e}\n{written}"));
    assert!(Value::Table(back).same(&Value::Table(table)), "read back different:\n{written}");
});
