use alloc::vec;

use super::*;

fn lines(reader: &mut LineReader, bytes: &[u8]) -> Vec<Result<String, LineError>> {
    let mut out = Vec::new();
    reader.feed(bytes, &mut |l| out.push(l.map(String::from)));
    out
}

#[test]
fn line_ends_backspace_and_ctrl_c_behave_like_a_terminal() {
    let mut r = LineReader::new();
    assert_eq!(lines(&mut r, b"help\r\nwifi_st"), vec![Ok("help".into())]);
    assert_eq!(lines(&mut r, b"atus\n\n\r\r\n"), vec![Ok("wifi_status".into())], "blank lines are skipped");
    assert_eq!(lines(&mut r, b"heap_infx\x08o\r"), vec![Ok("heap_info".into())]);
    // Backspace takes a whole character, not a byte of it.
    assert_eq!(lines(&mut r, "caf\u{e9}\x7Fe\n".as_bytes()), vec![Ok("cafe".into())]);
    assert_eq!(lines(&mut r, b"restart\x03help\n"), vec![Ok("help".into())], "Ctrl-C drops the line");
    assert_eq!(lines(&mut r, b"a\tb\n"), vec![Ok("a b".into())]);
    assert_eq!(lines(&mut r, b"\x08\x08\x08x\n"), vec![Ok("x".into())], "backspace on nothing");
}

#[test]
fn garbage_and_long_lines_are_refused_whole_and_the_next_line_works() {
    let mut r = LineReader::new();
    assert_eq!(lines(&mut r, b"\x1b[Ahelp\n"), vec![Err(LineError::Control)]);
    assert_eq!(lines(&mut r, b"\xff\xfe\n"), vec![Err(LineError::NotText)]);
    let long = vec![b'a'; MAX_LINE * 3];
    assert_eq!(lines(&mut r, &long), vec![], "nothing until the line ends");
    assert!(r.buf.len() <= MAX_LINE, "the buffer is bounded");
    assert_eq!(lines(&mut r, b"\nhelp\n"), vec![Err(LineError::TooLong { max: MAX_LINE }), Ok("help".into())]);
    let exact = vec![b'b'; MAX_LINE];
    assert_eq!(lines(&mut r, &[exact.as_slice(), b"\n"].concat()), vec![Ok("b".repeat(MAX_LINE))]);
}

#[test]
fn words_split_at_spaces_with_quotes_and_escapes() {
    let s = |l: &str| split_args(l).map(|w| w.into_iter().collect::<Vec<_>>());
    assert_eq!(s("wifi_set MyNet secret123").unwrap(), ["wifi_set", "MyNet", "secret123"]);
    assert_eq!(s("  wifi_set   \"My Home\"  'p w d'  ").unwrap(), ["wifi_set", "My Home", "p w d"]);
    assert_eq!(s("wifi_set Cafe \"\"").unwrap(), ["wifi_set", "Cafe", ""], "an empty quoted word");
    assert_eq!(s(r#"memory_write "a \"b\"\nc\\d""#).unwrap(), ["memory_write", "a \"b\"\nc\\d"]);
    assert_eq!(s(r"a\ b 'c\n'").unwrap(), ["a b", "c\\n"], "single quotes are literal");
    assert_eq!(s("x\"y z\"w").unwrap(), ["xy zw"], "quotes join a word");
    assert_eq!(s("end\\").unwrap(), ["end\\"]);
    assert_eq!(s("").unwrap(), Vec::<String>::new());
    assert_eq!(s("say \"open"), Err(ArgError::OpenQuote));
    assert_eq!(s("say 'open"), Err(ArgError::OpenQuote));
    assert_eq!(s("say \"open\\"), Err(ArgError::OpenQuote));
    assert_eq!(s(&"w ".repeat(MAX_ARGS)).unwrap().len(), MAX_ARGS);
    assert_eq!(s(&"w ".repeat(MAX_ARGS + 1)), Err(ArgError::TooMany { max: MAX_ARGS }));
}
