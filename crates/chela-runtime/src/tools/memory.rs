//! The `memory` group: what the model remembers across conversations.
//!
//! Entries live in `memory/entries.jsonl` (rewritten atomically on every change); daily notes
//! in `memory/YYYY-MM-DD.md` (appended). `MEMORY.md` is the person's file; the model can edit
//! it with the file tools when asked.

use std::io;
use std::path::PathBuf;

use chela_core::contract::memory::{RECALL, RecallArgs, STORE, StoreArgs, Tags};
use chela_core::memory::{Entries, MAX_ENTRY_BYTES, render_line, tokens};
use chela_core::zone::Zone;

use super::{Group, Tool, ToolCtx, ToolError, ToolResult};
use crate::memory::index::{self, Index};
use crate::memory::{daily_path, load_entries, memory_dir, update_entries_then};
use crate::memory::{embed, fuse};
use crate::read_args;
use crate::workspace::{Workspace, append_durable};

pub fn group() -> Group {
    Group::new("memory", "Remember facts across conversations; keep daily notes.")
        .guidance(
            "Memory: when the user tells you something lasting about themselves, their people, plans or \
             preferences, or asks you to remember something, save it with memory_store (short, self-contained, \
             with tags). Before answering about past conversations or the user's preferences, check memory_recall; \
             memory_search looks through the daily notes and MEMORY.md. \
             Correct outdated entries with memory_update and drop wrong ones with memory_forget. Log notable events \
             of the day with memory_append_today. Never say you saved something unless the tool succeeded.",
        )
        .with(MemoryStore)
        .with(MemoryRecall)
        .with(MemorySearch)
        .with(MemoryUpdate)
        .with(MemoryForget)
        .with(MemoryList)
        .with(MemoryAppendToday)
}

fn io_err(e: io::Error) -> ToolError {
    ToolError::new(format!("The memory file could not be read or written: {e}"))
}

/// Runs `change` on the entries under the entries lock, off the async workers (the lock and
/// the file IO block), and keeps the index current: `change` returns its answer and the id it
/// stored, changed or removed. See [`update_entries`] and [`Index::entries_changed`].
fn change_entries<T>(
    ws: &Workspace,
    change: impl FnOnce(&mut Entries) -> Result<(T, String), ToolError>,
) -> Result<T, ToolError> {
    /// The two ways a change fails: the file, or the change itself (unknown id, empty fact).
    enum Failed {
        Io(io::Error),
        Tool(ToolError),
    }
    impl From<io::Error> for Failed {
        fn from(e: io::Error) -> Failed {
            Failed::Io(e)
        }
    }
    // The memory tools are `BLOCKING`: this runs on the blocking pool, so the lock may wait here.
    let written = |entries: &Entries, (_, id): &(T, String), before: Option<&std::fs::Metadata>| {
        // The file is the truth and is written: an index that cannot follow is left stale and
        // read again by the next search, never an error for this change.
        let Ok(after) = std::fs::symlink_metadata(crate::memory::entries_path(ws)) else { return };
        let touched: Vec<&chela_core::memory::Entry> = entries.get(id).into_iter().collect();
        let gone: Vec<&str> = if touched.is_empty() { vec![id.as_str()] } else { Vec::new() };
        let before = before.map(index::stamp);
        let synced = Index::open(ws)
            .and_then(|mut ix| ix.entries_changed(before.as_deref(), &index::stamp(&after), &touched, &gone));
        if let Err(e) = synced {
            chela_log::warn!("memory index not updated (the next search reads the file again): {e}");
        }
    };
    update_entries_then(ws, |e| change(e).map_err(Failed::Tool), written).map(|(out, _)| out).map_err(|f| match f {
        Failed::Io(e) => io_err(e),
        Failed::Tool(e) => e,
    })
}

/// How alike two facts are, from 0 to 1: the share of their words (and CJK pairs) they have in
/// common (Jaccard). At [`RESTATES`] or above, a new fact restates the old one.
fn likeness(a: &str, b: &str) -> f64 {
    let (a, b) = (word_set(a), word_set(b));
    let common = a.iter().filter(|w| b.binary_search(w).is_ok()).count();
    let union = a.len() + b.len() - common;
    if union == 0 {
        return 0.0;
    }
    common as f64 / union as f64
}

/// The distinct tokens of `s`, sorted (through the shared sort: no sort or tree compiled here).
fn word_set(s: &str) -> Vec<String> {
    let mut words = tokens(s);
    chela_infra::sort::sort_by(&mut words, Ord::cmp);
    words.dedup();
    words
}

/// The likeness above which `memory_store` updates the old fact instead of adding a second one.
/// High on purpose: the update replaces the old text, so two different facts must never meet it.
pub const RESTATES: f64 = 0.85;

/// Entries the index finds for `content`: the candidates a new fact may restate. An index that
/// fails gives none, and the fact is stored as new.
fn restated_candidates(ws: &Workspace, content: &str) -> Vec<String> {
    let found = Index::open(ws).and_then(|mut ix| {
        ix.refresh()?;
        ix.recall(content, 5)
    });
    match found {
        Ok(hits) => hits.into_iter().filter(|h| likeness(&h.content, content) >= RESTATES).map(|h| h.id).collect(),
        Err(e) => {
            chela_log::warn!("memory index unavailable for the duplicate check: {e}");
            Vec::new()
        }
    }
}

/// With `memory.embeddings_*` set: starts the background embedding of what is new and returns
/// the model and the query's vector (`None` when the server fails or is slow: keywords alone).
/// Unset: `None` at once, no request, no work.
async fn by_meaning(ctx: &ToolCtx, query: &str) -> Option<(String, Vec<f32>)> {
    let s = embed::Settings::from_config(&ctx.cfg)?;
    embed::kick(&ctx.ws, &s, &ctx.http);
    let q = embed::query_vector(&ctx.http, &s, query).await?;
    Some((s.model, q))
}

/// Appends a timestamped line to today's note, creating it with a heading.
pub fn append_today(ws: &Workspace, tz: &Zone, now: i64, text: &str) -> io::Result<PathBuf> {
    let z = crate::localtime::Local::at(tz, now);
    let path = daily_path(ws, z.date());
    std::fs::create_dir_all(memory_dir(ws))?;
    let mut out = String::new();
    if !path.exists() {
        out.push_str(&format!("# {}\n\n", z.date()));
    }
    for (i, line) in text.trim().lines().enumerate() {
        if i == 0 {
            out.push_str(&format!("- {} {}\n", z.hour_minute(), line));
        } else {
            out.push_str(&format!("  {line}\n"));
        }
    }
    append_durable(&path, &out)?;
    Ok(path)
}

pub struct MemoryStore;

impl Tool for MemoryStore {
    const NAME: &'static str = STORE.name;
    const DESCRIPTION: &'static str = STORE.description;
    const SCHEMA: &'static str = STORE.input_schema;
    type Args = StoreArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: StoreArgs) -> ToolResult {
        let tags = Tags::into_vec(a.tags);
        let now = ctx.clock.unix_secs_u64();
        let candidates = restated_candidates(&ctx.ws, &a.content);
        let stored = change_entries(&ctx.ws, move |entries| {
            // Checked again here, under the lock, against the file as it is now.
            let same = candidates
                .iter()
                .find(|id| entries.get(id).is_some_and(|old| likeness(&old.content, &a.content) >= RESTATES));
            if let Some(id) = same {
                let keep = (!tags.is_empty()).then_some(tags.as_slice());
                let e = entries.update(id, &a.content, keep, now).map_err(|e| ToolError::new(e.to_string()))?;
                return Ok((format!("updated {id} (it said nearly the same): {}", render_line(e)), id.clone()));
            }
            // No count limit on the host: the file streams and the index searches any size.
            let e = entries
                .store_within(&a.content, &tags, &a.source, now, usize::MAX)
                .map_err(|e| ToolError::new(e.to_string()))?;
            Ok((format!("stored as {}", e.id), e.id.clone()))
        })?;
        // The new fact's vector is made in the background, ready for a later search.
        if let Some(s) = embed::Settings::from_config(&ctx.cfg) {
            embed::kick(&ctx.ws, &s, &ctx.http);
        }
        Ok(stored)
    }
}

pub struct MemoryRecall;

impl Tool for MemoryRecall {
    const NAME: &'static str = RECALL.name;
    const DESCRIPTION: &'static str = RECALL.description;
    const SCHEMA: &'static str = RECALL.input_schema;
    type Args = RecallArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: RecallArgs) -> ToolResult {
        let max = a.max_results.unwrap_or(8).clamp(1, 50);
        let near = by_meaning(ctx, &a.query).await;
        let found = Index::open(&ctx.ws).and_then(|mut ix| {
            ix.refresh()?;
            match &near {
                Some((model, q)) => fuse::recall(&mut ix, &a.query, q, model, max),
                None => ix.recall(&a.query, max),
            }
        });
        match found {
            Ok(hits) if hits.is_empty() => Ok(format!("Nothing remembered matches \"{}\".", a.query)),
            Ok(hits) => Ok(hits.into_iter().map(|h| h.line).collect::<Vec<_>>().join("\n")),
            // The files are the truth: without the index, rank them in memory (slower, same
            // facts) rather than fail the turn.
            Err(e) => {
                chela_log::warn!("memory index unavailable, recalling from the file: {e}");
                let entries = load_entries(&ctx.ws).map_err(io_err)?;
                Ok(chela_core::contract::memory::recall(&entries, &a))
            }
        }
    }
}

pub struct MemorySearch;

pub struct SearchArgs {
    query: String,
    max_results: Option<usize>,
}

read_args!(SearchArgs { query: need, max_results: opt });

impl Tool for MemorySearch {
    const NAME: &'static str = "memory_search";
    const DESCRIPTION: &'static str =
        "Search the daily notes and MEMORY.md by keywords. Each result: file:lines: snippet.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"query":{"type":"string"},"max_results":{"type":"integer"}},"required":["query"]}"#;
    type Args = SearchArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: SearchArgs) -> ToolResult {
        let max = a.max_results.unwrap_or(8).clamp(1, 20);
        let near = by_meaning(ctx, &a.query).await;
        let hits = Index::open(&ctx.ws)
            .and_then(|mut ix| {
                ix.include_sessions(ctx.cfg.bool(chela_core::config::MEMORY_INDEX_SESSIONS));
                ix.refresh()?;
                match &near {
                    Some((model, q)) => fuse::search(&mut ix, &a.query, q, model, max),
                    None => ix.search(&a.query, max),
                }
            })
            .map_err(|e| ToolError::new(format!("The memory index could not be searched: {e}")))?;
        if hits.is_empty() {
            return Ok(format!("Nothing in the notes matches \"{}\".", a.query));
        }
        let lines: Vec<String> = hits
            .into_iter()
            .map(|h| {
                let lines = if h.first == h.last { h.first.to_string() } else { format!("{}-{}", h.first, h.last) };
                format!("{}:{lines}: {}", h.path, h.snippet)
            })
            .collect();
        Ok(lines.join("\n"))
    }
}

pub struct MemoryUpdate;

pub struct UpdateArgs {
    id: String,
    content: String,
    tags: Option<Tags>,
}

read_args!(UpdateArgs { id: need, content: need, tags: opt });

impl Tool for MemoryUpdate {
    const NAME: &'static str = "memory_update";
    const DESCRIPTION: &'static str = "Replace the content (and optionally the tags) of a remembered fact by id.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"id":{"type":"string"},"content":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},"required":["id","content"]}"#;
    type Args = UpdateArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: UpdateArgs) -> ToolResult {
        let tags = a.tags.map(|t| Tags::into_vec(Some(t)));
        let now = ctx.clock.unix_secs_u64();
        let line = change_entries(&ctx.ws, move |entries| {
            let id = a.id.trim();
            let line = entries
                .update(id, &a.content, tags.as_deref(), now)
                .map(render_line)
                .map_err(|e| ToolError::new(e.to_string()))?;
            Ok((line, id.to_owned()))
        })?;
        Ok(format!("updated: {line}"))
    }
}

pub struct MemoryForget;

pub struct ForgetArgs {
    id: String,
}

read_args!(ForgetArgs { id: need });

impl Tool for MemoryForget {
    const NAME: &'static str = "memory_forget";
    const DESCRIPTION: &'static str = "Delete a remembered fact by id.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}"#;
    type Args = ForgetArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: ForgetArgs) -> ToolResult {
        let gone = change_entries(&ctx.ws, move |entries| {
            let id = a.id.trim();
            let gone = entries.forget(id).map(|gone| render_line(&gone)).map_err(|e| ToolError::new(e.to_string()))?;
            Ok((gone, id.to_owned()))
        })?;
        Ok(format!("forgot: {gone}"))
    }
}

pub struct MemoryList;

pub struct ListArgs {
    max_results: Option<usize>,
    tag: Option<String>,
}

read_args!(ListArgs { max_results: opt, tag: opt });

impl Tool for MemoryList {
    const NAME: &'static str = "memory_list";
    const DESCRIPTION: &'static str = "List remembered facts, newest first, optionally with one tag.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"max_results":{"type":"integer","minimum":1,"maximum":200},"tag":{"type":"string"}}}"#;
    type Args = ListArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: ListArgs) -> ToolResult {
        let entries = load_entries(&ctx.ws).map_err(io_err)?;
        let list = entries.newest(a.max_results.unwrap_or(20).clamp(1, 200), a.tag.as_deref());
        if list.is_empty() {
            return Ok("Nothing is remembered yet.".to_owned());
        }
        let mut out: Vec<String> = list.into_iter().map(render_line).collect();
        out.push(format!("({} entries in all)", entries.len()));
        Ok(out.join("\n"))
    }
}

pub struct MemoryAppendToday;

pub struct AppendArgs {
    content: String,
}

read_args!(AppendArgs { content: need });

impl Tool for MemoryAppendToday {
    const NAME: &'static str = "memory_append_today";
    const DESCRIPTION: &'static str =
        "Add a timestamped line to today's note (memory/YYYY-MM-DD.md, in the user's time zone).";
    const SCHEMA: &'static str =
        r#"{"type":"object","properties":{"content":{"type":"string"}},"required":["content"]}"#;
    type Args = AppendArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: AppendArgs) -> ToolResult {
        let text = a.content.trim();
        if text.is_empty() {
            return Err(ToolError::new("The note is empty."));
        }
        if text.len() > MAX_ENTRY_BYTES {
            return Err(ToolError::new(format!("The note is over {MAX_ENTRY_BYTES} bytes; write a shorter one.")));
        }
        let path = append_today(&ctx.ws, &ctx.tz, ctx.clock.unix_secs(), text).map_err(io_err)?;
        Ok(format!("noted in {}", path.strip_prefix(ctx.ws.root()).unwrap_or(&path).display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Fixture;

    #[tokio::test]
    async fn store_recall_update_forget_list() {
        let fx = Fixture::new(&[]);
        let r = fx
            .call(MemoryStore, serde_json::json!({"content": "User's sister Ana lives in Lisbon", "tags": ["family"]}))
            .await;
        assert_eq!(r.unwrap(), "stored as m1");
        fx.call(MemoryStore, serde_json::json!({"content": "Prefers oat milk", "tags": "food, drinks"})).await.unwrap();
        let hits = fx.call(MemoryRecall, serde_json::json!({"query": "where does Ana live?"})).await.unwrap();
        assert_eq!(hits, "[m1] User's sister Ana lives in Lisbon (tags: family)");
        let none = fx.call(MemoryRecall, serde_json::json!({"query": "volcano"})).await.unwrap();
        assert!(none.starts_with("Nothing remembered"), "{none}");
        fx.call(MemoryUpdate, serde_json::json!({"id": "m1", "content": "Ana moved to Porto"})).await.unwrap();
        let text = std::fs::read_to_string(fx.root().join("memory/entries.jsonl")).unwrap();
        assert!(text.contains("Ana moved to Porto") && !text.contains("Lisbon"), "{text}");
        let list = fx.call(MemoryList, serde_json::json!({"tag": "food"})).await.unwrap();
        assert_eq!(list, "[m2] Prefers oat milk (tags: food, drinks)\n(2 entries in all)");
        let gone = fx.call(MemoryForget, serde_json::json!({"id": "m2"})).await.unwrap();
        assert!(gone.contains("oat milk"));
        let e = fx.call(MemoryForget, serde_json::json!({"id": "m2"})).await.unwrap_err();
        assert!(e.0.contains("no memory entry `m2`"), "{e}");
        let e = fx.call(MemoryStore, serde_json::json!({"content": " "})).await.unwrap_err();
        assert!(e.0.contains("empty"), "{e}");
    }

    /// Twenty stores at once, each on its own thread and runtime as separate callers would be:
    /// every one is kept, each under its own id.
    #[test]
    fn parallel_stores_keep_every_entry_with_unique_ids() {
        let fx = Fixture::new(&[]);
        let replies: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..20)
                .map(|i| {
                    let fx = &fx;
                    s.spawn(move || {
                        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
                        let fact = serde_json::json!({"content": format!("parallel fact {i}")});
                        rt.block_on(fx.call(MemoryStore, fact)).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut ids: Vec<&str> = replies.iter().map(|r| r.strip_prefix("stored as ").unwrap()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 20, "{replies:?}");
        let entries = load_entries(&fx.ws).unwrap();
        assert_eq!(entries.len(), 20);
        let text = std::fs::read_to_string(fx.root().join("memory/entries.jsonl")).unwrap();
        for i in 0..20 {
            assert!(text.contains(&format!("\"parallel fact {i}\"")), "fact {i} lost:\n{text}");
        }
    }

    /// Years of memory: more than the chip's 1,000 entries and a file over 8 MiB are stored
    /// and searched (both were refused).
    #[tokio::test]
    async fn the_host_keeps_more_than_a_thousand_entries_and_any_file_size() {
        let fx = Fixture::new(&[]);
        let mut e = Entries::default();
        for i in 0..5000u64 {
            e.store_within(&format!("filler {i} {}", "words ".repeat(300)), &[], "", i, usize::MAX).unwrap();
        }
        e.store_within("The needle is a green kiwi", &[], "", 9, usize::MAX).unwrap();
        crate::workspace::write_atomic(&crate::memory::entries_path(&fx.ws), e.to_jsonl().as_bytes()).unwrap();
        assert!(std::fs::metadata(crate::memory::entries_path(&fx.ws)).unwrap().len() > 8 << 20);
        let hits = fx.call(MemoryRecall, serde_json::json!({"query": "needle kiwi"})).await.unwrap();
        assert_eq!(hits, "[m5001] The needle is a green kiwi");
        let r = fx.call(MemoryStore, serde_json::json!({"content": "one more fact, a plum"})).await.unwrap();
        assert_eq!(r, "stored as m5002");
        let hits = fx.call(MemoryRecall, serde_json::json!({"query": "plum"})).await.unwrap();
        assert_eq!(hits, "[m5002] one more fact, a plum");
        assert_eq!(load_entries(&fx.ws).unwrap().len(), 5002);
    }

    #[tokio::test]
    async fn memory_search_finds_notes_with_file_lines_and_snippet() {
        let fx = Fixture::new(&[]);
        std::fs::write(fx.root().join("MEMORY.md"), "# Memory\n\nAllergic to peanuts.\n").unwrap();
        std::fs::write(
            fx.root().join("memory/2025-06-01.md"),
            "# 2025-06-01\n\n- 08:00 Swam\n- 09:00 Booked the 歌剧 tickets\n  for Saturday\n",
        )
        .unwrap();
        let r = fx.call(MemorySearch, serde_json::json!({"query": "tickets saturday"})).await.unwrap();
        assert_eq!(r, "memory/2025-06-01.md:4-5: - 09:00 Booked the 歌剧 tickets for Saturday");
        let r = fx.call(MemorySearch, serde_json::json!({"query": "歌剧"})).await.unwrap();
        assert!(r.starts_with("memory/2025-06-01.md:4-5:"), "{r}");
        let r = fx.call(MemorySearch, serde_json::json!({"query": "peanut"})).await.unwrap();
        assert_eq!(r, "MEMORY.md:3: Allergic to peanuts.");
        let r = fx.call(MemorySearch, serde_json::json!({"query": "volcano"})).await.unwrap();
        assert_eq!(r, "Nothing in the notes matches \"volcano\".");
        // An edit through the tools is found by the next search.
        fx.call(MemoryAppendToday, serde_json::json!({"content": "Fed the axolotl"})).await.unwrap();
        let r = fx.call(MemorySearch, serde_json::json!({"query": "axolotl", "max_results": 500})).await.unwrap();
        assert!(r.contains(": - ") && r.contains("Fed the axolotl"), "{r}");
    }

    #[tokio::test]
    async fn a_restated_fact_updates_the_old_one() {
        let fx = Fixture::new(&[]);
        fx.call(MemoryStore, serde_json::json!({"content": "The user's dentist is Dr. Okafor on Rua Augusta"}))
            .await
            .unwrap();
        fx.call(MemoryStore, serde_json::json!({"content": "Likes hiking"})).await.unwrap();
        let r = fx
            .call(
                MemoryStore,
                serde_json::json!({"content": "the user's dentist is Dr Okafor, on Rua Augusta.", "tags": ["health"]}),
            )
            .await
            .unwrap();
        assert_eq!(
            r,
            "updated m1 (it said nearly the same): [m1] the user's dentist is Dr Okafor, on Rua Augusta. (tags: health)"
        );
        assert_eq!(load_entries(&fx.ws).unwrap().len(), 2);
        // A different fact that shares words is a new entry.
        let r = fx
            .call(MemoryStore, serde_json::json!({"content": "The user's dentist appointment is on Monday"}))
            .await
            .unwrap();
        assert_eq!(r, "stored as m3");
        let r = fx.call(MemoryStore, serde_json::json!({"content": "Likes hiking a lot"})).await.unwrap();
        assert_eq!(r, "stored as m4");
        assert_eq!(likeness("", ""), 0.0);
    }

    #[tokio::test]
    async fn daily_notes_append() {
        let fx = Fixture::new(&[]);
        let r = fx.call(MemoryAppendToday, serde_json::json!({"content": "Called the plumber"})).await.unwrap();
        let today = crate::localtime::Local::at(&Zone::utc(), fx.clock.unix_secs()).date();
        assert_eq!(r, format!("noted in memory/{today}.md"));
        let text = std::fs::read_to_string(fx.root().join(format!("memory/{today}.md"))).unwrap();
        assert!(text.starts_with(&format!("# {today}\n\n- ")) && text.ends_with(" Called the plumber\n"), "{text}");
    }

    // The notes are written by the memory tools, which stand above memory.rs (the prompt reads
    // them there), so their dating is tested here, where both are in reach.
    #[test]
    fn daily_notes_are_dated_in_the_users_zone() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().to_path_buf())).unwrap();
        ws.ensure().unwrap();
        // 23:30 UTC on the 29th is already the 30th in Shanghai.
        let now = 1_795_995_000; // 2026-11-29T23:30:00Z
        let tz = crate::tzdb::load_zone("Asia/Shanghai").unwrap();
        let p = append_today(&ws, &tz, now, "Booked dentist\nfor Friday").unwrap();
        assert!(p.ends_with("memory/2026-11-30.md"), "{}", p.display());
        append_today(&ws, &tz, now, "Second note").unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "# 2026-11-30\n\n- 07:30 Booked dentist\n  for Friday\n- 07:30 Second note\n");
        std::fs::write(daily_path(&ws, "2026-11-28".parse().unwrap()), "# 2026-11-28\n\n- old").unwrap();
        std::fs::write(daily_path(&ws, "2026-11-20".parse().unwrap()), "- too old").unwrap();
        let recent = crate::memory::recent_daily(&ws, "2026-11-30".parse().unwrap(), 3);
        assert_eq!(
            recent,
            "### 2026-11-28\n- old\n\n### 2026-11-30\n- 07:30 Booked dentist\n  for Friday\n- 07:30 Second note"
        );
    }
}
