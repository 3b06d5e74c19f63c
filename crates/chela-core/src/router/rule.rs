//! One rule: read from its JSON, checked field by field, compiled for the match path.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::{Map, Value as Json};

use super::event::{BUILTIN_FIELDS, Builtin, Event, Num, Value, valid_field_name};
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
            PatKind::Exact => v == &*self.s,
            PatKind::Prefix => v.starts_with(&*self.s),
            PatKind::Contains => v.contains(&*self.s),
        }
    }
}

/// A guard's constant.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Const {
    Str(Box<str>),
    Num(Num),
    Bool(bool),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Eq(Const),
    Ne(Const),
    Gt(Num),
    Lt(Num),
    Ge(Num),
    Le(Num),
    Contains(Box<str>),
    Exists,
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
    pub(crate) target: Target,
    pub(crate) op: Op,
}

/// A field's value as a guard sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Seen<'e> {
    Str(&'e str),
    Val(&'e Value),
}

impl Op {
    /// Whether the guard holds for the field's value (`None`: the event lacks the field).
    /// A missing field fails every guard; a value of another type fails every guard but `ne`
    /// and `exists`. A fixed field "exists" when it is not empty.
    #[inline]
    pub(crate) fn holds(&self, seen: Option<Seen<'_>>) -> bool {
        let Some(seen) = seen else { return false };
        let (s, num, b) = match seen {
            Seen::Str(s) => (Some(s), None, None),
            Seen::Val(Value::Str(s)) => (Some(s.as_str()), None, None),
            Seen::Val(Value::Bool(b)) => (None, None, Some(*b)),
            Seen::Val(v) => (None, v.num(), None),
        };
        let cmp = |c: Num, f: fn(core::cmp::Ordering) -> bool| num.and_then(|n| n.cmp(c)).is_some_and(f);
        match self {
            Op::Exists => !matches!(seen, Seen::Str("")),
            Op::Eq(c) => eq(c, s, num, b),
            Op::Ne(c) => !eq(c, s, num, b),
            Op::Gt(c) => cmp(*c, core::cmp::Ordering::is_gt),
            Op::Lt(c) => cmp(*c, core::cmp::Ordering::is_lt),
            Op::Ge(c) => cmp(*c, core::cmp::Ordering::is_ge),
            Op::Le(c) => cmp(*c, core::cmp::Ordering::is_le),
            Op::Contains(needle) => s.is_some_and(|s| s.contains(&**needle)),
        }
    }
}

fn eq(c: &Const, s: Option<&str>, num: Option<Num>, b: Option<bool>) -> bool {
    match c {
        Const::Str(c) => s == Some(&**c),
        Const::Num(c) => num.and_then(|n| n.cmp(*c)).is_some_and(core::cmp::Ordering::is_eq),
        Const::Bool(c) => b == Some(*c),
    }
}

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
        &["id", "description", "enabled", "match", "only_if", "cooldown_ms", "consume_on_match", "actions"],
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

    let (kind, pats) = match map.get("match") {
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
    })
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
                        return Err(fault(&alloc::format!("{path}.{k}"), "unknown; expected exact, prefix or contains"));
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
        let op = match op_name {
            "eq" | "ne" => {
                let c = constant(need()?, &value_path)?;
                if op_name == "eq" { Op::Eq(c) } else { Op::Ne(c) }
            }
            "gt" => Op::Gt(number(need()?, &value_path)?),
            "lt" => Op::Lt(number(need()?, &value_path)?),
            "ge" => Op::Ge(number(need()?, &value_path)?),
            "le" => Op::Le(number(need()?, &value_path)?),
            "contains" => Op::Contains(string(need()?, &value_path, MAX_PATTERN)?.into()),
            "exists" => {
                if value.is_some() {
                    return Err(fault(&value_path, "`exists` takes no value"));
                }
                Op::Exists
            }
            other => {
                return Err(fault(
                    &op_path,
                    &alloc::format!(
                        "unknown op `{}`; one of eq, ne, gt, lt, ge, le, contains, exists",
                        crate::text::prefix(other, 16)
                    ),
                ));
            }
        };
        out.push(Guard { name: name.into(), target, op });
    }
    Ok(out)
}

fn constant(v: &Json, path: &str) -> Result<Const, Fault> {
    Ok(match v {
        Json::String(_) => Const::Str(string(v, path, MAX_PATTERN)?.into()),
        Json::Bool(b) => Const::Bool(*b),
        Json::Number(_) => Const::Num(number(v, path)?),
        other => {
            return Err(fault(path, &alloc::format!("expected a string, number or boolean, found {}", kind_of(other))));
        }
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
