//! The tools both the host and the chip offer, as one contract: what the model is shown (the
//! [`ToolSpec`]: name, description, JSON schema), the argument types the answers are read
//! into, and the handlers that need no IO. Both toolboxes advertise the specs from here, so a
//! model that learnt a tool on one side finds it the same on the other; the host's test
//! `shared_tools_are_advertised_as_the_core_contract` and the chip's `tests/contract.rs` check
//! each side against [`SHARED`].
//!
//! What a side does with a call stays its own: the host answers from files and the board
//! host, the chip from flash and its drivers. Where one side cannot do what the contract
//! allows (the chip knows only UTC, has one LED), it refuses with a sentence instead of
//! advertising a narrower schema.

use alloc::format;
use alloc::string::String;
use core::fmt;

use chela_proto::chat::ToolSpec;
use chela_proto::json::read::{self, Reader};

#[cfg(test)]
mod args_tests;
pub mod board;
pub mod cron;
pub mod memory;
pub mod time;
pub mod web;

/// Every tool of the contract, in the order the specs are listed here.
pub static SHARED: [ToolSpec<'static>; 12] = [
    memory::STORE,
    memory::RECALL,
    time::CURRENT_TIME,
    cron::ADD,
    cron::LIST,
    cron::REMOVE,
    board::LIST_DEVICES,
    board::SENSOR_READ,
    board::GPIO_READ,
    board::GPIO_WRITE,
    board::LED_SET,
    web::SEARCH,
];

/// The contract's spec of `name`, if it is a shared tool.
pub fn spec(name: &str) -> Option<&'static ToolSpec<'static>> {
    SHARED.iter().find(|s| s.name == name)
}

/// The sentence a side answers when the arguments do not parse as the contract's type.
pub fn bad_args(e: &dyn fmt::Display) -> String {
    format!("The arguments do not fit the tool's schema: {e}")
}

/// A tool's arguments, read by the pull reader: the one reader of each type, which the chip
/// calls through [`Args::parse`] and the host's serde-typed tool registry through the serde
/// impl [`serde_args!`] gives it.
///
/// The readers keep the rules of the serde derives they replaced (each is held to its old
/// derive by a property test): a missing `Option` or defaulted field and `null` for an `Option`
/// are none, a field given twice (or under its name and its alias) is refused, and so is an
/// unknown field where the derive denied them. Unlike the derive, arguments written as an
/// array of their fields are refused.
pub trait Args: Sized {
    /// The names read, aliases included, as the derive listed them (the host's schema check
    /// compares them with the tool's schema).
    const FIELDS: &'static [&'static str];

    fn read(r: &mut Reader<'_>) -> read::Result<Self>;

    /// Reads a call's whole input, or the sentence the model is told.
    fn parse(input: &str) -> Result<Self, String> {
        read::read_all(input.as_bytes(), Self::read).map_err(|e| bad_args(&e))
    }
}

/// The refusal of a field an argument type does not know, where the derive denied them.
pub(crate) fn unknown_field(r: &Reader<'_>) -> read::Error {
    r.error("unknown field")
}

/// Gives an [`Args`] type the serde `Deserialize` the host's tool registry reads arguments
/// with: serde hands over the object's members as text, which [`Args::read`] reads.
#[macro_export]
macro_rules! serde_args {
    ($t:ty) => {
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                $crate::contract::deserialize_args(d, stringify!($t))
            }
        }
    };
}

/// What [`serde_args!`] expands to: a struct as serde's derive asks for one (so the fields
/// are listed where a deserializer looks for them), its members written back as JSON text.
/// Only the host comes here, and only serde_json's deserializers can hand over a value's text.
#[doc(hidden)]
pub fn deserialize_args<'de, D: serde::Deserializer<'de>, T: Args>(d: D, name: &'static str) -> Result<T, D::Error> {
    let text = d.deserialize_struct(name, T::FIELDS, Members)?;
    read::read_all(text.as_bytes(), T::read).map_err(serde::de::Error::custom)
}

/// The object's members written back as JSON text, for [`deserialize_args`]: not generic over
/// the argument type, so one copy serves every type.
struct Members;

impl<'de> serde::de::Visitor<'de> for Members {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        let mut text = String::from("{");
        while let Some(key) = map.next_key::<String>()? {
            if text.len() > 1 {
                text.push(',');
            }
            chela_proto::json::write_escaped(&mut text, &key);
            text.push(':');
            text.push_str(map.next_value::<alloc::boxed::Box<serde_json::value::RawValue>>()?.get());
        }
        text.push('}');
        Ok(text)
    }
}
