//! The memory flush: before compaction folds a conversation's oldest turns into a summary, the
//! model gets one silent step to store what those turns hold that must outlive them (durable
//! facts, preferences, decisions), so a summary's brevity never loses what the person said.
//!
//! The step is bounded every way the model could stretch it: one model call and no second one
//! (the results of the calls are not read back), only the memory tools that write
//! ([`FLUSH_TOOLS`]), at most `agent.max_tool_calls` of them, all within `llm.deadline_secs`.
//! A call to any other tool is refused unrun: the model is untrusted, and a silent step has no
//! one watching it. Its text goes nowhere: not to the channel, not to the history, not to the
//! log. Like compaction it never fails a turn: an error is logged and the fold goes ahead.

use std::time::Duration;

use chela_core::cap::{Caller, Scope};
use chela_core::compaction::{self, FLUSH_INSTRUCTION, FLUSH_TOOLS, Policy};
use chela_core::config as keys;
use chela_proto::chat::{Block, Message};

use crate::turn::{Agent, Cancel};

/// What a flush did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flushed {
    /// Switched off (`memory.flush_before_compact`), or no memory tool to call.
    Skipped,
    /// The step ran: the calls run, and those refused (another tool, or past the bound).
    Ran {
        run: usize,
        refused: usize,
    },
    Cancelled,
}

/// Gives the model its one step over `folded`, the turns about to be folded. `Err` when the
/// model call failed or the step ran out of time; the caller folds anyway.
pub async fn before_fold(
    agent: &Agent<'_>,
    folded: &[Message],
    policy: &Policy,
    cancel: &Cancel,
) -> anyhow::Result<Flushed> {
    let cfg = &agent.ctx.cfg;
    if !cfg.bool(keys::MEMORY_FLUSH_BEFORE_COMPACT) {
        return Ok(Flushed::Skipped);
    }
    let registry = agent.toolbox.registry();
    let tools: Vec<_> =
        registry.tools_for(Scope::default()).into_iter().filter(|t| FLUSH_TOOLS.contains(&t.name)).collect();
    if tools.is_empty() {
        return Ok(Flushed::Skipped);
    }
    let budget = Duration::from_secs(u64::try_from(cfg.int(keys::LLM_DEADLINE_SECS)).unwrap_or(600));
    let step = async {
        let ws = std::sync::Arc::clone(&agent.ctx.ws);
        let max = cfg.usize(keys::PROMPT_ENTRIES_BYTES);
        // What memory holds already, so the model does not store it again: read from the
        // entries file's end, bounded like the prompt's share of it.
        let remembered = crate::tasks::blocking(move || crate::memory::recent_entries(&ws, max))
            .await
            .map_err(|e| anyhow::anyhow!("reading the remembered entries stopped unexpectedly: {e}"))?;
        let messages = compaction::flush_request(folded, &remembered, policy);
        let Some(reply) = super::quiet_call(agent, FLUSH_INSTRUCTION, &messages, &tools, cancel).await? else {
            return Ok(Flushed::Cancelled);
        };
        run_calls(agent, &reply.content, cancel).await
    };
    tokio::time::timeout(budget, step)
        .await
        .map_err(|_| anyhow::anyhow!("the memory flush took longer than llm.deadline_secs ({}s)", budget.as_secs()))?
}

/// Runs the reply's calls to the flush's tools, in order, up to the per-step bound; refuses
/// the rest. The reply's text is dropped here, unread.
async fn run_calls(agent: &Agent<'_>, content: &[Block], cancel: &Cancel) -> anyhow::Result<Flushed> {
    let max = agent.limits.max_calls_per_step;
    let (mut run, mut refused) = (0, 0);
    for (name, input) in content.iter().filter_map(|b| match b {
        Block::ToolUse { name, input, .. } => Some((name, input)),
        _ => None,
    }) {
        if !FLUSH_TOOLS.contains(&name.as_str()) || run >= max {
            refused += 1;
            continue;
        }
        let outcome = tokio::select! {
            r = agent.toolbox.call_output(&agent.ctx, name, input.as_str(), Caller::Model, Scope::default()) => r,
            () = cancel.cancelled() => return Ok(Flushed::Cancelled),
        };
        if let Err(e) = outcome {
            chela_log::debug!("a memory flush call failed: {}", e.0);
        }
        run += 1;
    }
    if refused > 0 {
        // Once, and without the names: they are the model's text.
        chela_log::warn!(
            "the memory flush asked for {refused} call(s) it may not make (another tool than {}, or more than {max}); \
             refused",
            FLUSH_TOOLS.join(" / ")
        );
    }
    Ok(Flushed::Ran { run, refused })
}

#[cfg(all(test, feature = "memory"))]
#[path = "flush_tests.rs"]
mod tests;
