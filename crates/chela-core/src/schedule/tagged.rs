//! `Deserialize` for [`Trigger`] and [`Action`], the internally tagged `{"type": "cron", …}`
//! objects of `cron.json`, read in one pass, field by field.
//!
//! serde's derive for an internally tagged enum buffers the whole object in its private
//! `Content` tree to find the tag first; on the chip that path was about 17 KB of the image
//! budget. Here each field is read into its slot as it comes, the tag wherever it is, and
//! the checks and messages are serde's own: an unknown `type` is ``unknown variant `x`, expected
//! one of …``, a field the variant does not have is ``unknown field `x`, expected …`` (with
//! that variant's fields), a repeated one ``duplicate field `x` ``, a missing one
//! ``missing field `x` ``. The format is unchanged; serialising stays derived.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::marker::PhantomData;

use serde::de::{Error, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{Action, Trigger};

/// The tag's key.
const TAG: &str = "type";

/// An internally tagged enum, as data: its variants, each variant's fields, and how to read a
/// field and build a variant from what was read.
trait Tagged: Sized {
    /// What serde's derive names it in "invalid type" messages.
    const EXPECTING: &'static str;
    const VARIANTS: &'static [&'static str];
    /// The fields of each variant, in `VARIANTS`' order.
    const FIELDS: &'static [&'static [&'static str]];
    type Slots: Default;

    /// Reads the value of field `key` into its slot and answers the field's name; `None` (and
    /// nothing read) when no variant has that field.
    fn read<'de, A: MapAccess<'de>>(
        slots: &mut Self::Slots,
        key: &str,
        map: &mut A,
    ) -> Result<Option<&'static str>, A::Error>;

    /// Variant `variant` from its slots.
    fn build<E: Error>(variant: usize, slots: Self::Slots) -> Result<Self, E>;
}

struct TaggedVisitor<T>(PhantomData<T>);

impl<'de, T: Tagged> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut variant: Option<usize> = None;
        let mut slots = T::Slots::default();
        // The fields read so far (at most every field of every variant, each once), and the
        // first key no variant has, for the checks once the tag is known.
        let mut seen: Vec<&'static str> = Vec::new();
        let mut stray: Option<String> = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == TAG {
                if variant.is_some() {
                    return Err(A::Error::duplicate_field(TAG));
                }
                let name: String = map.next_value()?;
                let Some(v) = T::VARIANTS.iter().position(|&n| n == name) else {
                    return Err(A::Error::unknown_variant(&name, T::VARIANTS));
                };
                let allowed = T::FIELDS[v];
                if let Some(field) = stray.as_deref().or_else(|| seen.iter().copied().find(|f| !allowed.contains(f))) {
                    return Err(A::Error::unknown_field(field, allowed));
                }
                variant = Some(v);
                continue;
            }
            if let Some(v) = variant
                && !T::FIELDS[v].contains(&key.as_str())
            {
                return Err(A::Error::unknown_field(&key, T::FIELDS[v]));
            }
            match T::read(&mut slots, &key, &mut map)? {
                Some(field) if seen.contains(&field) => return Err(A::Error::duplicate_field(field)),
                Some(field) => seen.push(field),
                None => {
                    map.next_value::<IgnoredAny>()?;
                    stray.get_or_insert(key);
                }
            }
        }
        let Some(v) = variant else {
            return Err(A::Error::missing_field(TAG));
        };
        T::build(v, slots)
    }
}

fn required<T, E: Error>(slot: Option<T>, field: &'static str) -> Result<T, E> {
    slot.ok_or_else(|| E::missing_field(field))
}

#[derive(Default)]
struct TriggerSlots {
    at: Option<i64>,
    every_s: Option<u64>,
    anchor: Option<i64>,
    expr: Option<String>,
    tz: Option<Option<String>>,
    event: Option<String>,
    filter: Option<BTreeMap<String, String>>,
}

impl Tagged for Trigger {
    const EXPECTING: &'static str = "internally tagged enum Trigger";
    const VARIANTS: &'static [&'static str] = &["once", "interval", "cron", "on_event"];
    const FIELDS: &'static [&'static [&'static str]] =
        &[&["at"], &["every_s", "anchor"], &["expr", "tz"], &["event", "match"]];
    type Slots = TriggerSlots;

    fn read<'de, A: MapAccess<'de>>(
        s: &mut TriggerSlots,
        key: &str,
        map: &mut A,
    ) -> Result<Option<&'static str>, A::Error> {
        Ok(Some(match key {
            "at" => {
                s.at = Some(map.next_value()?);
                "at"
            }
            "every_s" => {
                s.every_s = Some(map.next_value()?);
                "every_s"
            }
            "anchor" => {
                s.anchor = Some(map.next_value()?);
                "anchor"
            }
            "expr" => {
                s.expr = Some(map.next_value()?);
                "expr"
            }
            "tz" => {
                s.tz = Some(map.next_value()?);
                "tz"
            }
            "event" => {
                s.event = Some(map.next_value()?);
                "event"
            }
            "match" => {
                s.filter = Some(map.next_value()?);
                "match"
            }
            _ => return Ok(None),
        }))
    }

    fn build<E: Error>(variant: usize, s: TriggerSlots) -> Result<Trigger, E> {
        Ok(match variant {
            0 => Trigger::Once { at: required(s.at, "at")? },
            1 => Trigger::Interval { every_s: required(s.every_s, "every_s")?, anchor: s.anchor.unwrap_or_default() },
            2 => Trigger::Cron { expr: required(s.expr, "expr")?, tz: s.tz.flatten() },
            _ => Trigger::OnEvent { event: required(s.event, "event")?, filter: s.filter.unwrap_or_default() },
        })
    }
}

impl<'de> Deserialize<'de> for Trigger {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Trigger, D::Error> {
        d.deserialize_map(TaggedVisitor(PhantomData))
    }
}

#[derive(Default)]
struct ActionSlots {
    message: Option<String>,
    channel: Option<Option<String>>,
    chat_id: Option<Option<String>>,
    name: Option<String>,
    args: Option<serde_json::Value>,
    event: Option<String>,
    data: Option<serde_json::Value>,
}

impl Tagged for Action {
    const EXPECTING: &'static str = "internally tagged enum Action";
    const VARIANTS: &'static [&'static str] = &["agent", "cap", "emit"];
    const FIELDS: &'static [&'static [&'static str]] =
        &[&["message", "channel", "chat_id"], &["name", "args"], &["event", "data"]];
    type Slots = ActionSlots;

    fn read<'de, A: MapAccess<'de>>(
        s: &mut ActionSlots,
        key: &str,
        map: &mut A,
    ) -> Result<Option<&'static str>, A::Error> {
        Ok(Some(match key {
            "message" => {
                s.message = Some(map.next_value()?);
                "message"
            }
            "channel" => {
                s.channel = Some(map.next_value()?);
                "channel"
            }
            "chat_id" => {
                s.chat_id = Some(map.next_value()?);
                "chat_id"
            }
            "name" => {
                s.name = Some(map.next_value()?);
                "name"
            }
            "args" => {
                s.args = Some(map.next_value()?);
                "args"
            }
            "event" => {
                s.event = Some(map.next_value()?);
                "event"
            }
            "data" => {
                s.data = Some(map.next_value()?);
                "data"
            }
            _ => return Ok(None),
        }))
    }

    fn build<E: Error>(variant: usize, s: ActionSlots) -> Result<Action, E> {
        Ok(match variant {
            0 => Action::Agent {
                message: required(s.message, "message")?,
                channel: s.channel.flatten(),
                chat_id: s.chat_id.flatten(),
            },
            1 => Action::Cap { name: required(s.name, "name")?, args: s.args.unwrap_or_default() },
            _ => Action::Emit { event: required(s.event, "event")?, data: s.data.unwrap_or_default() },
        })
    }
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Action, D::Error> {
        d.deserialize_map(TaggedVisitor(PhantomData))
    }
}
