//! What the router matches: an event with five fixed fields and a bounded map of extra fields.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// The most extra fields one event carries.
pub const MAX_FIELDS: usize = 32;
/// The longest name of an extra field, in bytes.
pub const MAX_FIELD_NAME: usize = 64;
/// The longest string held by an extra field or by `type`, `source`, `channel` or `chat_id`.
pub const MAX_FIELD_VALUE: usize = 4 * 1024;
/// The longest event text, in bytes (a long chat message).
pub const MAX_TEXT: usize = 64 * 1024;

/// The fixed fields every event has; guards and templates name them like extra fields.
pub const BUILTIN_FIELDS: [&str; 5] = ["type", "source", "channel", "chat_id", "text"];

/// The value of an extra field.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    /// A number with a fraction (a temperature). Integers compare exactly as `Int`.
    Float(f64),
    Bool(bool),
}

impl Value {
    /// Writes the value as text, the way a template shows it.
    pub(crate) fn write_to(&self, out: &mut String) {
        use core::fmt::Write;
        match self {
            Value::Str(s) => out.push_str(s),
            Value::Int(i) => push_int(out, *i),
            // Writing into a String cannot fail.
            Value::Float(f) => drop(write!(out, "{f}")),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        }
    }
}

/// Appends the decimal digits of `i` (cheaper than `core::fmt` on the fire path).
fn push_int(out: &mut String, i: i64) {
    let mut buf = [0u8; 20];
    let mut n = i.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if i < 0 {
        out.push('-');
    }
    for &b in &buf[at..] {
        out.push(char::from(b));
    }
}

/// Why an event could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventError {
    /// The event already has [`MAX_FIELDS`] extra fields.
    TooManyFields,
    /// A field name is empty, longer than [`MAX_FIELD_NAME`], or not `[A-Za-z0-9_.-]`.
    BadFieldName(String),
    /// A field name is one of [`BUILTIN_FIELDS`]; those are set through the event's own fields.
    BuiltinFieldName(String),
    /// A string is longer than its bound.
    TooLong { field: String, len: usize, max: usize },
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::TooManyFields => write!(f, "an event holds at most {MAX_FIELDS} extra fields"),
            EventError::BadFieldName(n) => write!(
                f,
                "event field name `{n}` must be 1 to {MAX_FIELD_NAME} bytes of letters, digits, `_`, `.` or `-`"
            ),
            EventError::BuiltinFieldName(n) => {
                write!(f, "event field name `{n}` is one of the event's own fields; set it directly")
            }
            EventError::TooLong { field, len, max } => {
                write!(f, "event field `{field}` is {len} bytes; at most {max} are allowed")
            }
        }
    }
}

/// FNV-1a of a field name: a cheap first comparison when looking fields up.
pub(crate) fn name_hash(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Whether `name` may name an extra field (and a guard or template may refer to it).
pub(crate) fn valid_field_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_FIELD_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// One event: a chat message received, a job fired, a capability's result, a sensor reading.
///
/// Every string is bounded (see the constants of this module) so an event costs a known amount
/// of memory; the constructors refuse what does not fit rather than cut it silently.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    kind: String,
    source: String,
    channel: String,
    chat_id: String,
    text: String,
    fields: Vec<(String, Value)>,
    /// [`name_hash`] of each field's name, side by side: finding a field reads this one small
    /// array instead of following each name to the heap (a cache miss per name on a cold event).
    hashes: Vec<u32>,
    /// How many `emit` actions led to this event; the router stops re-emitting at
    /// [`super::MAX_EMIT_DEPTH`] so two rules emitting each other's events cannot loop.
    depth: u8,
}

fn bounded(field: &str, s: &str, max: usize) -> Result<String, EventError> {
    if s.len() > max {
        return Err(EventError::TooLong { field: field.into(), len: s.len(), max });
    }
    Ok(s.into())
}

impl Event {
    /// An event of type `kind` (`message`, `schedule`, `cap_result`, …) with empty fixed fields.
    pub fn new(kind: &str) -> Result<Event, EventError> {
        Ok(Event {
            kind: bounded("type", kind, MAX_FIELD_VALUE)?,
            source: String::new(),
            channel: String::new(),
            chat_id: String::new(),
            text: String::new(),
            fields: Vec::new(),
            hashes: Vec::new(),
            depth: 0,
        })
    }

    /// Sets who raised the event (`telegram`, `scheduler`, `router`, a capability name).
    pub fn with_source(mut self, source: &str) -> Result<Event, EventError> {
        self.source = bounded("source", source, MAX_FIELD_VALUE)?;
        Ok(self)
    }

    /// Sets the chat the event belongs to.
    pub fn with_chat(mut self, channel: &str, chat_id: &str) -> Result<Event, EventError> {
        self.channel = bounded("channel", channel, MAX_FIELD_VALUE)?;
        self.chat_id = bounded("chat_id", chat_id, MAX_FIELD_VALUE)?;
        Ok(self)
    }

    /// Sets the event's text (a message's words, a job's message).
    pub fn with_text(mut self, text: &str) -> Result<Event, EventError> {
        self.text = bounded("text", text, MAX_TEXT)?;
        Ok(self)
    }

    /// Adds or replaces the extra field `name`.
    pub fn set(&mut self, name: &str, value: Value) -> Result<(), EventError> {
        if BUILTIN_FIELDS.contains(&name) {
            return Err(EventError::BuiltinFieldName(name.into()));
        }
        if !valid_field_name(name) {
            return Err(EventError::BadFieldName(crate::text::prefix(name, MAX_FIELD_NAME).into()));
        }
        if let Value::Str(s) = &value
            && s.len() > MAX_FIELD_VALUE
        {
            return Err(EventError::TooLong { field: name.into(), len: s.len(), max: MAX_FIELD_VALUE });
        }
        if let Some(slot) = self.fields.iter_mut().find(|(n, _)| n == name) {
            slot.1 = value;
            return Ok(());
        }
        if self.fields.len() >= MAX_FIELDS {
            return Err(EventError::TooManyFields);
        }
        self.fields.push((name.into(), value));
        self.hashes.push(name_hash(name));
        Ok(())
    }

    /// [`Event::set`] for chaining.
    pub fn with(mut self, name: &str, value: Value) -> Result<Event, EventError> {
        self.set(name, value)?;
        Ok(self)
    }

    pub fn kind(&self) -> &str {
        &self.kind
    }
    pub fn source(&self) -> &str {
        &self.source
    }
    pub fn channel(&self) -> &str {
        &self.channel
    }
    pub fn chat_id(&self) -> &str {
        &self.chat_id
    }
    pub fn text(&self) -> &str {
        &self.text
    }
    pub fn depth(&self) -> u8 {
        self.depth
    }
    /// Sets how many automation steps led to this event (an `emit`, a job fired by an event, a
    /// capability called by a rule). The router fires no `emit` from an event
    /// [`super::MAX_EMIT_DEPTH`] deep, and a host raises nothing deeper than that, so a chain of
    /// rules and jobs raising each other's events ends.
    pub fn with_depth(mut self, depth: u8) -> Event {
        self.depth = depth;
        self
    }

    /// The value of the field `name` (fixed or extra) as a template shows it; `None` when the
    /// event has no such extra field.
    pub fn field_text(&self, name: &str) -> Option<alloc::borrow::Cow<'_, str>> {
        if let Some(b) = Builtin::from_name(name) {
            return Some(alloc::borrow::Cow::Borrowed(self.builtin(b)));
        }
        Some(match self.get(name)? {
            Value::Str(s) => alloc::borrow::Cow::Borrowed(s.as_str()),
            v => {
                let mut out = String::new();
                v.write_to(&mut out);
                alloc::borrow::Cow::Owned(out)
            }
        })
    }

    pub(crate) fn set_depth(&mut self, depth: u8) {
        self.depth = depth;
    }

    /// The extra field `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The extra fields, in the order they were first set.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.fields.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// The position of the extra field `name`, whose [`name_hash`] is `hash` (the router
    /// caches it per event).
    pub(crate) fn position(&self, hash: u32, name: &str) -> Option<usize> {
        let mut from = 0;
        while let Some(i) = self.hashes[from..].iter().position(|&h| h == hash) {
            if self.fields[from + i].0 == name {
                return Some(from + i);
            }
            from += i + 1;
        }
        None
    }

    pub(crate) fn at(&self, i: usize) -> &Value {
        &self.fields[i].1
    }

    pub(crate) fn at_checked(&self, i: usize) -> Option<&Value> {
        self.fields.get(i).map(|f| &f.1)
    }

    pub(crate) fn builtin(&self, b: Builtin) -> &str {
        match b {
            Builtin::Type => &self.kind,
            Builtin::Source => &self.source,
            Builtin::Channel => &self.channel,
            Builtin::ChatId => &self.chat_id,
            Builtin::Text => &self.text,
        }
    }
}

/// One of the event's fixed fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    Type,
    Source,
    Channel,
    ChatId,
    Text,
}

impl Builtin {
    pub(crate) fn from_name(name: &str) -> Option<Builtin> {
        Some(match name {
            "type" => Builtin::Type,
            "source" => Builtin::Source,
            "channel" => Builtin::Channel,
            "chat_id" => Builtin::ChatId,
            "text" => Builtin::Text,
            _ => return None,
        })
    }
}
