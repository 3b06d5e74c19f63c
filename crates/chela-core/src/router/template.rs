//! `{{event.field}}` and `{{last.output}}` in action texts and capability arguments.
//!
//! A template is compiled once when its rule is loaded. When a rule fires, its event fields are
//! bound at once (the result is a [`Text`]: literal text and holes for the previous action's
//! output); the host fills the holes with [`Text::render`] as it runs the actions in order.
//! Event values are never read as templates again, so an event text holding `{{last.output}}`
//! stays literal text.
//!
//! Choices: a field the event does not carry renders as the empty string (events of one type
//! differ in their extra fields, and a rule cannot know them all in advance); a placeholder
//! that is neither `event.<field>` nor `last.output`, or an unclosed `{{`, is an error when the
//! rule is loaded, naming the placeholder. Rendered text is cut at [`MAX_RENDERED`] bytes on a
//! character boundary. The strings of one action's capability arguments hold at most
//! [`MAX_RENDERED_ARGS`] bytes together: a rule of a thousand `"{{event.text}}"` strings would
//! otherwise turn one message into megabytes per action, held in the router's queue.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::Value as Json;

use super::event::{Builtin, Event, valid_field_name};

/// The longest text one rendered template yields, in bytes.
pub const MAX_RENDERED: usize = 16 * 1024;
/// The most bytes the strings of one action's capability arguments hold together, once the
/// event is bound and again once the previous output is filled in; the strings past it are
/// cut, in document order.
pub const MAX_RENDERED_ARGS: usize = 2 * MAX_RENDERED;

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Lit(Box<str>),
    Builtin(Builtin),
    Field(Box<str>),
    Last,
}

/// A compiled template.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Template(Box<[Part]>);

impl Template {
    /// Compiles `src`, or says which placeholder is wrong.
    pub(crate) fn parse(src: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = src;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(Part::Lit(rest[..open].into()));
            }
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else {
                return Err(alloc::format!(
                    "`{{{{` at byte {} is never closed with `}}}}`",
                    src.len() - rest.len() + open
                ));
            };
            let name = after[..close].trim();
            parts.push(placeholder(name)?);
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Lit(rest.into()));
        }
        Ok(Template(parts.into_boxed_slice()))
    }

    /// Whether the template is plain text.
    pub(crate) fn is_literal(&self) -> bool {
        self.0.iter().all(|p| matches!(p, Part::Lit(_)))
    }

    /// The text of a template without placeholders.
    pub(crate) fn literal(&self) -> Option<String> {
        self.is_literal()
            .then(|| self.0.iter().filter_map(|p| if let Part::Lit(s) = p { Some(&**s) } else { None }).collect())
    }

    /// Whether the template refers to the previous action's output.
    pub(crate) fn uses_last(&self) -> bool {
        self.0.contains(&Part::Last)
    }

    /// Fills in the event's fields; the previous output stays a hole.
    pub(crate) fn bind(&self, event: &Event) -> Text {
        let mut text = String::new();
        let mut holes = Vec::new();
        for part in self.0.iter() {
            match part {
                Part::Lit(s) => text.push_str(s),
                Part::Builtin(b) => text.push_str(event.builtin(*b)),
                Part::Field(name) => {
                    if let Some(v) = event.get(name) {
                        v.write_to(&mut text);
                    }
                }
                // The text is at most MAX_RENDERED (+ one field) long: offsets fit in u32.
                Part::Last => holes.push(text.len() as u32),
            }
            if text.len() > MAX_RENDERED {
                crate::text::truncate_in_place(&mut text, MAX_RENDERED);
                holes.retain(|&h| h as usize <= text.len());
                break;
            }
        }
        Text { text, holes }
    }
}

fn placeholder(name: &str) -> Result<Part, String> {
    if name == "last.output" {
        return Ok(Part::Last);
    }
    if let Some(field) = name.strip_prefix("event.") {
        if let Some(b) = Builtin::from_name(field) {
            return Ok(Part::Builtin(b));
        }
        if valid_field_name(field) {
            return Ok(Part::Field(field.into()));
        }
    }
    Err(alloc::format!(
        "unknown placeholder `{{{{{}}}}}`: use `{{{{event.<field>}}}}` or `{{{{last.output}}}}`",
        crate::text::prefix(name, 80)
    ))
}

/// An action's text with the event bound: the literal text, and where the previous action's
/// output goes (byte offsets, ascending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text {
    text: String,
    holes: Vec<u32>,
}

impl Text {
    pub(crate) fn empty() -> Text {
        Text { text: String::new(), holes: Vec::new() }
    }

    /// The text with `last` (the previous action's output in this rule, `""` before the first)
    /// in each hole, cut at [`MAX_RENDERED`] bytes.
    pub fn render(&self, last: &str) -> String {
        if self.holes.is_empty() {
            return self.text.clone();
        }
        let mut out = String::new();
        let mut at = 0;
        for &h in &self.holes {
            let h = h as usize;
            out.push_str(&self.text[at..h]);
            out.push_str(crate::text::prefix(last, MAX_RENDERED.saturating_sub(out.len())));
            at = h;
            if out.len() >= MAX_RENDERED {
                break;
            }
        }
        out.push_str(&self.text[at..]);
        crate::text::truncate_in_place(&mut out, MAX_RENDERED);
        out
    }

    /// Whether the text uses the previous output (the host need not keep it otherwise).
    pub fn uses_last(&self) -> bool {
        !self.holes.is_empty()
    }

    /// Cuts the bound text at `max` bytes (a hole past the cut goes with it).
    fn cut(&mut self, max: usize) {
        if self.text.len() > max {
            crate::text::truncate_in_place(&mut self.text, max);
            let len = self.text.len();
            self.holes.retain(|&h| h as usize <= len);
        }
    }
}

/// Takes `s` out of what is left of `room`, cutting it to fit.
fn spend(s: &mut String, room: &mut usize) {
    crate::text::truncate_in_place(s, *room);
    *room -= s.len();
}

/// Capability arguments: JSON whose strings may hold templates.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ArgsTemplate {
    Lit(Json),
    Str(Template),
    Arr(Box<[ArgsTemplate]>),
    Obj(Box<[(String, ArgsTemplate)]>),
}

impl ArgsTemplate {
    /// Compiles every string of `v`; the error names the path of the bad string.
    pub(crate) fn parse(v: &Json, path: &str) -> Result<ArgsTemplate, String> {
        let t = match v {
            Json::String(s) => {
                let t = Template::parse(s).map_err(|e| alloc::format!("`{path}`: {e}"))?;
                if t.is_literal() { ArgsTemplate::Lit(v.clone()) } else { ArgsTemplate::Str(t) }
            }
            Json::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    out.push(ArgsTemplate::parse(item, &alloc::format!("{path}[{i}]"))?);
                }
                ArgsTemplate::Arr(out.into_boxed_slice())
            }
            Json::Object(map) => {
                let mut out = Vec::with_capacity(map.len());
                for (k, item) in map {
                    out.push((k.clone(), ArgsTemplate::parse(item, &alloc::format!("{path}.{k}"))?));
                }
                ArgsTemplate::Obj(out.into_boxed_slice())
            }
            other => ArgsTemplate::Lit(other.clone()),
        };
        // A subtree without templates is kept as one literal, cloned whole when the rule fires.
        Ok(match t {
            ArgsTemplate::Arr(items) if items.iter().all(|i| matches!(i, ArgsTemplate::Lit(_))) => {
                ArgsTemplate::Lit(v.clone())
            }
            ArgsTemplate::Obj(items) if items.iter().all(|(_, i)| matches!(i, ArgsTemplate::Lit(_))) => {
                ArgsTemplate::Lit(v.clone())
            }
            t => t,
        })
    }

    /// Fills in the event's fields, within [`MAX_RENDERED_ARGS`] for all the strings.
    pub(crate) fn bind(&self, event: &Event) -> Args {
        let mut room = MAX_RENDERED_ARGS;
        self.bind_within(event, &mut room)
    }

    fn bind_within(&self, event: &Event, room: &mut usize) -> Args {
        match self {
            ArgsTemplate::Lit(v) => Args::Lit(v.clone()),
            ArgsTemplate::Str(t) => {
                // Nothing is bound once the room is spent: the cut would throw it away.
                let mut text = if *room == 0 { Text::empty() } else { t.bind(event) };
                text.cut(*room);
                *room -= text.text.len();
                Args::Text(text)
            }
            ArgsTemplate::Arr(items) => Args::Arr(items.iter().map(|i| i.bind_within(event, room)).collect()),
            ArgsTemplate::Obj(items) => {
                Args::Obj(items.iter().map(|(k, i)| (k.clone(), i.bind_within(event, room))).collect())
            }
        }
    }
}

/// Capability arguments with the event bound; [`Args::render`] gives the JSON to call with.
#[derive(Debug, Clone, PartialEq)]
pub enum Args {
    Lit(Json),
    Text(Text),
    Arr(Vec<Args>),
    Obj(Vec<(String, Args)>),
}

impl Args {
    /// The arguments with `last` in each hole: each string cut at [`MAX_RENDERED`] bytes, and
    /// all of them together at [`MAX_RENDERED_ARGS`].
    pub fn render(&self, last: &str) -> Json {
        let mut room = MAX_RENDERED_ARGS;
        self.render_within(last, &mut room)
    }

    fn render_within(&self, last: &str, room: &mut usize) -> Json {
        match self {
            Args::Lit(v) => v.clone(),
            Args::Text(t) => {
                let mut s = if *room == 0 { String::new() } else { t.render(last) };
                spend(&mut s, room);
                Json::String(s)
            }
            Args::Arr(items) => Json::Array(items.iter().map(|i| i.render_within(last, room)).collect()),
            Args::Obj(items) => {
                // Inserted one by one, not collected: a collected map sorts its entries first,
                // and that sort would be compiled here alone. A repeated key keeps its last value
                // either way.
                let mut map = serde_json::Map::new();
                for (k, i) in items {
                    map.insert(k.clone(), i.render_within(last, room));
                }
                Json::Object(map)
            }
        }
    }

    /// Whether any string uses the previous output.
    pub fn uses_last(&self) -> bool {
        match self {
            Args::Lit(_) => false,
            Args::Text(t) => t.uses_last(),
            Args::Arr(items) => items.iter().any(Args::uses_last),
            Args::Obj(items) => items.iter().any(|(_, i)| i.uses_last()),
        }
    }
}
