//! Folding a long conversation's oldest turns into a summary the model writes.
//!
//! What it is: the rules, without IO. When the history a session keeps passes its budget,
//! the oldest whole exchanges are folded (a tool call never leaves its result behind), the
//! model is asked for a short summary of them (and of the summary before, if any), and the
//! summary then stands at the head of the conversation: it is added to the system prompt,
//! which both wire formats take and which no trimming or [`history::repair`] touches.
//!
//! What it is not: it calls no model and writes no file. The session line that records the
//! summary is [`crate::session::Summary`]; the turns it replaces stay in the file.
//!
//! # Calling order
//!
//! 1. After a turn was saved, [`plan`] with the history and a [`Policy`]: `None` means nothing
//!    to do.
//! 2. Send [`request`] of the folded part (`history[..plan.fold]`) with [`INSTRUCTION`] as the
//!    system prompt and no tools.
//! 3. Feed the reply's text to [`accept`]. On an error, or a failed call, change nothing: the
//!    turns are then left out of requests as before compaction existed.
//! 4. Append the [`crate::session::Summary`] line (its `keeps` from
//!    [`crate::session::live_lines`] of `history[plan.fold..]`), then drop `history[..plan.fold]`
//!    and show the summary with [`system_note`] from the next turn on.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use chela_proto::chat::{Block, Message, Role};

use crate::history;
use crate::text;

/// The system prompt of a summary request.
pub const INSTRUCTION: &str = "You keep the memory of a long conversation between a person and their assistant, \
Chela. The older part of that conversation is about to leave Chela's view and will be replaced by your summary. \
Summarise it so that Chela can carry on as if it still saw it: facts about the person (names, preferences, \
circumstances), decisions and promises, open questions and tasks, and the files, commands and results that matter \
later. Fold the summary so far, if there is one, into the new one. Write plain sentences in the language of the \
conversation, with no preamble and no closing remark.";

/// The bounds of compaction, derived from the history budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// History bytes above which the oldest turns are folded. Below the budget, so the next
    /// turn's message and tool output still fit without anything being left out unsummarised.
    pub trigger: usize,
    /// History bytes the newest exchanges may keep once the older ones are folded.
    pub keep: usize,
    /// Longest summary kept, in bytes; a longer reply is cut with a visible note.
    pub max_summary: usize,
    /// Largest transcript sent to be summarised, in bytes.
    pub max_request: usize,
}

impl Policy {
    /// The policy for a history budget of `budget` request bytes.
    pub fn for_budget(budget: usize) -> Policy {
        Policy {
            trigger: budget / 4 * 3,
            keep: budget / 2,
            max_summary: (budget / 8).clamp(512, 8 * 1024),
            // The budget is what the model takes in one request; a small one still gets room.
            max_request: budget.max(4 * 1024),
        }
    }
}

/// What to fold: the messages `[..fold]` of the history given to [`plan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub fold: usize,
}

/// Whether `history` should be compacted now, and how much of it. Only whole exchanges are
/// folded, oldest first, until the rest fits [`Policy::keep`]; the newest exchange always stays.
pub fn plan(history: &[Message], policy: &Policy) -> Option<Plan> {
    if history::bytes(history) <= policy.trigger {
        return None;
    }
    let last = history.iter().rposition(history::starts_exchange)?;
    let fold = history::trim_start(history, policy.keep, last);
    (fold > 0).then_some(Plan { fold })
}

/// Longest text block, tool input and tool output shown in a transcript: the gist, not the data.
const TEXT_CLIP: usize = 4000;
const INPUT_CLIP: usize = 300;
const OUTPUT_CLIP: usize = 1000;

/// The messages of a summary request for `folded`, after the summary so far (`previous`).
/// One user message holding a transcript, so no tool call or result has to pair up and no
/// tools need to be offered. Bounded by [`Policy::max_request`]: the oldest lines of the
/// transcript give way first, with a note saying how many.
pub fn request(folded: &[Message], previous: Option<&str>, policy: &Policy) -> Vec<Message> {
    let mut head = String::new();
    if let Some(p) = previous {
        head.push_str("The summary so far, of what came before:\n\n");
        head.push_str(text::prefix(p, policy.max_summary));
        head.push_str("\n\n");
    }
    head.push_str("The conversation to summarise:\n\n");
    let words = policy.max_summary / 8;
    let tail = format!("\nWrite the summary now, in fewer than {words} words.");
    alloc::vec![Message::user_text(transcript(folded, head, &tail, policy))]
}

/// The system prompt of the memory flush: the step, before a fold, in which the model may store
/// what the folded turns hold that must outlive them (see [`flush_request`]).
pub const FLUSH_INSTRUCTION: &str = "You look after the long-term memory of Chela, a personal assistant. The older \
part of a conversation between a person and Chela is about to leave Chela's view and be replaced by a short summary. \
Before it does, store with the memory tools what the person said that must be remembered for good and is not in \
memory yet: durable facts about them and their people, their preferences, and decisions or promises made. Store \
each as one short, self-contained fact with tags; correct an outdated remembered fact with memory_update rather than \
storing it again. Store nothing that is passing small talk, already remembered, or only a guess. Nobody reads \
your text: only the tool calls count. If there is nothing to store, call no tool.";

/// The only tools the memory flush may call. One step, with no answer to read back: tools that
/// only look things up would be useless, and anything else has no place in a silent step.
pub const FLUSH_TOOLS: &[&str] = &["memory_store", "memory_update"];

/// The messages of the memory flush for `folded`, the turns about to be folded; `remembered`
/// is what memory holds already (its newest entries), so the model need not store it again.
/// One user message, bounded like [`request`].
pub fn flush_request(folded: &[Message], remembered: &str, policy: &Policy) -> Vec<Message> {
    let mut head = String::new();
    let remembered = remembered.trim();
    if !remembered.is_empty() {
        head.push_str("Already remembered (the newest entries):\n\n");
        head.push_str(text::prefix(remembered, policy.max_summary));
        head.push_str("\n\n");
    }
    head.push_str("The part of the conversation about to be folded:\n\n");
    let tail = "\nStore now what must be remembered from it, with the memory tools, or call no tool.";
    alloc::vec![Message::user_text(transcript(folded, head, tail, policy))]
}

/// `head`, the transcript of `folded` and `tail`, within [`Policy::max_request`] bytes: the
/// oldest lines give way first, with a note saying how many.
fn transcript(folded: &[Message], head: String, tail: &str, policy: &Policy) -> String {
    let room = policy.max_request.saturating_sub(head.len() + tail.len());
    let left_out = |n: usize| format!("[{n} earlier message(s) left out: too long to summarise at once]\n");
    // Room for the note about what was left out, should it be needed: its longest form.
    let room = room.saturating_sub(left_out(folded.len()).len());
    let lines: Vec<String> = folded.iter().map(render).collect();
    let mut used = 0;
    let mut first = lines.len();
    for (i, l) in lines.iter().enumerate().rev() {
        if used + l.len() > room {
            break;
        }
        used += l.len();
        first = i;
    }
    let mut body = head;
    if first > 0 {
        body.push_str(&left_out(first));
    }
    for l in &lines[first..] {
        body.push_str(l);
    }
    body.push_str(tail);
    body
}

/// One message as transcript lines.
fn render(m: &Message) -> String {
    let who = match m.role {
        Role::User => "Person",
        Role::Assistant => "Chela",
    };
    let mut out = String::new();
    for b in &m.content {
        match b {
            Block::Text { text } => {
                out.push_str(&format!("{who}: {}\n", text::truncate_visibly(text, TEXT_CLIP)));
            }
            Block::Image { .. } => out.push_str(&format!("{who}: [an image]\n")),
            Block::ToolUse { name, input, .. } => {
                out.push_str(&format!(
                    "Chela called {name} with {}\n",
                    text::truncate_visibly(input.as_str(), INPUT_CLIP)
                ));
            }
            Block::ToolResult { content, is_error, .. } => {
                let what = if *is_error { "Tool error" } else { "Tool result" };
                out.push_str(&format!("{what}: {}\n", text::truncate_visibly(content, OUTPUT_CLIP)));
            }
        }
    }
    out
}

/// Why a reply cannot be used as a summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SummaryError {
    /// The model answered with no text.
    Empty,
}

impl fmt::Display for SummaryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SummaryError::Empty => f.write_str("the model answered the summary request with no text"),
        }
    }
}

impl core::error::Error for SummaryError {}

/// The summary to keep from the model's reply `text`: trimmed, and cut visibly at
/// [`Policy::max_summary`] bytes.
pub fn accept(text: &str, policy: &Policy) -> Result<String, SummaryError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(SummaryError::Empty);
    }
    Ok(text::truncate_visibly(text, policy.max_summary).into_owned())
}

/// The part of the system prompt that shows `summary`, to append to it.
pub fn system_note(summary: &str) -> String {
    format!(
        "\n\n# Earlier in this conversation\n\nThe oldest turns of this conversation were folded into this summary \
         (the session file still holds them):\n\n{summary}\n"
    )
}

#[cfg(test)]
mod tests;
