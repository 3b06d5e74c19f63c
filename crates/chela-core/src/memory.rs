//! Memory: the default memory files, and structured entries with keyword recall.
//!
//! `MEMORY.md` is the person's view of long-term memory: plain Markdown they edit, included in
//! every prompt. Entries are what the model stores with its memory tools: one JSON object per
//! line in `memory/entries.jsonl`, each with an id, content, tags, a source and timestamps, so
//! they can be listed, recalled by keyword, updated and forgotten one by one. The driver
//! rewrites the file atomically after each change. The file is kept in order of change (an
//! update moves its entry to the end), so the prompt needs only the file's last lines.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::ops::ControlFlow;

use serde::Serialize;

use crate::storage::Storage;
use crate::text;

mod json;
mod recall;
pub use recall::{MAX_QUERY_TERMS, Score, rarity, recall, tokens};

/// Written on first run when `SOUL.md` is missing.
pub const SOUL_DEFAULT: &str = "\
# Soul

You are Chela, a personal AI assistant. You are warm, direct and concise. You answer in the
language the user writes in. You say so when you do not know something, and you never claim to
have done something (run a tool, saved a note, checked a fact) that you did not actually do.
";

/// Written on first run when `AGENTS.md` is missing.
pub const AGENTS_DEFAULT: &str = "\
# How to work

- Use tools when they give a better answer than guessing: the time, the web, files, memory.
- Keep replies short unless asked for detail. Prefer plain text; use Markdown lists sparingly.
- Before changing or deleting a file, make sure it is what the user meant.
- When a tool fails, say what failed and what you will do instead.
";

/// Written on first run when `USER.md` is missing.
pub const USER_DEFAULT: &str = "\
# User

(Nothing yet. Chela reads this file in every conversation but does not write it: what it
learns about you it keeps as remembered entries, which the console's Memory tab shows. Write
here what it should always know: name, languages, time zone, preferences.)
";

/// Written on first run when `MEMORY.md` is missing.
pub const MEMORY_DEFAULT: &str = "\
# Memory

Long-term notes that Chela should always keep in mind. Edit freely.
";

/// Bounds on entries.
pub const MAX_ENTRIES: usize = 1000;
pub const MAX_ENTRY_BYTES: usize = 2000;
pub const MAX_TAGS: usize = 8;

/// One remembered thing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub id: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Unix seconds.
    pub created: u64,
    pub updated: u64,
}

/// Why a memory operation was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryError {
    Empty,
    TooLong { limit: usize },
    Full { limit: usize },
    NotFound { id: String },
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryError::Empty => f.write_str("The memory content is empty."),
            MemoryError::TooLong { limit } => {
                write!(f, "The memory content is over {limit} bytes; store a shorter summary.")
            }
            MemoryError::Full { limit } => write!(
                f,
                "Memory holds {limit} entries, the most it keeps; forget or update old entries first (memory_list shows them)."
            ),
            MemoryError::NotFound { id } => write!(f, "There is no memory entry `{id}`; memory_list shows the ids."),
        }
    }
}

impl core::error::Error for MemoryError {}

/// All entries, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entries {
    list: Vec<Entry>,
}

impl Entries {
    /// Reads `entries.jsonl`, skipping lines that do not parse. Returns the entries and the
    /// number of lines skipped. A repeated id is found by a scan: the chip keeps at most
    /// [`MAX_ENTRIES`], and a set would cost its image more than the scan costs its time.
    pub fn parse(text: &str) -> (Entries, usize) {
        Entries::parse_lines(text.lines(), |list: &[Entry], id: &str| list.iter().any(|o| o.id == id))
    }

    /// [`Entries::parse`] of lines given one by one, so the host can stream a file of any size
    /// instead of holding its whole text as well as the entries. `seen(entries so far, id)` says
    /// whether `id` was read already (a repeat is skipped): the host answers from a set, since a
    /// scan made reading 100,000 entries quadratic.
    pub fn parse_lines<L: AsRef<str>>(
        lines: impl IntoIterator<Item = L>,
        mut seen: impl FnMut(&[Entry], &str) -> bool,
    ) -> (Entries, usize) {
        let mut list: Vec<Entry> = Vec::new();
        let mut skipped = 0;
        for line in lines {
            let line = line.as_ref();
            if line.trim().is_empty() {
                continue;
            }
            match Entry::read_line(line) {
                Ok(e) if !seen(&list, &e.id) => list.push(e),
                _ => skipped += 1,
            }
        }
        (Entries { list }, skipped)
    }

    /// All entries, oldest change first.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.list.iter()
    }

    /// The file text: one entry per line.
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for e in &self.list {
            e.write_line(&mut out);
            out.push('\n');
        }
        out
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.list.iter().find(|e| e.id == id)
    }

    fn next_id(&self) -> String {
        let max = self.list.iter().filter_map(|e| e.id.strip_prefix('m')?.parse::<u64>().ok()).max().unwrap_or(0);
        format!("m{}", max + 1)
    }

    /// Stores a new entry and returns it; refused once [`MAX_ENTRIES`] are kept (the chip's
    /// bound: its flash holds no more).
    pub fn store(&mut self, content: &str, tags: &[String], source: &str, now: u64) -> Result<&Entry, MemoryError> {
        self.store_within(content, tags, source, now, MAX_ENTRIES)
    }

    /// [`Entries::store`] with the caller's bound on the number of entries: the host, whose
    /// disk and index hold years of memory, passes `usize::MAX`.
    pub fn store_within(
        &mut self,
        content: &str,
        tags: &[String],
        source: &str,
        now: u64,
        limit: usize,
    ) -> Result<&Entry, MemoryError> {
        let content = check_content(content)?;
        if self.list.len() >= limit {
            return Err(MemoryError::Full { limit });
        }
        let entry = Entry {
            id: self.next_id(),
            content,
            tags: clean_tags(tags),
            source: text::prefix(source.trim(), 100).to_owned(),
            created: now,
            updated: now,
        };
        self.list.push(entry);
        Ok(self.list.last().unwrap_or_else(|| unreachable_empty()))
    }

    /// Replaces an entry's content (and its tags, when given). The entry moves to the end, so the
    /// file stays in order of change and its last lines are always the newest.
    pub fn update(
        &mut self,
        id: &str,
        content: &str,
        tags: Option<&[String]>,
        now: u64,
    ) -> Result<&Entry, MemoryError> {
        let content = check_content(content)?;
        let i = self.list.iter().position(|e| e.id == id).ok_or_else(|| MemoryError::NotFound { id: id.to_owned() })?;
        let mut e = self.list.remove(i);
        e.content = content;
        if let Some(t) = tags {
            e.tags = clean_tags(t);
        }
        e.updated = now;
        self.list.push(e);
        Ok(self.list.last().unwrap_or_else(|| unreachable_empty()))
    }

    /// Removes an entry and returns it.
    pub fn forget(&mut self, id: &str) -> Result<Entry, MemoryError> {
        let i = self.list.iter().position(|e| e.id == id).ok_or_else(|| MemoryError::NotFound { id: id.to_owned() })?;
        Ok(self.list.remove(i))
    }

    /// The newest `max` entries, newest first, optionally only those carrying `tag`.
    pub fn newest(&self, max: usize, tag: Option<&str>) -> Vec<&Entry> {
        let mut v: Vec<&Entry> =
            self.list.iter().filter(|e| tag.is_none_or(|t| e.tags.iter().any(|x| x.eq_ignore_ascii_case(t)))).collect();
        crate::sort::sort_by(&mut v, |a, b| b.updated.cmp(&a.updated).then_with(|| id_num(&b.id).cmp(&id_num(&a.id))));
        v.truncate(max);
        v
    }

    /// Entries matching `query`'s keywords, best first, at most `max`: see [`recall()`].
    pub fn recall(&self, query: &str, max: usize) -> Vec<(Score, &Entry)> {
        recall(&self.list, query, max)
    }

    /// Entries as prompt lines, newest last, cut to `max` bytes from the oldest side.
    pub fn render(&self, max: usize) -> String {
        newest_last(self.newest(MAX_ENTRIES, None).into_iter().map(render_line), max)
    }
}

/// Joins `lines`, given newest first, newest last: as many as fit in `max` bytes.
fn newest_last(lines: impl Iterator<Item = String>, max: usize) -> String {
    let mut kept: Vec<String> = Vec::new();
    let mut total = 0;
    for line in lines {
        if total + line.len() + 1 > max {
            break;
        }
        total += line.len() + 1;
        kept.push(line);
    }
    kept.reverse();
    kept.join("\n")
}

#[cold]
fn unreachable_empty() -> ! {
    panic!("an entry was just pushed")
}

/// One entry on one line: `[m3] content (tags: a, b)`.
pub fn render_line(e: &Entry) -> String {
    let mut out = String::with_capacity(e.content.len() + 16);
    push_line(&mut out, &e.id, &e.content, e.tags.iter().map(String::as_str));
    out
}

fn push_line<'t>(out: &mut String, id: &str, content: &str, tags: impl Iterator<Item = &'t str>) {
    out.push('[');
    out.push_str(id);
    out.push_str("] ");
    for (i, part) in content.split('\n').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(part);
    }
    let mut tagged = false;
    for t in tags {
        out.push_str(if tagged { ", " } else { " (tags: " });
        out.push_str(t);
        tagged = true;
    }
    if tagged {
        out.push(')');
    }
}

/// The newest entries of an `entries.jsonl` text (kept in order of change, newest last) as
/// prompt lines, newest last, at most `max` bytes: the same as [`Entries::render`] of the whole
/// file, but it reads lines from the end and stops at the bound, without building the entries.
pub fn render_tail(jsonl: &str, max: usize) -> String {
    let mut tail = Tail::new(max);
    for raw in jsonl.lines().rev() {
        if tail.push(raw.as_bytes()).is_break() {
            break;
        }
    }
    tail.finish()
}

/// [`render_tail`] of the file `name` in `storage`: reads it newest first and stops at `max`
/// bytes, so the cost stays the same however much is remembered. Unreadable lines (a torn last
/// line) are left out.
pub fn render_newest<S: Storage + ?Sized>(storage: &S, name: &str, max: usize) -> Result<String, S::Error> {
    let mut tail = Tail::new(max);
    storage.read_newest_first(name, &mut |line| tail.push(line.bytes))?;
    Ok(tail.finish())
}

/// Rendered entry lines, fed newest first, kept while they fit `max` bytes.
struct Tail {
    kept: Vec<String>,
    total: usize,
    max: usize,
}

impl Tail {
    fn new(max: usize) -> Tail {
        Tail { kept: Vec::new(), total: 0, max }
    }

    fn push(&mut self, raw: &[u8]) -> ControlFlow<()> {
        let Ok(e) = json::EntryRef::read(raw) else {
            return ControlFlow::Continue(());
        };
        let mut line = String::with_capacity(e.content.len() + 16);
        push_line(&mut line, &e.id, &e.content, e.tags.iter().map(|t| t.as_ref()));
        if self.total + line.len() + 1 > self.max {
            return ControlFlow::Break(());
        }
        self.total += line.len() + 1;
        self.kept.push(line);
        ControlFlow::Continue(())
    }

    fn finish(mut self) -> String {
        self.kept.reverse();
        self.kept.join("\n")
    }
}

fn id_num(id: &str) -> u64 {
    id.strip_prefix('m').and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn check_content(content: &str) -> Result<String, MemoryError> {
    let c = content.trim();
    if c.is_empty() {
        return Err(MemoryError::Empty);
    }
    if c.len() > MAX_ENTRY_BYTES {
        return Err(MemoryError::TooLong { limit: MAX_ENTRY_BYTES });
    }
    Ok(c.to_owned())
}

fn clean_tags(tags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tags.iter().flat_map(|t| t.split(',')) {
        let t = text::prefix(t.trim(), 40).to_lowercase();
        if !t.is_empty() && !out.contains(&t) && out.len() < MAX_TAGS {
            out.push(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn tags(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn store_update_forget_round_trip_through_the_file() {
        let mut m = Entries::default();
        let id = m.store("The user likes green tea", &tags(&["Food", "drinks,food"]), "chat", 10).unwrap().id.clone();
        assert_eq!(id, "m1");
        assert_eq!(m.get("m1").unwrap().tags, ["food", "drinks"]);
        m.store("Birthday is 3 March", &[], "", 11).unwrap();
        m.update("m1", "The user likes oolong", None, 12).unwrap();
        assert!(m.to_jsonl().lines().last().unwrap().contains("oolong"), "the changed entry is last");
        let (back, skipped) = Entries::parse(&m.to_jsonl());
        assert_eq!(skipped, 0);
        assert_eq!(back, m);
        assert_eq!(back.get("m1").unwrap().updated, 12);
        assert_eq!(m.forget("m2").unwrap().content, "Birthday is 3 March");
        assert_eq!(m.forget("m2"), Err(MemoryError::NotFound { id: "m2".into() }));
        assert_eq!(m.store("x", &[], "", 13).unwrap().id, "m2", "ids continue after the highest");
    }

    #[test]
    fn bounds_and_refusals() {
        let mut m = Entries::default();
        assert_eq!(m.store("   ", &[], "", 0).unwrap_err(), MemoryError::Empty);
        assert_eq!(
            m.store(&"x".repeat(MAX_ENTRY_BYTES + 1), &[], "", 0).unwrap_err(),
            MemoryError::TooLong { limit: MAX_ENTRY_BYTES }
        );
        for i in 0..MAX_ENTRIES {
            m.store(&format!("fact {i}"), &[], "", 0).unwrap();
        }
        let e = m.store("one more", &[], "", 0).unwrap_err();
        assert!(e.to_string().contains("forget"), "{e}");
        // The host's bound is its own.
        assert_eq!(m.store_within("one more", &[], "", 0, MAX_ENTRIES + 1).unwrap().id, "m1001");
        assert_eq!(m.store_within("and another", &[], "", 0, MAX_ENTRIES + 1), Err(MemoryError::Full { limit: 1001 }));
    }

    #[test]
    fn parsing_lines_one_by_one_equals_parsing_the_text() {
        let lines: Vec<String> = (0..2_000)
            .map(|i| format!("{{\"id\":\"m{i}\",\"content\":\"fact {i}\",\"created\":1,\"updated\":1}}"))
            .chain(core::iter::once("{\"id\":\"m7\",\"content\":\"dup\",\"created\":1,\"updated\":1}".into()))
            .collect();
        let mut ids = alloc::collections::BTreeSet::new();
        let (m, skipped) = Entries::parse_lines(&lines, |_, id| !ids.insert(id.to_owned()));
        assert_eq!((m.len(), skipped), (2_000, 1));
        assert_eq!(m.get("m7").unwrap().content, "fact 7");
        assert_eq!(m.iter().count(), 2_000);
        assert_eq!(Entries::parse(&lines.join("\n")), (m, 1));
    }

    #[test]
    fn torn_and_duplicate_lines_are_skipped() {
        let text = "{\"id\":\"m1\",\"content\":\"a\",\"created\":1,\"updated\":1}\n{\"id\":\"m1\",\"content\":\"dup\",\"created\":1,\"updated\":1}\n{\"id\":\"m2\",\"cont";
        let (m, skipped) = Entries::parse(text);
        assert_eq!(m.len(), 1);
        assert_eq!(skipped, 2);
    }

    #[test]
    fn recall_ranks_rare_terms_tags_and_recency() {
        let mut m = Entries::default();
        m.store("User drinks coffee every morning", &[], "", 1).unwrap();
        m.store("User's cat is called Miso", &tags(&["pets"]), "", 2).unwrap();
        m.store("User prefers coffees from Ethiopia", &[], "", 3).unwrap();
        m.store("The user works at a bakery", &[], "", 4).unwrap();
        let r = m.recall("what coffee?", 5);
        let ids: Vec<&str> = r.iter().map(|(_, e)| e.id.as_str()).collect();
        assert_eq!(ids, ["m1", "m3"], "exact word beats prefix match");
        let r = m.recall("pets", 5);
        assert_eq!(r[0].1.id, "m2");
        assert!(m.recall("", 5).is_empty());
        assert!(m.recall("zebra", 5).is_empty());
        // "user" is in every entry: it still matches, newest first.
        let r = m.recall("user", 2);
        assert_eq!(r.iter().map(|(_, e)| e.id.as_str()).collect::<Vec<_>>(), ["m4", "m3"]);
    }

    #[test]
    fn recall_works_for_chinese() {
        let mut m = Entries::default();
        m.store("用户喜欢喝绿茶", &[], "", 1).unwrap();
        m.store("用户的猫叫小米", &[], "", 2).unwrap();
        let r = m.recall("绿茶", 5);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].1.id, "m1");
    }

    #[test]
    fn newest_and_render() {
        let mut m = Entries::default();
        m.store("a", &tags(&["x"]), "", 5).unwrap();
        m.store("b", &[], "", 7).unwrap();
        m.store("c\nd", &tags(&["x"]), "", 6).unwrap();
        let ids: Vec<&str> = m.newest(10, None).iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["m2", "m3", "m1"]);
        let ids: Vec<&str> = m.newest(10, Some("X")).iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["m3", "m1"]);
        assert_eq!(m.render(1000), "[m1] a (tags: x)\n[m3] c d (tags: x)\n[m2] b");
        assert_eq!(m.render(10), "[m2] b");
    }

    #[test]
    fn rendering_the_tail_equals_rendering_everything() {
        let mut m = Entries::default();
        for i in 0..40u64 {
            m.store(
                &format!("fact {i}\nsecond line \"quoted\""),
                &tags(if i % 3 == 0 { &["a", "b"] } else { &[] }),
                "",
                i,
            )
            .unwrap();
        }
        m.update("m2", "changed", Some(&tags(&["z"])), 100).unwrap();
        let text = m.to_jsonl();
        for max in [0, 10, 100, 500, 5000] {
            assert_eq!(render_tail(&text, max), m.render(max), "max {max}");
        }
        assert_eq!(render_tail("garbage\n{\"id\":\"m9\",\"content\":\"ok\"}\n{\"torn", 100), "[m9] ok");
    }

    #[test]
    fn the_newest_entries_are_read_from_the_end_and_reading_stops_at_the_bound() {
        use crate::storage::{Storage, mem::MemStorage};
        let mut m = Entries::default();
        for i in 0..500u64 {
            m.store(&format!("fact number {i} with some words"), &[], "", i).unwrap();
        }
        let text = m.to_jsonl();
        let mut s = MemStorage::new();
        // A torn last line, as a crash mid-append leaves it: left out.
        s.replace("entries.jsonl", format!("{text}{{\"id\":\"m999\",\"con").as_bytes()).unwrap();
        for max in [0, 10, 100, 1000] {
            assert_eq!(render_newest(&s, "entries.jsonl", max).unwrap(), m.render(max), "max {max}");
        }
        let mut tail = Tail::new(1000);
        let mut lines_read = 0;
        s.read_newest_first("entries.jsonl", &mut |l| {
            lines_read += 1;
            tail.push(l.bytes)
        })
        .unwrap();
        assert!(lines_read < 30, "{lines_read} of 501 lines were read for a 1000-byte bound");
        assert_eq!(render_newest(&MemStorage::new(), "entries.jsonl", 100).unwrap(), "");
    }

    // Structured properties: generate valid entry files (unicode, JSON escapes, tags, sources),
    // damage one line, and check that exactly that line is skipped and counted.
    mod generated {
        use super::*;
        use proptest::prelude::*;
        use proptest::sample::Index;

        fn any_text() -> impl Strategy<Value = String> {
            r#"[a-z "\\\n\t\r\x01é世😀{}:,]{0,24}"#
        }

        fn any_entries() -> impl Strategy<Value = Vec<Entry>> {
            proptest::collection::vec(
                (any_text(), proptest::collection::vec("[a-z世]{1,6}", 0..3), "[a-z]{0,5}", any::<u64>(), any::<u64>()),
                1..12,
            )
            .prop_map(|v| {
                v.into_iter()
                    .enumerate()
                    .map(|(i, (content, tags, source, created, updated))| Entry {
                        id: format!("m{}", i + 1),
                        content,
                        tags,
                        source,
                        created,
                        updated,
                    })
                    .collect()
            })
        }

        fn lines_of(list: &[Entry]) -> Vec<String> {
            list.iter().map(|e| format!("{}\n", serde_json::to_string(e).unwrap())).collect()
        }

        proptest::proptest! {
            #[test]
            fn generated_files_round_trip_exactly(list in any_entries()) {
                let lines = lines_of(&list);
                let text = lines.concat();
                prop_assert_eq!(text.lines().count(), list.len(), "one entry per line, whatever the text holds");
                let (m, skipped) = Entries::parse(&text);
                prop_assert_eq!(skipped, 0);
                prop_assert_eq!(&m.list, &list);
                prop_assert_eq!(&m.to_jsonl(), &text);
                prop_assert_eq!(Entries::parse(&text.replace('\n', "\r\n")).0, m);
            }

            #[test]
            fn a_damaged_line_is_skipped_and_counted_and_the_others_survive(
                list in any_entries(),
                line in any::<Index>(),
                at in any::<Index>(),
                how in 0u8..4,
            ) {
                let mut lines = lines_of(&list);
                let j = line.index(lines.len());
                let l = lines[j].clone();
                let mut expected = list.clone();
                expected.remove(j);
                match how {
                    // Torn inside, then more lines appended after it.
                    0 => {
                        let cut = (1..=at.index(l.len() - 1).max(1)).rev().find(|&c| l.is_char_boundary(c)).unwrap_or(1);
                        lines[j] = format!("{}\n", &l[..cut]);
                    }
                    // Edited by hand: a field the entry needs is gone.
                    1 => lines[j] = l.replacen("\"created\"", "\"born\"", 1),
                    // A line that is not JSON at all.
                    2 => lines[j] = "- remember to buy milk\n".into(),
                    // The same entry twice: the first one counts.
                    _ => {
                        lines.insert(j + 1, l);
                        expected = list.clone();
                    }
                }
                let (m, skipped) = Entries::parse(&lines.concat());
                prop_assert_eq!(skipped, 1);
                prop_assert_eq!(&m.list, &expected);
            }

            #[test]
            fn a_torn_last_line_loses_only_itself(list in any_entries(), at in any::<Index>()) {
                let text = lines_of(&list).concat();
                let last_start = text[..text.len() - 1].rfind('\n').map_or(0, |i| i + 1);
                let cut = last_start + at.index(text.len() - 1 - last_start);
                let cut = (0..=cut).rev().find(|&c| text.is_char_boundary(c)).unwrap_or(0);
                let (m, skipped) = Entries::parse(&text[..cut]);
                prop_assert_eq!(&m.list[..], &list[..list.len() - 1]);
                prop_assert_eq!(skipped, usize::from(cut > last_start));
            }

            #[test]
            fn render_keeps_its_bound_and_the_newest_entries(list in any_entries(), max in 0usize..600) {
                let (m, _) = Entries::parse(&lines_of(&list).concat());
                let out = m.render(max);
                prop_assert!(out.len() <= max);
                // Newest last: the last rendered line is the newest entry, when anything fits.
                if let Some(last) = out.lines().last() {
                    prop_assert_eq!(last, render_line(m.newest(1, None)[0]));
                }
                // One line per entry: a newline inside an entry's content does not start another.
                prop_assert!(out.lines().count() <= m.len());
                prop_assert!(out.lines().all(|l| l.starts_with("[m")), "{}", out);
            }
        }
    }

    #[test]
    fn tokens_split_words_and_cjk_pairs() {
        assert_eq!(tokens("Hello, World-42!"), ["hello", "world", "42"]);
        assert_eq!(tokens("喜欢绿茶 tea"), ["喜欢", "欢绿", "绿茶", "tea"]);
        assert_eq!(tokens("猫"), ["猫"]);
    }
}
