//! xiaozhi's device protocol, fed outside bytes: the binary frames of versions 1, 2 and 3 (what
//! parses re-encodes to the same bytes, reserved fields aside), the JSON text messages (what
//! parses survives `to_json` and parses the same), and the OTA and activation bodies.
#![no_main]

use chela_proto::xiaozhi::frame::{self, Version};
use chela_proto::xiaozhi::message;
use chela_proto::xiaozhi::ota::{self, ActivateRequest, SystemInfo};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("to_json writes JSON")
}

/// Equal, except that two numbers may differ by the last unit of an f64.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) if x.is_finite() && y.is_finite() => {
                x == y || (x - y).abs() <= 2.0 * f64::EPSILON * x.abs().max(y.abs())
            }
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    for v in [Version::V1, Version::V2, Version::V3] {
        if let Ok(f) = frame::parse(v, data) {
            let mut out = Vec::new();
            frame::encode(v, &f, &mut out).expect("a parsed frame encodes");
            assert_eq!(out.len(), data.len(), "a frame changed length through parse and encode");
            assert_eq!(&out[v.header_len()..], &data[v.header_len()..]);
            assert_eq!(frame::parse(v, &out).expect("an encoded frame parses"), f);
        }
    }
    let text = String::from_utf8_lossy(data);
    if let Ok(m) = message::parse(&text) {
        let again = message::parse(&m.to_json()).expect("an encoded message parses");
        if again != m {
            // serde_json parses decimals without `float_roundtrip` (smaller and faster, on the
            // chip too), so a long decimal may come back one unit in the last place apart; the
            // message is otherwise the same, field for field.
            let (a, b) = (json(&m.to_json()), json(&again.to_json()));
            assert!(same(&a, &b), "a message changed through to_json and parse: {m:?} became {again:?}");
        }
    }
    let _ = ota::parse_body::<SystemInfo>(data);
    let _ = ota::parse_body::<ActivateRequest>(data);
    // Two version strings from one input: split where a character starts.
    if let Some((a, b)) = text.split_at_checked(text.len() / 2) {
        let _ = ota::compare_versions(a, b);
    }
});
