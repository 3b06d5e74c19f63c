//! `cron.json`'s jobs read with the pull reader ([`chela_proto::json::read`]), one pass, field
//! by field, on the host and the chip alike.
//!
//! Why not serde's derives: every derived type links its visitor and a monomorph of serde_json's
//! parser, and the internally tagged `{"type": "cron", …}` enums buffered the whole object in
//! serde's `Content` tree to find the tag; on the chip that was kilobytes for a handful of small
//! types. The checks and the messages are the derives' own, which people already see: an unknown
//! `type` is ``unknown variant `x`, expected one of …``, a field the struct or the variant does
//! not have is ``unknown field `x`, expected …``, a repeated one ``duplicate field `x` ``, a
//! missing one ``missing field `x` ``, a value of the wrong kind ``invalid type: integer `3`,
//! expected a string``. Two deliberate differences: a struct written as an array (`["id", …]`,
//! which the derives took field by field) is refused, and a float in a message is quoted as
//! written rather than re-printed. `Deserialize` for the types (the host's tools, `chela cron
//! add`) goes through here too, by the value's text. Serialising stays derived.

use alloc::borrow::ToOwned;
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::json::read::{self, Kind, Number, Reader};
use serde_json::Value;

use super::{Action, Job, Trigger};
use crate::router::MadeBy;

/// Why JSON text was refused as a job (or part of one): serde's wording, and the byte offset
/// where it was noticed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub message: String,
    pub offset: usize,
}

impl From<read::Error> for Refused {
    fn from(e: read::Error) -> Refused {
        Refused { message: e.what.to_owned(), offset: e.offset }
    }
}

impl core::fmt::Display for Refused {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.message)
    }
}

pub type Result<T> = core::result::Result<T, Refused>;

/// Reads a whole text with `read`: nothing but whitespace may follow the value.
pub fn parse<'a, T>(text: &'a str, read: impl FnOnce(&mut Reader<'a>) -> Result<T>) -> Result<T> {
    let mut r = Reader::new(text.as_bytes());
    let v = read(&mut r)?;
    r.end()?;
    Ok(v)
}

fn refuse<T>(r: &Reader<'_>, message: String) -> Result<T> {
    Err(Refused { message, offset: r.offset() })
}

/// `` `a` ``, `` `a` or `b` ``, `` one of `a`, `b`, `c` ``: serde's list of what was expected.
fn one_of(names: &[&str]) -> String {
    match names {
        [a] => format!("`{a}`"),
        [a, b] => format!("`{a}` or `{b}`"),
        _ => {
            let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("one of {}", list.join(", "))
        }
    }
}

fn unknown_field<T>(r: &Reader<'_>, key: &str, fields: &[&str]) -> Result<T> {
    refuse(r, format!("unknown field `{key}`, expected {}", one_of(fields)))
}

fn duplicate<T>(r: &Reader<'_>, field: &str) -> Result<T> {
    refuse(r, format!("duplicate field `{field}`"))
}

fn missing<T>(r: &Reader<'_>, field: &str) -> Result<T> {
    refuse(r, format!("missing field `{field}`"))
}

fn required<T>(r: &Reader<'_>, slot: Option<T>, field: &str) -> Result<T> {
    match slot {
        Some(v) => Ok(v),
        None => missing(r, field),
    }
}

/// ``invalid type: integer `3`, expected a string``: reads the value that is not what was
/// expected, to say what it is, as serde_json does.
pub(super) fn invalid_type<T>(r: &mut Reader<'_>, expected: &str) -> Result<T> {
    let what = match r.peek()? {
        Kind::Null => {
            r.null()?;
            String::from("null")
        }
        Kind::Bool => format!("boolean `{}`", r.bool()?),
        Kind::Number => number_text(r)?,
        Kind::String => format!("string {:?}", r.str()?),
        Kind::Array => String::from("sequence"),
        Kind::Object => String::from("map"),
    };
    refuse(r, format!("invalid type: {what}, expected {expected}"))
}

/// `` integer `-5` `` or `` floating point `1.5` ``, as serde_json names a number it refuses.
fn number_text(r: &mut Reader<'_>) -> Result<String> {
    let text = r.clone().number_text()?;
    Ok(match r.number()? {
        Number::U64(n) => format!("integer `{n}`"),
        Number::I64(n) => format!("integer `{n}`"),
        Number::F64(_) => format!("floating point `{text}`"),
    })
}

fn string(r: &mut Reader<'_>) -> Result<String> {
    if r.peek()? != Kind::String {
        return invalid_type(r, "a string");
    }
    Ok(r.string_owned()?)
}

fn boolean(r: &mut Reader<'_>) -> Result<bool> {
    if r.peek()? != Kind::Bool {
        return invalid_type(r, "a boolean");
    }
    Ok(r.bool()?)
}

/// An integer of a type that holds `min..=max`, named `name` in messages.
fn integer(r: &mut Reader<'_>, name: &str, min: i128, max: i128) -> Result<i128> {
    if r.peek()? != Kind::Number {
        return invalid_type(r, name);
    }
    let n = match r.clone().number()? {
        Number::U64(n) => i128::from(n),
        Number::I64(n) => i128::from(n),
        Number::F64(_) => return invalid_type(r, name),
    };
    r.number()?;
    if n < min || n > max {
        return refuse(r, format!("invalid value: integer `{n}`, expected {name}"));
    }
    Ok(n)
}

fn u64(r: &mut Reader<'_>) -> Result<u64> {
    integer(r, "u64", 0, i128::from(u64::MAX)).map(|n| n as u64)
}

/// The file's `version`.
pub(super) fn opt_u32(r: &mut Reader<'_>) -> Result<Option<u32>> {
    opt(r, |r| integer(r, "u32", 0, i128::from(u32::MAX)).map(|n| n as u32))
}

fn i64(r: &mut Reader<'_>) -> Result<i64> {
    integer(r, "i64", i128::from(i64::MIN), i128::from(i64::MAX)).map(|n| n as i64)
}

/// An `Option`: `null` is `None`.
fn opt<'a, T>(r: &mut Reader<'a>, read: impl FnOnce(&mut Reader<'a>) -> Result<T>) -> Result<Option<T>> {
    if r.take_null()? { Ok(None) } else { read(r).map(Some) }
}

/// Opens an object, or says the value is not the `expected` one.
fn begin_object(r: &mut Reader<'_>, expected: &str) -> Result<()> {
    if r.peek()? != Kind::Object {
        return invalid_type(r, expected);
    }
    Ok(r.begin_object()?)
}

/// Any JSON value, as `serde_json::Value` holds it (a repeated key: the last one).
pub fn value(r: &mut Reader<'_>) -> Result<Value> {
    Ok(match r.peek()? {
        Kind::Null => {
            r.null()?;
            Value::Null
        }
        Kind::Bool => Value::Bool(r.bool()?),
        Kind::Number => Value::Number(match r.number()? {
            Number::U64(n) => n.into(),
            Number::I64(n) => n.into(),
            // `number` answers finite floats only.
            Number::F64(f) => serde_json::Number::from_f64(f).unwrap_or_else(|| 0.into()),
        }),
        Kind::String => Value::String(r.string_owned()?),
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
            let mut map = serde_json::Map::new();
            while let Some(key) = r.next_key()? {
                let v = value(r)?;
                map.insert(key.into_owned(), v);
            }
            Value::Object(map)
        }
    })
}

/// `{"a": "b", …}` (a repeated key: the last one).
fn string_map(r: &mut Reader<'_>) -> Result<BTreeMap<String, String>> {
    begin_object(r, "a map")?;
    let mut map = BTreeMap::new();
    while let Some(key) = r.next_key()? {
        let v = string(r)?;
        map.insert(key.into_owned(), v);
    }
    Ok(map)
}

fn strings(r: &mut Reader<'_>) -> Result<Vec<String>> {
    if r.peek()? != Kind::Array {
        return invalid_type(r, "a sequence");
    }
    r.begin_array()?;
    let mut out = Vec::new();
    while r.next_item()? {
        out.push(string(r)?);
    }
    Ok(out)
}

/// Marks field `i` of `fields` as read, refusing it a second time.
fn once(r: &Reader<'_>, seen: &mut u32, fields: &[&str], i: usize) -> Result<()> {
    if *seen & (1 << i) != 0 {
        return duplicate(r, fields[i]);
    }
    *seen |= 1 << i;
    Ok(())
}

const MADE_BY: &[&str] = &["channel", "chat_id", "groups", "approved"];

/// A [`MadeBy`] object.
pub fn made_by(r: &mut Reader<'_>) -> Result<MadeBy> {
    begin_object(r, "struct MadeBy")?;
    let (mut channel, mut chat_id, mut groups, mut approved, mut seen) = (None, None, None, None, 0);
    while let Some(key) = r.next_key()? {
        let Some(i) = MADE_BY.iter().position(|f| *f == key) else {
            return unknown_field(r, &key, MADE_BY);
        };
        once(r, &mut seen, MADE_BY, i)?;
        match i {
            0 => channel = Some(string(r)?),
            1 => chat_id = Some(string(r)?),
            2 => groups = Some(strings(r)?),
            _ => approved = Some(boolean(r)?),
        }
    }
    Ok(MadeBy {
        channel: required(r, channel, "channel")?,
        chat_id: required(r, chat_id, "chat_id")?,
        groups: groups.unwrap_or_default(),
        approved: approved.unwrap_or_default(),
    })
}

const JOB: &[&str] = &[
    "id",
    "name",
    "enabled",
    "paused",
    "trigger",
    "action",
    "grace_s",
    "delete_after_run",
    "created_at",
    "last_run",
    "made_by",
];

/// A [`Job`] object.
pub fn job(r: &mut Reader<'_>) -> Result<Job> {
    begin_object(r, "struct Job")?;
    let mut id = None;
    let mut name = None;
    let mut enabled = None;
    let mut paused = None;
    let mut trigger = None;
    let mut action = None;
    let mut grace_s = None;
    let mut delete_after_run = None;
    let mut created_at = None;
    let mut last_run = None;
    let mut made = None;
    let mut seen = 0;
    while let Some(key) = r.next_key()? {
        let Some(i) = JOB.iter().position(|f| *f == key) else {
            return unknown_field(r, &key, JOB);
        };
        once(r, &mut seen, JOB, i)?;
        match i {
            0 => id = Some(string(r)?),
            1 => name = Some(string(r)?),
            2 => enabled = Some(boolean(r)?),
            3 => paused = Some(boolean(r)?),
            4 => trigger = Some(self::trigger(r)?),
            5 => action = Some(self::action(r)?),
            6 => grace_s = opt(r, u64)?,
            7 => delete_after_run = Some(boolean(r)?),
            8 => created_at = opt(r, i64)?,
            9 => last_run = opt(r, i64)?,
            _ => made = opt(r, made_by)?,
        }
    }
    Ok(Job {
        id: required(r, id, "id")?,
        name: name.unwrap_or_default(),
        enabled: enabled.unwrap_or(true),
        paused: paused.unwrap_or_default(),
        trigger: required(r, trigger, "trigger")?,
        action: required(r, action, "action")?,
        grace_s,
        delete_after_run: delete_after_run.unwrap_or_default(),
        created_at,
        last_run,
        made_by: made,
    })
}

/// An internally tagged enum: its name in messages, its variants, and each variant's fields.
struct Tagged {
    expecting: &'static str,
    variants: &'static [&'static str],
    fields: &'static [&'static [&'static str]],
    /// Every field of every variant, once: a field's bit in `seen` is its index here.
    all: &'static [&'static str],
}

/// Reads a tagged object: `value` reads the field at index `i` of `all` into its slot. The tag
/// may come anywhere; a field no variant has is refused once the tag is known, with that
/// variant's fields, as is a field of another variant. Answers the variant's index.
fn tagged<'a>(
    r: &mut Reader<'a>,
    t: &Tagged,
    mut value: impl FnMut(&mut Reader<'a>, usize) -> Result<()>,
) -> Result<usize> {
    begin_object(r, t.expecting)?;
    let mut variant: Option<usize> = None;
    let mut seen = 0u32;
    // The first key no variant has, for the check once the tag is known.
    let mut stray: Option<String> = None;
    while let Some(key) = r.next_key()? {
        if key == "type" {
            if variant.is_some() {
                return duplicate(r, "type");
            }
            let name = string(r)?;
            let Some(v) = t.variants.iter().position(|n| *n == name) else {
                return refuse(r, format!("unknown variant `{name}`, expected {}", one_of(t.variants)));
            };
            let allowed = t.fields[v];
            let read_other = (0..t.all.len()).find(|&i| seen & (1 << i) != 0 && !allowed.contains(&t.all[i]));
            if let Some(field) = stray.as_deref().or_else(|| read_other.map(|i| t.all[i])) {
                return unknown_field(r, field, allowed);
            }
            variant = Some(v);
            continue;
        }
        if let Some(v) = variant
            && !t.fields[v].contains(&&*key)
        {
            return unknown_field(r, &key, t.fields[v]);
        }
        match t.all.iter().position(|f| *f == key) {
            Some(i) => {
                once(r, &mut seen, t.all, i)?;
                value(r, i)?;
            }
            None => {
                r.skip()?;
                stray.get_or_insert_with(|| key.into_owned());
            }
        }
    }
    match variant {
        Some(v) => Ok(v),
        None => missing(r, "type"),
    }
}

const TRIGGER: Tagged = Tagged {
    expecting: "internally tagged enum Trigger",
    variants: &["once", "interval", "cron", "on_event"],
    fields: &[&["at"], &["every_s", "anchor"], &["expr", "tz"], &["event", "match"]],
    all: &["at", "every_s", "anchor", "expr", "tz", "event", "match"],
};

/// A [`Trigger`] object.
pub fn trigger(r: &mut Reader<'_>) -> Result<Trigger> {
    let (mut at, mut every_s, mut anchor, mut expr, mut tz, mut event, mut filter) =
        (None, None, None, None, None, None, None);
    let v = tagged(r, &TRIGGER, |r, i| {
        match i {
            0 => at = Some(i64(r)?),
            1 => every_s = Some(u64(r)?),
            2 => anchor = Some(i64(r)?),
            3 => expr = Some(string(r)?),
            4 => tz = opt(r, string)?,
            5 => event = Some(string(r)?),
            _ => filter = Some(string_map(r)?),
        }
        Ok(())
    })?;
    Ok(match v {
        0 => Trigger::Once { at: required(r, at, "at")? },
        1 => Trigger::Interval { every_s: required(r, every_s, "every_s")?, anchor: anchor.unwrap_or_default() },
        2 => Trigger::Cron { expr: required(r, expr, "expr")?, tz },
        _ => Trigger::OnEvent { event: required(r, event, "event")?, filter: filter.unwrap_or_default() },
    })
}

const ACTION: Tagged = Tagged {
    expecting: "internally tagged enum Action",
    variants: &["agent", "cap", "emit"],
    fields: &[&["message", "channel", "chat_id"], &["name", "args"], &["event", "data"]],
    all: &["message", "channel", "chat_id", "name", "args", "event", "data"],
};

/// An [`Action`] object.
pub fn action(r: &mut Reader<'_>) -> Result<Action> {
    let (mut message, mut channel, mut chat_id, mut name, mut args, mut event, mut data) =
        (None, None, None, None, None, None, None);
    let v = tagged(r, &ACTION, |r, i| {
        match i {
            0 => message = Some(string(r)?),
            1 => channel = opt(r, string)?,
            2 => chat_id = opt(r, string)?,
            3 => name = Some(string(r)?),
            4 => args = Some(value(r)?),
            5 => event = Some(string(r)?),
            _ => data = Some(value(r)?),
        }
        Ok(())
    })?;
    Ok(match v {
        0 => Action::Agent { message: required(r, message, "message")?, channel, chat_id },
        1 => Action::Cap { name: required(r, name, "name")?, args: args.unwrap_or_default() },
        _ => Action::Emit { event: required(r, event, "event")?, data: data.unwrap_or_default() },
    })
}

/// `Deserialize` through the reader above, by the value's text: one reading of these types for
/// every caller (serde_json keeps a repeated key in that text, so it is refused as here).
macro_rules! deserialize_with {
    ($ty:ty, $read:path) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> core::result::Result<$ty, D::Error> {
                let raw: Box<serde_json::value::RawValue> = serde::Deserialize::deserialize(d)?;
                parse(raw.get(), $read).map_err(<D::Error as serde::de::Error>::custom)
            }
        }
    };
}

deserialize_with!(Job, job);
deserialize_with!(Trigger, trigger);
deserialize_with!(Action, action);
deserialize_with!(MadeBy, made_by);

#[cfg(test)]
mod tests;
