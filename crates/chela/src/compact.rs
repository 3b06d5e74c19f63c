//! Compaction on the host: after a turn, fold a long conversation's oldest turns into a
//! summary the model writes (the rules are `chela_core::compaction`'s).
//!
//! The summary is appended to the session file as a line of its own (one fsync'd append); the
//! turns it replaces stay in the file above it, so nothing is deleted. From then on the summary
//! is shown to the model in the system prompt, and those turns are no longer sent or loaded.
//!
//! Compaction is a convenience, never a reason for a turn to fail: when the summary call fails,
//! is cancelled or answers nothing, or the file cannot be written, a warning is logged and the
//! history stays as it was (the oldest turns are left out of requests, as without compaction).

use std::path::Path;

use anyhow::Context;
use chela_core::compaction::{self, Plan, Policy};
use chela_core::config as keys;
use chela_core::session::{self, Summary};
use chela_proto::chat::{Message, ToolChoice};

use crate::storage::FileStorage;
use crate::turn::{Agent, Cancel, History, tail_bytes};

/// `system` with the summary of the conversation's older turns, if there is one.
pub fn system_with_summary(mut system: String, summary: Option<&Summary>) -> String {
    if let Some(s) = summary {
        system.push_str(&compaction::system_note(&s.text));
    }
    system
}

/// Folds `history`'s oldest turns into a summary when it has grown past what the policy of
/// its budget allows and `agent.compaction` is on. Never fails: see the module docs.
pub async fn after_turn(agent: &Agent<'_>, history: &mut History, cancel: &Cancel) {
    if !agent.ctx.cfg.bool(keys::AGENT_COMPACTION) {
        return;
    }
    let policy = Policy::for_budget(agent.limits.history_budget);
    let Some(plan) = compaction::plan(&history.messages, &policy) else {
        return;
    };
    match fold(agent, history, plan, &policy, cancel).await {
        Ok(true) => tracing::info!(
            "{}: folded the {} oldest message(s) into a summary; they stay in the file",
            history.path.display(),
            plan.fold
        ),
        Ok(false) => {
            tracing::info!("the summary of the oldest turns was cancelled; it is asked for after the next turn")
        }
        Err(e) => tracing::warn!(
            "{}: could not fold the oldest turns into a summary ({e:#}); they are left out of what the model sees \
             until the next try, after the next turn",
            history.path.display()
        ),
    }
}

/// Asks for the summary, writes it, and shrinks `history`. `Ok(false)` when cancelled.
async fn fold(
    agent: &Agent<'_>,
    history: &mut History,
    plan: Plan,
    policy: &Policy,
    cancel: &Cancel,
) -> anyhow::Result<bool> {
    let previous = history.summary.as_ref().map(|s| s.text.as_str());
    let messages = compaction::request(&history.messages[..plan.fold], previous, policy);
    let call = chela_core::agent::ModelCall {
        system: compaction::INSTRUCTION,
        messages: &messages,
        tool_choice: ToolChoice::Auto,
    };
    // No tools, and a whole reply rather than a stream: nobody watches the summary arrive.
    let provider = agent.provider.unstreamed();
    let mut quiet = |_: chela_proto::chat::Update<'_>| {};
    let reply = tokio::select! {
        r = provider.complete(&call, &[], &mut quiet) => r,
        () = cancel.cancelled() => return Ok(false),
    };
    let reply = reply.map_err(|e| anyhow::anyhow!("{}", agent.provider.tell(&e)))?;
    let text = compaction::accept(&reply.into_message().text(), policy)?;
    let summary = Summary { text, replaces: plan.fold as u64, keeps: 0, ts: now() };
    let (path, live) = (history.path.clone(), history.messages[plan.fold..].to_vec());
    // The live part's lines, however its text was escaped, and room for lines another
    // process appended meanwhile.
    let max_read = (chela_core::history::bytes(&live) as u64)
        .saturating_mul(8)
        .saturating_add(tail_bytes(agent.limits.history_budget));
    let summary = tokio::task::spawn_blocking(move || write(&path, &live, summary, max_read))
        .await
        .map_err(|e| anyhow::anyhow!("saving the summary stopped unexpectedly: {e}"))??;
    history.messages.drain(..plan.fold);
    history.summary = Some(summary);
    Ok(true)
}

/// Appends `summary`, keeping `live` (the newest messages, at the file's end) live.
fn write(path: &Path, live: &[Message], mut summary: Summary, max_read: u64) -> anyhow::Result<Summary> {
    let (mut storage, name) = FileStorage::for_file(path)?;
    let shown = path.display();
    summary.keeps = session::live_lines(&storage, &name, live, max_read)
        .with_context(|| format!("cannot read {shown}"))?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "the end of {shown} does not hold the conversation kept in memory (was the file changed by another program?)"
            )
        })?;
    session::append_summary(&mut storage, &name, &summary).with_context(|| format!("cannot write to {shown}"))?;
    Ok(summary)
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
