//! The event router: rules that act on events without the model.
//!
//! What it is: the rules of `rules.json` (Ameba-Claw's event router), checked and compiled, and
//! the decision which of them an event fires. [`Router::handle_event`] takes an [`Event`] and
//! `now` (milliseconds on the host's monotonic clock) and returns a [`Plan`]: the fired rules'
//! actions with the event's fields already filled in. It is sans-IO: the host runs the actions.
//!
//! What it is not: it calls no capability, sends nothing and reads no file or clock. Loading and
//! saving `rules.json`, running actions and feeding emitted events back are the host's.
//!
//! How to drive it:
//! 1. [`Router::load`] the text of `rules.json`. Good rules are kept; bad ones come back as
//!    [`Problem`]s with their line, for the log and `chela doctor`. A file with problems should
//!    not be overwritten until a tool writes a whole valid version.
//! 2. For each event, [`Router::handle_event`]. Run each [`Fired`] rule's actions in order;
//!    `last` starts empty and becomes the output of each `agent` (its reply) or `cap` (its
//!    result) action; `send` and `emit` leave it as it was. Render each action's texts with
//!    [`Text::render`]`(last)` just before running it. An [`Emit`] becomes an event through
//!    [`Emit::event`], which the host feeds back to `handle_event`. If [`Plan::consumed`] is
//!    set, the event does not take its default path (a chat message does not reach the agent).
//! 3. The tools `router_add_rule`, `router_list_rules` and `router_remove_rule` use
//!    [`Router::add_rule`], [`Router::rules`] and [`Router::remove_rule`]; after a change, write
//!    [`Router::to_json`] atomically.
//!
//! Matching: rules are tried in file order; a rule fires when it is enabled, out of its
//! cooldown, and its `match` patterns and `only_if` guards all hold. Every firing rule is
//! planned until one has `consume_on_match` or a `drop` action, which ends the event's
//! processing. See `docs/DESIGN.md`, "The event router", for the file format and the costs.

mod event;
mod rule;
mod scan;
mod template;
#[cfg(test)]
mod tests;

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use serde_json::Value as Json;

pub use event::{BUILTIN_FIELDS, Event, EventError, MAX_FIELD_NAME, MAX_FIELD_VALUE, MAX_FIELDS, MAX_TEXT, Value};
pub use rule::{MAX_ACTIONS, MAX_GUARDS, MAX_ID, MAX_PATTERN, MAX_RULE_BYTES, MAX_TEMPLATE};
pub use template::{Args, MAX_RENDERED, Text};

use rule::{ActionT, Cmp, Op, Pat, Rule, Seen, Target, Test};

/// The most rules one router holds.
pub const MAX_RULES: usize = 256;
/// The largest `rules.json` read, in bytes.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;
/// How deep events raised by `emit` may chain: an event this many emits away from an outside
/// event fires no further `emit` (two rules emitting each other's event would otherwise loop).
pub const MAX_EMIT_DEPTH: u8 = 4;

/// A bad rule or a broken structure in `rules.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The line (from 1) the rule starts on, or where the structure broke.
    pub line: u32,
    /// The rule's id, when it has a usable one.
    pub rule: Option<String>,
    /// What is wrong, naming the field: "`only_if[0].op`: unknown op `gte`; one of …".
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rules.json line {}: ", self.line)?;
        if let Some(id) = &self.rule {
            write!(f, "rule `{id}`: ")?;
        }
        f.write_str(&self.message)
    }
}

/// What [`Router::load`] made of a file.
#[derive(Debug)]
pub struct Loaded {
    pub router: Router,
    /// Every rule or piece of the file that was not loaded, in file order.
    pub problems: Vec<Problem>,
}

/// An action of a fired rule, with the event's fields filled in.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// Put `message` into the chat as if from the router; the reply goes to that chat.
    Agent { channel: String, chat_id: String, message: Text },
    /// Call the capability `name` with [`Args::render`]`(last)`.
    Cap { name: String, args: Args },
    /// Send `text` to the chat, without the model.
    Send { channel: String, chat_id: String, text: Text },
    /// Raise another event.
    Emit(Emit),
}

/// An event to raise; [`Emit::event`] builds it once the previous output is known.
#[derive(Debug, Clone, PartialEq)]
pub struct Emit {
    /// The new event's type.
    pub kind: String,
    pub text: Text,
    /// The chat of the event that fired the rule.
    pub channel: String,
    pub chat_id: String,
    /// The rule that raised it (the new event's `rule` field).
    pub rule: String,
    depth: u8,
}

impl Emit {
    /// The event to feed back to [`Router::handle_event`]: source `router`, the firing event's
    /// chat, the field `rule` naming the rule, one emit deeper than the firing event.
    pub fn event(&self, last: &str) -> Result<Event, EventError> {
        let mut e = Event::new(&self.kind)?
            .with_source("router")?
            .with_chat(&self.channel, &self.chat_id)?
            .with_text(&self.text.render(last))?
            .with("rule", Value::Str(self.rule.clone()))?;
        e.set_depth(self.depth);
        Ok(e)
    }
}

/// A rule that fired, and its actions in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Fired {
    pub rule: String,
    pub actions: Vec<Action>,
}

/// What an event fired. Empty (and free: no allocation) when no rule fired.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub fired: Vec<Fired>,
    /// A rule consumed the event (`consume_on_match` or `drop`): it takes no default path.
    pub consumed: bool,
    /// `emit` actions left out because the event was already [`MAX_EMIT_DEPTH`] emits deep.
    pub emits_refused: u32,
}

/// What [`Router::add_rule`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    New,
    /// A rule with the same id was replaced in place (its cooldown starts afresh).
    Replaced,
}

/// A rule as [`Router::rules`] lists it.
#[derive(Debug, Clone, Copy)]
pub struct RuleView<'r> {
    pub id: &'r str,
    pub enabled: bool,
    /// The rule's JSON as given.
    pub spec: &'r Json,
    /// When it last fired (the `now` of that event).
    pub last_fired: Option<u64>,
}

/// The rules and their cooldown state. See the module docs for the calling order.
#[derive(Debug, Default)]
pub struct Router {
    rules: Vec<Rule>,
    last_fired: Vec<Option<u64>>,
    /// What the match path reads of each rule, small and side by side; the guards and patterns
    /// of all rules are in two flat arrays, so trying 100 rules walks three arrays in order.
    hot: Vec<Hot>,
    tests: Vec<Test>,
    pats: Vec<Pat>,
    /// Rule indices (in order) for each event type named by a rule, sorted by type; each list
    /// includes the rules that match every type.
    by_type: Vec<(Box<str>, List)>,
    /// The rules that match every type: the list for a type no rule names.
    any: List,
    /// The extra-field names guards look at; a guard holds its name's index here.
    slots: Vec<(u32, Box<str>)>,
    /// Per slot: the field as the current event has it, stamped with the event's generation.
    /// Each guard field is looked up once per event, and only if a guard needs it.
    cache: Vec<Seen>,
    generation: u32,
}

/// The rules one event type meets, and their integer guards on extra fields by column.
#[derive(Debug, Default)]
struct List {
    rules: Box<[u16]>,
    columns: Box<[Column]>,
}

/// The integer guards with one field and one comparison among a list's rules: (constant,
/// position of the rule in the list). An event runs them in one tight loop per column and
/// crosses out the rules that fail, before the rule loop; the rule loop then skips those
/// rules and runs only their other guards.
#[derive(Debug)]
struct Column {
    slot: u16,
    cmp: Cmp,
    entries: Vec<(i64, u16)>,
}

/// One bit per position in a list (at most MAX_RULES).
type Alive = [u64; MAX_RULES / 64];

#[derive(Debug, Clone, Copy)]
struct Hot {
    cooldown_ms: u64,
    guards: u32,
    pats: u32,
    guard_count: u8,
    pat_count: u8,
    enabled: bool,
    consume: bool,
}

impl Router {
    /// A router without rules.
    pub fn new() -> Router {
        Router::default()
    }

    /// Reads `rules.json` text: `{"rules": [ rule, … ]}`. Never fails: what cannot be loaded
    /// is reported in [`Loaded::problems`] and the rest is kept.
    pub fn load(text: &str) -> Loaded {
        let mut router = Router::new();
        let mut problems = Vec::new();
        if text.len() > MAX_FILE_BYTES {
            problems.push(Problem {
                line: 1,
                rule: None,
                message: alloc::format!("the file is {} bytes; at most {MAX_FILE_BYTES} are read", text.len()),
            });
            return Loaded { router, problems };
        }
        let scan = scan::scan(text, MAX_RULES);
        let mut structure = scan.problems.into_iter().map(|(line, message)| Problem { line, rule: None, message });
        let mut first_lines = Vec::new();
        for el in scan.elements {
            let problem =
                |rule: Option<&str>, message: String| Problem { line: el.line, rule: rule.map(Into::into), message };
            if el.text.len() > MAX_RULE_BYTES {
                problems.push(problem(None, alloc::format!("longer than {MAX_RULE_BYTES} bytes; ignored")));
                continue;
            }
            let spec: Json = match serde_json::from_str(el.text) {
                Ok(v) => v,
                Err(e) => {
                    let mut p = problem(None, alloc::format!("not valid JSON: {}", without_position(&e)));
                    p.line = el.line + u32::try_from(e.line()).unwrap_or(1).saturating_sub(1);
                    problems.push(p);
                    continue;
                }
            };
            let id = rule::id_of(&spec).map(String::from);
            match rule::compile(spec) {
                Err(message) => problems.push(problem(id.as_deref(), message)),
                Ok(r) => match router.rules.iter().position(|old| old.id == r.id) {
                    Some(i) => problems.push(problem(
                        id.as_deref(),
                        alloc::format!(
                            "the id is already used by the rule at line {}; this one is ignored",
                            first_lines[i]
                        ),
                    )),
                    None => {
                        router.rules.push(r);
                        router.last_fired.push(None);
                        first_lines.push(el.line);
                    }
                },
            }
        }
        problems.extend(&mut structure);
        problems.sort_by_key(|p| p.line);
        router.reindex();
        Loaded { router, problems }
    }

    /// Adds a rule, or replaces the rule with the same id where it stands.
    pub fn add_rule(&mut self, spec: Json) -> Result<Added, String> {
        rule::check_size(&spec)?;
        let id = rule::id_of(&spec).map(String::from);
        let r = rule::compile(spec).map_err(|m| match id {
            Some(id) => alloc::format!("rule `{id}`: {m}"),
            None => m,
        })?;
        let added = match self.rules.iter().position(|old| old.id == r.id) {
            Some(i) => {
                self.rules[i] = r;
                self.last_fired[i] = None;
                Added::Replaced
            }
            None => {
                if self.rules.len() >= MAX_RULES {
                    return Err(alloc::format!("the router holds at most {MAX_RULES} rules; remove one first"));
                }
                self.rules.push(r);
                self.last_fired.push(None);
                Added::New
            }
        };
        self.reindex();
        Ok(added)
    }

    /// Removes the rule `id`; false if there is none.
    pub fn remove_rule(&mut self, id: &str) -> bool {
        let Some(i) = self.rules.iter().position(|r| &*r.id == id) else { return false };
        self.rules.remove(i);
        self.last_fired.remove(i);
        self.reindex();
        true
    }

    /// The rules in order.
    pub fn rules(&self) -> impl Iterator<Item = RuleView<'_>> {
        self.rules.iter().zip(&self.last_fired).map(|(r, last)| RuleView {
            id: &r.id,
            enabled: r.enabled,
            spec: &r.spec,
            last_fired: *last,
        })
    }

    /// The number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The whole `rules.json`, for the host to write atomically. [`Router::load`] reads it back
    /// to the same rules.
    pub fn to_json(&self) -> String {
        let rules: Vec<&Json> = self.rules.iter().map(|r| &r.spec).collect();
        let mut out = serde_json::to_string_pretty(&serde_json::json!({ "rules": rules }))
            .expect("a JSON value always serialises");
        out.push('\n');
        out
    }

    /// Rebuilds the type index and the guard slots after the rule list changed.
    fn reindex(&mut self) {
        self.slots.clear();
        for r in &mut self.rules {
            for g in r.guards.iter_mut() {
                if let Target::Slot(slot) = &mut g.test.target {
                    let i = match self.slots.iter().position(|s| s.1 == g.name) {
                        Some(i) => i,
                        None => {
                            self.slots.push((event::name_hash(&g.name), g.name.clone()));
                            self.slots.len() - 1
                        }
                    };
                    // At most MAX_RULES * MAX_GUARDS names, far below u16::MAX.
                    *slot = u16::try_from(i).expect("slot fits in u16");
                }
            }
        }
        self.cache = alloc::vec![Seen::default(); self.slots.len()];
        self.generation = 0;

        self.hot.clear();
        self.tests.clear();
        self.pats.clear();
        for r in &self.rules {
            // At most MAX_RULES * MAX_GUARDS entries: the offsets fit in u32, the counts in u8.
            self.hot.push(Hot {
                cooldown_ms: r.cooldown_ms,
                guards: self.tests.len() as u32,
                pats: self.pats.len() as u32,
                guard_count: r.guards.iter().filter(|g| !columnar(&g.test)).count() as u8,
                pat_count: r.pats.len() as u8,
                enabled: r.enabled,
                consume: r.consume,
            });
            self.tests.extend(r.guards.iter().filter(|g| !columnar(&g.test)).map(|g| g.test.clone()));
            self.pats.extend(r.pats.iter().cloned());
        }

        let index = |i: usize| u16::try_from(i).expect("MAX_RULES fits in u16");
        let mut types: Vec<&str> = self.rules.iter().filter_map(|r| r.kind.as_deref()).collect();
        types.sort_unstable();
        types.dedup();
        let list = |rules: &[Rule], keep: &dyn Fn(&Rule) -> bool| {
            let ids: Vec<u16> = (0..rules.len()).filter(|&i| keep(&rules[i])).map(index).collect();
            let mut columns: Vec<Column> = Vec::new();
            for (pos, &i) in ids.iter().enumerate() {
                for g in rules[usize::from(i)].guards.iter() {
                    if let (Target::Slot(slot), Op::Int(cmp, k)) = (g.test.target, &g.test.op) {
                        let entry = (*k, index(pos));
                        match columns.iter_mut().find(|c| c.slot == slot && c.cmp == *cmp) {
                            Some(c) => c.entries.push(entry),
                            None => columns.push(Column { slot, cmp: *cmp, entries: alloc::vec![entry] }),
                        }
                    }
                }
            }
            List { rules: ids.into_boxed_slice(), columns: columns.into_boxed_slice() }
        };
        self.by_type = types
            .iter()
            .map(|t| (Box::<str>::from(*t), list(&self.rules, &|r| r.kind.as_deref().is_none_or(|k| k == *t))))
            .collect();
        self.any = list(&self.rules, &|r| r.kind.is_none());
    }

    /// The rules `event` fires at `now` (ms, monotonic), and their cooldowns start.
    pub fn handle_event(&mut self, event: &Event, now: u64) -> Plan {
        let Router { rules, last_fired, hot, tests, pats, by_type, any, slots, cache, generation } = self;
        *generation = generation.wrapping_add(1);
        if *generation == 0 {
            // After 2^32 events: stale stamps could look current, so forget them all.
            cache.fill(Seen::default());
            *generation = 1;
        }
        let list = match by_type.binary_search_by(|(t, _)| (**t).cmp(event.kind())) {
            Ok(i) => &by_type[i].1,
            Err(_) => &*any,
        };
        let mut alive: Alive = [u64::MAX; MAX_RULES / 64];
        for col in list.columns.iter() {
            let c = &mut cache[usize::from(col.slot)];
            if c.generation != *generation {
                let (hash, name) = &slots[usize::from(col.slot)];
                *c = Seen::of(*generation, event, *hash, name);
            }
            if c.kind == rule::Kind::Int {
                let x = c.bits as i64;
                // One comparison per loop, chosen outside it: the loops stay branch-free.
                match col.cmp {
                    Cmp::Eq => cross_out(&mut alive, &col.entries, |k| x == k),
                    Cmp::Ne => cross_out(&mut alive, &col.entries, |k| x != k),
                    Cmp::Gt => cross_out(&mut alive, &col.entries, |k| x > k),
                    Cmp::Lt => cross_out(&mut alive, &col.entries, |k| x < k),
                    Cmp::Ge => cross_out(&mut alive, &col.entries, |k| x >= k),
                    Cmp::Le => cross_out(&mut alive, &col.entries, |k| x <= k),
                }
            } else {
                let seen = *c;
                cross_out(&mut alive, &col.entries, |k| Op::Int(col.cmp, k).holds(&seen, event));
            }
        }
        let mut plan = Plan::default();
        for (pos, &i) in list.rules.iter().enumerate() {
            if alive[pos / 64] & (1 << (pos % 64)) == 0 {
                continue;
            }
            let i = usize::from(i);
            let h = hot[i];
            if !h.enabled {
                continue;
            }
            if h.cooldown_ms > 0
                && let Some(t) = last_fired[i]
                && now.saturating_sub(t) < h.cooldown_ms
            {
                continue;
            }
            let p = h.pats as usize;
            if !pats[p..p + usize::from(h.pat_count)].iter().all(|p| p.matches(event)) {
                continue;
            }
            let g = h.guards as usize;
            let guards_hold = tests[g..g + usize::from(h.guard_count)].iter().all(|g| match g.target {
                Target::Builtin(b) => g.op.holds_str(event.builtin(b), false),
                Target::Slot(s) => {
                    let c = &mut cache[usize::from(s)];
                    if c.generation != *generation {
                        let (hash, name) = &slots[usize::from(s)];
                        *c = Seen::of(*generation, event, *hash, name);
                    }
                    g.op.holds(c, event)
                }
            });
            if !guards_hold {
                continue;
            }
            last_fired[i] = Some(now);
            let (fired, dropped) = plan_actions(&rules[i], event, &mut plan.emits_refused);
            plan.fired.push(fired);
            if dropped || h.consume {
                plan.consumed = true;
                break;
            }
        }
        plan
    }
}

/// Whether a guard is run by column (an integer test on an extra field) rather than by its rule.
fn columnar(t: &Test) -> bool {
    matches!((t.target, &t.op), (Target::Slot(_), Op::Int(..)))
}

/// Clears the bit of each entry whose constant fails `test`.
#[inline]
fn cross_out(alive: &mut Alive, entries: &[(i64, u16)], test: impl Fn(i64) -> bool) {
    for &(k, pos) in entries {
        let pos = usize::from(pos);
        alive[pos / 64] &= !(u64::from(!test(k)) << (pos % 64));
    }
}

/// The rule's actions bound to `event`; true if it ends with `drop`.
fn plan_actions(r: &Rule, event: &Event, refused: &mut u32) -> (Fired, bool) {
    let dest = |t: &Option<template::Template>, own: &str| match t {
        Some(t) => t.bind(event).render(""),
        None => own.into(),
    };
    let mut actions = Vec::with_capacity(r.actions.len());
    let mut dropped = false;
    for a in r.actions.iter() {
        actions.push(match a {
            ActionT::Agent { channel, chat_id, message } => Action::Agent {
                channel: dest(channel, event.channel()),
                chat_id: dest(chat_id, event.chat_id()),
                message: message.bind(event),
            },
            ActionT::Send { channel, chat_id, text } => Action::Send {
                channel: dest(channel, event.channel()),
                chat_id: dest(chat_id, event.chat_id()),
                text: text.bind(event),
            },
            ActionT::Cap { name, args } => Action::Cap { name: (**name).into(), args: args.bind(event) },
            ActionT::Emit { kind, text } => {
                if event.depth() >= MAX_EMIT_DEPTH {
                    *refused += 1;
                    continue;
                }
                Action::Emit(Emit {
                    kind: (**kind).into(),
                    text: text.as_ref().map_or_else(Text::empty, |t| t.bind(event)),
                    channel: event.channel().into(),
                    chat_id: event.chat_id().into(),
                    rule: (*r.id).into(),
                    depth: event.depth() + 1,
                })
            }
            ActionT::Drop => {
                dropped = true;
                continue;
            }
        });
    }
    (Fired { rule: (*r.id).into(), actions }, dropped)
}

/// serde_json's message without its " at line L column C" (the report gives the file's line).
fn without_position(e: &serde_json::Error) -> String {
    let mut s = alloc::format!("{e}");
    if let Some(i) = s.rfind(" at line ") {
        s.truncate(i);
    }
    s
}
