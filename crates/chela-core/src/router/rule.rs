//! One rule: read from its JSON, checked field by field, compiled for the match path.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::{Map, Value as Json};

use core::cmp::Ordering;

use super::event::{BUILTIN_FIELDS, Builtin, Event, Value, valid_field_name};
use super::made_by::MadeBy;
use super::template::{ArgsTemplate, Template};

/// The longest rule id, in bytes.
pub const MAX_ID: usize = 64;
/// The most `only_if` guards one rule has.
pub const MAX_GUARDS: usize = 8;
/// The most actions one rule has.
pub const MAX_ACTIONS: usize = 8;
/// The longest `match` pattern, guard string or description, in bytes.
pub const MAX_PATTERN: usize = 1024;
/// The longest template source (an action's text or message), in bytes.
pub const MAX_TEMPLATE: usize = 4 * 1024;
/// The longest rule, as JSON text.
pub const MAX_RULE_BYTES: usize = 16 * 1024;

/// How a `match` pattern compares with the event's field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatKind {
    Exact,
    Prefix,
    Contains,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pat {
    pub(crate) field: Builtin,
    pub(crate) kind: PatKind,
    pub(crate) s: Box<str>,
}

impl Pat {
    #[inline]
    pub(crate) fn matches(&self, event: &Event) -> bool {
        let v = event.builtin(self.field);
        match self.kind {
            PatKind::Exact => equal(v, &self.s),
            PatKind::Prefix => starts(v, &self.s),
            PatKind::Contains => contains(v, &self.s),
        }
    }
}

/// A number in a guard.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Int(i64),
    Float(f64),
}

/// How a guard compares numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
}

impl Cmp {
    #[inline]
    fn test(self, o: Option<Ordering>) -> bool {
        match o {
            // NaN: equal to nothing, ordered against nothing.
            None => self == Cmp::Ne,
            Some(o) => match self {
                Cmp::Eq => o.is_eq(),
                Cmp::Ne => o.is_ne(),
                Cmp::Gt => o.is_gt(),
                Cmp::Lt => o.is_lt(),
                Cmp::Ge => o.is_ge(),
                Cmp::Le => o.is_le(),
            },
        }
    }
}

/// A guard's test, specialised by the constant's type when the rule is compiled, so the match
/// path makes one branch on the test and one on the event value's type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Exists,
    Int(Cmp, i64),
    Float(Cmp, f64),
    StrEq(Box<str>),
    StrNe(Box<str>),
    BoolEq(bool),
    BoolNe(bool),
    Contains(Box<str>),
}

#[allow(clippy::cast_precision_loss)] // mixed integer/fraction comparison is approximate by design
fn as_f64(i: i64) -> f64 {
    i as f64
}

/// An extra field's type, as the per-event lookup cache holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Kind {
    #[default]
    Absent,
    Int,
    Float,
    Bool,
    Str,
}

/// One guard field of the current event, looked up once: its type, its number or boolean
/// (bits), and its position (for strings, read from the event). Numeric and boolean guards
/// then never touch the event again.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Seen {
    pub(crate) generation: u32,
    pub(crate) kind: Kind,
    pub(crate) pos: u8,
    pub(crate) bits: u64,
}

impl Seen {
    pub(crate) fn of(generation: u32, event: &Event, hash: u32, name: &str) -> Seen {
        let Some(pos) = event.position(hash, name) else { return Seen { generation, ..Seen::default() } };
        // At most MAX_FIELDS (32) fields: the position fits in a byte.
        let pos8 = pos as u8;
        let (kind, bits) = match event.at(pos) {
            Value::Int(i) => (Kind::Int, *i as u64),
            Value::Float(f) => (Kind::Float, f.to_bits()),
            Value::Bool(b) => (Kind::Bool, u64::from(*b)),
            Value::Str(_) => (Kind::Str, 0),
        };
        Seen { generation, kind, pos: pos8, bits }
    }
}

impl Op {
    /// Whether the guard holds for an extra field. A value of another type than the guard's
    /// constant fails every test but `ne`; two integers compare exactly, an integer and a
    /// fraction as `f64`. A missing field fails every test.
    #[inline]
    pub(crate) fn holds(&self, seen: &Seen, event: &Event) -> bool {
        // (Integer tests on extra fields usually run by column in the router; this is the
        // path for the rest, and for a field that is not an integer.)
        match seen.kind {
            Kind::Absent => false,
            // The common case, integers on both sides, compares directly.
            Kind::Int => match self {
                Op::Int(c, k) => {
                    let x = seen.bits as i64;
                    match c {
                        Cmp::Eq => x == *k,
                        Cmp::Ne => x != *k,
                        Cmp::Gt => x > *k,
                        Cmp::Lt => x < *k,
                        Cmp::Ge => x >= *k,
                        Cmp::Le => x <= *k,
                    }
                }
                _ => self.holds_num(Some(seen.bits as i64), f64::NAN),
            },
            Kind::Float => self.holds_num(None, f64::from_bits(seen.bits)),
            Kind::Bool => match self {
                Op::BoolEq(k) => (seen.bits != 0) == *k,
                Op::BoolNe(k) => (seen.bits != 0) != *k,
                Op::Exists | Op::StrNe(_) => true,
                Op::Int(c, _) | Op::Float(c, _) => *c == Cmp::Ne,
                Op::StrEq(_) | Op::Contains(_) => false,
            },
            Kind::Str => match event.at(usize::from(seen.pos)) {
                Value::Str(s) => self.holds_str(s, true),
                _ => false,
            },
        }
    }

    /// An integer (`int`) or a fraction (`float`).
    #[inline]
    fn holds_num(&self, int: Option<i64>, float: f64) -> bool {
        match (self, int) {
            (Op::Int(c, k), Some(x)) => c.test(Some(x.cmp(k))),
            (Op::Int(c, k), None) => c.test(float.partial_cmp(&as_f64(*k))),
            (Op::Float(c, k), Some(x)) => c.test(as_f64(x).partial_cmp(k)),
            (Op::Float(c, k), None) => c.test(float.partial_cmp(k)),
            (Op::Exists | Op::BoolNe(_) | Op::StrNe(_), _) => true,
            (Op::BoolEq(_) | Op::StrEq(_) | Op::Contains(_), _) => false,
        }
    }

    /// Whether the guard holds for a string: an extra field's, or a fixed field's (`extra`
    /// false), which "exists" only when it is not empty.
    #[inline]
    pub(crate) fn holds_str(&self, s: &str, extra: bool) -> bool {
        match self {
            Op::Exists => extra || !s.is_empty(),
            Op::StrEq(k) => equal(s, k),
            Op::StrNe(k) => !equal(s, k),
            Op::Contains(k) => contains(s, k),
            Op::Int(c, _) | Op::Float(c, _) => *c == Cmp::Ne,
            Op::BoolEq(_) => false,
            Op::BoolNe(_) => true,
        }
    }
}

/// `needle` in `hay`. A short field (most extra fields) is scanned inline: the general
/// searcher's set-up and its `memcmp` calls cost more than the whole scan. Longer text goes to
/// the standard searcher, which is linear and uses SIMD where the target has it.
#[inline(always)]
pub(crate) fn contains(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let Some((&first, rest)) = n.split_first() else { return true };
    if h.len() < n.len() {
        return false;
    }
    if h.len() > 16 {
        return hay.contains(needle);
    }
    let last = h.len() - n.len();
    let mut i = 0;
    while i <= last {
        if h[i] == first {
            let mut j = 0;
            while j < rest.len() && h[i + 1 + j] == rest[j] {
                j += 1;
            }
            if j == rest.len() {
                return true;
            }
        }
        i += 1;
    }
    false
}

/// `a == b` for short slices without a call out to `memcmp`.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// `s` starts with `p`.
#[inline]
fn starts(s: &str, p: &str) -> bool {
    s.len() >= p.len() && same(&s.as_bytes()[..p.len()], p.as_bytes())
}

/// `s == p`.
#[inline]
pub(crate) fn equal(s: &str, p: &str) -> bool {
    if s.len() > 32 { s == p } else { same(s.as_bytes(), p.as_bytes()) }
}

/// What a guard looks at: a fixed field, or an extra field by its slot in the router's table
/// of guard field names (assigned when the rule joins a router).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Builtin(Builtin),
    Slot(u16),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Guard {
    pub(crate) name: Box<str>,
    pub(crate) test: Test,
}

/// What the match path reads of a guard (32 bytes: two to a cache line).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Test {
    pub(crate) target: Target,
    pub(crate) op: Op,
}

const _: () = assert!(core::mem::size_of::<Test>() <= 32);

/// An action as the rule declares it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ActionT {
    Agent { channel: Option<Template>, chat_id: Option<Template>, message: Template },
    Cap { name: Box<str>, args: ArgsTemplate },
    Send { channel: Option<Template>, chat_id: Option<Template>, text: Template },
    Emit { kind: Box<str>, text: Option<Template> },
    Drop,
}

/// A compiled rule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rule {
    pub(crate) id: Box<str>,
    pub(crate) enabled: bool,
    /// The exact event type, or `None` for every type.
    pub(crate) kind: Option<Box<str>>,
    pub(crate) pats: Box<[Pat]>,
    pub(crate) guards: Box<[Guard]>,
    pub(crate) cooldown_ms: u64,
    pub(crate) consume: bool,
    pub(crate) actions: Box<[ActionT]>,
    /// The rule as it was given, written back to `rules.json` unchanged.
    pub(crate) spec: Json,
    /// The conversation the model made it in; `None` for the owner's rules.
    pub(crate) made_by: Option<MadeBy>,
    /// Made by the model, not approved, and an action names a chat other than its own: it
    /// does nothing until the owner approves it.
    pub(crate) pending: bool,
}

/// A message naming the field at fault, e.g. "`match.text`: expected …".
type Fault = String;

fn fault(path: &str, msg: &str) -> Fault {
    alloc::format!("`{path}`: {msg}")
}

fn object<'v>(v: &'v Json, path: &str) -> Result<&'v Map<String, Json>, Fault> {
    v.as_object().ok_or_else(|| fault(path, &alloc::format!("expected an object, found {}", kind_of(v))))
}

fn kind_of(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// Refuses keys not in `allowed` (a typo such as `cooldown` for `cooldown_ms` would otherwise
/// be silently ignored).
fn known_keys(map: &Map<String, Json>, path: &str, allowed: &[&str]) -> Result<(), Fault> {
    for k in map.keys() {
        if !allowed.contains(&k.as_str()) {
            let at = if path.is_empty() { k.clone() } else { alloc::format!("{path}.{k}") };
            return Err(fault(
                crate::text::prefix(&at, 100),
                &alloc::format!("unknown field; expected one of {}", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

fn string<'v>(v: &'v Json, path: &str, max: usize) -> Result<&'v str, Fault> {
    let s = v.as_str().ok_or_else(|| fault(path, &alloc::format!("expected a string, found {}", kind_of(v))))?;
    if s.len() > max {
        return Err(fault(path, &alloc::format!("{} bytes; at most {max} are allowed", s.len())));
    }
    Ok(s)
}

fn boolean(v: &Json, path: &str) -> Result<bool, Fault> {
    v.as_bool().ok_or_else(|| fault(path, &alloc::format!("expected true or false, found {}", kind_of(v))))
}

fn number(v: &Json, path: &str) -> Result<Num, Fault> {
    if let Some(i) = v.as_i64() {
        return Ok(Num::Int(i));
    }
    match v.as_f64() {
        Some(f) => Ok(Num::Float(f)),
        None => Err(fault(path, &alloc::format!("expected a number, found {}", kind_of(v)))),
    }
}

fn template(v: &Json, path: &str) -> Result<Template, Fault> {
    Template::parse(string(v, path, MAX_TEMPLATE)?).map_err(|e| fault(path, &e))
}

/// A template for a channel or chat id: event fields only, since the destination is fixed
/// before any action runs.
fn destination(map: &Map<String, Json>, key: &str, path: &str) -> Result<Option<Template>, Fault> {
    let Some(v) = map.get(key) else { return Ok(None) };
    let p = alloc::format!("{path}.{key}");
    let t = Template::parse(string(v, &p, MAX_PATTERN)?).map_err(|e| fault(&p, &e))?;
    if t.uses_last() {
        return Err(fault(&p, "`{{last.output}}` cannot choose a destination; use event fields"));
    }
    Ok(Some(t))
}

/// The id the rule gives itself, if it gives a usable one (for reports on bad rules).
pub(crate) fn id_of(v: &Json) -> Option<&str> {
    v.get("id").and_then(Json::as_str).filter(|id| valid_id(id))
}

pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Checks and compiles one rule. Guard slots are left at 0 for the router to assign.
pub(crate) fn compile(spec: Json) -> Result<Rule, Fault> {
    let map = object(&spec, "rule")?;
    known_keys(
        map,
        "",
        &["id", "description", "enabled", "match", "only_if", "cooldown_ms", "consume_on_match", "actions", "made_by"],
    )?;
    let id = match map.get("id") {
        None => return Err(fault("id", "missing; every rule needs an id")),
        Some(v) => string(v, "id", usize::MAX)?,
    };
    if !valid_id(id) {
        return Err(fault("id", &alloc::format!("must be 1 to {MAX_ID} bytes of letters, digits, `_`, `.` or `-`")));
    }
    if let Some(v) = map.get("description") {
        string(v, "description", MAX_PATTERN)?;
    }
    let enabled = map.get("enabled").map(|v| boolean(v, "enabled")).transpose()?.unwrap_or(true);
    let consume = map.get("consume_on_match").map(|v| boolean(v, "consume_on_match")).transpose()?.unwrap_or(false);
    let cooldown_ms = match map.get("cooldown_ms") {
        None => 0,
        Some(v) => {
            v.as_u64().ok_or_else(|| fault("cooldown_ms", "expected a whole number of milliseconds, 0 or more"))?
        }
    };

    let made_by = match map.get("made_by") {
        None => None,
        Some(v) => {
            let m: MadeBy = serde_json::from_value(v.clone())
                .map_err(|e| fault("made_by", &alloc::format!("expected {{\"channel\", \"chat_id\"}}: {e}")))?;
            m.check().map_err(|e| fault("made_by", &e))?;
            Some(m)
        }
    };
    let (kind, mut pats) = match map.get("match") {
        None => (None, Vec::new()),
        Some(v) => matcher(v)?,
    };
    let guards = match map.get("only_if") {
        None => Vec::new(),
        Some(v) => guards(v)?,
    };
    let actions = match map.get("actions") {
        None => return Err(fault("actions", "missing; a rule needs at least one action")),
        Some(v) => actions(v)?,
    };
    let confined = made_by.as_ref().filter(|m| m.confined());
    if let Some(m) = confined {
        // Events of other chats never reach it: their text is not its to read, and an action
        // without a destination answers the event's chat.
        pats.push(Pat { field: Builtin::Channel, kind: PatKind::Exact, s: m.channel.as_str().into() });
        pats.push(Pat { field: Builtin::ChatId, kind: PatKind::Exact, s: m.chat_id.as_str().into() });
    }
    let pending = confined.is_some_and(|m| actions.iter().any(|a| reaches_other(a, m)));
    Ok(Rule {
        id: id.into(),
        enabled,
        kind,
        pats: pats.into_boxed_slice(),
        guards: guards.into_boxed_slice(),
        cooldown_ms,
        consume,
        actions: actions.into_boxed_slice(),
        spec,
        made_by,
        pending,
    })
}

/// Whether the action talks or sends to a chat other than `own`'s: a destination that is not
/// plain text equal to its own (one without a destination answers the event's chat, which for
/// a confined rule is its own).
fn reaches_other(action: &ActionT, own: &MadeBy) -> bool {
    let (ActionT::Agent { channel, chat_id, .. } | ActionT::Send { channel, chat_id, .. }) = action else {
        return false;
    };
    let other = |t: &Option<Template>, mine: &str| t.as_ref().is_some_and(|t| t.literal().is_none_or(|s| s != mine));
    other(channel, &own.channel) || other(chat_id, &own.chat_id)
}

type Matcher = (Option<Box<str>>, Vec<Pat>);

fn matcher(v: &Json) -> Result<Matcher, Fault> {
    let map = object(v, "match")?;
    known_keys(map, "match", &BUILTIN_FIELDS)?;
    let kind = match map.get("type") {
        None => None,
        Some(v) => Some(string(v, "match.type", MAX_PATTERN).map_err(|e| {
            if v.is_object() { fault("match.type", "expected the exact event type as a string") } else { e }
        })?),
    };
    let mut pats = Vec::new();
    // Cheap, selective fields first: the text is usually the longest to compare.
    for (name, field) in [
        ("source", Builtin::Source),
        ("channel", Builtin::Channel),
        ("chat_id", Builtin::ChatId),
        ("text", Builtin::Text),
    ] {
        let Some(v) = map.get(name) else { continue };
        let path = alloc::format!("match.{name}");
        let (kind, s) = match v {
            Json::String(s) => (PatKind::Exact, s),
            Json::Object(o) if o.len() == 1 => {
                let (k, s) = o.iter().next().expect("one entry");
                let kind = match k.as_str() {
                    "exact" => PatKind::Exact,
                    "prefix" => PatKind::Prefix,
                    "contains" => PatKind::Contains,
                    _ => {
                        return Err(fault(
                            &alloc::format!("{path}.{k}"),
                            "unknown; expected exact, prefix or contains",
                        ));
                    }
                };
                let Json::String(s) = s else {
                    return Err(fault(
                        &alloc::format!("{path}.{k}"),
                        &alloc::format!("expected a string, found {}", kind_of(s)),
                    ));
                };
                (kind, s)
            }
            _ => {
                return Err(fault(
                    &path,
                    "expected a string (exact) or one of {\"exact\": …}, {\"prefix\": …}, {\"contains\": …}",
                ));
            }
        };
        if s.len() > MAX_PATTERN {
            return Err(fault(&path, &alloc::format!("{} bytes; at most {MAX_PATTERN} are allowed", s.len())));
        }
        pats.push(Pat { field, kind, s: s.as_str().into() });
    }
    Ok((kind.map(Into::into), pats))
}

fn guards(v: &Json) -> Result<Vec<Guard>, Fault> {
    let list = v
        .as_array()
        .ok_or_else(|| fault("only_if", &alloc::format!("expected an array of guards, found {}", kind_of(v))))?;
    if list.len() > MAX_GUARDS {
        return Err(fault("only_if", &alloc::format!("{} guards; at most {MAX_GUARDS} are allowed", list.len())));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, g) in list.iter().enumerate() {
        let path = alloc::format!("only_if[{i}]");
        let map = object(g, &path)?;
        known_keys(map, &path, &["field", "op", "value"])?;
        let name = match map.get("field") {
            None => return Err(fault(&alloc::format!("{path}.field"), "missing")),
            Some(v) => string(v, &alloc::format!("{path}.field"), usize::MAX)?,
        };
        let target = match Builtin::from_name(name) {
            Some(b) => Target::Builtin(b),
            None if valid_field_name(name) => Target::Slot(0),
            None => {
                return Err(fault(
                    &alloc::format!("{path}.field"),
                    "must be an event field name: letters, digits, `_`, `.` or `-`, at most 64 bytes",
                ));
            }
        };
        let op_path = alloc::format!("{path}.op");
        let op_name = match map.get("op") {
            None => return Err(fault(&op_path, "missing; one of eq, ne, gt, lt, ge, le, contains, exists")),
            Some(v) => string(v, &op_path, 16)?,
        };
        let value_path = alloc::format!("{path}.value");
        let value = map.get("value");
        let need =
            || value.ok_or_else(|| fault(&value_path, &alloc::format!("missing; `{op_name}` compares with a value")));
        let cmp = match op_name {
            "eq" => Some(Cmp::Eq),
            "ne" => Some(Cmp::Ne),
            "gt" => Some(Cmp::Gt),
            "lt" => Some(Cmp::Lt),
            "ge" => Some(Cmp::Ge),
            "le" => Some(Cmp::Le),
            _ => None,
        };
        let op = match (op_name, cmp) {
            ("eq" | "ne", Some(cmp)) => match need()? {
                Json::String(_) => {
                    let k: Box<str> = string(need()?, &value_path, MAX_PATTERN)?.into();
                    if cmp == Cmp::Eq { Op::StrEq(k) } else { Op::StrNe(k) }
                }
                Json::Bool(b) => {
                    if cmp == Cmp::Eq {
                        Op::BoolEq(*b)
                    } else {
                        Op::BoolNe(*b)
                    }
                }
                v @ Json::Number(_) => numeric(cmp, v, &value_path)?,
                other => {
                    return Err(fault(
                        &value_path,
                        &alloc::format!("expected a string, number or boolean, found {}", kind_of(other)),
                    ));
                }
            },
            (_, Some(cmp)) => numeric(cmp, need()?, &value_path)?,
            ("contains", None) => Op::Contains(string(need()?, &value_path, MAX_PATTERN)?.into()),
            ("exists", None) => {
                if value.is_some() {
                    return Err(fault(&value_path, "`exists` takes no value"));
                }
                Op::Exists
            }
            (other, None) => {
                return Err(fault(
                    &op_path,
                    &alloc::format!(
                        "unknown op `{}`; one of eq, ne, gt, lt, ge, le, contains, exists",
                        crate::text::prefix(other, 16)
                    ),
                ));
            }
        };
        out.push(Guard { name: name.into(), test: Test { target, op } });
    }
    // Guards are pure, so their order is free: the cheap ones (numbers, booleans, presence) go
    // first and the string tests last, so a failing number spares the string work.
    crate::sort::sort_by_key(&mut out, |g| match g.test.op {
        Op::Exists | Op::Int(..) | Op::Float(..) | Op::BoolEq(_) | Op::BoolNe(_) => 0,
        Op::StrEq(_) | Op::StrNe(_) => 1,
        Op::Contains(_) => 2,
    });
    Ok(out)
}

fn numeric(cmp: Cmp, v: &Json, path: &str) -> Result<Op, Fault> {
    Ok(match number(v, path)? {
        Num::Int(i) => Op::Int(cmp, i),
        Num::Float(f) => Op::Float(cmp, f),
    })
}

fn actions(v: &Json) -> Result<Vec<ActionT>, Fault> {
    let list = v
        .as_array()
        .ok_or_else(|| fault("actions", &alloc::format!("expected an array of actions, found {}", kind_of(v))))?;
    if list.is_empty() {
        return Err(fault("actions", "empty; a rule needs at least one action"));
    }
    if list.len() > MAX_ACTIONS {
        return Err(fault("actions", &alloc::format!("{} actions; at most {MAX_ACTIONS} are allowed", list.len())));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, a) in list.iter().enumerate() {
        let path = alloc::format!("actions[{i}]");
        let map = object(a, &path)?;
        let type_path = alloc::format!("{path}.type");
        let kind = match map.get("type") {
            None => return Err(fault(&type_path, "missing; one of agent, cap, send, emit, drop")),
            Some(v) => string(v, &type_path, 16)?,
        };
        let required = |key: &str| -> Result<&Json, Fault> {
            map.get(key)
                .ok_or_else(|| fault(&alloc::format!("{path}.{key}"), &alloc::format!("missing; `{kind}` needs it")))
        };
        let action = match kind {
            "agent" => {
                known_keys(map, &path, &["type", "message", "channel", "chat_id"])?;
                ActionT::Agent {
                    channel: destination(map, "channel", &path)?,
                    chat_id: destination(map, "chat_id", &path)?,
                    message: template(required("message")?, &alloc::format!("{path}.message"))?,
                }
            }
            "send" => {
                known_keys(map, &path, &["type", "text", "channel", "chat_id"])?;
                ActionT::Send {
                    channel: destination(map, "channel", &path)?,
                    chat_id: destination(map, "chat_id", &path)?,
                    text: template(required("text")?, &alloc::format!("{path}.text"))?,
                }
            }
            "cap" => {
                known_keys(map, &path, &["type", "cap", "args"])?;
                let name = string(required("cap")?, &alloc::format!("{path}.cap"), MAX_ID)?;
                if !valid_id(name) {
                    return Err(fault(&alloc::format!("{path}.cap"), "must be a capability name"));
                }
                let args_path = alloc::format!("{path}.args");
                let args = match map.get("args") {
                    None => ArgsTemplate::Lit(Json::Object(Map::new())),
                    Some(v) => {
                        object(v, &args_path)?;
                        ArgsTemplate::parse(v, &args_path)?
                    }
                };
                ActionT::Cap { name: name.into(), args }
            }
            "emit" => {
                known_keys(map, &path, &["type", "event", "text"])?;
                let kind = string(required("event")?, &alloc::format!("{path}.event"), MAX_PATTERN)?;
                if kind.is_empty() {
                    return Err(fault(&alloc::format!("{path}.event"), "empty; name the event type to raise"));
                }
                let text = map.get("text").map(|v| template(v, &alloc::format!("{path}.text"))).transpose()?;
                ActionT::Emit { kind: kind.into(), text }
            }
            "drop" => {
                known_keys(map, &path, &["type"])?;
                if i + 1 != list.len() {
                    return Err(fault(&path, "`drop` ends the rule; it must be the last action"));
                }
                ActionT::Drop
            }
            other => {
                return Err(fault(
                    &type_path,
                    &alloc::format!(
                        "unknown action `{}`; one of agent, cap, send, emit, drop",
                        crate::text::prefix(other, 16)
                    ),
                ));
            }
        };
        out.push(action);
    }
    Ok(out)
}

/// The size check a rule given as a JSON value gets (the loader checks the element's text).
pub(crate) fn check_size(spec: &Json) -> Result<(), Fault> {
    let len = serde_json::to_string(spec).map_or(usize::MAX, |s| s.len());
    if len > MAX_RULE_BYTES {
        return Err(fault("rule", &alloc::format!("longer than {MAX_RULE_BYTES} bytes as JSON")));
    }
    Ok(())
}
