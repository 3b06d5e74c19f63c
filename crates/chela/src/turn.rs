//! Driving one agent turn: step the core's `AgentRun`, call the provider, run the tools,
//! persist the turn. Every channel (the terminal today) goes through [`run_turn`].

use std::path::Path;
use std::time::{Duration, Instant};

use chela_core::agent::{AgentRun, Limits, Outcome, Step, ToolCall, ToolResult};
use chela_core::cap::{Caller, Scope};
use chela_core::session;
use chela_proto::chat::{Message, Update};

use crate::provider::{Provider, ProviderError};
use crate::tools::{ToolCtx, Toolbox};
use crate::workspace::{append_durable, read_bounded};

/// Session files larger than this are not loaded whole; see [`load_history`].
const MAX_SESSION_BYTES: u64 = 8 * 1024 * 1024;

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

/// Loads a session's history. Never fails on content: torn or bad lines are skipped.
pub fn load_history(path: &Path) -> anyhow::Result<Vec<Message>> {
    let text = match read_bounded(path, MAX_SESSION_BYTES) {
        Ok(t) => t.unwrap_or_default(),
        Err(e) if e.kind() == std::io::ErrorKind::Other => {
            anyhow::bail!("{e}; start a new session with `chela chat --new`")
        }
        Err(e) => return Err(e.into()),
    };
    let loaded = session::parse(&text);
    if loaded.skipped_lines > 0 {
        tracing::warn!("{}: skipped {} unreadable line(s)", path.display(), loaded.skipped_lines);
    }
    Ok(loaded.messages)
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
    let history = load_history(session_path)?;
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
    append_durable(path, &session::encode_turn(messages, ts))
        .map_err(|e| anyhow::anyhow!("cannot save the conversation to {}: {e}", path.display()))
}
