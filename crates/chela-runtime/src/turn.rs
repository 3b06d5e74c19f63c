//! Driving one agent turn: step the core's `AgentRun`, call the provider, run the tools,
//! persist the turn. Every channel (the terminal today) goes through [`run_turn`], called by
//! the session's owner (`crate::session`), which keeps the history between turns.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use anyhow::Context;
use chela_core::agent::{AgentRun, Limits, Outcome, Step, ToolCall, ToolResult};
use chela_core::cap::{Caller, Scope};
use chela_core::prompt::System;
use chela_core::session::{self, Budget, Summary};
use chela_core::storage::Storage;
use chela_proto::chat::{Block, Format, Message, ToolSpec, Update};

use crate::provider::{Provider, ProviderError};
use crate::storage::FileStorage;
use crate::tools::{ToolCtx, Toolbox};
use crate::vision::ImageBudget;
use crate::workspace::archive_target;

/// A session file is archived and restarted from its recent part when it grows past this; the
/// whole of it stays in `sessions/archive/`.
const ROTATE_BYTES: u64 = 4 * 1024 * 1024;

/// Most bytes of a session file's end looked at for the history, however many lines turn out
/// unreadable: many times what the budget sends.
pub(crate) fn tail_bytes(budget: usize) -> u64 {
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
    /// The model call failed for a passing reason (`why`) and is made again after `wait`.
    fn retrying(&mut self, _why: &str, _wait: Duration) {}
    /// The turn ended with calls to the client's own tools ([`ClientTurn::tools`]), for the
    /// client to run and answer in its next request.
    fn handed_back(&mut self, _calls: &[ToolCall]) {}
}

/// For turns whose progress nobody watches: answers sent whole, scheduled jobs, callers that
/// get the whole answer at the end.
pub struct Quiet;

impl Observer for Quiet {
    fn text(&mut self, _: &str) {}
    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}
}

/// Stops a turn from elsewhere (Ctrl-C, a channel's "stop"): clones share one switch.
#[derive(Clone, Debug)]
pub struct Cancel(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Cancel {
    fn default() -> Cancel {
        Cancel(Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl Cancel {
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once [`Cancel::cancel`] was called, at once if it already was.
    pub async fn cancelled(&self) {
        let mut rx = self.0.subscribe();
        // The sender lives in `self`, so waiting cannot end with a closed channel.
        let _ = rx.wait_for(|&c| c).await;
    }
}

/// One turn as a channel asks for it.
pub struct TurnRequest {
    pub channel: String,
    pub chat_id: String,
    pub user: Message,
    /// Groups this session sees on top of the base visibility (a skill unlocked them).
    pub scope: Vec<String>,
    /// Who asked for the turn. The tool calls inside it are always the model's.
    pub caller: Caller,
    /// How many automation steps led to the turn (0: a person, a clock, the heartbeat; a router
    /// rule's `agent` action fired by a message: 1). Its tool calls carry it (`ToolCtx::depth`).
    pub depth: u8,
    pub cancel: Cancel,
    pub observer: Box<dyn Observer + Send>,
    /// What an API client brings besides its message; `None` for every other channel.
    pub client: Option<Box<ClientTurn>>,
}

/// What a program talking to Chela through the OpenAI-compatible API brings to a turn.
#[derive(Clone, Debug, Default)]
pub struct ClientTurn {
    /// The conversation the client sent, used instead of the stored history: a stateless
    /// request, whose client keeps the conversation itself.
    pub history: Option<Vec<Message>>,
    /// The client's system message, added to Chela's prompt as the caller's instructions.
    pub instructions: Option<String>,
    /// Tools the client runs itself. The model sees them beside Chela's (a client's tool hides
    /// Chela's of the same name); a call to one ends the turn, handed back to the client.
    pub tools: Vec<ClientTool>,
    /// The shape the client wants the answer in (`response_format`), asked of every model call.
    pub format: Option<Format>,
}

/// A tool the client offers, as OpenAI's `tools` describe a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTool {
    pub name: String,
    pub description: String,
    /// A JSON Schema object, as JSON text.
    pub input_schema: String,
}

impl ClientTurn {
    fn owns(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t.name == tool)
    }
}

/// A session's conversation as its owner keeps it between turns: the file it is appended to
/// and its recent messages, bounded like the part of the file that is read back.
pub struct History {
    pub path: PathBuf,
    pub messages: Vec<Message>,
    /// What the turns before `messages` were folded into (`crate::compact`), if they were.
    pub summary: Option<Summary>,
}

/// Everything a turn needs.
pub struct Agent<'a> {
    pub provider: &'a Provider,
    pub toolbox: &'a Arc<Toolbox>,
    /// The MCP servers, connected before the model is shown the tools.
    pub mcp: &'a crate::mcp::client::Clients,
    pub ctx: ToolCtx,
    pub limits: Limits,
}

/// Where a conversation's file work runs: loading its history, reading the memory files for
/// the prompt, and the fsync'd append of each turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FileWork {
    /// On tokio's blocking pool, so a slow disk or an fsync never holds an async worker that
    /// other conversations are waiting for: what a process serving many chats uses (`chela run`,
    /// whose chats share one thread).
    /// A turn hands off twice: once before its first model call (the history if not yet loaded
    /// and the prompt files together), once for the append.
    #[default]
    Pool,
    /// On the conversation owner's own thread. Only for a process with one conversation on a
    /// current-thread runtime: the terminal. There nothing else needs the thread while a file is
    /// read or synced (a Ctrl-C is taken as soon as the work returns), while each hand-off to the
    /// pool costs two cross-CPU wake-ups, and the first one a new thread with its own stack and
    /// malloc arena: about 0.5 ms of a 6 ms `chat -m` and 0.1-0.2 MiB of its RSS (docs/BENCHMARKS.md §3).
    Inline,
}

impl FileWork {
    /// Runs `f`, blocking file work, where `self` says; `what` names it if the pool loses it.
    pub async fn run<T: Send + 'static>(
        self,
        what: &str,
        f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        match self {
            FileWork::Inline => f(),
            FileWork::Pool => {
                crate::tasks::blocking(f).await.map_err(|e| anyhow::anyhow!("{what} stopped unexpectedly: {e}"))?
            }
        }
    }
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
/// The summary of the older turns comes along when the recent part reaches it.
pub fn load_history(path: &Path, budget: usize) -> anyhow::Result<History> {
    let (mut storage, name) = FileStorage::for_file(path)?;
    let loaded = session::load(&storage, &name, Budget { bytes: budget, max_read: tail_bytes(budget) })
        .with_context(|| format!("cannot read the conversation in {}", path.display()))?;
    if loaded.torn_tail {
        chela_log::warn!(
            "{}: the last line is incomplete (an earlier run stopped while saving); it was skipped",
            path.display()
        );
    }
    let other = loaded.skipped_lines - usize::from(loaded.torn_tail);
    if other > 0 {
        chela_log::warn!("{}: skipped {other} unreadable line(s)", path.display());
    }
    if loaded.file_bytes > ROTATE_BYTES {
        rotate(&mut storage, &name, path, &loaded, loaded.last_ts)
            .with_context(|| format!("cannot archive the long conversation in {}", path.display()))?;
    }
    Ok(History { path: path.to_owned(), messages: loaded.messages, summary: loaded.summary })
}

/// Keeps everything in the archive, then replaces the live file with the recent messages. A
/// crash in between leaves both, never neither. A summary stays at the head of the new file,
/// standing for all that went to the archive.
fn rotate(
    storage: &mut FileStorage,
    name: &str,
    path: &Path,
    recent: &session::Loaded,
    ts: u64,
) -> std::io::Result<()> {
    let target = archive_target(path)?;
    std::fs::hard_link(path, &target)?;
    let mut text = recent
        .summary
        .as_ref()
        .map_or_else(String::new, |s| session::encode_summary(&Summary { keeps: 0, ..s.clone() }));
    text.push_str(&session::encode_turn(&recent.messages, ts));
    storage.replace(name, text.as_bytes())?;
    chela_log::info!("{} was over {ROTATE_BYTES} bytes; the full record is in {}", path.display(), target.display());
    Ok(())
}

/// Runs one turn of `history`'s conversation, appends it to the session file and to
/// `history`. The file is written where `files` says.
pub async fn run_turn(
    agent: &Agent<'_>,
    history: &mut History,
    system: System,
    req: &mut TurnRequest,
    files: FileWork,
) -> anyhow::Result<TurnEnd> {
    chela_log::debug!(channel = %req.channel, chat = %req.chat_id, caller = ?req.caller, "turn starts");
    let mut ctx = agent.ctx.clone();
    ctx.conversation = Some((req.channel.clone(), req.chat_id.clone()));
    ctx.depth = req.depth;
    // MCP servers not connected yet (lazy ones, or the first turn of a one-shot command)
    // connect before the model is shown the tools; a no-op once they are.
    agent.mcp.ensure(agent.toolbox).await;
    let obs = &mut *req.observer;
    let cancel = &req.cancel;
    let mut images = ImageBudget::for_turn(&ctx.cfg);
    let mut user = req.user.clone();
    if !images.vision() {
        // A photo to a text-only model: a note says one was sent.
        user.images_to_notes();
    }
    let stable = system.stable;
    let context = system.turn_block();
    let client = req.client.as_deref();
    let system = match client.and_then(|c| c.instructions.as_deref()) {
        Some(instructions) => format!("{}\n\n{CALLER_INSTRUCTIONS}\n\n{instructions}", system.text),
        None => system.text,
    };
    let base = client.and_then(|c| c.history.clone()).unwrap_or_else(|| history.messages.clone());
    if client.is_some() {
        answer_open_calls(&base, &mut user);
    }
    let mut run = AgentRun::new(base, user, system, agent.limits);
    run.set_cache(stable, Some(cache_key(&req.channel, &req.chat_id)));
    // After the history, so the history is read from the cache on the next turn too.
    run.set_turn_context(context);
    run.set_format(client.and_then(|c| c.format.clone()));
    // A "context too long" is answered by shrinking the window and asking again, once a turn.
    let mut shrunk = false;
    let end = loop {
        match run.next_step() {
            Step::Done(outcome) => break TurnEnd::Done(outcome.clone()),
            Step::CallModel(call) => {
                // Taken at each call: a group registered while the turn runs shows up in the next.
                let registry = agent.toolbox.registry();
                let extra = scope_with_skills(agent, &registry, &req.scope);
                let mut tools = registry.tools_for(Scope { extra_visible: &extra });
                if let Some(c) = client {
                    tools.retain(|t| !c.owns(t.name));
                    tools.extend(c.tools.iter().map(|t| ToolSpec {
                        name: &t.name,
                        description: &t.description,
                        input_schema: &t.input_schema,
                    }));
                }
                let mut on_update = |u: Update<'_>| match u {
                    Update::Text(t) => obs.text(t),
                    Update::Retrying { why, wait_ms } => obs.retrying(why, Duration::from_millis(wait_ms)),
                    Update::ToolUseStart { .. } => {}
                };
                let result = tokio::select! {
                    r = agent.provider.complete(&call, &tools, &mut on_update) => Some(r),
                    () = cancel.cancelled() => None,
                };
                match result {
                    None => run.cancel(),
                    Some(Ok(reply)) => {
                        obs.reply_done(reply.has_tool_use());
                        run.handle_reply(reply)?;
                    }
                    Some(Err(e)) if e.is_context_too_long() && !shrunk && run.shrink_for_retry() => {
                        shrunk = true;
                        chela_log::info!(
                            "the provider said the conversation is too long; asking again with {} bytes of it",
                            chela_core::history::bytes(run.window())
                        );
                    }
                    Some(Err(e)) => break TurnEnd::Failed(e),
                }
            }
            Step::CallTools(calls) => {
                if let Some(c) = client
                    && calls.iter().any(|call| c.owns(&call.name))
                {
                    let back = run.hand_back(|name| c.owns(name));
                    obs.handed_back(&back);
                    continue;
                }
                // Run in order: a later call may read what an earlier one wrote.
                let calls = calls.to_vec();
                let mut cancelled = false;
                for call in &calls {
                    obs.tool_started(call);
                    let started = Instant::now();
                    // Per call: a skill activated by the call before unlocks its groups for this one.
                    let extra = scope_with_skills(agent, &agent.toolbox.registry(), &req.scope);
                    let scope = Scope { extra_visible: &extra };
                    let outcome = tokio::select! {
                        r = agent.toolbox.call_output(&ctx, &call.name, call.input.as_str(), Caller::Model, scope) => r,
                        () = cancel.cancelled() => {
                            cancelled = true;
                            break;
                        }
                    };
                    let result = match outcome {
                        Ok(out) => {
                            let (text, images) = images.admit(out);
                            ToolResult::ok(call.id.clone(), text).with_images(images)
                        }
                        Err(e) => {
                            chela_log::debug!(tool = %call.name, kind = ?e.kind(), "tool call failed");
                            ToolResult::error(call.id.clone(), e.0)
                        }
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
    let ts = agent.ctx.clock.unix_secs_u64();
    match &end {
        TurnEnd::Done(_) => {
            let usage = usage_record(agent, req, &run, ts);
            keep(history, run.turn_messages(), agent.limits.history_budget, files, ts, usage).await?;
        }
        // When tools already changed things, keep the record of it, closed so it stays well-formed.
        // The sentence the person reads, never a Rust form: the model reads it next turn.
        // A turn that did nothing is dropped: the person just asks again.
        TurnEnd::Failed(e) => {
            if run.fail(&format!("(this turn stopped: {})", agent.provider.tell(e))) {
                let usage = usage_record(agent, req, &run, ts);
                keep(history, run.turn_messages(), agent.limits.history_budget, files, ts, usage).await?;
            }
        }
    }
    Ok(end)
}

/// Heads the client's system message in the prompt: it comes from the program calling the API,
/// which Chela's own prompt outranks.
const CALLER_INSTRUCTIONS: &str = "## The caller's instructions\n\nThe program calling Chela through its API gives these instructions for this conversation:";

/// Pairs the client's tool results in `user` with the calls of the last assistant message of
/// `base`, so the provider is sent a well-formed conversation: a call the client did not answer
/// gets an error result, and a result for a call `base` does not have becomes a text note (the
/// stored conversation may have lost that call, e.g. to a restart in between).
fn answer_open_calls(base: &[Message], user: &mut Message) {
    let open: Vec<String> = match base.last() {
        Some(m) if m.role == chela_proto::chat::Role::Assistant => m.tool_use_ids().map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    let mut fixed = Vec::with_capacity(user.content.len() + open.len());
    for id in &open {
        let answered =
            user.content.iter().any(|b| matches!(b, Block::ToolResult { tool_use_id, .. } if **tool_use_id == **id));
        if !answered {
            fixed.push(Block::tool_result(id.clone(), "The client sent no result for this call.", true));
        }
    }
    let mut notes = Vec::new();
    for b in user.content.drain(..) {
        match b {
            Block::ToolResult { tool_use_id, content, .. } if !open.iter().any(|id| **id == *tool_use_id) => {
                notes.push(Block::text(format!(
                    "(a result for the tool call `{tool_use_id}`, which this conversation does not have: {content})"
                )));
            }
            Block::ToolResult { .. } => fixed.push(b),
            other => notes.push(other),
        }
    }
    fixed.extend(notes);
    user.content = fixed;
}

/// What the finished `run` spent, as a line for the usage log; `None` when no model call was
/// counted (a server that reports no usage).
fn usage_record(agent: &Agent<'_>, req: &TurnRequest, run: &AgentRun, ts: u64) -> Option<UsageLine> {
    let Step::Done(o) = run.next_step() else { return None };
    (o.usage != chela_proto::chat::Usage::default()).then(|| {
        let record = chela_core::usage::Record::new(ts, &req.channel, &req.chat_id, &agent.provider.model, &o.usage);
        (Arc::clone(&agent.ctx.ws), record)
    })
}

/// A usage record and the workspace whose log it goes to.
type UsageLine = (Arc<crate::workspace::Workspace>, chela_core::usage::Record);

/// The session's prompt-cache key: the same for every turn of one conversation, different
/// between conversations, and not the chat id itself (which the provider need not learn).
/// FNV-1a: stable across builds and processes, unlike the std hasher.
pub fn cache_key(channel: &str, chat_id: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in channel.bytes().chain([0]).chain(chat_id.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("chela-{h:016x}")
}

/// The groups this turn's model sees on top of the base visibility: the request's own, and the
/// skill-gated groups the conversation's active skills unlock (`chela_core::skills`).
fn scope_with_skills(agent: &Agent<'_>, registry: &chela_core::cap::Registry, base: &[String]) -> Vec<String> {
    let mut extra = base.to_vec();
    if let Some(session) = &agent.ctx.session {
        let hidden = agent.ctx.cfg.list(chela_core::config::CAPS_HIDDEN);
        for g in chela_core::skills::unlocked_groups(registry, &session.named_groups(), &hidden) {
            if !extra.contains(&g) {
                extra.push(g);
            }
        }
    }
    extra
}

/// Appends a finished turn to the session file (where `files` says: it fsyncs) and then to the
/// history in memory, which keeps only as much as a fresh load would read.
/// A tool's images are kept as notes (`[image: image/png, 1.2 KiB]`): the model saw them in
/// this turn, and no line of the file or of the history carries them for ever after.
/// `ts`: the turn's time, as the session file records it. `usage` goes to the usage log in the
/// same piece of file work; failing to record it is logged, not a failed turn.
async fn keep(
    history: &mut History,
    turn: &[Message],
    budget: usize,
    files: FileWork,
    ts: u64,
    usage: Option<UsageLine>,
) -> anyhow::Result<()> {
    let mut messages = turn.to_vec();
    for m in &mut messages {
        m.tool_images_to_notes();
    }
    let path = history.path.clone();
    // The file work gets the messages and hands them back, so they are copied once.
    let messages = files
        .run("saving the conversation", move || {
            persist(&path, &messages, ts)?;
            if let Some((ws, record)) = usage
                && let Err(e) = crate::usage::append(&ws, &record)
            {
                chela_log::warn!("could not record the turn's usage in {}: {e}", crate::usage::log_path(&ws).display());
            }
            Ok(messages)
        })
        .await?;
    let kept = &mut history.messages;
    kept.extend(messages);
    let bound = usize::try_from(tail_bytes(budget)).unwrap_or(usize::MAX);
    let start = chela_core::history::trim_start(kept, bound, kept.len());
    kept.drain(..start);
    Ok(())
}

fn persist(path: &Path, messages: &[Message], ts: u64) -> anyhow::Result<()> {
    let (mut storage, name) = FileStorage::for_file(path)?;
    session::append_turn(&mut storage, &name, messages, ts)
        .map_err(|e| anyhow::anyhow!("cannot save the conversation to {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_can_run_on_any_worker_thread() {
        // Compiles only while the turn's future is `Send`: a non-Send value held across an
        // await in a turn (a borrow, an `Rc`, a std lock guard) breaks the build here.
        fn is_send<'a>(
            agent: &'a Agent<'a>,
            history: &'a mut History,
            req: &'a mut TurnRequest,
        ) -> impl std::future::Future<Output = anyhow::Result<TurnEnd>> + Send + 'a {
            run_turn(agent, history, System::default(), req, FileWork::Pool)
        }
        let _ = is_send;
    }

    #[tokio::test]
    async fn the_history_kept_between_turns_is_bounded_and_the_file_has_everything() {
        for files in [FileWork::Pool, FileWork::Inline] {
            let dir = tempfile::tempdir().unwrap();
            let mut history = History { path: dir.path().join("s.jsonl"), messages: Vec::new(), summary: None };
            let budget = 1024;
            for i in 0..400 {
                let turn = [Message::user_text(format!("question {i}")), Message::assistant_text("a".repeat(1000))];
                keep(&mut history, &turn, budget, files, 1_800_000_000, None).await.unwrap();
            }
            let kept = chela_core::history::bytes(&history.messages) as u64;
            assert!(kept <= tail_bytes(budget), "{files:?}: {kept} bytes kept in memory");
            assert_eq!(history.messages.last().unwrap().text(), "a".repeat(1000));
            assert!(history.messages[0].text().starts_with("question "), "starts with a whole exchange");
            let saved = session::parse(&std::fs::read_to_string(&history.path).unwrap()).messages;
            assert_eq!(saved.len(), 800, "{files:?}: every turn was appended to the file");
        }
    }

    #[tokio::test]
    async fn file_work_runs_inline_or_on_the_blocking_pool_as_asked() {
        let here = std::thread::current().id();
        let on = |files: FileWork| files.run("a test", || Ok(std::thread::current().id()));
        assert_eq!(on(FileWork::Inline).await.unwrap(), here, "inline: on the owner's own thread");
        assert_ne!(on(FileWork::Pool).await.unwrap(), here, "pool: off the async worker");
        let failed = FileWork::Pool.run("a test", || -> anyhow::Result<()> { panic!("lost") }).await;
        assert!(failed.unwrap_err().to_string().starts_with("a test stopped unexpectedly"));
    }

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
        let history = load_history(&path, 16 * 1024).unwrap().messages;
        assert_eq!(history.last().unwrap().text(), "a".repeat(1000));
        assert_eq!(history[history.len() - 2].text(), format!("question {}", i - 1));
        assert!(history[0].text().starts_with("question "), "starts with a whole exchange");
        let live = std::fs::metadata(&path).unwrap().len();
        assert!(live <= tail_bytes(16 * 1024), "the live file was cut to its recent part: {live}");
        let archived: Vec<_> = std::fs::read_dir(dir.path().join("sessions/archive")).unwrap().flatten().collect();
        assert_eq!(archived.len(), 1);
        assert_eq!(std::fs::read_to_string(archived[0].path()).unwrap(), text, "the archive has everything");
        // The rotated file loads to the same history.
        assert_eq!(load_history(&path, 16 * 1024).unwrap().messages, history);
    }

    #[test]
    fn rotation_keeps_the_summary_at_the_head_of_the_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions").join("cli_local.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let turn = |i: u64| [Message::user_text(format!("question {i}")), Message::assistant_text("a".repeat(1000))];
        let mut text = String::new();
        let mut i = 0;
        while text.len() as u64 <= ROTATE_BYTES {
            text.push_str(&session::encode_turn(&turn(i), i));
            i += 1;
        }
        // The newest turn before it stays live; everything older is folded.
        let summary = Summary { text: "Ada asked many questions.".into(), replaces: 2 * i - 2, keeps: 2, ts: i };
        text.push_str(&session::encode_summary(&summary));
        text.push_str(&session::encode_turn(&turn(i), i));
        std::fs::write(&path, &text).unwrap();

        let history = load_history(&path, 16 * 1024).unwrap();
        assert_eq!(history.summary.as_ref(), Some(&summary));
        assert_eq!(history.messages, [turn(i - 1), turn(i)].concat());
        let archived: Vec<_> = std::fs::read_dir(dir.path().join("sessions/archive")).unwrap().flatten().collect();
        assert_eq!(std::fs::read_to_string(archived[0].path()).unwrap(), text, "the archive has everything");
        let live = std::fs::read_to_string(&path).unwrap();
        assert!(live.starts_with("{\"kind\":\"summary\""), "{live:.100}");
        let again = load_history(&path, 16 * 1024).unwrap();
        assert_eq!(again.messages, history.messages);
        assert_eq!(again.summary.map(|s| s.text), Some(summary.text));
    }
}
