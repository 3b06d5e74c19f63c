//! Proptest generators of JSON for the tests that hold a hand-written reader against serde_json
//! or a serde derive, in this crate and in chela-core (through the `strategies` feature, which
//! only tests enable). Not part of the API.
//!
//! One place for what every such test needs: values of every kind, strings full of what JSON
//! escapes, the numbers where serde_json's classification turns, and objects and arrays built as
//! text around a test's own keys and leaves. A test adds only what its wire type makes special.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::ops::Range;

use proptest::prelude::*;
use serde_json::Value;

/// A string of up to `max` characters drawn from what JSON escapes or encodes in more than one
/// byte (`"`, `\`, every control character, DEL, `é`, an emoji), from HTML's `<>&;`, space and
/// `a-z`.
pub fn escaped_string(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[a-z <>&;\"\\\\\u{0}-\u{1f}\u{7f}\u{e9}\u{1F600}]{{0,{max}}}"))
        .expect("a valid character class")
}

/// Number texts serde_json reads: any `u64` and `i64`, and the edges where its classification
/// turns (`u64::MAX` and one past it, `i64::MIN` and one below it, `-0`), with fractions and
/// exponents.
pub fn number_text() -> impl Strategy<Value = String> {
    const EDGES: &[&str] = &[
        "0",
        "-0",
        "7",
        "-1",
        "0.5",
        "1.0",
        "1.5",
        "1e3",
        "-1.5e3",
        "2.5E-3",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
    ];
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        prop::sample::select(EDGES).prop_map(String::from),
    ]
}

/// A `serde_json::Value` of any shape: every kind, any `u64`, `i64` and finite float, any string
/// and escaped ones, nested four deep, keys with escapes.
pub fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        escaped_string(8).prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((escaped_string(4), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A string's JSON text.
pub fn string_text(max: usize) -> impl Strategy<Value = String> {
    escaped_string(max).prop_map(|s| Value::String(s).to_string())
}

/// An object's text: `members` members keyed from `keys` (a key may repeat, as a reader must
/// refuse or settle), each value from `value`; compact or with spaces after `:` and `,`.
pub fn object_text(
    keys: &'static [&'static str],
    value: impl Strategy<Value = String>,
    members: Range<usize>,
) -> impl Strategy<Value = String> {
    (prop::collection::vec((prop::sample::select(keys), value), members), any::<bool>()).prop_map(|(kv, spaced)| {
        let (colon, comma) = if spaced { (": ", ", ") } else { (":", ",") };
        let body: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\"{colon}{v}")).collect();
        format!("{{{}}}", body.join(comma))
    })
}

/// An array's text: `items` items from `item`.
pub fn array_text(item: impl Strategy<Value = String>, items: Range<usize>) -> impl Strategy<Value = String> {
    prop::collection::vec(item, items).prop_map(|v| format!("[{}]", v.join(",")))
}

/// Objects (keyed from `keys`, up to `members` members) and arrays (up to two items) nested four
/// deep over `leaf`: the shapes a reader of a wire type meets, right and wrong. `branch` is
/// proptest's expected branch size.
pub fn nested_text(
    leaf: impl Strategy<Value = String> + 'static,
    keys: &'static [&'static str],
    members: Range<usize>,
    branch: u32,
) -> impl Strategy<Value = String> {
    leaf.prop_recursive(4, 24, branch, move |inner| {
        prop_oneof![object_text(keys, inner.clone(), members.clone()), array_text(inner, 0..3)]
    })
}
