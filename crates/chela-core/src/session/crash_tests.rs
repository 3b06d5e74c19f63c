//! Sessions under the in-memory crash model: for random sequences of turn appends,
//! compactions and summaries (folds), a crash is injected at every primitive operation (write, fsync, rename, folder
//! sync), with several amounts of unsynced bytes surviving. After recovery the session must
//! load, hold every turn that was reported durable, whole and once, skip and report a torn
//! last line, and take the next append cleanly.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use chela_proto::chat::{Block, Json, Message, Role};
use proptest::prelude::*;

use super::{Budget, Summary, append_summary, append_turn, encode_turn, live_lines, load};
use crate::history;
use crate::storage::Storage;
use crate::storage::mem::{MemError, MemStorage};

const NAME: &str = "cli_local.jsonl";
const ALL: Budget = Budget { bytes: usize::MAX, max_read: u64::MAX };

fn turn(k: u32) -> Vec<Message> {
    vec![
        Message::user_text(format!("turn {k}")),
        Message {
            role: Role::Assistant,
            content: vec![Block::ToolUse {
                id: format!("t{k}"),
                name: "file_write".into(),
                input: Json::empty_object(),
            }],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: format!("t{k}").into(),
                content: format!("output of {k}: {}", "o".repeat(90)),
                images: Default::default(),
                is_error: false,
            }],
        },
        Message::assistant_text(format!("done {k}")),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    Append,
    /// Rewrite the file with only its newest `n` turns, as rotation does.
    Compact(u32),
    /// Append a summary that keeps only the newest `n` turns live, as compaction does.
    Fold(u32),
}

#[derive(Debug)]
enum InFlight {
    Append(u32),
    Compact { old: Vec<u32>, new: Vec<u32> },
    Fold { old: Vec<u32>, new: Vec<u32> },
}

/// Turn numbers in `messages`, checking that each exchange is exactly the turn it names.
fn ids(messages: &[Message]) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for chunk in messages.chunk_by(|_, b| !history::starts_exchange(b)) {
        let text = chunk[0].text();
        let k: u32 = text.strip_prefix("turn ").and_then(|n| n.parse().ok()).ok_or(format!("odd exchange {text}"))?;
        if chunk != turn(k).as_slice() {
            return Err(format!("turn {k} is not whole: {chunk:?}"));
        }
        out.push(k);
    }
    Ok(out)
}

/// Runs `ops` until the storage crashes. Returns the turns reported durable and what was
/// under way when it crashed.
fn run(s: &mut MemStorage, ops: &[Op]) -> (Vec<u32>, Option<InFlight>) {
    let mut durable: Vec<u32> = Vec::new();
    for (k, op) in (0u32..).zip(ops) {
        match op {
            Op::Append => match append_turn(s, NAME, &turn(k), u64::from(k)) {
                Ok(()) => durable.push(k),
                Err(MemError::Crashed) => return (durable, Some(InFlight::Append(k))),
                Err(e) => panic!("{e}"),
            },
            Op::Compact(n) => {
                let per_turn = history::bytes(&turn(0));
                let budget = Budget { bytes: per_turn * *n as usize + per_turn / 2, max_read: u64::MAX };
                let recent = load(&*s, NAME, budget).expect("load before compaction");
                let new = ids(&recent.messages).expect("the live history is whole");
                match s.replace(NAME, encode_turn(&recent.messages, recent.last_ts).as_bytes()) {
                    Ok(()) => durable = new,
                    Err(MemError::Crashed) => return (durable.clone(), Some(InFlight::Compact { old: durable, new })),
                    Err(e) => panic!("{e}"),
                }
            }
            Op::Fold(n) => {
                let history = load(&*s, NAME, ALL).expect("load before folding").messages;
                let live = &history[history.len().saturating_sub(4 * *n as usize)..];
                let new = ids(live).expect("the live history is whole");
                let keeps =
                    live_lines(&*s, NAME, live, u64::MAX).expect("read").expect("the live turns are at the end");
                let summary = Summary { text: format!("folded before {new:?}"), replaces: 0, keeps, ts: 0 };
                match append_summary(s, NAME, &summary) {
                    Ok(()) => durable = new,
                    Err(MemError::Crashed) => return (durable.clone(), Some(InFlight::Fold { old: durable, new })),
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }
    (durable, None)
}

/// Crashes `s` at operation `at`, keeping `keep` unsynced bytes, and checks the recovery.
fn crash_and_check(mut s: MemStorage, ops: &[Op], at: u64, keep: usize) -> Result<(), String> {
    s.crash_at(at);
    let (durable, in_flight) = run(&mut s, ops);
    s.crash(keep);
    let loaded = load(&s, NAME, ALL).map_err(|e| format!("{e}"))?;
    let got = ids(&loaded.messages)?;
    let ok = match &in_flight {
        None => got == durable,
        Some(InFlight::Append(k)) => got == durable || got == [durable.as_slice(), &[*k]].concat(),
        Some(InFlight::Compact { old, new } | InFlight::Fold { old, new }) => got == *old || got == *new,
    };
    if !ok {
        return Err(format!("after a crash at op {at} ({in_flight:?}): loaded {got:?}, durable {durable:?}"));
    }
    if loaded.skipped_lines > 1 || (loaded.skipped_lines == 1) != loaded.torn_tail {
        return Err(format!("only a torn last line may be skipped: {loaded:?}"));
    }
    // The next turn goes on a fresh line, after the torn one.
    append_turn(&mut s, NAME, &turn(1000), 1000).map_err(|e| format!("{e}"))?;
    let again = load(&s, NAME, ALL).map_err(|e| format!("{e}"))?;
    if ids(&again.messages)? != [got.as_slice(), &[1000]].concat() || again.skipped_lines != loaded.skipped_lines {
        return Err(format!("the append after recovery went wrong: {again:?}"));
    }
    if again.torn_tail {
        return Err(String::from("a fresh append left a torn tail"));
    }
    Ok(())
}

/// Every crash point of `ops`, each with several amounts of unsynced bytes surviving.
fn every_crash(fresh: fn() -> MemStorage, ops: &[Op]) -> Result<(), String> {
    let mut dry = fresh();
    run(&mut dry, ops);
    for at in 0..=dry.ops() {
        for keep in [0, 1, 40, 150, usize::MAX] {
            crash_and_check(fresh(), ops, at, keep)?;
        }
    }
    Ok(())
}

#[test]
fn a_crash_at_every_operation_loses_nothing_reported_durable() {
    let ops = [Op::Append, Op::Append, Op::Compact(1), Op::Append, Op::Append, Op::Compact(2), Op::Append];
    every_crash(MemStorage::new, &ops).unwrap();
    let ops = [Op::Append, Op::Append, Op::Fold(1), Op::Append, Op::Fold(1), Op::Append, Op::Compact(1), Op::Append];
    every_crash(MemStorage::new, &ops).unwrap();
}

#[test]
fn the_crash_model_catches_a_missing_fsync() {
    // An implementation whose fsync does nothing loses reported turns; the check must say so.
    let err = every_crash(MemStorage::without_fsync, &[Op::Append, Op::Append]).unwrap_err();
    assert!(err.contains("loaded []"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn random_sequences_survive_a_crash_anywhere(
        ops in proptest::collection::vec(prop_oneof![4 => Just(Op::Append), 1 => (1u32..4).prop_map(Op::Compact), 1 => (0u32..3).prop_map(Op::Fold)], 1..8)
    ) {
        if let Err(e) = every_crash(MemStorage::new, &ops) {
            prop_assert!(false, "{}", e);
        }
    }
}
