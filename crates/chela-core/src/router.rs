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
mod made_by;
mod multi;
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
pub use made_by::MadeBy;
pub use rule::{MAX_ACTIONS, MAX_GUARDS, MAX_ID, MAX_PATTERN, MAX_RULE_BYTES, MAX_TEMPLATE};
pub use template::{Args, MAX_RENDERED, MAX_RENDERED_ARGS, Text};

use multi::{Multi, set};
use rule::{ActionT, Cmp, Kind, Op, Pat, PatKind, Rule, Seen, Target, Test};

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
    /// The conversation the model made the rule in: its actions act with that conversation's
    /// rights. `None` for the owner's rules.
    pub made_by: Option<MadeBy>,
}

/// What an event fired. Empty (and free: no allocation) when no rule fired.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub fired: Vec<Fired>,
    /// A rule consumed the event (`consume_on_match` or `drop`): it takes no default path.
    pub consumed: bool,
    /// `emit` actions left out because the event was already [`MAX_EMIT_DEPTH`] emits deep.
    pub emits_refused: u32,
    /// Rules the event would have fired that wait for the owner's approval (made by the
    /// model, acting on another chat): they did nothing, and consumed nothing.
    pub waiting: Vec<String>,
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
    /// The conversation the model made it in; `None` for the owner's rules.
    pub made_by: Option<&'r MadeBy>,
    /// It waits for the owner's approval and does nothing until then.
    pub pending: bool,
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

/// The rules one event type meets, and the guards and patterns run by column for all of them
/// at once (integer and string-equality guards on extra fields, `contains` tests).
#[derive(Debug, Default)]
struct List {
    rules: Box<[u16]>,
    columns: Box<[Column]>,
    strs: Box<[StrColumn]>,
    texts: Box<[TextColumn]>,
}

/// The `eq`/`ne` guards with a string constant on one extra field: per distinct constant
/// (sorted), the positions whose `eq` holds and those whose `ne` fails when the field equals
/// it. One lookup of the event's value answers them all. A rule has at most one `eq` here.
#[derive(Debug)]
struct StrColumn {
    slot: u16,
    eq_all: Alive,
    ne_all: Alive,
    values: Box<[(Box<str>, Alive, Alive)]>,
}

/// The `contains` tests of one field (a rule's `match` pattern or guard; at most one per rule
/// and field), searched for all positions at once.
#[derive(Debug)]
struct TextColumn {
    target: Target,
    all: Alive,
    multi: Multi,
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

/// A text column being built: its field, its positions, and their patterns.
type TextPatterns = (Target, Alive, Vec<(Box<str>, u16)>);

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
    pending: bool,
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
            let spec: Json = match chela_proto::json::from_str(el.text) {
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
        crate::sort::sort_by_key(&mut problems, |p| p.line);
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

    /// The owner approves the model-made rule `id`: it may then act beyond the chat it was made
    /// in. Only the owner's commands call this; a rule that is the owner's already is refused.
    pub fn approve_rule(&mut self, id: &str) -> Result<(), String> {
        let Some(i) = self.rules.iter().position(|r| &*r.id == id) else {
            return Err(alloc::format!("there is no rule {id:?}"));
        };
        let mut spec = self.rules[i].spec.clone();
        match spec.get_mut("made_by").and_then(Json::as_object_mut) {
            Some(m) => {
                m.insert("approved".into(), Json::Bool(true));
            }
            None => {
                return Err(alloc::format!("rule {id:?} is the owner's (not made by the model): it needs no approval"));
            }
        }
        self.rules[i] = rule::compile(spec).map_err(|m| alloc::format!("rule `{id}`: {m}"))?;
        self.reindex();
        Ok(())
    }

    /// The rules in order.
    pub fn rules(&self) -> impl Iterator<Item = RuleView<'_>> {
        self.rules.iter().zip(&self.last_fired).map(|(r, last)| RuleView {
            id: &r.id,
            enabled: r.enabled,
            spec: &r.spec,
            last_fired: *last,
            made_by: r.made_by.as_ref(),
            pending: r.pending,
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
            let (g_col, p_col) = split(r);
            // At most MAX_RULES * MAX_GUARDS entries: the offsets fit in u32, the counts in u8.
            self.hot.push(Hot {
                cooldown_ms: r.cooldown_ms,
                guards: self.tests.len() as u32,
                pats: self.pats.len() as u32,
                guard_count: r.guards.len().saturating_sub(g_col.count_ones() as usize) as u8,
                pat_count: r.pats.len().saturating_sub(p_col.count_ones() as usize) as u8,
                enabled: r.enabled,
                consume: r.consume,
                pending: r.pending,
            });
            self.tests.extend(
                r.guards.iter().enumerate().filter(|(k, _)| g_col & (1 << k) == 0).map(|(_, g)| g.test.clone()),
            );
            self.pats.extend(r.pats.iter().enumerate().filter(|(k, _)| p_col & (1 << k) == 0).map(|(_, p)| p.clone()));
        }

        let index = |i: usize| u16::try_from(i).expect("MAX_RULES fits in u16");
        let mut types: Vec<&str> = self.rules.iter().filter_map(|r| r.kind.as_deref()).collect();
        types.sort_unstable();
        types.dedup();
        let list = |rules: &[Rule], keep: &dyn Fn(&Rule) -> bool| {
            let ids: Vec<u16> = (0..rules.len()).filter(|&i| keep(&rules[i])).map(index).collect();
            let mut columns: Vec<Column> = Vec::new();
            let mut strs: Vec<StrColumn> = Vec::new();
            let mut texts: Vec<TextPatterns> = Vec::new();
            let mut text = |target: Target, k: &str, pos: u16| {
                let i = match texts.iter().position(|t| t.0 == target) {
                    Some(i) => i,
                    None => {
                        texts.push((target, Alive::default(), Vec::new()));
                        texts.len() - 1
                    }
                };
                set(&mut texts[i].1, pos);
                texts[i].2.push((k.into(), pos));
            };
            for (pos, &i) in ids.iter().enumerate() {
                let r = &rules[usize::from(i)];
                let (g_col, p_col) = split(r);
                let pos = index(pos);
                for (_, g) in r.guards.iter().enumerate().filter(|(k, _)| g_col & (1 << k) != 0) {
                    match (g.test.target, &g.test.op) {
                        (Target::Slot(slot), Op::Int(cmp, k)) => {
                            let entry = (*k, pos);
                            match columns.iter_mut().find(|c| c.slot == slot && c.cmp == *cmp) {
                                Some(c) => c.entries.push(entry),
                                None => columns.push(Column { slot, cmp: *cmp, entries: alloc::vec![entry] }),
                            }
                        }
                        (Target::Slot(slot), Op::StrEq(k) | Op::StrNe(k)) => {
                            let eq = matches!(g.test.op, Op::StrEq(_));
                            let c = match strs.iter().position(|c| c.slot == slot) {
                                Some(c) => &mut strs[c],
                                None => {
                                    strs.push(StrColumn {
                                        slot,
                                        eq_all: Alive::default(),
                                        ne_all: Alive::default(),
                                        values: Box::new([]),
                                    });
                                    strs.last_mut().expect("just pushed")
                                }
                            };
                            set(if eq { &mut c.eq_all } else { &mut c.ne_all }, pos);
                            let mut values = core::mem::take(&mut c.values).into_vec();
                            let v = match values.binary_search_by(|(v, ..)| (**v).cmp(&**k)) {
                                Ok(v) => v,
                                Err(at) => {
                                    values.insert(at, (k.clone(), Alive::default(), Alive::default()));
                                    at
                                }
                            };
                            set(if eq { &mut values[v].1 } else { &mut values[v].2 }, pos);
                            c.values = values.into_boxed_slice();
                        }
                        (target, Op::Contains(k)) => text(target, k, pos),
                        _ => unreachable!("split() takes only these guards"),
                    }
                }
                for (_, p) in r.pats.iter().enumerate().filter(|(k, _)| p_col & (1 << k) != 0) {
                    text(Target::Builtin(p.field), &p.s, pos);
                }
            }
            let texts = texts
                .into_iter()
                .map(|(target, all, patterns)| TextColumn { target, all, multi: Multi::new(patterns) })
                .collect();
            List {
                rules: ids.into_boxed_slice(),
                columns: columns.into_boxed_slice(),
                strs: strs.into_boxed_slice(),
                texts,
            }
        };
        self.by_type = types
            .iter()
            .map(|t| (Box::<str>::from(*t), list(&self.rules, &|r| r.kind.as_deref().is_none_or(|k| k == *t))))
            .collect();
        self.any = list(&self.rules, &|r| r.kind.is_none());
    }

    /// Whether some rule may fire on events of type `kind` (a rule for that type, or one for
    /// every type): the host skips building events nobody listens to (`cap_result` after every
    /// tool call). Disabled rules count; the answer may be `true` when nothing fires.
    pub fn listens(&self, kind: &str) -> bool {
        !self.any.rules.is_empty() || self.by_type.binary_search_by(|(t, _)| (**t).cmp(kind)).is_ok()
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
        for col in list.strs.iter() {
            if !any_left(&alive, &col.eq_all) && !any_left(&alive, &col.ne_all) {
                continue;
            }
            let c = seen(cache, slots, *generation, event, col.slot);
            // `eq` holds only for the same string; `ne` fails only for it, and for a missing field.
            let kill = match (c.kind, event_str(event, &c)) {
                (Kind::Absent, _) => or(&col.eq_all, &col.ne_all),
                (_, Some(s)) => match col.values.binary_search_by(|(v, ..)| (**v).cmp(s)) {
                    Ok(v) => {
                        let (_, eq, ne) = &col.values[v];
                        or(&and_not(&col.eq_all, eq), ne)
                    }
                    Err(_) => col.eq_all,
                },
                (_, None) => col.eq_all,
            };
            alive = and_not(&alive, &kill);
        }
        for col in list.texts.iter() {
            if !any_left(&alive, &col.all) {
                continue;
            }
            let hay = match col.target {
                Target::Builtin(b) => Some(event.builtin(b)),
                Target::Slot(s) => {
                    let c = seen(cache, slots, *generation, event, s);
                    event_str(event, &c)
                }
            };
            // `contains` fails on a missing field and on one that is not a string.
            let kill = match hay {
                Some(h) => and_not(&col.all, &col.multi.matches(h)),
                None => col.all,
            };
            alive = and_not(&alive, &kill);
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
            if h.pending {
                plan.waiting.push((*rules[i].id).into());
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

/// Which guards and patterns of a rule run by column (bit k for its k-th guard, and for its
/// k-th pattern) rather than by the rule: integer tests and string `eq`/`ne` on extra fields,
/// and the first `contains` test of each field. At most one string `eq` per field joins a
/// column (a second one stays with the rule), since a column answers "this field equals the
/// rule's constant" with one bit per rule.
fn split(r: &Rule) -> (u8, u8) {
    let (mut guards, mut pats) = (0u8, 0u8);
    let mut searched: Vec<Target> = Vec::new();
    let mut equal: Vec<Target> = Vec::new();
    for (k, g) in r.guards.iter().enumerate() {
        let t: &Test = &g.test;
        let col = match (t.target, &t.op) {
            (Target::Slot(_), Op::Int(..) | Op::StrNe(_)) => true,
            (target @ Target::Slot(_), Op::StrEq(_)) if !equal.contains(&target) => {
                equal.push(target);
                true
            }
            (target, Op::Contains(_)) if !searched.contains(&target) => {
                searched.push(target);
                true
            }
            _ => false,
        };
        // At most MAX_GUARDS (8) guards.
        if col {
            guards |= 1 << k;
        }
    }
    for (k, p) in r.pats.iter().enumerate() {
        let target = Target::Builtin(p.field);
        if p.kind == PatKind::Contains && !searched.contains(&target) {
            searched.push(target);
            pats |= 1 << k;
        }
    }
    (guards, pats)
}

/// The guard field `slot` of the current event, looked up once per event.
#[inline]
fn seen(cache: &mut [Seen], slots: &[(u32, Box<str>)], generation: u32, event: &Event, slot: u16) -> Seen {
    let c = &mut cache[usize::from(slot)];
    if c.generation != generation {
        let (hash, name) = &slots[usize::from(slot)];
        *c = Seen::of(generation, event, *hash, name);
    }
    *c
}

/// The string of a field seen in `event`, if it is one.
#[inline]
fn event_str<'e>(event: &'e Event, c: &Seen) -> Option<&'e str> {
    match (c.kind, event.at_checked(usize::from(c.pos))) {
        (Kind::Str, Some(Value::Str(s))) => Some(s),
        _ => None,
    }
}

#[inline]
fn or(a: &Alive, b: &Alive) -> Alive {
    core::array::from_fn(|i| a[i] | b[i])
}

#[inline]
fn and_not(a: &Alive, b: &Alive) -> Alive {
    core::array::from_fn(|i| a[i] & !b[i])
}

/// Whether a position of `of` is still alive.
#[inline]
fn any_left(alive: &Alive, of: &Alive) -> bool {
    alive.iter().zip(of).any(|(a, b)| a & b != 0)
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
    (Fired { rule: (*r.id).into(), actions, made_by: r.made_by.clone() }, dropped)
}

/// serde_json's message without its " at line L column C" (the report gives the file's line).
fn without_position(e: &serde_json::Error) -> String {
    let mut s = alloc::format!("{e}");
    if let Some(i) = s.rfind(" at line ") {
        s.truncate(i);
    }
    s
}
