//! The `memory` group: what the model remembers across conversations.
//!
//! Entries live in `memory/entries.jsonl` (rewritten atomically on every change); daily notes
//! in `memory/YYYY-MM-DD.md` (appended). `MEMORY.md` is the person's file; the model can edit
//! it with the file tools when asked.

use serde::Deserialize;

use std::io;
use std::path::PathBuf;

use chela_core::contract::memory::{RECALL, RecallArgs, STORE, StoreArgs, Tags};
use chela_core::memory::{Entries, MAX_ENTRY_BYTES, render_line};
use chela_core::zone::Zone;

use super::{Group, Tool, ToolCtx, ToolError, ToolResult};
use crate::memory::{daily_path, load_entries, memory_dir, update_entries};
use crate::workspace::{Workspace, append_durable};

pub fn group() -> Group {
    Group::new("memory", "Remember facts across conversations; keep daily notes.")
        .guidance(
            "Memory: when the user tells you something lasting about themselves, their people, plans or \
             preferences, or asks you to remember something, save it with memory_store (short, self-contained, \
             with tags). Before answering about past conversations or the user's preferences, check memory_recall. \
             Correct outdated entries with memory_update and drop wrong ones with memory_forget. Log notable events \
             of the day with memory_append_today. Never say you saved something unless the tool succeeded.",
        )
        .with(MemoryStore)
        .with(MemoryRecall)
        .with(MemoryUpdate)
        .with(MemoryForget)
        .with(MemoryList)
        .with(MemoryAppendToday)
}

fn io_err(e: io::Error) -> ToolError {
    ToolError::new(format!("The memory file could not be read or written: {e}"))
}

/// Runs `change` on the entries under the entries lock, off the async workers (the lock and
/// the file IO block). See [`update_entries`].
fn change_entries<T>(
    ws: &Workspace,
    change: impl FnOnce(&mut Entries) -> Result<T, ToolError>,
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
    update_entries(ws, |e| change(e).map_err(Failed::Tool)).map_err(|f| match f {
        Failed::Io(e) => io_err(e),
        Failed::Tool(e) => e,
    })
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
        let id = change_entries(&ctx.ws, move |entries| {
            let e = entries.store(&a.content, &tags, &a.source, now).map_err(|e| ToolError::new(e.to_string()))?;
            Ok(e.id.clone())
        })?;
        Ok(format!("stored as {id}"))
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
        let entries = load_entries(&ctx.ws).map_err(io_err)?;
        Ok(chela_core::contract::memory::recall(&entries, &a))
    }
}

pub struct MemoryUpdate;

#[derive(Deserialize)]
pub struct UpdateArgs {
    id: String,
    content: String,
    #[serde(default)]
    tags: Option<Tags>,
}

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
            entries
                .update(a.id.trim(), &a.content, tags.as_deref(), now)
                .map(render_line)
                .map_err(|e| ToolError::new(e.to_string()))
        })?;
        Ok(format!("updated: {line}"))
    }
}

pub struct MemoryForget;

#[derive(Deserialize)]
pub struct ForgetArgs {
    id: String,
}

impl Tool for MemoryForget {
    const NAME: &'static str = "memory_forget";
    const DESCRIPTION: &'static str = "Delete a remembered fact by id.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}"#;
    type Args = ForgetArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: ForgetArgs) -> ToolResult {
        let gone = change_entries(&ctx.ws, move |entries| {
            entries.forget(a.id.trim()).map(|gone| render_line(&gone)).map_err(|e| ToolError::new(e.to_string()))
        })?;
        Ok(format!("forgot: {gone}"))
    }
}

pub struct MemoryList;

#[derive(Deserialize)]
pub struct ListArgs {
    #[serde(default)]
    max_results: Option<usize>,
    #[serde(default)]
    tag: Option<String>,
}

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

#[derive(Deserialize)]
pub struct AppendArgs {
    content: String,
}

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
