//! `cron.json`'s jobs read with the pull reader ([`chela_proto::json::read`]), one pass, field
//! by field, and written by hand ([`write_job`]), on the host and the chip alike.
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
//! add`) goes through here too, by the value's text, and `Serialize` through the writer, which
//! writes the derive's text byte for byte.

use alloc::borrow::ToOwned;
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use core::fmt::Write as _;

use chela_proto::json::read::{self, Kind, Reader};
use chela_proto::json::write_escaped;
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

// The refusals are built out of line, one copy each: they are the rare path, and inlined at
// every field they were most of this reader's size on the chip.

#[cold]
#[inline(never)]
fn refuse(r: &Reader<'_>, message: String) -> Refused {
    Refused { message, offset: r.offset() }
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

#[cold]
#[inline(never)]
fn unknown_field(r: &Reader<'_>, key: &str, fields: &[&str]) -> Refused {
    refuse(r, format!("unknown field `{key}`, expected {}", one_of(fields)))
}

#[cold]
#[inline(never)]
fn duplicate(r: &Reader<'_>, field: &str) -> Refused {
    refuse(r, format!("duplicate field `{field}`"))
}

#[cold]
#[inline(never)]
fn missing(r: &Reader<'_>, field: &str) -> Refused {
    refuse(r, format!("missing field `{field}`"))
}

#[cold]
#[inline(never)]
fn invalid_value(r: &Reader<'_>, n: i128, expected: &str) -> Refused {
    refuse(r, format!("invalid value: integer `{n}`, expected {expected}"))
}

#[cold]
#[inline(never)]
fn unknown_variant(r: &Reader<'_>, name: &str, variants: &[&str]) -> Refused {
    refuse(r, format!("unknown variant `{name}`, expected {}", one_of(variants)))
}

fn required<T>(r: &Reader<'_>, slot: Option<T>, field: &str) -> Result<T> {
    slot.ok_or_else(|| missing(r, field))
}

/// ``invalid type: integer `3`, expected a string``: reads the value that is not what was
/// expected, to say what it is, as serde_json does.
#[cold]
#[inline(never)]
pub(super) fn invalid_type(r: &mut Reader<'_>, expected: &str) -> Refused {
    let what = match describe(r) {
        Ok(what) => what,
        Err(e) => return e,
    };
    refuse(r, format!("invalid type: {what}, expected {expected}"))
}

fn describe(r: &mut Reader<'_>) -> Result<String> {
    Ok(match r.peek()? {
        Kind::Null => {
            r.null()?;
            String::from("null")
        }
        Kind::Bool => format!("boolean `{}`", r.bool()?),
        Kind::Number => number_text(r)?,
        Kind::String => format!("string {:?}", r.str()?),
        Kind::Array => String::from("sequence"),
        Kind::Object => String::from("map"),
    })
}

/// A number as serde_json classifies it, read without parsing a float (core's float parser and
/// its tables are about 14 KB of the chip's image): an integer that fits `u64` or `i64`, or the
/// text of anything else.
enum Num<'a> {
    Int(i128),
    Other(&'a str),
}

fn num<'a>(r: &mut Reader<'a>) -> Result<Num<'a>> {
    let text = r.number_text()?;
    // `-0` is a float to serde_json.
    let integral = !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) && text != "-0";
    Ok(match text.parse::<i128>() {
        Ok(n) if integral && n >= i128::from(i64::MIN) && n <= i128::from(u64::MAX) => Num::Int(n),
        _ => Num::Other(text),
    })
}

/// `` integer `-5` `` or `` floating point `1.5` ``, as serde_json names a number it refuses.
fn number_text(r: &mut Reader<'_>) -> Result<String> {
    Ok(match num(r)? {
        Num::Int(n) => format!("integer `{n}`"),
        Num::Other(text) => format!("floating point `{text}`"),
    })
}

fn string(r: &mut Reader<'_>) -> Result<String> {
    if r.peek()? != Kind::String {
        return Err(invalid_type(r, "a string"));
    }
    Ok(r.string_owned()?)
}

fn boolean(r: &mut Reader<'_>) -> Result<bool> {
    if r.peek()? != Kind::Bool {
        return Err(invalid_type(r, "a boolean"));
    }
    Ok(r.bool()?)
}

/// An integer of a type that holds `min..=max`, named `name` in messages.
fn integer(r: &mut Reader<'_>, name: &str, min: i128, max: i128) -> Result<i128> {
    if r.peek()? != Kind::Number {
        return Err(invalid_type(r, name));
    }
    let at = r.clone();
    let Num::Int(n) = num(r)? else {
        *r = at;
        return Err(invalid_type(r, name));
    };
    if n < min || n > max {
        return Err(invalid_value(r, n, name));
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
        return Err(invalid_type(r, expected));
    }
    Ok(r.begin_object()?)
}

/// Any JSON value, as `serde_json::Value` holds it (a repeated key: the last one), its floats
/// read by serde_json's own parser: a job's floats are the ones the derive read, and core's
/// float parser stays out of the chip's image.
pub fn value(r: &mut Reader<'_>) -> Result<Value> {
    Ok(read::value::value(r, read::value::serde_number)?)
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
        return Err(invalid_type(r, "a sequence"));
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
        return Err(duplicate(r, fields[i]));
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
            return Err(unknown_field(r, &key, MADE_BY));
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
            return Err(unknown_field(r, &key, JOB));
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
    value: &mut dyn FnMut(&mut Reader<'a>, usize) -> Result<()>,
) -> Result<usize> {
    begin_object(r, t.expecting)?;
    let mut variant: Option<usize> = None;
    let mut seen = 0u32;
    // The first key no variant has, for the check once the tag is known.
    let mut stray: Option<String> = None;
    while let Some(key) = r.next_key()? {
        if key == "type" {
            if variant.is_some() {
                return Err(duplicate(r, "type"));
            }
            let name = string(r)?;
            let Some(v) = t.variants.iter().position(|n| *n == name) else {
                return Err(unknown_variant(r, &name, t.variants));
            };
            let allowed = t.fields[v];
            let read_other = (0..t.all.len()).find(|&i| seen & (1 << i) != 0 && !allowed.contains(&t.all[i]));
            if let Some(field) = stray.as_deref().or_else(|| read_other.map(|i| t.all[i])) {
                return Err(unknown_field(r, field, allowed));
            }
            variant = Some(v);
            continue;
        }
        if let Some(v) = variant
            && !t.fields[v].contains(&&*key)
        {
            return Err(unknown_field(r, &key, t.fields[v]));
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
    variant.ok_or_else(|| missing(r, "type"))
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
    let v = tagged(r, &TRIGGER, &mut |r, i| {
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
    let v = tagged(r, &ACTION, &mut |r, i| {
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

/// Appends `job` as compact JSON, the text serde's derive wrote (field order, and the same
/// fields left out when empty), so that files written before read back unchanged.
pub fn write_job(out: &mut String, job: &Job) {
    out.push_str("{\"id\":");
    write_escaped(out, &job.id);
    if !job.name.is_empty() {
        out.push_str(",\"name\":");
        write_escaped(out, &job.name);
    }
    out.push_str(if job.enabled { ",\"enabled\":true" } else { ",\"enabled\":false" });
    out.push_str(if job.paused { ",\"paused\":true" } else { ",\"paused\":false" });
    out.push_str(",\"trigger\":");
    write_trigger(out, &job.trigger);
    out.push_str(",\"action\":");
    write_action(out, &job.action);
    if let Some(g) = job.grace_s {
        let _ = write!(out, ",\"grace_s\":{g}");
    }
    out.push_str(if job.delete_after_run { ",\"delete_after_run\":true" } else { ",\"delete_after_run\":false" });
    if let Some(t) = job.created_at {
        let _ = write!(out, ",\"created_at\":{t}");
    }
    if let Some(t) = job.last_run {
        let _ = write!(out, ",\"last_run\":{t}");
    }
    if let Some(m) = &job.made_by {
        out.push_str(",\"made_by\":");
        write_made_by(out, m);
    }
    out.push('}');
}

fn field_str(out: &mut String, key: &str, value: &str) {
    out.push_str(",\"");
    out.push_str(key);
    out.push_str("\":");
    write_escaped(out, value);
}

fn write_trigger(out: &mut String, t: &Trigger) {
    match t {
        Trigger::Once { at } => {
            let _ = write!(out, "{{\"type\":\"once\",\"at\":{at}}}");
        }
        Trigger::Interval { every_s, anchor } => {
            let _ = write!(out, "{{\"type\":\"interval\",\"every_s\":{every_s},\"anchor\":{anchor}}}");
        }
        Trigger::Cron { expr, tz } => {
            out.push_str("{\"type\":\"cron\"");
            field_str(out, "expr", expr);
            if let Some(tz) = tz {
                field_str(out, "tz", tz);
            }
            out.push('}');
        }
        Trigger::OnEvent { event, filter } => {
            out.push_str("{\"type\":\"on_event\"");
            field_str(out, "event", event);
            if !filter.is_empty() {
                out.push_str(",\"match\":{");
                for (i, (k, v)) in filter.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_escaped(out, k);
                    out.push(':');
                    write_escaped(out, v);
                }
                out.push('}');
            }
            out.push('}');
        }
    }
}

fn write_action(out: &mut String, a: &Action) {
    match a {
        Action::Agent { message, channel, chat_id } => {
            out.push_str("{\"type\":\"agent\"");
            field_str(out, "message", message);
            if let Some(c) = channel {
                field_str(out, "channel", c);
            }
            if let Some(c) = chat_id {
                field_str(out, "chat_id", c);
            }
        }
        Action::Cap { name, args } => {
            out.push_str("{\"type\":\"cap\"");
            field_str(out, "name", name);
            out.push_str(",\"args\":");
            write_value(out, args);
        }
        Action::Emit { event, data } => {
            out.push_str("{\"type\":\"emit\"");
            field_str(out, "event", event);
            out.push_str(",\"data\":");
            write_value(out, data);
        }
    }
    out.push('}');
}

fn write_made_by(out: &mut String, m: &MadeBy) {
    out.push_str("{\"channel\":");
    write_escaped(out, &m.channel);
    field_str(out, "chat_id", &m.chat_id);
    if !m.groups.is_empty() {
        out.push_str(",\"groups\":[");
        for (i, g) in m.groups.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_escaped(out, g);
        }
        out.push(']');
    }
    if m.approved {
        out.push_str(",\"approved\":true");
    }
    out.push('}');
}

/// Appends `v` as compact JSON, as serde_json writes it. Recursive: a value read here is at most
/// [`read::MAX_DEPTH`] deep.
pub fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_escaped(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_escaped(out, k);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// `Serialize` for the job types through the writer above (the host's listings and tools put
/// jobs into JSON replies): one writing of a job for every caller. It serialises a map of the
/// written fields, each value as written, the derive's shape, so that `#[serde(flatten)]` around
/// a job works as it did.
macro_rules! serialize_with {
    ($ty:ty, $write:path) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
                use serde::ser::{Error as _, SerializeMap as _};
                let mut text = String::new();
                $write(&mut text, self);
                let mut r = Reader::new(text.as_bytes());
                let mut map = s.serialize_map(None)?;
                r.begin_object().map_err(S::Error::custom)?;
                while let Some(key) = r.next_key().map_err(S::Error::custom)? {
                    let value = r.raw().map_err(S::Error::custom)?.to_owned();
                    let raw = serde_json::value::RawValue::from_string(value).map_err(S::Error::custom)?;
                    map.serialize_entry(&*key, &raw)?;
                }
                map.end()
            }
        }
    };
}

serialize_with!(Job, write_job);
serialize_with!(Trigger, write_trigger);
serialize_with!(Action, write_action);

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
