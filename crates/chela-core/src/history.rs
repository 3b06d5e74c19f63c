//! Keeping a conversation well-formed and within its byte budget.
//!
//! Two rules every provider enforces, and that these functions keep:
//! - the conversation starts with something the person said;
//! - every `tool_use` is answered by a `tool_result` in the very next message, and every
//!   `tool_result` answers a `tool_use` just before it.
//!
//! An *exchange* is a message the person typed plus everything up to the next one. Trimming
//! drops whole exchanges from the front, so a tool call and its result are never separated.

use alloc::string::String;
use alloc::vec::Vec;

use chela_proto::chat::{Block, Message, Role};

/// Whether `m` starts an exchange: a user message that is not only tool results.
pub fn starts_exchange(m: &Message) -> bool {
    m.role == Role::User && !m.has_tool_results()
}

/// Approximate request bytes of `messages`.
pub fn bytes(messages: &[Message]) -> usize {
    messages.iter().map(Message::approx_bytes).sum()
}

/// Index of the first message to keep so that `messages[index..]` fits `budget`, dropping
/// whole exchanges from the front and never dropping anything at or after `protect_from`.
pub fn trim_start(messages: &[Message], budget: usize, protect_from: usize) -> usize {
    let mut total = bytes(messages);
    let mut start = 0;
    while total > budget {
        // The next exchange boundary after `start`.
        let Some(next) = messages[start + 1..].iter().position(starts_exchange).map(|i| start + 1 + i) else {
            break;
        };
        if next > protect_from {
            break;
        }
        total -= bytes(&messages[start..next]);
        start = next;
    }
    start
}

/// The note that stands in for an elided tool output.
pub const ELIDED_NOTE: &str = "[output removed to keep the conversation within its size budget]";

/// Replaces the content of the oldest tool results in `messages[from..]` with a short note
/// until the whole fits `budget`. Used when the current exchange alone is over the budget.
/// Returns the outputs it took out, with where they were (message index, block index), so the
/// caller can put them back in what it saves: eliding shapes what is sent, not the record.
pub fn elide_tool_results(messages: &mut [Message], from: usize, budget: usize) -> Vec<(usize, usize, String)> {
    let mut total = bytes(messages);
    let mut elided = Vec::new();
    // The newest result is what the model is about to read; leave it whole.
    let last_with_results = messages.iter().rposition(Message::has_tool_results);
    for (i, m) in messages.iter_mut().enumerate().skip(from) {
        if total <= budget || Some(i) == last_with_results {
            break;
        }
        for (b, block) in m.content.iter_mut().enumerate() {
            if total <= budget {
                break;
            }
            if let Block::ToolResult { content, .. } = block
                && content.len() > ELIDED_NOTE.len()
            {
                total -= content.len() - ELIDED_NOTE.len();
                elided.push((i, b, core::mem::replace(content, String::from(ELIDED_NOTE))));
            }
        }
    }
    elided
}

/// What [`repair`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Messages dropped from the front because the history did not start with the person.
    pub leading: usize,
    /// Messages dropped with the exchanges that were not whole (turns torn by a crash).
    pub broken_tail: usize,
}

/// Makes a loaded history well-formed: drops anything before the first exchange, and every
/// exchange whose tool calls and results do not pair up or that does not end with an answer
/// (a turn torn by a crash). Only that exchange goes: a torn turn followed by later, whole
/// turns (the writer carried on after the crash) leaves those turns in place.
pub fn repair(messages: &mut Vec<Message>) -> Repaired {
    let mut r = Repaired::default();
    let first = messages.iter().position(starts_exchange).unwrap_or(messages.len());
    if first > 0 {
        messages.drain(..first);
        r.leading = first;
    }
    let mut keep: Vec<bool> = Vec::with_capacity(messages.len());
    let mut start = 0;
    while start < messages.len() {
        let end = messages[start + 1..].iter().position(starts_exchange).map_or(messages.len(), |i| start + 1 + i);
        let last = &messages[end - 1];
        let whole = (start..end).all(|i| pair_ok(messages, i))
            && last.role == Role::Assistant
            && last.tool_use_ids().next().is_none();
        keep.extend(core::iter::repeat_n(whole, end - start));
        if !whole {
            r.broken_tail += end - start;
        }
        start = end;
    }
    if r.broken_tail > 0 {
        let mut flags = keep.into_iter();
        messages.retain(|_| flags.next().unwrap_or(false));
    }
    r
}

/// Whether message `i` is consistent with its neighbours.
fn pair_ok(messages: &[Message], i: usize) -> bool {
    let m = &messages[i];
    match m.role {
        Role::Assistant => {
            let ids: Vec<&str> = m.tool_use_ids().collect();
            if ids.is_empty() {
                return true;
            }
            // The answer may be missing only when this is the last message; the end check covers that.
            let Some(next) = messages.get(i + 1) else {
                return true;
            };
            next.role == Role::User && ids.iter().all(|id| answers(next, id))
        }
        Role::User => {
            if !m.has_tool_results() {
                return true;
            }
            let Some(prev) = i.checked_sub(1).map(|p| &messages[p]) else {
                return false;
            };
            prev.role == Role::Assistant
                && m.content.iter().all(|b| match b {
                    Block::ToolResult { tool_use_id, .. } => prev.tool_use_ids().any(|id| id == &**tool_use_id),
                    _ => true,
                })
        }
    }
}

fn answers(m: &Message, id: &str) -> bool {
    m.content.iter().any(|b| matches!(b, Block::ToolResult { tool_use_id, .. } if &**tool_use_id == id))
}

#[cfg(test)]
mod tests;
