use super::*;
use alloc::boxed::Box;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;
use proptest::prelude::*;
use serde_json::Value;

use super::oracle::{self, read_value as ours, same};
use crate::json::strategies::value as json_value;

/// The comparison with serde_json the fuzz target makes too, as a property test's failure.
fn agree(bytes: &[u8]) -> core::result::Result<(), TestCaseError> {
    oracle::agree(bytes).map_err(TestCaseError::fail)
}

/// Bytes that change what a JSON text means when put in or taken out.
const SIGNIFICANT: &[u8] = b"{}[],:\"\\-+.eE0123456789tfnu \x00\x1f\xff\xc3";

/// serde_json's text of a value with one to three bytes put in, taken out or changed.
fn mutated_json() -> impl Strategy<Value = Vec<u8>> {
    let edits = prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, prop::sample::select(SIGNIFICANT)), 1..4);
    (json_value(), edits).prop_map(|(v, edits)| {
        let mut bytes = serde_json::to_vec(&v).unwrap();
        for (at, op, b) in edits {
            let i = at.index(bytes.len() + 1);
            match op {
                0 => bytes.insert(i, b),
                1 if i < bytes.len() => {
                    bytes.remove(i);
                }
                _ if i < bytes.len() => bytes[i] = b,
                _ => bytes.push(b),
            }
        }
        bytes
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn reads_what_serde_json_writes(v in json_value(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&v) } else { serde_json::to_string(&v) };
        let text = text.unwrap();
        let got = ours(text.as_bytes());
        prop_assert!(got.as_ref().is_ok_and(|g| same(g, &v)), "{got:?} for {text}");
        agree(text.as_bytes())?;
    }

    #[test]
    fn mutated_json_is_accepted_and_refused_as_serde_json_does(bytes in mutated_json()) {
        agree(&bytes)?;
    }

    #[test]
    fn arbitrary_bytes_are_accepted_and_refused_as_serde_json_does(bytes in prop::collection::vec(prop::sample::select(SIGNIFICANT), 0..24)) {
        agree(&bytes)?;
    }

    #[test]
    fn arbitrary_text_is_accepted_and_refused_as_serde_json_does(s in any::<String>()) {
        agree(s.as_bytes())?;
    }

    #[test]
    fn a_value_with_serde_numbers_is_exactly_serde_jsons(v in json_value(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&v) } else { serde_json::to_string(&v) };
        let text = text.unwrap();
        let got = read_all(text.as_bytes(), |r| value::value(r, value::serde_number));
        // The same float parser on both sides: equal to the bit, no rounding allowance.
        prop_assert_eq!(got.ok(), Some(serde_json::from_str::<Value>(&text).unwrap()), "{}", text);
    }

    #[test]
    fn a_value_with_serde_numbers_is_refused_where_serde_json_refuses_it(text in mutated_json()) {
        let got = read_all(&text, |r| value::value(r, value::serde_number));
        prop_assert_eq!(got.ok(), serde_json::from_slice::<Value>(&text).ok(), "{}", String::from_utf8_lossy(&text));
    }

    #[test]
    fn serde_numbers_are_serde_jsons(s in "-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?") {
        let got = read_all(s.as_bytes(), |r| value::value(r, value::serde_number));
        prop_assert_eq!(got.ok(), serde_json::from_str::<Value>(&s).ok(), "{}", s);
    }

    #[test]
    fn numbers_read_as_serde_json_reads_them(s in "-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?") {
        agree(s.as_bytes())?;
    }
}

#[test]
fn escapes_and_surrogate_pairs_decode() {
    let mut r = Reader::new(br#""a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00z""#);
    assert_eq!(r.str().unwrap(), "a\"\\/\u{8}\u{c}\n\r\t\u{e9}\u{1F600}z");
    // Without escapes the string is borrowed from the input.
    let mut r = Reader::new(br#""plain""#);
    assert!(matches!(r.str().unwrap(), Cow::Borrowed("plain")));
}

#[test]
fn refusals_name_the_fault_and_its_byte() {
    let cases: &[(&[u8], &str, usize)] = &[
        (br#""\ud800""#, "lone leading surrogate in hex escape", 7),
        (br#""\udc00""#, "lone trailing surrogate in hex escape", 7),
        (br#""\q""#, "invalid escape", 2),
        (b"\"a\x01\"", "control character (\\u0000-\\u001F) found while parsing a string", 2),
        (b"\"\xff\"", "invalid unicode code point", 1),
        (b"[1,]", "trailing comma", 3),
        (b"{\"a\" 1}", "expected `:`", 5),
        (b"[1 2]", "expected `,` or `]`", 3),
        (b"01", "invalid number", 1),
        (b"1e400", "number out of range", 0),
        (b"{} x", "trailing characters", 3),
        (b"[", "EOF while parsing a value", 1),
        (b"nul", "EOF while parsing a value", 3),
    ];
    for &(text, what, offset) in cases {
        assert_eq!(ours(text).unwrap_err(), Error { what, offset }, "{:?}", String::from_utf8_lossy(text));
        assert!(serde_json::from_slice::<Value>(text).is_err());
    }
    assert_eq!(Error { what: "invalid number", offset: 7 }.to_string(), "invalid number at byte 7");
}

#[test]
fn nesting_is_bounded_at_serde_jsons_limit_without_recursion() {
    for depth in [126usize, 127, 128, 100_000] {
        let text: Vec<u8> = [vec![b'['; depth], vec![b']'; depth]].concat();
        let ok = read_all(&text, Reader::skip).is_ok();
        assert_eq!(ok, depth <= MAX_DEPTH as usize, "{depth}");
        if depth < 1000 {
            assert_eq!(ok, serde_json::from_slice::<Value>(&text).is_ok(), "{depth}");
        }
    }
    let deep: Vec<u8> = [vec![b'['; 128], vec![b']'; 128]].concat();
    assert_eq!(read_all(&deep, Reader::skip).unwrap_err(), Error { what: "recursion limit exceeded", offset: 127 });
}

#[test]
fn raw_gives_a_values_text_and_skip_resumes_after_it() {
    let text = br#"{"a": {"x": [1, "]"]} , "b": true}"#;
    let mut r = Reader::new(text);
    r.begin_object().unwrap();
    assert_eq!(r.next_key().unwrap().as_deref(), Some("a"));
    assert_eq!(r.raw().unwrap(), r#"{"x": [1, "]"]}"#);
    assert_eq!(r.next_key().unwrap().as_deref(), Some("b"));
    assert!(r.bool().unwrap());
    assert_eq!(r.next_key().unwrap(), None);
    r.end().unwrap();
}

#[test]
fn numbers_classify_as_serde_json_does() {
    let n = |s: &str| Reader::new(s.as_bytes()).number().unwrap();
    assert_eq!(n("18446744073709551615"), Number::U64(u64::MAX));
    assert_eq!(n("18446744073709551616"), Number::F64(18446744073709551616.0));
    assert_eq!(n("-9223372036854775808"), Number::I64(i64::MIN));
    assert_eq!(n("-9223372036854775809"), Number::F64(-9223372036854775809.0));
    assert!(matches!(n("-0"), Number::F64(f) if f == 0.0 && f.is_sign_negative()));
    assert_eq!(n("1.5e3"), Number::F64(1500.0));
    // Out of a float's range: refused when read, passed when skipped (as serde_json skips it).
    assert_eq!(Reader::new(b"1e400").number().unwrap_err().what, "number out of range");
    assert_eq!(read_all(b"[1e400]", Reader::raw).unwrap(), "[1e400]");
    assert!(serde_json::from_slice::<Box<serde_json::value::RawValue>>(b"[1e400]").is_ok());
    assert!(Reader::new(b"1.0").u64().is_err());
    assert!(Reader::new(b"-1").u64().is_err());
    assert_eq!(Reader::new(b"4294967296").u32().unwrap_err().what, "invalid value: expected u32");
}

#[test]
fn serde_numbers_classify_as_serde_json_does_and_a_refusal_names_the_number() {
    let n = |s: &str| read_all(s.as_bytes(), |r| value::value(r, value::serde_number));
    assert!(n("18446744073709551615").unwrap().is_u64());
    assert!(n("18446744073709551616").unwrap().is_f64());
    assert!(n("-9223372036854775808").unwrap().is_i64());
    assert!(n("-9223372036854775809").unwrap().is_f64());
    assert!(n("-0").unwrap().as_f64().is_some_and(|f| f == 0.0 && f.is_sign_negative()));
    assert_eq!(n("[1, -2, 2.5e1]").unwrap(), serde_json::json!([1, -2, 25.0]));
    // A repeated key: the last one, as serde_json keeps it.
    assert_eq!(n(r#"{"a": 1, "b": [], "a": {"c": null}}"#).unwrap(), serde_json::json!({"a": {"c": null}, "b": []}));
    assert_eq!(n("[1e400]").unwrap_err(), Error { what: "number out of range", offset: 1 });
}

#[test]
fn duplicate_fields_are_refused_as_serde_derive_refuses_them() {
    let mut seen = 0;
    let mut r = Reader::new(b"1 2 3");
    assert_eq!(field(&mut r, &mut seen, 1, Reader::u64).unwrap(), 1);
    assert_eq!(field(&mut r, &mut seen, 2, Reader::u64).unwrap(), 2);
    assert_eq!(field(&mut r, &mut seen, 1, Reader::u64).unwrap_err().what, "duplicate field");
}

proptest! {
    #[test]
    fn a_plain_run_stops_at_the_first_byte_a_string_must_stop_at(
        src in prop::collection::vec(prop_oneof![Just(b'"'), Just(b'\\'), 0u8..0x20, 0x20u8..=0xff], 0..40),
        pos in 0usize..40,
    ) {
        let pos = pos.min(src.len());
        let first = (pos..src.len()).find(|&i| src[i] < 0x20 || src[i] == b'"' || src[i] == b'\\').unwrap_or(src.len());
        let run = super::plain_run(&src, pos);
        prop_assert!(run <= first, "{run} past {first}");
        prop_assert!(run == first || src.len() - run < core::mem::size_of::<usize>(), "{run} stopped short of {first}");
    }
}
