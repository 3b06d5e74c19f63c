//! The pull JSON reader against serde_json: the same bytes are accepted or refused alike, with
//! the same values; skipping checks what reading checks (but a number's range); `raw` gives a value's exact text; a
//! refusal's offset is inside the input.
#![no_main]

use chela_proto::json::read::{Kind, Number, Reader, read_all};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fn value(r: &mut Reader<'_>) -> chela_proto::json::read::Result<Value> {
    Ok(match r.peek()? {
        Kind::Null => {
            r.null()?;
            Value::Null
        }
        Kind::Bool => Value::Bool(r.bool()?),
        Kind::String => Value::String(r.string_owned()?),
        Kind::Number => match r.number()? {
            Number::U64(n) => Value::from(n),
            Number::I64(n) => Value::from(n),
            Number::F64(f) => Value::from(f),
        },
        Kind::Array => {
            r.begin_array()?;
            let mut items = Vec::new();
            while r.next_item()? {
                items.push(value(r)?);
            }
            Value::Array(items)
        }
        Kind::Object => {
            r.begin_object()?;
            let mut map = Map::new();
            while let Some(k) = r.next_key()? {
                let v = value(r)?;
                map.insert(k.into_owned(), v);
            }
            Value::Object(map)
        }
    })
}

/// Equal, floats within serde_json's best-effort rounding (core's parser rounds correctly).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x == y || (x - y).abs() <= f64::EPSILON * 4.0 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    let ours = read_all(data, value);
    match (&ours, serde_json::from_slice::<Value>(data)) {
        (Ok(a), Ok(b)) => assert!(same(a, &b), "{a} != {b}"),
        (Err(e), Err(_)) => assert!(e.offset <= data.len(), "{e} past the input's {} bytes", data.len()),
        (a, b) => panic!("the reader says {a:?}, serde_json says {b:?}"),
    }
    // Skipping checks what reading checks but a number's range (as serde_json's skipping does).
    match (read_all(data, Reader::skip), &ours) {
        (Ok(()), Ok(_)) | (Err(_), Err(_)) => {}
        (Ok(()), Err(e)) => assert_eq!(e.what, "number out of range", "skip passed what read refused"),
        (Err(e), Ok(_)) => panic!("skip refused what read accepts: {e}"),
    }
    if ours.is_ok() {
        let raw = read_all(data, Reader::raw).expect("raw refused what read accepted");
        assert_eq!(raw, String::from_utf8_lossy(data).trim_matches([' ', '\t', '\n', '\r']));
    }
});
