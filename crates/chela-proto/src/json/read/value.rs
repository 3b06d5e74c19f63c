//! A `serde_json::Value` read with the pull reader, for the places that keep a value whole: a
//! scheduled job's arguments and the oracle the reader is held against.
//!
//! The caller says how numbers are read ([`serde_number`] or [`core_number`]): the two differ
//! only in whose float parser reads a fraction or an exponent, and that is a choice of what an
//! image links, not of what the value means.

use alloc::vec::Vec;

use serde_json::{Map, Number, Value};

use super::{Error, Kind, Reader, Result};

/// Reads one value, each number with `number` (a repeated key: the last one, as serde_json
/// keeps it). Recursive: the depth is bounded by the reader's own limit.
pub fn value(r: &mut Reader<'_>, number: fn(&mut Reader<'_>) -> Result<Number>) -> Result<Value> {
    Ok(match r.peek()? {
        Kind::Null => {
            r.null()?;
            Value::Null
        }
        Kind::Bool => Value::Bool(r.bool()?),
        Kind::Number => Value::Number(number(r)?),
        Kind::String => Value::String(r.string_owned()?),
        Kind::Array => {
            r.begin_array()?;
            let mut items = Vec::new();
            while r.next_item()? {
                items.push(value(r, number)?);
            }
            Value::Array(items)
        }
        Kind::Object => {
            r.begin_object()?;
            let mut map = Map::new();
            while let Some(key) = r.next_key()? {
                let v = value(r, number)?;
                map.insert(key.into_owned(), v);
            }
            Value::Object(map)
        }
    })
}

/// A number as serde_json reads it, floats by serde_json's own parser (its `Number: FromStr`):
/// the floats the serde derives read, and core's float parser stays out of an image (the chip's)
/// that reads numbers only this way.
pub fn serde_number(r: &mut Reader<'_>) -> Result<Number> {
    let at = r.offset();
    let text = r.number_text()?;
    // `-0` is a float to serde_json.
    let integral = !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) && text != "-0";
    if integral {
        if let Ok(n) = text.parse::<u64>() {
            return Ok(n.into());
        }
        if let Ok(n) = text.parse::<i64>() {
            return Ok(n.into());
        }
    }
    text.parse::<Number>().map_err(|_| Error { what: "number out of range", offset: at })
}

/// A number read by [`Reader::number`] (floats by core's correctly rounded parser).
pub fn core_number(r: &mut Reader<'_>) -> Result<Number> {
    let at = r.offset();
    match r.number()? {
        super::Number::U64(n) => Ok(n.into()),
        super::Number::I64(n) => Ok(n.into()),
        // `Reader::number` refuses a float that is not finite, the one `from_f64` turns down.
        super::Number::F64(f) => Number::from_f64(f).ok_or(Error { what: "number out of range", offset: at }),
    }
}
