//! Building the system prompt from the memory files, tool guidance and the turn's context.
//!
//! The driver reads the files (`SOUL.md`, `AGENTS.md`, `USER.md`, `MEMORY.md`, recent daily
//! notes, remembered entries) and passes their text in; this module assembles them in a fixed
//! order, each part cut to its bound on a character boundary with a visible note saying where
//! the rest is, so a huge file can never crowd out the conversation.

use alloc::format;
use alloc::string::String;

use crate::text;

/// Which end of a part to keep when it is over its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// The beginning (identity, rules: what comes first matters most).
    Start,
    /// The end (notes: the newest lines are at the bottom).
    End,
}

/// One part of the prompt.
#[derive(Clone, Copy, Debug)]
pub struct Part<'a> {
    pub title: &'a str,
    pub body: &'a str,
    /// Bytes of `body` kept at most.
    pub max: usize,
    pub keep: Keep,
    /// Named in the cut note ("the rest is in MEMORY.md").
    pub source: &'a str,
}

/// Bounds for each part, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub soul: usize,
    pub agents: usize,
    pub user: usize,
    pub memory: usize,
    pub entries: usize,
    pub daily: usize,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds { soul: 4096, agents: 4096, user: 4096, memory: 8192, entries: 4096, daily: 6144 }
    }
}

/// Facts about the turn the model should know.
#[derive(Clone, Copy, Debug)]
pub struct TurnContext<'a> {
    pub channel: &'a str,
    pub chat_id: &'a str,
    /// Local time, ISO 8601 with offset.
    pub local_time: &'a str,
    pub weekday: &'a str,
    pub timezone: &'a str,
}

/// Everything the prompt is built from. Empty strings are left out.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub soul: &'a str,
    pub agents: &'a str,
    pub user: &'a str,
    pub memory: &'a str,
    /// Remembered entries, already rendered as lines.
    pub entries: &'a str,
    /// Recent daily notes, already joined oldest first with `## date` headings.
    pub daily: &'a str,
    /// Guidance for the tools the model can use this turn.
    pub tool_guidance: &'a str,
    pub context: TurnContext<'a>,
}

/// A system prompt and how much of its start stays the same from turn to turn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct System {
    pub text: String,
    /// Bytes at the start of `text` that change only when a person edits `SOUL.md`,
    /// `AGENTS.md`, `USER.md` or `MEMORY.md`, or the tools' guidance changes: the part a
    /// provider's prompt cache can reuse. Always a character boundary.
    pub stable: usize,
    /// What changes from turn to turn (remembered entries, recent daily notes, the channel,
    /// chat and time), kept out of `text`: a driver with a prompt cache sends it with the
    /// turn's own message instead, after the history, so the history stays a cacheable
    /// prefix (see [`TURN_CONTEXT_OPEN`]). Empty for none.
    pub turn: String,
}

/// Opens the turn's context where it travels with the person's message, so the model can tell
/// it from what the person wrote; [`TURN_CONTEXT_CLOSE`] ends it.
pub const TURN_CONTEXT_OPEN: &str = "<turn_context>\n";
/// Ends the turn's context (see [`TURN_CONTEXT_OPEN`]).
pub const TURN_CONTEXT_CLOSE: &str = "\n</turn_context>";

impl System {
    /// The turn's context as the text block sent with the person's message; empty for none.
    pub fn turn_block(&self) -> String {
        if self.turn.is_empty() {
            return String::new();
        }
        format!("{TURN_CONTEXT_OPEN}{}{TURN_CONTEXT_CLOSE}", self.turn)
    }

    /// The whole prompt in one text, the turn's context last: for a driver without a prompt
    /// cache (the chip), which sends it all as the system prompt.
    pub fn into_text(mut self) -> String {
        if !self.turn.is_empty() {
            self.text.push_str("\n\n");
            self.text.push_str(&self.turn);
        }
        self.text
    }
}

impl System {
    /// Appends a part that changes per turn (a skill's instructions, a summary) after the rest.
    pub fn push_tail(&mut self, part: &str) {
        let part = part.trim_start();
        if !part.is_empty() {
            self.text.push_str("\n\n");
            self.text.push_str(part);
        }
    }
}

/// The system prompt with the turn's context in it (see [`System::into_text`]).
pub fn build(inputs: &Inputs<'_>, bounds: &Bounds) -> String {
    build_system(inputs, bounds).into_text()
}

/// The system prompt, stable parts first: the memory files a person edits and the tools'
/// guidance; what changes (remembered entries and daily notes, which the model writes, and the
/// turn's channel and time) goes to [`System::turn`].
pub fn build_system(inputs: &Inputs<'_>, bounds: &Bounds) -> System {
    let stable = [
        Part { title: "", body: inputs.soul, max: bounds.soul, keep: Keep::Start, source: "SOUL.md" },
        Part { title: "How you work", body: inputs.agents, max: bounds.agents, keep: Keep::Start, source: "AGENTS.md" },
        Part { title: "About the user", body: inputs.user, max: bounds.user, keep: Keep::Start, source: "USER.md" },
        Part {
            title: "Long-term memory",
            body: inputs.memory,
            max: bounds.memory,
            keep: Keep::Start,
            source: "MEMORY.md",
        },
        Part { title: "Tools", body: inputs.tool_guidance, max: usize::MAX, keep: Keep::Start, source: "" },
    ];
    let c = inputs.context;
    let context = format!(
        "Channel: {}. Chat id: {}. Local time: {} ({}, {}).",
        c.channel, c.chat_id, c.local_time, c.weekday, c.timezone
    );
    let changing = [
        Part {
            title: "Remembered entries (newest last)",
            body: inputs.entries,
            max: bounds.entries,
            keep: Keep::End,
            source: "memory_list",
        },
        Part { title: "Recent daily notes", body: inputs.daily, max: bounds.daily, keep: Keep::End, source: "memory/" },
        Part { title: "This conversation", body: &context, max: usize::MAX, keep: Keep::Start, source: "" },
    ];
    let capacity: usize = stable.iter().chain(&changing).map(|p| p.body.len().min(p.max) + p.title.len() + 80).sum();
    let mut out = String::with_capacity(capacity);
    for p in &stable {
        push_part(&mut out, p);
    }
    let mut turn = String::new();
    for p in &changing {
        push_part(&mut turn, p);
    }
    System { stable: out.len(), text: out, turn }
}

/// Appends one part, cut to its bound, with its title as a heading.
pub fn push_part(out: &mut String, p: &Part<'_>) {
    let body = p.body.trim();
    if body.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    if !p.title.is_empty() {
        out.push_str("## ");
        out.push_str(p.title);
        out.push_str("\n\n");
    }
    if body.len() <= p.max {
        out.push_str(body);
        return;
    }
    match p.keep {
        Keep::Start => {
            out.push_str(text::prefix(body, p.max));
            out.push_str(&format!(
                "\n[… {} cut at {} of {} bytes; the rest is in {}]",
                p.title_or_source(),
                p.max,
                body.len(),
                p.source
            ));
        }
        Keep::End => {
            out.push_str(&format!(
                "[… older part cut: {} of {} bytes shown; the rest is in {}]\n",
                p.max,
                body.len(),
                p.source
            ));
            out.push_str(text::suffix(body, p.max));
        }
    }
}

impl Part<'_> {
    fn title_or_source(&self) -> &str {
        if self.title.is_empty() { self.source } else { self.title }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> TurnContext<'static> {
        TurnContext {
            channel: "cli",
            chat_id: "local",
            local_time: "2026-11-30T19:25:20+08:00",
            weekday: "Monday",
            timezone: "Asia/Shanghai",
        }
    }

    fn inputs<'a>(soul: &'a str, memory: &'a str, daily: &'a str) -> Inputs<'a> {
        Inputs {
            soul,
            agents: "Be kind.",
            user: "",
            memory,
            entries: "",
            daily,
            tool_guidance: "Use tools.",
            context: ctx(),
        }
    }

    #[test]
    fn parts_come_in_order_and_empty_ones_are_left_out() {
        let p = build(&inputs("I am Chela.", "Likes tea.", ""), &Bounds::default());
        let soul = p.find("I am Chela.").unwrap();
        let rules = p.find("## How you work").unwrap();
        let memory = p.find("## Long-term memory\n\nLikes tea.").unwrap();
        let tools = p.find("## Tools").unwrap();
        let convo = p
            .find("Channel: cli. Chat id: local. Local time: 2026-11-30T19:25:20+08:00 (Monday, Asia/Shanghai).")
            .unwrap();
        assert!(soul < rules && rules < memory && memory < tools && tools < convo, "{p}");
        assert!(!p.contains("About the user"));
        assert!(!p.contains("daily notes"));
    }

    #[test]
    fn the_stable_part_leads_and_only_the_changing_part_follows_it() {
        let mut i = inputs("I am Chela.", "Likes tea.", "### 2026-11-30\nwalked");
        i.entries = "[m1] birthday in May";
        let a = build_system(&i, &Bounds::default());
        let (stable, rest) = a.text.split_at(a.stable);
        assert!(stable.starts_with("I am Chela.") && stable.ends_with("Use tools."), "{stable}");
        assert_eq!(rest, "", "nothing that changes per turn is in the system text");
        let turn = &a.turn;
        assert!(turn.contains("birthday in May") && turn.contains("walked") && turn.contains("Channel: cli"), "{turn}");
        assert!(!stable.contains("Channel") && !stable.contains("walked") && !stable.contains("birthday"));
        assert_eq!(a.turn_block(), alloc::format!("<turn_context>\n{turn}\n</turn_context>"));
        // Another time, channel, notes and entries: the stable part is the same bytes.
        let mut j = i;
        j.entries = "[m1] birthday in May\n[m2] likes rain";
        j.daily = "";
        j.context =
            TurnContext { channel: "telegram", chat_id: "42", local_time: "2026-12-01T08:00:00+08:00", ..ctx() };
        let b = build_system(&j, &Bounds::default());
        assert_eq!(b.text, a.text, "the whole system text is the same bytes");
        assert_ne!(b.turn, a.turn);
        assert_eq!(build(&i, &Bounds::default()), alloc::format!("{}\n\n{}", a.text, a.turn));
        let mut tail = a.clone();
        tail.push_tail("  skill says hi");
        assert!(tail.text.ends_with("\n\nskill says hi") && tail.stable == a.stable);
    }

    #[test]
    fn over_long_parts_are_cut_visibly_on_char_boundaries() {
        let memory = "记".repeat(5000);
        let daily = alloc::format!("## 2026-11-28\nold\n{}\n## 2026-11-30\nnewest line", "x".repeat(10_000));
        let bounds = Bounds { memory: 100, daily: 50, ..Bounds::default() };
        let p = build(&inputs("s", &memory, &daily), &bounds);
        assert!(p.contains("[… Long-term memory cut at 100 of 15000 bytes; the rest is in MEMORY.md]"), "{p}");
        assert!(p.contains("newest line"));
        assert!(!p.contains("old\n"));
        assert!(p.contains("the rest is in memory/"));
        // 100 bytes of 3-byte characters keep 33 whole ones.
        assert!(p.contains(&"记".repeat(33)) && !p.contains(&"记".repeat(34)));
    }
}
