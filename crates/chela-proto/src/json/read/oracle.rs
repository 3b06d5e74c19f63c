//! The pull reader held against serde_json, shared by its property tests and the `json_read`
//! fuzz target so the two check the same thing. Not part of the API: compiled for this crate's
//! tests and behind the `testing` feature, which only the fuzz crate enables.

use alloc::format;
use alloc::string::String;

use serde_json::Value;

use super::value::{core_number, value};
use super::{Reader, Result, read_all};

/// The whole of `bytes` read as a value, floats by core's parser: the reader's own
/// [`Reader::number`] is among what this holds against serde_json.
pub fn read_value(bytes: &[u8]) -> Result<Value> {
    read_all(bytes, |r| value(r, core_number))
}

/// Both values are equal, floats within serde_json's best-effort rounding (it is not correctly
/// rounded without its `float_roundtrip` feature; core's parser is).
pub fn same(a: &Value, b: &Value) -> bool {
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

/// The reader and serde_json accept and refuse the same bytes, with the same values; a refusal's
/// offset is inside the input; skipping checks what reading checks, except a number's range
/// (serde_json's skipping and its RawValue check only the grammar too); `raw` gives an accepted
/// value's exact text. `Err` says how they differ.
pub fn agree(bytes: &[u8]) -> core::result::Result<(), String> {
    let text = || String::from_utf8_lossy(bytes).into_owned();
    let ours = read_value(bytes);
    match (&ours, serde_json::from_slice::<Value>(bytes)) {
        (Ok(a), Ok(b)) if !same(a, &b) => return Err(format!("{a} != {b} for {:?}", text())),
        (Err(e), Err(_)) if e.offset > bytes.len() => {
            return Err(format!("{e} past the input's {} bytes", bytes.len()));
        }
        (Ok(_), Ok(_)) | (Err(_), Err(_)) => {}
        (a, b) => return Err(format!("the reader says {a:?}, serde_json says {b:?} for {:?}", text())),
    }
    match (read_all(bytes, Reader::skip), &ours) {
        (Ok(()), Ok(_)) | (Err(_), Err(_)) => {}
        (Ok(()), Err(e)) if e.what == "number out of range" => {}
        (Ok(()), Err(e)) => return Err(format!("skip passed what read refused ({e}) for {:?}", text())),
        (Err(e), Ok(_)) => return Err(format!("skip refused what read accepts: {e} for {:?}", text())),
    }
    if ours.is_ok() {
        let raw = read_all(bytes, Reader::raw).map_err(|e| format!("raw refused what read accepted: {e}"))?;
        let trimmed = text();
        let trimmed = trimmed.trim_matches([' ', '\t', '\n', '\r']);
        if raw != trimmed {
            return Err(format!("raw gave {raw:?} for {trimmed:?}"));
        }
    }
    Ok(())
}
