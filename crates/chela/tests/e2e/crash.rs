//! Crash safety: `chela` killed with SIGKILL at random moments loses nothing that was done.
//!
//! 200 scripted turns, each calling tools that write a file and a memory entry, interleaved with
//! `chela config set`; about half the processes are killed after a random delay. Afterwards:
//! every turn that completed (exit 0) is in the history, whole; the only unreadable session
//! lines are torn writes of killed runs (cut at a line start, never inside a completed turn),
//! which the reader skips and counts; the note files, the memory entries and the config
//! overrides are each one whole version (old or new), never torn. Then a torn last line is
//! made on purpose and the next run must skip it, warn, and save its turn whole after it.
//!
//! SIGKILL keeps the page cache, so this cannot catch a missing fsync; the in-memory crash
//! model in `chela_core::storage::mem` (and `chela_core::session`'s crash tests) does.
//! Set `CHELA_CRASH_SEED` to replay a run; the seed is printed on failure.
//!
//! The second test runs fewer turns with compaction on (`agent.compaction`), so runs are also
//! killed while asking for a summary or appending it: the summary lines are whole or torn like
//! any other, every completed turn is still in the file, and those after the newest summary load.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chela::storage::FileStorage;
use chela_core::session;
use chela_testkit::{FakeLlm, Step, ToolCall};
use serde_json::json;

const TURNS: usize = 200;

/// xorshift64*: deterministic from the seed, good enough to pick kill moments.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn chela(ws: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chela"));
    c.env("CHELA_HOME", ws).env_remove("ANTHROPIC_API_KEY").env_remove("OPENAI_API_KEY").env_remove("CHELA_LOG");
    for (k, _) in std::env::vars() {
        if k.starts_with("CHELA_") && k != "CHELA_HOME" {
            c.env_remove(k);
        }
    }
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Waits for `child` up to `kill_after`, then SIGKILLs it. Returns whether it exited 0 by itself.
fn run_maybe_killed(mut child: Child, kill_after: Option<Duration>) -> bool {
    let deadline = Instant::now() + kill_after.unwrap_or(Duration::from_secs(30));
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.success();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return false;
        }
        std::thread::sleep(Duration::from_micros(300));
    }
}

fn note_content(version: usize) -> String {
    // Long enough that a torn write would show.
    format!("version {version}\n{}\nend {version}\n", "x".repeat(2000 + version))
}

#[test]
fn sigkill_at_random_moments_loses_nothing_done_real_time() {
    // Without compaction, so every completed turn must also load.
    with_seed(|seed| crash_run(seed, false, TURNS));
}

#[test]
fn sigkill_during_compaction_loses_nothing_done_real_time() {
    with_seed(|seed| crash_run(seed, true, 80));
}

fn with_seed(run: fn(u64)) {
    let seed = std::env::var("CHELA_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    let result = std::panic::catch_unwind(|| run(seed));
    if let Err(e) = result {
        eprintln!("crash test failed with CHELA_CRASH_SEED={seed}");
        std::panic::resume_unwind(e);
    }
}

fn crash_run(seed: u64, compaction: bool, turns: usize) {
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let set = |key: &str, value: &str| {
        let out = chela(&ws).args(["config", "set", key, value]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    set("llm.api_key", "test-key");
    set("llm.max_tokens", "1000");
    set("agent.compaction", if compaction { "true" } else { "false" });

    let mut completed: Vec<usize> = Vec::new();
    let mut config_versions: HashSet<String> = HashSet::from(["1000".to_owned()]);
    let mut killed = 0;
    for turn in 0..turns {
        // Every fourth step also rewrites the config, possibly killed mid-write.
        if turn % 4 == 0 {
            let v = (2000 + turn).to_string();
            config_versions.insert(v.clone());
            let child = chela(&ws).args(["config", "set", "llm.max_tokens", &v]).spawn().unwrap();
            let kill = (rng.below(2) == 0).then(|| Duration::from_micros(rng.below(4000)));
            run_maybe_killed(child, kill);
        }
        // A fresh fake per turn: a killed turn cannot leave script steps behind for the next.
        let note = format!("notes/n{}.md", turn % 5);
        let llm = FakeLlm::start(vec![
            Step::tool_calls(vec![
                ToolCall::new("file_write", json!({"path": note, "content": note_content(turn)})),
                ToolCall::new("memory_store", json!({"content": format!("fact {turn}"), "tags": ["crash"]})),
            ])
            .chunk_delay_ms(rng.below(3)),
            Step::text(format!("done {turn}")).chunk_delay_ms(rng.below(3)),
        ]);
        let child = chela(&ws)
            .env("CHELA_LLM__BASE_URL", llm.anthropic_base_url())
            .args(["chat", "-m", &format!("turn {turn}")])
            .spawn()
            .unwrap();
        let kill = (rng.below(2) == 0).then(|| Duration::from_micros(rng.below(40_000)));
        if run_maybe_killed(child, kill) {
            completed.push(turn);
        } else {
            killed += 1;
        }
    }
    assert!(killed > turns / 5, "only {killed} of {turns} processes were killed; the test is not testing much");
    assert!(completed.len() > turns / 5, "only {} turns completed", completed.len());

    // A run killed while saving may leave a torn line, which the next run's append leaves on a
    // line of its own. Such lines are the only unreadable ones allowed, and each must be a
    // killed run's: never inside a completed turn, always cut at a line start and followed by
    // the start of the next turn (or last, without a newline).
    let session_path = ws.join("sessions/cli_local.jsonl");
    let session = std::fs::read_to_string(&session_path).unwrap();
    let lines: Vec<&str> = session.lines().collect();
    let whole = |line: &str| {
        serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| v["role"].is_string() && v["ts"].is_u64())
    };
    let summary = |line: &str| {
        serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| v["kind"] == "summary" && v["keeps"].is_u64())
    };
    let starts_turn = |line: &str| line.starts_with("{\"role\":\"user\",\"content\":\"turn ");
    let mut torn = 0;
    for (i, line) in lines.iter().enumerate() {
        if whole(line) || (compaction && summary(line)) {
            continue;
        }
        torn += 1;
        let cut_summary = compaction && line.starts_with("{\"kind\":\"summary\"");
        assert!(line.starts_with("{\"role\":") || cut_summary, "line {} is not a cut-short message: {line}", i + 1);
        match lines.get(i + 1) {
            // Another torn line may follow: a run killed while saving right after the first.
            Some(next) => {
                assert!(starts_turn(next) || !whole(next), "line {} is torn in the middle of a turn: {line}", i + 1)
            }
            None => assert!(!session.ends_with('\n'), "a torn last line has no newline"),
        }
    }
    assert!(torn <= killed, "{torn} torn lines from {killed} killed runs");
    // Each completed turn is four whole lines in a row: question, calls, results, answer.
    for turn in &completed {
        let q = lines.iter().position(|l| starts_turn(l) && l.contains(&format!("\"turn {turn}\"")));
        let q = q.unwrap_or_else(|| panic!("completed turn {turn} is missing from the session"));
        assert!(lines[q..q + 4].iter().all(|l| whole(l)), "completed turn {turn} is torn: {:#?}", &lines[q..q + 4]);
        assert!(lines[q + 3].contains(&format!("done {turn}")), "the answer to turn {turn} is missing");
    }
    // The reader skips exactly the torn lines and reports a torn tail, and loads every completed turn.
    let (storage, name) = FileStorage::for_file(&session_path).unwrap();
    let all = session::Budget { bytes: usize::MAX, max_read: u64::MAX };
    let loaded = session::load(&storage, &name, all).unwrap();
    assert_eq!(loaded.torn_tail, !session.ends_with('\n'));
    assert_eq!(loaded.messages, session::parse(&session).messages, "newest-first loading equals a full parse");
    let texts: Vec<String> = loaded.messages.iter().map(|m| m.text()).collect();
    let mut from = 0;
    // With compaction, the turns before the newest summary are in the file (checked above) and
    // stand behind the summary; those after it must load.
    let newest_summary = lines.iter().rposition(|l| summary(l));
    if compaction {
        let at = newest_summary.expect("no summary was ever written: the test is not testing compaction");
        let line: serde_json::Value = serde_json::from_str(lines[at]).unwrap();
        assert_eq!(loaded.summary.as_ref().map(|s| s.text.as_str()), line["text"].as_str(), "the newest summary loads");
        assert!(loaded.skipped_lines <= torn, "only torn lines are skipped");
    } else {
        assert_eq!(loaded.skipped_lines, torn);
    }
    let after_summary = |turn: usize| {
        let q = lines.iter().position(|l| starts_turn(l) && l.contains(&format!("\"turn {turn}\"")));
        newest_summary.is_none_or(|at| q.is_some_and(|q| q > at))
    };
    for turn in completed.iter().filter(|&&t| after_summary(t)) {
        let q = texts[from..].iter().position(|t| *t == format!("turn {turn}")).map(|i| i + from);
        let q = q.unwrap_or_else(|| panic!("completed turn {turn} is missing from the loaded history"));
        assert!(texts[q..].iter().any(|t| *t == format!("done {turn}")), "the answer to turn {turn} is missing");
        from = q + 1;
    }

    // Notes are whole versions.
    for n in 0..5 {
        let path = ws.join(format!("notes/n{n}.md"));
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let version: usize = text
            .strip_prefix("version ")
            .and_then(|r| r.split('\n').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{} is torn: {:?}", path.display(), &text[..text.len().min(40)]));
        assert_eq!(text, note_content(version), "{} is torn", path.display());
    }
    // Memory entries: every line parses, and every completed turn's fact is there.
    let entries = std::fs::read_to_string(ws.join("memory/entries.jsonl")).unwrap();
    let (parsed, skipped) = chela_core::memory::Entries::parse(&entries);
    assert_eq!(skipped, 0, "torn memory file:\n{entries}");
    for turn in &completed {
        let fact = format!("fact {turn}");
        assert!(parsed.newest(usize::MAX, None).iter().any(|e| e.content == fact), "{fact} is missing");
    }
    // The overrides file is one whole version.
    let overrides = std::fs::read_to_string(ws.join("overrides.toml")).unwrap();
    let table = chela::toml::parse(&overrides).unwrap_or_else(|e| panic!("overrides.toml is torn ({e}):\n{overrides}"));
    let tokens = table["llm"]["max_tokens"].as_str().unwrap().to_owned();
    assert!(config_versions.contains(&tokens), "max_tokens = {tokens} was never written");
    assert_eq!(table["llm"]["api_key"].as_str(), Some("test-key"));
    // And chela still works in this workspace afterwards, even from a torn last line: one is
    // made here (a random kill rarely tears a write), and the run must skip it, say so, and save
    // its turn whole after it.
    let mut f = std::fs::OpenOptions::new().append(true).open(&session_path).unwrap();
    if !session.ends_with('\n') {
        f.write_all(b"\n").unwrap();
    }
    f.write_all(b"{\"role\":\"user\",\"content\":\"turn 99").unwrap();
    drop(f);
    let llm = FakeLlm::start(vec![Step::text("still here")]);
    let out =
        chela(&ws).env("CHELA_LLM__BASE_URL", llm.anthropic_base_url()).args(["chat", "-m", "ok?"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "still here\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("last line is incomplete"), "the torn line was not reported: {stderr}");
    let after = session::load(&storage, &name, all).unwrap();
    assert!(!after.torn_tail);
    if compaction {
        // This turn may have folded older ones; it is whole at the end either way.
        let n = after.messages.len();
        let last: Vec<String> = after.messages[n - 2..].iter().map(|m| m.text()).collect();
        assert_eq!(last, ["ok?", "still here"]);
        return;
    }
    assert_eq!(after.skipped_lines, torn + 1);
    assert_eq!(after.messages[..loaded.messages.len()], loaded.messages[..], "everything before is intact");
    let last: Vec<String> = after.messages[loaded.messages.len()..].iter().map(|m| m.text()).collect();
    assert_eq!(last, ["ok?", "still here"]);
}
