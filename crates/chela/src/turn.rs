//! Driving one agent turn: step the core's `AgentRun`, call the provider, run the tools,
//! persist the turn. Every channel (the terminal today) goes through [`run_turn`].

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use chela_core::agent::{AgentRun, Limits, Outcome, Step, ToolCall, ToolResult};
use chela_core::cap::{Caller, Scope};
use chela_core::session::{self, Budget};
use chela_core::storage::Storage;
use chela_proto::chat::{Message, Update};

use crate::provider::{Provider, ProviderError};
use crate::storage::FileStorage;
use crate::tools::{ToolCtx, Toolbox};
use crate::workspace::archive_target;

/// A session file is archived and restarted from its recent part when it grows past this; the
/// whole of it stays in `sessions/archive/`.
const ROTATE_BYTES: u64 = 4 * 1024 * 1024;

/// Most bytes of a session file's end looked at for the history, however many lines turn out
/// unreadable: many times what the budget sends.
fn tail_bytes(budget: usize) -> u64 {
    (budget as u64).saturating_mul(4).max(256 * 1024)
}

/// What a turn reports while it runs, for showing progress.
pub trait Observer {
    /// More answer text streamed in.
    fn text(&mut self, text: &str);
    /// A model reply finished; `tools_follow` when it asked for tools.
    fn reply_done(&mut self, tools_follow: bool);
    fn tool_started(&mut self, call: &ToolCall);
    fn tool_finished(&mut self, call: &ToolCall, result: &ToolResult, elapsed: Duration);
}

/// Something that resolves when the person asks to stop the turn (Ctrl-C).
pub trait Interrupt {
    fn interrupted(&mut self) -> impl std::future::Future<Output = ()>;
}

/// Everything a turn needs.
pub struct Agent<'a> {
    pub provider: &'a Provider,
    pub toolbox: &'a Toolbox,
    pub ctx: ToolCtx<'a>,
    pub limits: Limits,
}

/// How a turn ended.
pub enum TurnEnd {
    Done(Outcome),
    Failed(ProviderError),
}

/// Loads a session's recent history: read from the file's end, newest first, the whole
/// exchanges that fit `budget` request bytes; older lines are neither read nor parsed. Never
/// fails on content: torn or bad lines are skipped with a warning. A file past [`ROTATE_BYTES`]
/// is archived whole and restarted with that recent part, so it never grows without bound.
pub fn load_history(path: &Path, budget: usize) -> anyhow::Result<Vec<Message>> {
    let (mut storage, name) = FileStorage::for_file(path)?;
    let loaded = session::load(&storage, &name, Budget { bytes: budget, max_read: tail_bytes(budget) })
        .with_context(|| format!("cannot read the conversation in {}", path.display()))?;
    if loaded.torn_tail {
        tracing::warn!(
            "{}: the last line is incomplete (an earlier run stopped while saving); it was skipped",
            path.display()
        );
    }
    let other = loaded.skipped_lines - usize::from(loaded.torn_tail);
    if other > 0 {
        tracing::warn!("{}: skipped {other} unreadable line(s)", path.display());
    }
    if loaded.file_bytes > ROTATE_BYTES {
        rotate(&mut storage, &name, path, &loaded.messages, loaded.last_ts)
            .with_context(|| format!("cannot archive the long conversation in {}", path.display()))?;
    }
    Ok(loaded.messages)
}

/// Keeps everything in the archive, then replaces the live file with the recent messages. A
/// crash in between leaves both, never neither.
fn rotate(storage: &mut FileStorage, name: &str, path: &Path, recent: &[Message], ts: u64) -> std::io::Result<()> {
    let target = archive_target(path)?;
    std::fs::hard_link(path, &target)?;
    storage.replace(name, session::encode_turn(recent, ts).as_bytes())?;
    tracing::info!("{} was over {ROTATE_BYTES} bytes; the full record is in {}", path.display(), target.display());
    Ok(())
}

/// Runs one turn and appends it to the session file at `session_path`.
pub async fn run_turn(
    agent: &Agent<'_>,
    session_path: &Path,
    system: String,
    user: Message,
    obs: &mut impl Observer,
    interrupt: &mut impl Interrupt,
) -> anyhow::Result<TurnEnd> {
    let history = load_history(session_path, agent.limits.history_budget)?;
    let mut run = AgentRun::new(history, user, system, agent.limits);
    let end = loop {
        match run.next_step() {
            Step::Done(outcome) => break TurnEnd::Done(outcome.clone()),
            Step::CallModel(call) => {
                let tools = agent.toolbox.registry.tools_for(Scope::default());
                let mut on_update = |u: Update<'_>| {
                    if let Update::Text(t) = u {
                        obs.text(t);
                    }
                };
                let result = tokio::select! {
                    r = agent.provider.complete(&call, &tools, &mut on_update) => Some(r),
                    () = interrupt.interrupted() => None,
                };
                match result {
                    None => run.cancel(),
                    Some(Ok(reply)) => {
                        obs.reply_done(reply.has_tool_use());
                        run.handle_reply(reply)?;
                    }
                    Some(Err(e)) => break TurnEnd::Failed(e),
                }
            }
            Step::CallTools(calls) => {
                // Run in order: a later call may read what an earlier one wrote.
                let calls = calls.to_vec();
                let mut cancelled = false;
                for call in &calls {
                    obs.tool_started(call);
                    let started = Instant::now();
                    let outcome = tokio::select! {
                        r = agent.toolbox.call(&agent.ctx, &call.name, call.input.as_str(), Caller::Model, Scope::default()) => r,
                        () = interrupt.interrupted() => {
                            cancelled = true;
                            break;
                        }
                    };
                    let result = match outcome {
                        Ok(out) => ToolResult::ok(call.id.clone(), out),
                        Err(e) => ToolResult::error(call.id.clone(), e.0),
                    };
                    obs.tool_finished(call, &result, started.elapsed());
                    run.record_tool_result(result)?;
                }
                if cancelled {
                    run.cancel();
                } else {
                    run.handle_tool_results(Vec::new())?;
                }
            }
        }
    };
    match &end {
        TurnEnd::Done(_) => persist(session_path, run.turn_messages())?,
        // When tools already changed things, keep the record of it, closed so it stays well-formed.
        TurnEnd::Failed(e) if run.turn_messages().len() > 1 => {
            run.abort(&format!("(this turn stopped: the model call failed: {e})"));
            persist(session_path, run.turn_messages())?;
        }
        TurnEnd::Failed(_) => {}
    }
    Ok(end)
}

fn persist(path: &Path, messages: &[Message]) -> anyhow::Result<()> {
    let ts = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (mut storage, name) = FileStorage::for_file(path)?;
    session::append_turn(&mut storage, &name, messages, ts)
        .map_err(|e| anyhow::anyhow!("cannot save the conversation to {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_sessions_load_their_tail_and_are_rotated_without_losing_anything() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions").join("cli_local.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut text = String::new();
        let mut i = 0;
        while text.len() as u64 <= ROTATE_BYTES {
            let turn = [Message::user_text(format!("question {i}")), Message::assistant_text("a".repeat(1000))];
            text.push_str(&session::encode_turn(&turn, i));
            i += 1;
        }
        std::fs::write(&path, &text).unwrap();
        let history = load_history(&path, 16 * 1024).unwrap();
        assert_eq!(history.last().unwrap().text(), "a".repeat(1000));
        assert_eq!(history[history.len() - 2].text(), format!("question {}", i - 1));
        assert!(history[0].text().starts_with("question "), "starts with a whole exchange");
        let live = std::fs::metadata(&path).unwrap().len();
        assert!(live <= tail_bytes(16 * 1024), "the live file was cut to its recent part: {live}");
        let archived: Vec<_> = std::fs::read_dir(dir.path().join("sessions/archive")).unwrap().flatten().collect();
        assert_eq!(archived.len(), 1);
        assert_eq!(std::fs::read_to_string(archived[0].path()).unwrap(), text, "the archive has everything");
        // The rotated file loads to the same history.
        assert_eq!(load_history(&path, 16 * 1024).unwrap(), history);
    }
}
