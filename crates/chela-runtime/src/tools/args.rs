//! Argument types read by hand, in a few lines each, through shared non-generic code.
//!
//! A derived `Deserialize` compiles a visitor per argument type (its field matching, slots,
//! duplicate checks and error paths): about 1.7 KB for each of sixty tools. An argument type
//! that implements `Deserialize` with [`read`] instead compiles one short function that takes its
//! fields out of an [`ArgMap`] by name; the map, the lookups and the errors are shared. The
//! values themselves are still read by serde (`String`, `u64`, an enum), so a wrong type is
//! refused with the derive's words ("invalid type: boolean `true`, expected a string"), a
//! missing field with "missing field `path`", an unknown one (where refused) with serde's
//! "unknown field" text, and the schema test still sees the field names.

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde_json::{Error, Map, Value};
use std::fmt;

/// `input` parsed as argument type `A`: the JSON text by [`args_value`], compiled once, then
/// `A`'s reading of the parsed value.
pub fn parse<A: DeserializeOwned>(input: &str) -> Result<A, Error> {
    args_value(input).and_then(A::deserialize)
}

/// `input` as a JSON value, refused as `serde_json::from_str` refuses it, and, as a derived
/// `Deserialize` refuses a field given twice, refused when the top-level object repeats a key.
#[inline(never)]
fn args_value(input: &str) -> Result<Value, Error> {
    let mut json = serde_json::Deserializer::from_str(input);
    let value = json.deserialize_any(ArgsVisitor)?;
    json.end()?;
    Ok(value)
}

/// Reads the top-level value of a tool's arguments (see [`args_value`]).
struct ArgsVisitor;

impl<'de> Visitor<'de> for ArgsVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.into()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        fields(map).map(Value::Object)
    }
}

/// An object's fields, refused when a key comes twice (as a derived `Deserialize` refuses a
/// field given twice).
fn fields<'de, A: MapAccess<'de>>(mut map: A) -> Result<Map<String, Value>, A::Error> {
    let mut fields = Map::new();
    while let Some(key) = map.next_key::<String>()? {
        if fields.contains_key(&key) {
            return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
        }
        let value = map.next_value()?;
        fields.insert(key, value);
    }
    Ok(fields)
}

/// What an argument type says about itself to [`read`].
pub struct Shape {
    /// The type's name, for "expected struct NAME".
    pub name: &'static str,
    /// Every name [`ArgMap`] is asked for, aliases included (serde's field list).
    pub fields: &'static [&'static str],
    /// Whether a name outside `fields` is refused (`#[serde(deny_unknown_fields)]`).
    pub deny_unknown: bool,
}

/// The arguments' object, its fields taken out one by one.
pub struct ArgMap(Map<String, Value>);

impl ArgMap {
    /// The value of field `name` parsed as `T`, `None` when absent (an explicit `null` is
    /// given to `T`, as the derive does: an `Option` reads it as `None`, a `u64` refuses it).
    pub fn get<T: DeserializeOwned>(&mut self, name: &'static str) -> Result<Option<T>, Error> {
        self.get_any(&[name])
    }

    /// [`ArgMap::get`] for a field that has aliases: `names[0]` and the older names after it;
    /// giving two of them is refused as a field given twice.
    pub fn get_any<T: DeserializeOwned>(&mut self, names: &[&'static str]) -> Result<Option<T>, Error> {
        self.take(names)?.map(T::deserialize).transpose()
    }

    /// A field that must be there.
    pub fn need<T: DeserializeOwned>(&mut self, name: &'static str) -> Result<T, Error> {
        self.get(name)?.ok_or_else(|| de::Error::missing_field(name))
    }

    /// A field whose absence means `T::default()` (`#[serde(default)]`).
    pub fn or_default<T: DeserializeOwned + Default>(&mut self, name: &'static str) -> Result<T, Error> {
        Ok(self.get(name)?.unwrap_or_default())
    }

    /// An optional field: absent or `null` is `None`.
    pub fn opt<T: DeserializeOwned>(&mut self, name: &'static str) -> Result<Option<T>, Error> {
        Ok(self.get::<Option<T>>(name)?.flatten())
    }

    #[inline(never)]
    fn take(&mut self, names: &[&'static str]) -> Result<Option<Value>, Error> {
        let mut found = None;
        for name in names {
            if let Some(v) = self.0.remove(*name) {
                if found.is_some() {
                    return Err(de::Error::duplicate_field(names[0]));
                }
                found = Some(v);
            }
        }
        Ok(found)
    }
}

/// Reads an argument type from `d`: the object's fields go into an [`ArgMap`] and `fill` takes
/// them out. The generic part is this call; the rest is compiled once.
pub fn read<'de, D: Deserializer<'de>, T>(
    d: D,
    shape: &'static Shape,
    fill: fn(&mut ArgMap) -> Result<T, Error>,
) -> Result<T, D::Error> {
    let map = d.deserialize_struct(shape.name, shape.fields, MapVisitor(shape))?;
    open(map, shape).and_then(|mut args| fill(&mut args)).map_err(de::Error::custom)
}

/// The fields as an [`ArgMap`], refused first if the type refuses unknown fields and has one.
#[inline(never)]
fn open(map: Map<String, Value>, shape: &Shape) -> Result<ArgMap, Error> {
    if shape.deny_unknown
        && let Some(key) = map.keys().find(|k| !shape.fields.contains(&k.as_str()))
    {
        return Err(de::Error::unknown_field(key, shape.fields));
    }
    Ok(ArgMap(map))
}

/// Collects an object's fields, for [`read`].
struct MapVisitor(&'static Shape);

impl<'de> Visitor<'de> for MapVisitor {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "struct {}", self.0.name)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        fields(map)
    }
}

/// Implements `Deserialize` for argument struct `$ty` through [`read`]: each field is read by
/// an [`ArgMap`] method, `need` (must be there), `or_default` (`#[serde(default)]`) or `opt`
/// (an `Option`); `strict` refuses unknown fields (`#[serde(deny_unknown_fields)]`).
///
/// ```ignore
/// read_args!(ReadArgs { path: need, offset: or_default, max_bytes: opt });
/// ```
#[macro_export]
macro_rules! read_args {
    (strict $ty:ident { $($field:ident: $how:ident),* $(,)? }) => {
        $crate::read_args!(@impl true, $ty { $($field: $how),* });
    };
    ($ty:ident { $($field:ident: $how:ident),* $(,)? }) => {
        $crate::read_args!(@impl false, $ty { $($field: $how),* });
    };
    (@impl $deny:expr, $ty:ident { $($field:ident: $how:ident),* }) => {
        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                const SHAPE: $crate::tools::args::Shape = $crate::tools::args::Shape {
                    name: stringify!($ty),
                    fields: &[$(stringify!($field)),*],
                    deny_unknown: $deny,
                };
                $crate::tools::args::read(d, &SHAPE, |_a| Ok($ty { $($field: _a.$how(stringify!($field))?),* }))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Deserializer};

    use super::*;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        #[default]
        Overwrite,
        Append,
    }

    /// The derive's reading, for comparison.
    #[derive(Debug, PartialEq, Deserialize)]
    struct Derived {
        #[serde(alias = "file")]
        path: String,
        #[serde(default)]
        offset: u64,
        max: Option<usize>,
        #[serde(default)]
        mode: Mode,
        #[serde(default)]
        tags: Vec<String>,
    }

    #[derive(Debug, PartialEq)]
    struct Hand {
        path: String,
        offset: u64,
        max: Option<usize>,
        mode: Mode,
        tags: Vec<String>,
    }

    impl<'de> Deserialize<'de> for Hand {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            const SHAPE: Shape = Shape {
                name: "Derived",
                fields: &["path", "file", "offset", "max", "mode", "tags"],
                deny_unknown: false,
            };
            read(d, &SHAPE, |a| {
                Ok(Hand {
                    path: a.get_any(&["path", "file"])?.ok_or_else(|| de::Error::missing_field("path"))?,
                    offset: a.or_default("offset")?,
                    max: a.opt("max")?,
                    mode: a.or_default("mode")?,
                    tags: a.or_default("tags")?,
                })
            })
        }
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct DerivedStrict {
        id: String,
    }

    #[derive(Debug, PartialEq)]
    struct HandStrict {
        id: String,
    }

    impl<'de> Deserialize<'de> for HandStrict {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            const SHAPE: Shape = Shape { name: "DerivedStrict", fields: &["id"], deny_unknown: true };
            read(d, &SHAPE, |a| Ok(HandStrict { id: a.need("id")? }))
        }
    }

    fn outcome<T: DeserializeOwned + fmt::Debug>(input: &str) -> Result<String, String> {
        parse::<T>(input).map(|v| format!("{v:?}").replace("Hand", "Derived")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_hand_read_type_reads_and_refuses_as_its_derived_twin() {
        let inputs = [
            r#"{"path":"a"}"#,
            r#"{"file":"a","offset":7,"max":null,"mode":"append","tags":["x"]}"#,
            r#"{"path":"a","max":3,"other":{"deep":[1,2]}}"#,
            r#"{"path":"a","file":"b"}"#,
            r#"{"path":"a","path":"b"}"#,
            r#"{}"#,
            r#"{"path":true}"#,
            r#"{"path":"a","offset":null}"#,
            r#"{"path":"a","offset":-1}"#,
            r#"{"path":"a","offset":1.5}"#,
            r#"{"path":"a","mode":"sideways"}"#,
            r#"{"path":"a","tags":"x"}"#,
            r#""a""#,
            r#"null"#,
            r#"{"path":"a"} x"#,
            r#"{"path":"a""#,
        ];
        for input in inputs {
            assert_eq!(outcome::<Hand>(input), outcome::<Derived>(input), "{input}");
        }
        assert_eq!(
            outcome::<Hand>(r#"{"file":"a","offset":7,"mode":"append"}"#),
            Ok(r#"Derived { path: "a", offset: 7, max: None, mode: Append, tags: [] }"#.into())
        );
        // The texts the model is shown (`Invalid arguments for NAME: ...`).
        assert_eq!(outcome::<Hand>("{}"), Err("missing field `path`".into()));
        assert_eq!(outcome::<Hand>(r#"{"path":1}"#), Err("invalid type: integer `1`, expected a string".into()));
        assert_eq!(outcome::<Hand>(r#"{"path":"a","file":"b"}"#), Err("duplicate field `path`".into()));
        assert_eq!(
            outcome::<Hand>(r#"{"path":"a","path":"b"}"#),
            Err("duplicate field `path` at line 1 column 18".into())
        );
        assert_eq!(outcome::<Hand>(r#""a""#), Err(r#"invalid type: string "a", expected struct Derived"#.into()));
    }

    #[test]
    fn unknown_fields_are_refused_where_the_derive_refused_them() {
        for input in [r#"{"id":"a"}"#, r#"{"id":"a","extra":1}"#, r#"{"extra":1}"#, r#"{"id":2}"#] {
            assert_eq!(outcome::<HandStrict>(input), outcome::<DerivedStrict>(input), "{input}");
        }
        assert_eq!(
            outcome::<HandStrict>(r#"{"id":"a","extra":1}"#),
            Err("unknown field `extra`, expected `id`".into())
        );
    }

    #[test]
    fn the_schema_test_sees_the_hand_read_fields() {
        assert_eq!(
            crate::tools::testing::struct_fields::<Hand>(),
            Some(&["path", "file", "offset", "max", "mode", "tags"][..])
        );
    }
}
