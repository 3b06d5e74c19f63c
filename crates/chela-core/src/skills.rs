//! Skills: instructions for the model in a `SKILL.md`, activated per session.
//!
//! What it is: the `SKILL.md` parser (YAML front matter in the subset the open Agent Skills
//! format uses: `name`, `description`, plus Chela's `groups: [...]` and `always: true`; other
//! keys are kept as text and ignored), the compact summary of every skill for the system prompt
//! (bounded by a byte budget), the gating rule (which capability groups an active skill makes
//! visible in its session) and a TTL + LRU cache of parsed skills validated by the file's
//! (mtime, size).
//!
//! What it is not: it reads no file and no clock. The driver stats and reads the file, passes
//! the text to [`parse`] and `now` (any monotonic count of milliseconds) to the [`Cache`].
//!
//! Calling order for a lookup: stat the file, [`Cache::get`] with its [`Stamp`] and `now`; on a
//! miss read and [`parse`] it, then [`Cache::insert`]. A save or delete calls
//! [`Cache::invalidate`] at once.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::cap::Registry;
use crate::text;

/// Longest skill name, as in the Agent Skills format.
pub const MAX_NAME: usize = 64;
/// Longest description, as in the Agent Skills format.
pub const MAX_DESCRIPTION: usize = 1024;
/// Most groups one skill may unlock.
pub const MAX_GROUPS: usize = 16;
/// Most bytes of front matter (the part between the `---` lines).
pub const MAX_FRONT_MATTER: usize = 16 * 1024;
/// Most front-matter keys kept (known and unknown together).
pub const MAX_KEYS: usize = 64;

/// One parsed skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Capability groups the skill unlocks in a session where it is active.
    pub groups: Vec<String>,
    /// Its text is in every session's prompt, active or not.
    pub always: bool,
    /// The instructions: everything after the front matter, trimmed.
    pub body: String,
    /// Front-matter keys Chela does not use (`license`, `allowed-tools`, `metadata`…), with their
    /// raw text, kept so a skill written for another assistant loads unchanged.
    pub extra: Vec<(String, String)>,
}

/// Why a `SKILL.md` or a skill name is refused. Every message names what to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkillError {
    BadName { name: String },
    TooLarge { bytes: usize, max: usize },
    NoFrontMatter,
    Unterminated,
    FrontMatterTooLarge { bytes: usize },
    BadLine { line: usize, why: &'static str },
    Missing { key: &'static str },
    BadValue { key: &'static str, why: String },
    NameMismatch { declared: String, folder: String },
}

impl fmt::Display for SkillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkillError::BadName { name } => write!(
                f,
                "`{}` is not a valid skill name: use 1 to {MAX_NAME} lowercase letters, digits, `-` or `_`, \
                 starting with a letter or digit (for example `pdf-forms`).",
                text::prefix(name, 80)
            ),
            SkillError::TooLarge { bytes, max } => write!(
                f,
                "The SKILL.md is {bytes} bytes, over the {max}-byte limit (skills.max_bytes); shorten it or \
                 move details into other files the skill tells the assistant to read."
            ),
            SkillError::NoFrontMatter => f.write_str(
                "A SKILL.md must start with front matter: a `---` line, `name: …` and `description: …`, and \
                 another `---` line.",
            ),
            SkillError::Unterminated => {
                f.write_str("The SKILL.md front matter has no closing `---` line after the opening one.")
            }
            SkillError::FrontMatterTooLarge { bytes } => write!(
                f,
                "The SKILL.md front matter is {bytes} bytes or more, over the {MAX_FRONT_MATTER}-byte limit; \
                 keep it to the name, description and a few keys."
            ),
            SkillError::BadLine { line, why } => write!(f, "SKILL.md front matter, line {line}: {why}."),
            SkillError::Missing { key } => write!(f, "The SKILL.md front matter has no `{key}:`; add one."),
            SkillError::BadValue { key, why } => write!(f, "SKILL.md front matter `{key}`: {why}."),
            SkillError::NameMismatch { declared, folder } => write!(
                f,
                "The SKILL.md says `name: {}` but its folder is `skills/{folder}/`; the two must match.",
                text::prefix(declared, 80)
            ),
        }
    }
}

impl core::error::Error for SkillError {}

/// Checks a skill name: what may be a folder name under `skills/` and nothing else (no `/`,
/// no `..`, no leading dot, no upper case so two names never differ by case alone).
pub fn check_name(name: &str) -> Result<(), SkillError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok { Ok(()) } else { Err(SkillError::BadName { name: name.into() }) }
}

/// Parses a `SKILL.md` found in folder `skills/<folder>/`, at most `max_bytes` long.
pub fn parse(folder: &str, source: &str, max_bytes: usize) -> Result<Skill, SkillError> {
    check_name(folder)?;
    if source.len() > max_bytes {
        return Err(SkillError::TooLarge { bytes: source.len(), max: max_bytes });
    }
    let (front, body) = split_front_matter(source)?;
    let mut fields = Fields::default();
    parse_front_matter(front, &mut fields)?;
    let name = fields.name.ok_or(SkillError::Missing { key: "name" })?;
    if name != folder {
        check_name(&name)?;
        return Err(SkillError::NameMismatch { declared: name, folder: folder.into() });
    }
    let description = fields.description.ok_or(SkillError::Missing { key: "description" })?;
    if description.trim().is_empty() {
        return Err(SkillError::BadValue { key: "description", why: "it is empty; say what the skill is for".into() });
    }
    if description.len() > MAX_DESCRIPTION {
        return Err(SkillError::BadValue {
            key: "description",
            why: format!("{} bytes, over the {MAX_DESCRIPTION}-byte limit", description.len()),
        });
    }
    Ok(Skill {
        name,
        description: description.trim().into(),
        groups: fields.groups,
        always: fields.always,
        body: body.trim().into(),
        extra: fields.extra,
    })
}

/// The front matter and the body, split at the `---` lines.
fn split_front_matter(source: &str) -> Result<(&str, &str), SkillError> {
    let s = source.strip_prefix('\u{feff}').unwrap_or(source);
    let rest = s.strip_prefix("---\n").or_else(|| s.strip_prefix("---\r\n")).ok_or(SkillError::NoFrontMatter)?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
        if at > MAX_FRONT_MATTER {
            return Err(SkillError::FrontMatterTooLarge { bytes: at });
        }
    }
    // A file ending right after the closing `---` with no newline.
    if rest.trim_end().ends_with("\n---") || rest.trim_end() == "---" {
        let end = rest.trim_end().len() - 3;
        return Ok((&rest[..end], ""));
    }
    Err(SkillError::Unterminated)
}

#[derive(Default)]
struct Fields {
    name: Option<String>,
    description: Option<String>,
    groups: Vec<String>,
    always: bool,
    extra: Vec<(String, String)>,
}

/// The YAML subset: top-level `key: value` lines, where a value is a plain or quoted scalar, a
/// flow list `[a, b]`, a block list of `- item` lines, or a block scalar (`|`, `>`). Indented
/// lines under any other key (a `metadata:` map) belong to that key and are kept as its text.
fn parse_front_matter(front: &str, out: &mut Fields) -> Result<(), SkillError> {
    let lines: Vec<&str> = front.lines().collect();
    let mut i = 0;
    let mut keys = 0;
    while i < lines.len() {
        let line = lines[i];
        let n = i + 1;
        i += 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(SkillError::BadLine { line: n, why: "an indented line with no key above it" });
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(SkillError::BadLine { line: n, why: "expected `key: value`" });
        };
        let key = key.trim();
        if key.is_empty() || key.contains(' ') {
            return Err(SkillError::BadLine { line: n, why: "a key must be one word before `:`" });
        }
        keys += 1;
        if keys > MAX_KEYS {
            return Err(SkillError::BadLine { line: n, why: "more than 64 keys" });
        }
        // The indented lines that follow belong to this key.
        let start = i;
        while i < lines.len() && (lines[i].starts_with([' ', '\t']) || lines[i].trim().is_empty()) {
            i += 1;
        }
        let nested = &lines[start..i];
        let value = value.trim();
        match key {
            "name" => out.name = Some(scalar(value, nested, "name")?),
            "description" => out.description = Some(scalar(value, nested, "description")?),
            "groups" => out.groups = list(value, nested)?,
            "always" => {
                out.always = match scalar(value, nested, "always")?.as_str() {
                    "true" | "yes" | "on" => true,
                    "false" | "no" | "off" | "" => false,
                    other => {
                        return Err(SkillError::BadValue {
                            key: "always",
                            why: format!("`{}` is not true or false", text::prefix(other, 40)),
                        });
                    }
                }
            }
            _ => {
                let mut raw = String::from(value);
                for l in nested {
                    raw.push('\n');
                    raw.push_str(l);
                }
                out.extra.push((key.into(), raw));
            }
        }
    }
    Ok(())
}

/// A scalar: plain, quoted, or a block scalar (`|` keeps line breaks, `>` folds them).
fn scalar(value: &str, nested: &[&str], key: &'static str) -> Result<String, SkillError> {
    let bad = |why: &str| SkillError::BadValue { key, why: why.into() };
    if let Some(style) = value.chars().next().filter(|c| *c == '|' || *c == '>') {
        let lines: Vec<&str> = nested.iter().map(|l| l.trim()).collect();
        let sep = if style == '|' { "\n" } else { " " };
        return Ok(lines.join(sep).trim().into());
    }
    if nested.iter().any(|l| !l.trim().is_empty()) {
        // A plain scalar continued on indented lines: YAML folds them with spaces.
        let mut s = unquote(value).map_err(bad)?;
        for l in nested {
            let t = l.trim();
            if !t.is_empty() {
                s.push(' ');
                s.push_str(t);
            }
        }
        return Ok(s);
    }
    unquote(value).map_err(bad)
}

/// The text of a plain or quoted scalar; a trailing ` # comment` on a plain one is dropped.
fn unquote(v: &str) -> Result<String, &'static str> {
    if let Some(inner) = v.strip_prefix('"') {
        let inner = inner.strip_suffix('"').ok_or("a double quote is not closed")?;
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(c @ ('"' | '\\' | '/')) => out.push(c),
                _ => return Err("an unknown escape in a double-quoted value"),
            }
        }
        return Ok(out);
    }
    if let Some(inner) = v.strip_prefix('\'') {
        let inner = inner.strip_suffix('\'').ok_or("a single quote is not closed")?;
        return Ok(inner.replace("''", "'"));
    }
    let v = v.split_once(" #").map_or(v, |(a, _)| a).trim();
    Ok(v.into())
}

/// A list of group names: `[a, b]`, `a` (one), or `- a` lines below the key.
fn list(value: &str, nested: &[&str]) -> Result<Vec<String>, SkillError> {
    let bad = |why: String| SkillError::BadValue { key: "groups", why };
    let items: Vec<String> = if let Some(inner) = value.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or_else(|| bad("the `[` list is not closed with `]`".into()))?;
        inner.split(',').map(|s| unquote(s.trim()).map_err(|e| bad(e.into()))).collect::<Result<_, _>>()?
    } else if value.is_empty() {
        let mut items = Vec::new();
        for l in nested.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
            let item = l.strip_prefix('-').ok_or_else(|| bad("expected `- group` lines".into()))?;
            items.push(unquote(item.trim()).map_err(|e| bad(e.into()))?);
        }
        items
    } else {
        alloc::vec![unquote(value).map_err(|e| bad(e.into()))?]
    };
    let mut out: Vec<String> = Vec::new();
    for g in items.into_iter().filter(|g| !g.is_empty()) {
        let valid = g.len() <= MAX_NAME && g.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(bad(format!("`{}` is not a capability group name", text::prefix(&g, 80))));
        }
        if !out.contains(&g) {
            out.push(g);
        }
    }
    if out.len() > MAX_GROUPS {
        return Err(bad(format!("{} groups, more than {MAX_GROUPS}", out.len())));
    }
    Ok(out)
}

/// One line per skill for the system prompt, at most `budget` bytes in all; the skills that do
/// not fit are counted in a last line that points to `skill_list`. `skills` come in the order
/// they are shown (the driver sorts them by name).
pub fn summary(skills: &[&Skill], budget: usize) -> String {
    let mut out = String::new();
    for (i, s) in skills.iter().enumerate() {
        let line = summary_line(s);
        let left = skills.len() - i - 1;
        // Room is kept for the "more" line whenever skills would be left out after this one.
        let tail = if left > 0 { more_line(left).len() } else { 0 };
        if out.len() + line.len() + tail > budget {
            let more = more_line(skills.len() - i);
            if out.len() + more.len() <= budget {
                out.push_str(&more);
            }
            break;
        }
        out.push_str(&line);
    }
    out
}

fn summary_line(s: &Skill) -> String {
    // One line each: a description's own line breaks become spaces.
    let mut d = String::with_capacity(s.description.len());
    for w in s.description.split_whitespace() {
        if !d.is_empty() {
            d.push(' ');
        }
        d.push_str(w);
    }
    if s.groups.is_empty() {
        format!("- {}: {d}\n", s.name)
    } else {
        format!("- {}: {d} [unlocks: {}]\n", s.name, s.groups.join(", "))
    }
}

fn more_line(n: usize) -> String {
    format!("- …and {n} more, see skill_list\n")
}

/// Whether `group` is skill-gated: registered, not core, and hidden unless unlocked (its
/// declaration says it starts hidden).
pub fn is_gated(registry: &Registry, group: &str) -> bool {
    registry.group(group).is_some_and(|g| !g.spec.core && !g.spec.visible_by_default)
}

/// The groups the active skills make visible in their session, from the groups they name
/// (`named`): those that are skill-gated, minus those a person hid on purpose (`user_hidden`,
/// from `caps.hidden`). A group that is switched off stays off: visibility never enables it
/// ([`Registry::tools_for`] and [`Registry::authorize`] check that first).
pub fn unlocked_groups<'a>(
    registry: &Registry,
    named: impl IntoIterator<Item = &'a String>,
    user_hidden: &[String],
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for g in named {
        if is_gated(registry, g) && !user_hidden.contains(g) && !out.contains(g) {
            out.push(g.clone());
        }
    }
    out
}

/// What the cache compares to tell whether a file changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Modification time in nanoseconds since any fixed origin.
    pub mtime_ns: i128,
    pub size: u64,
}

struct Entry<V> {
    name: String,
    stamp: Stamp,
    loaded: u64,
    used: u64,
    value: V,
}

/// Parsed skills by name, at most `capacity` of them, each trusted for `ttl_ms` after it was
/// read and only while its file's [`Stamp`] is unchanged. The least recently used entry goes
/// first when the cache is full. Linear scans: the capacity is small (tens), and on the chip a
/// map would cost more than it saves.
pub struct Cache<V> {
    entries: Vec<Entry<V>>,
    capacity: usize,
    ttl_ms: u64,
}

impl<V: Clone> Cache<V> {
    pub fn new(capacity: usize, ttl_ms: u64) -> Cache<V> {
        Cache { entries: Vec::new(), capacity: capacity.max(1), ttl_ms }
    }

    /// The value for `name` if its file still has `stamp` and it is younger than the TTL. An
    /// entry that is out of date is dropped.
    pub fn get(&mut self, name: &str, stamp: Stamp, now: u64) -> Option<V> {
        let i = self.entries.iter().position(|e| e.name == name)?;
        let e = &mut self.entries[i];
        if e.stamp != stamp || now.saturating_sub(e.loaded) >= self.ttl_ms {
            self.entries.swap_remove(i);
            return None;
        }
        e.used = now;
        Some(e.value.clone())
    }

    /// Keeps `value` for `name`, read at `now` from a file with `stamp`; the least recently used
    /// entry is dropped if the cache is full.
    pub fn insert(&mut self, name: &str, stamp: Stamp, value: V, now: u64) {
        self.invalidate(name);
        if self.entries.len() >= self.capacity
            && let Some(lru) = self.entries.iter().enumerate().min_by_key(|(_, e)| e.used).map(|(i, _)| i)
        {
            self.entries.swap_remove(lru);
        }
        self.entries.push(Entry { name: name.to_string(), stamp, loaded: now, used: now, value });
    }

    /// Forgets `name` (a save or delete changed it).
    pub fn invalidate(&mut self, name: &str) {
        self.entries.retain(|e| e.name != name);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests;
