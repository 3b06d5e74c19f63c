//! The reader held against the `toml` crate it replaced (a dev-dependency only): generated
//! documents, valid or not, and random mutations of them, are accepted and refused alike and
//! read to the same tree. And the writer: whatever tree it writes reads back equal.
//!
//! One difference is allowed, where the `toml` crate (0.9.12) is wrong per the spec: it takes a
//! line break between a key and its `=`, or between the `=` and the value, inside an inline
//! table (`{ a\n= 1 }`). TOML 1.1 lets newlines come only between the pairs of an inline table
//! (`inline-table-keyvals = ws-comment-newline keyval ws-comment-newline …`, and `keyval-sep =
//! ws %x3D ws`: "the key, equals sign, and value must be on the same line"). Ours refuses it.
//! The bounds are not generated (the `toml` crate has no [`MAX_DEPTH`]; ours refuses past it).

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::{Table, Value, parse, to_string};

/// Whether our value and the oracle's are the same tree (NaN equal to NaN, -0.0 not to 0.0).
fn same(ours: &Value, theirs: &::toml::Value) -> bool {
    use ::toml::Value as T;
    match (ours, theirs) {
        (Value::String(a), T::String(b)) => a == b,
        (Value::Integer(a), T::Integer(b)) => a == b,
        (Value::Float(a), T::Float(b)) => (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
        (Value::Boolean(a), T::Boolean(b)) => a == b,
        (Value::Datetime(a), T::Datetime(b)) => *a == b.to_string(),
        (Value::Array(a), T::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b)),
        (Value::Table(a), T::Table(b)) => same_table(a, b),
        _ => false,
    }
}

fn same_table(ours: &Table, theirs: &::toml::Table) -> bool {
    ours.len() == theirs.len() && ours.iter().all(|(k, v)| theirs.get(k).is_some_and(|t| same(v, t)))
}

/// Both readers accept `text` and read the same tree, or both refuse it.
fn agree(text: &str) -> Result<(), TestCaseError> {
    match (parse(text), text.parse::<::toml::Table>()) {
        (Ok(a), Ok(b)) => prop_assert!(same_table(&a, &b), "different trees for {text:?}:\n ours {a:?}\n toml {b:?}"),
        (Err(_), Err(_)) => {}
        (Err(e), Ok(_)) if line_break_around_equals(text, &e) => {}
        (a, b) => prop_assert!(false, "they disagree on {text:?}:\n ours {a:?}\n toml {b:?}"),
    }
    Ok(())
}

/// Whether our refusal is the one documented difference: a line break where a key's `=` or the
/// value after it belongs.
fn line_break_around_equals(text: &str, e: &super::Error) -> bool {
    let at = &text[e.span().start..];
    (at.starts_with('\n') || at.starts_with("\r\n"))
        && (e.message().starts_with("expected `=`") || e.message().starts_with("expected a value"))
}

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(&["a", "b", "c", "\"c d\"", "'a'", "1", "\"\"", "\"é\"", "\"b\"", "x-y_z"][..])
        .prop_map(str::to_owned)
}

fn dotted() -> impl Strategy<Value = String> {
    prop::collection::vec(key(), 1..4).prop_map(|k| k.join("."))
}

/// Text that may hold anything awkward: quotes of both kinds, backslashes, line ends, control
/// characters, any Unicode.
fn awkward() -> impl Strategy<Value = String> {
    proptest::string::string_regex(r#"("""|'''|["\\\n\r\t']|\PC|[\x00-\x1f\x7f]|\\[btnfre"\\xuU ]){0,12}"#).unwrap()
}

/// `s` as a basic string, escaped in one of the forms TOML allows.
fn escaped(s: &str, style: u8) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' if style == 0 => out.push_str("\\n"),
            '\u{1b}' if style == 1 => out.push_str("\\e"),
            c if c.is_control() && style == 2 && u32::from(c) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)))
            }
            c if c.is_control() || (style == 3 && !c.is_ascii()) => out.push_str(&format!("\\U{:08X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn string() -> impl Strategy<Value = String> {
    (awkward(), 0..8u8).prop_map(|(s, style)| match style {
        0..=3 => escaped(&s, style),
        4 => format!("\"{s}\""),
        5 => format!("'{s}'"),
        6 => format!("\"\"\"{s}\"\"\""),
        _ => format!("'''{s}'''"),
    })
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        (0..i64::MAX, 0..3usize)
            .prop_map(|(i, b)| [format!("0x{i:X}"), format!("0o{i:o}"), format!("0b{i:b}")][b].clone()),
        any::<u32>().prop_map(|i| {
            let s = i.to_string();
            s.chars().enumerate().flat_map(|(n, c)| if n % 2 == 1 { vec!['_', c] } else { vec![c] }).collect()
        }),
        any::<f64>().prop_map(|f| format!("{f:?}").replace("NaN", "nan")),
        prop::sample::select(
            &[
                "true",
                "false",
                "inf",
                "-inf",
                "+inf",
                "nan",
                "-nan",
                "+nan",
                "1e06",
                "5E+22",
                "-2e-2",
                "6.626e-34",
                "224_617.445_991_228",
                "3.1415",
                "+1.0",
                "-0.0",
                "0.0",
                "9223372036854775807",
                "-9223372036854775808",
                "9223372036854775808",
                "0x7FFFFFFFFFFFFFFF",
                "0x8000000000000000",
                "00",
                "01",
                "1_",
                "_1",
                "1__0",
                "0x_1",
                "+0x1",
                "1.",
                ".1",
                "1e",
                "1.e1",
                "0e0",
                "-0",
                "+0",
                "0b1_0",
                "0o7_7",
                "1979-05-27T07:32:00Z",
                "1979-05-27T00:32:00.999999-07:00",
                "1979-05-27 07:32:00Z",
                "1979-05-27t07:32:00z",
                "1979-05-27T07:32:00",
                "1979-05-27",
                "07:32:00",
                "07:32",
                "00:32:00.1234567891",
                "00:32:00.000",
                "2000-02-29",
                "1900-02-29",
                "1979-05-27T07:32:60Z",
                "1979-05-27T07:32:00-00:00",
                "1979-05-27T07:32:00+23:59",
                "1979-05-27T24:00:00",
                "1979-13-01",
                "1979-05-27T07:32Z",
                "1979-05-27T07:32:00.Z",
                "07:32:00Z",
                "2001-04-31",
                "0000-01-01",
            ][..]
        )
        .prop_map(str::to_owned),
        string(),
    ]
}

/// A value's text: a scalar, or an array or inline table of values, laid out in one of the ways
/// TOML allows (and a few it does not).
fn value() -> impl Strategy<Value = String> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (prop::collection::vec(inner.clone(), 0..4), 0..4u8).prop_map(|(items, style)| {
                let sep = [", ", ",\n  ", " , # c\n", ","][usize::from(style)];
                let trail = if style % 2 == 1 && !items.is_empty() { "," } else { "" };
                format!("[{}{trail}]", items.join(sep))
            }),
            (prop::collection::vec((dotted(), inner), 0..4), 0..3u8).prop_map(|(kvs, style)| {
                let kvs: Vec<String> = kvs.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
                match style {
                    0 => format!("{{ {} }}", kvs.join(", ")),
                    1 => format!("{{\n  {},\n}}", kvs.join(",\n  ")),
                    _ => format!("{{{}}}", kvs.join(",")),
                }
            }),
        ]
    })
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (dotted(), value()).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => dotted().prop_map(|k| format!("[{k}]")),
        1 => dotted().prop_map(|k| format!("[[{k}]]")),
        1 => Just("# a comment".to_owned()),
        1 => Just(String::new()),
    ]
}

fn document() -> impl Strategy<Value = String> {
    (prop::collection::vec(line(), 0..10), any::<bool>())
        .prop_map(|(lines, crlf)| lines.join(if crlf { "\r\n" } else { "\n" }))
}

/// What a mutation puts in: the characters TOML's grammar turns on.
const MUTATIONS: &[&str] = &[
    "\"", "'", "=", "[", "]", "{", "}", ",", ".", "#", "\n", " ", "\\", "_", "0", "e", ":", "-", "+", "\t", "\r", "\0",
    "é", "x", "T", "Z", "\"\"\"", "'''", "\u{7f}", "\u{feff}",
];

fn mutate(text: &str, edits: &[(prop::sample::Index, prop::sample::Index, bool)]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for (at, what, delete) in edits {
        if *delete && !chars.is_empty() {
            chars.remove(at.index(chars.len()));
        } else {
            let at = at.index(chars.len() + 1);
            let ins: Vec<char> = what.get(MUTATIONS).chars().collect();
            chars.splice(at..at, ins);
        }
    }
    chars.into_iter().collect()
}

/// A tree of every kind of value, with any keys: what the writer must write readably.
fn tree() -> impl Strategy<Value = Table> {
    let leaf = prop_oneof![
        any::<String>().prop_map(Value::String),
        awkward().prop_map(Value::String),
        any::<i64>().prop_map(Value::Integer),
        any::<f64>().prop_map(Value::Float),
        any::<bool>().prop_map(Value::Boolean),
        prop::sample::select(
            &["1979-05-27T07:32:00Z", "1979-05-27T00:32:00.999999-07:00", "1979-05-27", "07:32:00"][..]
        )
        .prop_map(|d| Value::Datetime(d.to_owned())),
    ];
    let key = prop_oneof![any::<String>(), awkward(), Just("a".to_owned())];
    let value = leaf.prop_recursive(4, 32, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..4).prop_map(Value::Table),
        ]
    });
    prop::collection::btree_map(prop_oneof![any::<String>(), Just("a".to_owned())], value, 0..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn generated_documents_read_as_the_toml_crate_reads_them(text in document()) {
        agree(&text)?;
    }

    #[test]
    fn mutated_documents_are_refused_or_read_as_the_toml_crate_does(
        text in document(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<bool>()), 1..4),
    ) {
        agree(&mutate(&text, &edits))?;
    }

    #[test]
    fn what_the_writer_writes_reads_back_the_same(table in tree()) {
        let text = to_string(&table);
        let back = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(Value::Table(back).same(&Value::Table(table.clone())), "{text}");
        // And the `toml` crate reads it the same: the file stays TOML for any other reader.
        let theirs = text.parse::<::toml::Table>().map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(same_table(&table, &theirs), "{text}");
    }

    #[test]
    fn any_text_is_refused_or_read_without_a_panic(text in "\\PC{0,64}") {
        agree(&text)?;
    }
}
