//! One agent turn as a value you step.
//!
//! # Calling order
//!
//! 1. [`AgentRun::new`] with the history, the person's message and the system prompt.
//! 2. Loop on [`AgentRun::next_step`]:
//!    - [`Step::CallModel`]: send a request built from the step (add the tools you want the
//!      model to see), then call [`AgentRun::handle_reply`] with what came back.
//!    - [`Step::CallTools`]: run every call (in any order, even concurrently), then call
//!      [`AgentRun::handle_tool_results`] with one result per call.
//!    - [`Step::Done`]: the turn is over; persist [`AgentRun::turn_messages`] and show the reply.
//!
//! [`AgentRun::cancel`] may be called at any point before `Done`; it closes the turn so that
//! what is persisted stays well-formed.
//!
//! The run never does IO and never reads a clock. Calling a handler in the wrong state is a
//! driver bug; the handler then returns [`RunError::OutOfOrder`] and changes nothing.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use chela_proto::chat::{Block, Cache, Format, Image, Json, Message, Reply, Role, StopReason, ToolChoice, Usage};

use crate::history;
use crate::text;

/// Bounds on one turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Model calls that may ask for tools in one turn. After that, one last call is made
    /// with tools switched off so the model answers with what it has.
    pub max_iterations: u32,
    /// Tool calls run from one model reply; extra calls are answered with an error.
    pub max_calls_per_step: usize,
    /// Request bytes the conversation may take; older exchanges are dropped to fit.
    pub history_budget: usize,
    /// Largest tool result kept; longer results are cut with a visible note.
    pub max_tool_output: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_iterations: 10, max_calls_per_step: 8, history_budget: 64 * 1024, max_tool_output: 16 * 1024 }
    }
}

/// A tool call the driver should run.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Json,
}

/// What a tool call produced: text, and the images the tool returned beside it. The driver
/// decides which images the model may see (its bounds, whether the model takes images); the
/// run sends what it is given and keeps it for the turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    pub id: String,
    pub content: String,
    pub images: Vec<Image>,
    pub is_error: bool,
}

impl ToolResult {
    pub fn ok(id: impl Into<String>, content: impl Into<String>) -> ToolResult {
        ToolResult { id: id.into(), content: content.into(), images: Vec::new(), is_error: false }
    }

    pub fn error(id: impl Into<String>, content: impl Into<String>) -> ToolResult {
        ToolResult { id: id.into(), content: content.into(), images: Vec::new(), is_error: true }
    }

    /// Adds images to a result.
    #[must_use]
    pub fn with_images(mut self, images: Vec<Image>) -> ToolResult {
        self.images = images;
        self
    }
}

/// The model call the driver should make.
#[derive(Clone, Copy, Debug)]
pub struct ModelCall<'a> {
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tool_choice: ToolChoice,
    /// Where the stable prefix ends, for the provider's prompt cache; the default marks nothing.
    pub cache: Cache<'a>,
    /// The answer's shape a client asked for; the same on every call of the turn.
    pub format: Option<&'a Format>,
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The answer: the text of the last model reply.
    pub text: String,
    pub stop_reason: StopReason,
    /// Model calls that asked for tools.
    pub iterations: u32,
    /// The tool budget ran out and the model was made to answer without tools.
    pub hit_tool_limit: bool,
    pub cancelled: bool,
    /// A model call failed and [`AgentRun::fail`] closed the turn with a note saying why.
    pub aborted: bool,
    /// Token counts summed over every model call of the turn.
    pub usage: Usage,
}

/// What the driver should do next.
#[derive(Debug)]
pub enum Step<'a> {
    CallModel(ModelCall<'a>),
    CallTools(&'a [ToolCall]),
    Done(&'a Outcome),
}

/// A handler was called in a state that does not expect it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunError {
    OutOfOrder,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("agent run stepped out of order")
    }
}

impl core::error::Error for RunError {}

#[derive(Debug)]
enum State {
    NeedModel(ToolChoice),
    NeedTools,
    Done(Outcome),
}

/// Where the turn's context sits in the person's message (see [`AgentRun::set_turn_context`]).
#[derive(Debug, Clone, Copy)]
enum Context {
    /// The first `bytes` of text block `block`.
    Prefix { block: usize, bytes: usize },
    /// A text block of its own, at this index.
    Block(usize),
}

/// One turn of the agent loop. See the module docs for the calling order.
#[derive(Debug)]
pub struct AgentRun {
    system: String,
    /// The window sent to the model: exchanges trimmed away for the budget are dropped (they
    /// are still on disk), so a long turn does not hold what it no longer sends.
    messages: Vec<Message>,
    /// Index of the person's message that started this turn.
    turn_start: usize,
    /// Real outputs of tool results elided for the budget, by (message index counted from
    /// `turn_start`, block index). The window carries the short note while the model is
    /// called; the outputs go back in when the turn is done, so what is saved is what the
    /// tools said. Moved, not copied: eliding never holds an output twice.
    elided: Vec<(usize, usize, String)>,
    limits: Limits,
    /// Bytes at the start of `system` that stay the same from turn to turn.
    system_stable: usize,
    /// The session's prompt-cache key, when the driver gives one.
    cache_key: Option<String>,
    format: Option<Format>,
    /// Where [`AgentRun::set_turn_context`] put the turn's context in the person's message,
    /// to take it out before the turn is kept.
    context: Option<Context>,

    iterations: u32,
    usage: Usage,
    state: State,
    /// Calls handed to the driver in the current `CallTools` step.
    pending: Vec<ToolCall>,
    /// Results for the current step, in the order of the reply's tool uses; `None` = pending.
    results: Vec<(String, Option<ToolResult>)>,
}

impl AgentRun {
    /// Starts a turn. `history` should already be [`history::repair`]ed; it is trimmed to the
    /// budget here.
    pub fn new(history: Vec<Message>, user: Message, system: String, limits: Limits) -> AgentRun {
        let mut messages = history;
        let turn_start = messages.len();
        messages.push(user);
        let mut run = AgentRun {
            system,
            messages,
            turn_start,
            elided: Vec::new(),
            limits,
            system_stable: 0,
            cache_key: None,
            format: None,
            context: None,

            iterations: 0,
            usage: Usage::default(),
            state: State::NeedModel(ToolChoice::Auto),
            pending: Vec::new(),
            results: Vec::new(),
        };
        run.fit_budget();
        run
    }

    /// Tells the prompt cache what stays: the first `system_stable` bytes of the system prompt
    /// (a character boundary, or nothing counts as stable), and the session's cache `key`. Each
    /// [`ModelCall`] then marks them, with the end of the history before this turn.
    pub fn set_cache(&mut self, system_stable: usize, key: Option<String>) {
        self.system_stable = if self.system.is_char_boundary(system_stable) { system_stable } else { 0 };
        self.cache_key = key;
    }

    /// Sends `block` (what changes from turn to turn: the time, the channel, recent notes) at
    /// the head of the person's message in every call of this turn, and keeps it out of what
    /// [`AgentRun::turn_messages`] gives once the turn is done. The system prompt and the
    /// history then stay the same bytes from turn to turn, a prefix a prompt cache can read.
    /// Tool results a client answered with stay first in the message, as the APIs require.
    pub fn set_turn_context(&mut self, block: String) {
        if block.is_empty() || self.context.is_some() {
            return;
        }
        let Some(user) = self.messages.get_mut(self.turn_start) else { return };
        let at = user.content.iter().position(|b| !matches!(b, Block::ToolResult { .. })).unwrap_or(user.content.len());
        // In front of the person's text, one text as before; a block of its own when they sent none.
        if let Some(Block::Text { text }) = user.content.get_mut(at) {
            let head = format!("{block}\n\n");
            self.context = Some(Context::Prefix { block: at, bytes: head.len() });
            text.insert_str(0, &head);
        } else {
            user.content.insert(at, Block::Text { text: block });
            self.context = Some(Context::Block(at));
        }
    }

    /// Asks every [`ModelCall`] of the turn for an answer of this shape.
    pub fn set_format(&mut self, format: Option<Format>) {
        self.format = format;
    }

    /// The next thing to do.
    pub fn next_step(&self) -> Step<'_> {
        match &self.state {
            State::NeedModel(choice) => Step::CallModel(ModelCall {
                system: &self.system,
                messages: &self.messages,
                tool_choice: *choice,
                cache: Cache {
                    mark: self.system_stable > 0 || self.cache_key.is_some(),
                    system_stable: self.system_stable,
                    history_end: self.turn_start.checked_sub(1),
                    key: self.cache_key.as_deref(),
                },
                format: self.format.as_ref(),
            }),
            State::NeedTools => Step::CallTools(&self.pending),
            State::Done(outcome) => Step::Done(outcome),
        }
    }

    /// Feeds the model's reply after a [`Step::CallModel`].
    pub fn handle_reply(&mut self, reply: Reply) -> Result<(), RunError> {
        let State::NeedModel(choice) = self.state else {
            return Err(RunError::OutOfOrder);
        };
        self.usage.add(&reply.usage);
        let stop_reason = reply.stop_reason.clone();
        let arg_errors = reply.arg_errors;
        let mut content: Vec<Block> =
            reply.content.into_iter().filter(|b| !matches!(b, Block::Text { text } if text.is_empty())).collect();
        // Which calls had unparseable arguments, by position: ids may be renamed next.
        let bad_args: Vec<Option<String>> = content
            .iter()
            .map(|b| match b {
                Block::ToolUse { id, .. } => arg_errors.iter().find(|e| e.tool_use_id == *id).map(|e| e.raw.clone()),
                _ => None,
            })
            .collect();
        self.make_ids_unique(&mut content);

        let wants_tools = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
        // The last call of a turn whose tool budget is spent is made with tools off.
        let hit_tool_limit = choice == ToolChoice::None;
        if !wants_tools || hit_tool_limit {
            // Calls the model makes after its budget is spent are not run; drop them so no
            // unanswered tool_use is stored.
            content.retain(|b| !matches!(b, Block::ToolUse { .. }));
            if content.is_empty() {
                let note = if hit_tool_limit {
                    format!("I stopped after {} rounds of tool calls without reaching an answer.", self.iterations)
                } else {
                    String::from("(the model returned an empty reply)")
                };
                content.push(Block::Text { text: note });
            }
            let msg = Message { role: Role::Assistant, content };
            let text = msg.text();
            self.messages.push(msg);
            self.restore_elided();
            self.state = State::Done(Outcome {
                text,
                stop_reason,
                iterations: self.iterations,
                hit_tool_limit,
                cancelled: false,
                aborted: false,
                usage: self.usage,
            });
            return Ok(());
        }

        self.iterations += 1;
        self.pending.clear();
        self.results.clear();
        for (b, bad) in content.iter().zip(&bad_args) {
            let Block::ToolUse { id, name, input } = b else {
                continue;
            };
            let early = if let Some(raw) = bad {
                Some(ToolResult::error(
                    id.clone(),
                    format!("The arguments were not valid JSON, so the tool did not run: {}", text::prefix(raw, 200)),
                ))
            } else if self.pending.len() >= self.limits.max_calls_per_step {
                Some(ToolResult::error(
                    id.clone(),
                    format!(
                        "Not run: at most {} tool calls per step. Call it again in the next step.",
                        self.limits.max_calls_per_step
                    ),
                ))
            } else {
                self.pending.push(ToolCall { id: id.clone(), name: name.clone(), input: input.clone() });
                None
            };
            self.results.push((id.clone(), early));
        }
        self.messages.push(Message { role: Role::Assistant, content });
        if self.pending.is_empty() {
            self.close_tool_step();
        } else {
            self.state = State::NeedTools;
        }
        Ok(())
    }

    /// Feeds the results after a [`Step::CallTools`]: one per call, in any order. A call
    /// without a result is answered with an error.
    pub fn handle_tool_results(&mut self, results: Vec<ToolResult>) -> Result<(), RunError> {
        if !matches!(self.state, State::NeedTools) {
            return Err(RunError::OutOfOrder);
        }
        for r in results {
            self.record_tool_result(r)?;
        }
        self.close_tool_step();
        Ok(())
    }

    /// Records one result during a [`Step::CallTools`] without ending the step: for drivers
    /// that may be cancelled halfway, so the results already in are kept.
    pub fn record_tool_result(&mut self, result: ToolResult) -> Result<(), RunError> {
        if !matches!(self.state, State::NeedTools) {
            return Err(RunError::OutOfOrder);
        }
        if let Some(slot) = self.results.iter_mut().find(|(id, slot)| *id == result.id && slot.is_none()) {
            slot.1 = Some(result);
        }
        Ok(())
    }

    /// Ends the turn during a [`Step::CallTools`] with the calls for which `theirs` holds left
    /// unanswered, for the caller to run and answer in its next message (an API client's own
    /// tools). The other calls of that reply are dropped, not run: the model asked for them
    /// together with the caller's, and asks again once the caller answered. The last message of
    /// [`AgentRun::turn_messages`] is then the assistant's, with the caller's calls; the outcome
    /// stops with [`StopReason::ToolUse`]. Returns the calls handed back (none: nothing changed).
    pub fn hand_back(&mut self, theirs: impl Fn(&str) -> bool) -> Vec<ToolCall> {
        if !matches!(self.state, State::NeedTools) {
            return Vec::new();
        }
        let calls: Vec<ToolCall> = self.pending.iter().filter(|c| theirs(&c.name)).cloned().collect();
        if calls.is_empty() {
            return calls;
        }
        if let Some(last) = self.messages.last_mut() {
            last.content.retain(|b| match b {
                Block::ToolUse { id, .. } => calls.iter().any(|c| c.id == *id),
                _ => true,
            });
        }
        self.pending.clear();
        self.results.clear();
        let text = self.messages.last().map(Message::text).unwrap_or_default();
        self.restore_elided();
        self.state = State::Done(Outcome {
            text,
            stop_reason: StopReason::ToolUse,
            iterations: self.iterations,
            hit_tool_limit: false,
            cancelled: false,
            aborted: false,
            usage: self.usage,
        });
        calls
    }

    /// Ends the turn at the person's request. Pending calls are answered as cancelled, and a
    /// short assistant note closes the exchange, so the history written afterwards is well-formed.
    pub fn cancel(&mut self) {
        self.close("(turn cancelled by the user)", "Cancelled by the user before it finished.", true);
    }

    /// Ends the turn because a model call failed (the provider refused, the network broke, the
    /// answer did not parse): pending calls are answered as not finished and `note`, the
    /// sentence the person reads, closes the exchange, so what is persisted stays well-formed.
    /// The outcome is [`aborted`](Outcome::aborted).
    ///
    /// Returns whether the turn did something before it failed (a tool ran): its record must
    /// then be kept, as the world already changed. A driver may drop a turn that did nothing
    /// (the host does: the person just asks again) or keep the person's message and the note
    /// (the chip does: its console shows the exchange).
    pub fn fail(&mut self, note: &str) -> bool {
        let worked = self.turn_messages().len() > 1;
        self.close(note, "Not finished: the turn was aborted.", false);
        worked
    }

    fn close(&mut self, note: &str, pending_note: &str, cancelled: bool) {
        match self.state {
            State::Done(_) => return,
            State::NeedTools => {
                for (id, slot) in &mut self.results {
                    if slot.is_none() {
                        *slot = Some(ToolResult::error(id.clone(), pending_note));
                    }
                }
                self.append_results();
            }
            State::NeedModel(_) => {}
        }
        self.messages.push(Message::assistant_text(note));
        self.restore_elided();
        self.state = State::Done(Outcome {
            text: String::from(note),
            stop_reason: if cancelled { StopReason::Other(String::from("cancelled")) } else { StopReason::EndTurn },
            iterations: self.iterations,
            hit_tool_limit: false,
            cancelled,
            aborted: !cancelled,
            usage: self.usage,
        });
    }

    /// Tightens the window after the provider said the request is over its context window:
    /// halves the history budget and fits the window to it again, dropping older exchanges
    /// (never the current turn). Returns whether the next request is smaller; when it is not,
    /// asking again would fail the same way. Only valid before a model call.
    pub fn shrink_for_retry(&mut self) -> bool {
        if !matches!(self.state, State::NeedModel(_)) {
            return false;
        }
        let before = history::bytes(self.window());
        self.limits.history_budget /= 2;
        self.fit_budget();
        history::bytes(self.window()) < before
    }

    /// The messages this turn added, starting with the person's: what to persist. Once the
    /// turn is [`Step::Done`] they hold every tool's real output, even those elided from what
    /// was sent.
    pub fn turn_messages(&self) -> &[Message] {
        &self.messages[self.turn_start..]
    }

    /// The messages sent with the next model call.
    pub fn window(&self) -> &[Message] {
        &self.messages
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn close_tool_step(&mut self) {
        for (id, slot) in &mut self.results {
            if slot.is_none() {
                *slot = Some(ToolResult::error(id.clone(), "The tool returned no result."));
            }
        }
        self.append_results();
        let choice = if self.iterations >= self.limits.max_iterations { ToolChoice::None } else { ToolChoice::Auto };
        self.state = State::NeedModel(choice);
        self.fit_budget();
    }

    fn append_results(&mut self) {
        let max = self.limits.max_tool_output;
        let content = self
            .results
            .drain(..)
            .filter_map(|(_, r)| r)
            .map(|r| {
                let content = match text::truncate_visibly(&r.content, max) {
                    alloc::borrow::Cow::Borrowed(_) => r.content,
                    alloc::borrow::Cow::Owned(cut) => cut,
                };
                Block::ToolResult { tool_use_id: r.id.into(), content, images: r.images.into(), is_error: r.is_error }
            })
            .collect();
        self.pending.clear();
        self.messages.push(Message { role: Role::User, content });
    }

    fn fit_budget(&mut self) {
        let budget = self.limits.history_budget;
        let start = history::trim_start(&self.messages, budget, self.turn_start);
        // Trimmed exchanges are freed, not kept: they are on disk already and are never sent again.
        self.messages.drain(..start);
        self.turn_start -= start;
        if history::bytes(&self.messages) > budget {
            let from = self.turn_start;
            for (i, b, output) in history::elide_tool_results(&mut self.messages, from, budget) {
                self.elided.push((i - from, b, output));
            }
        }
    }

    /// Puts the real outputs back where the notes stand and takes the turn's context out of
    /// the person's message, for what is persisted.
    fn restore_elided(&mut self) {
        for (i, b, output) in self.elided.drain(..) {
            if let Some(Block::ToolResult { content, .. }) =
                self.messages.get_mut(self.turn_start + i).and_then(|m| m.content.get_mut(b))
            {
                *content = output;
            }
        }
        let Some(user) = self.messages.get_mut(self.turn_start) else { return };
        match self.context.take() {
            Some(Context::Prefix { block, bytes }) => {
                if let Some(Block::Text { text }) = user.content.get_mut(block) {
                    text.drain(..bytes.min(text.len()));
                }
            }
            Some(Context::Block(at)) if at < user.content.len() => {
                user.content.remove(at);
            }
            _ => {}
        }
    }

    /// Tool-use ids must be unique in the conversation; some servers reuse `call_0`.
    fn make_ids_unique(&self, content: &mut [Block]) {
        let seen = |id: &str, content: &[Block], upto: usize| {
            self.messages.iter().any(|m| m.tool_use_ids().any(|x| x == id))
                || content[..upto].iter().any(|b| matches!(b, Block::ToolUse { id: x, .. } if x == id))
        };
        for i in 0..content.len() {
            let Block::ToolUse { id, .. } = &content[i] else {
                continue;
            };
            if !seen(id, content, i) {
                continue;
            }
            let base = id.clone();
            let mut n = self.messages.len();
            let fresh = loop {
                let candidate = format!("{base}_{n}");
                if !seen(&candidate, content, i) {
                    break candidate;
                }
                n += 1;
            };
            if let Block::ToolUse { id, .. } = &mut content[i] {
                *id = fresh;
            }
        }
    }
}

#[cfg(test)]
mod tests;
