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
//!
//! Before the summary is asked for, the model may store what the folded turns hold that must be
//! remembered ([`flush`], `memory.flush_before_compact`).

use std::path::Path;

use anyhow::Context;
use chela_core::agent::ModelCall;
use chela_core::compaction::{self, Plan, Policy};
use chela_core::config as keys;
use chela_core::session::{self, Summary};
use chela_proto::chat::{Message, Reply, ToolChoice, ToolSpec};

use crate::storage::FileStorage;
use crate::turn::{Agent, Cancel, History, tail_bytes};

pub mod flush;

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
    // Before the turns leave the model's view, what must outlive them goes to memory.
    match flush::before_fold(agent, &history.messages[..plan.fold], &policy, cancel).await {
        Ok(flush::Flushed::Cancelled) => {
            chela_log::info!("the memory flush before a summary was cancelled; both are tried after the next turn");
            return;
        }
        Ok(done) => chela_log::debug!("memory flush before the summary: {done:?}"),
        Err(e) => {
            chela_log::warn!("the memory flush before the summary failed ({e:#}); the summary is asked for anyway")
        }
    }
    match fold(agent, history, plan, &policy, cancel).await {
        Ok(true) => chela_log::info!(
            "{}: folded the {} oldest message(s) into a summary; they stay in the file",
            history.path.display(),
            plan.fold
        ),
        Ok(false) => {
            chela_log::info!("the summary of the oldest turns was cancelled; it is asked for after the next turn")
        }
        Err(e) => chela_log::warn!(
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
    // No tools: the summary is text.
    let Some(reply) = quiet_call(agent, compaction::INSTRUCTION, &messages, &[], cancel).await? else {
        return Ok(false);
    };
    let text = compaction::accept(&reply.into_message().text(), policy)?;
    let summary = Summary { text, replaces: plan.fold as u64, keeps: 0, ts: agent.ctx.clock.unix_secs_u64() };
    let (path, live) = (history.path.clone(), history.messages[plan.fold..].to_vec());
    // The live part's lines, however its text was escaped, and room for lines another
    // process appended meanwhile.
    let max_read = (chela_core::history::bytes(&live) as u64)
        .saturating_mul(8)
        .saturating_add(tail_bytes(agent.limits.history_budget));
    let summary = crate::tasks::blocking(move || write(&path, &live, summary, max_read))
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

/// One model call that nobody watches arrive: a whole reply rather than a stream. `Ok(None)` when
/// the turn is cancelled first; a provider's failure reads as the provider tells it.
async fn quiet_call(
    agent: &Agent<'_>,
    system: &str,
    messages: &[Message],
    tools: &[ToolSpec<'_>],
    cancel: &Cancel,
) -> anyhow::Result<Option<Reply>> {
    let call = ModelCall { system, messages, tool_choice: ToolChoice::Auto, cache: Default::default(), format: None };
    let provider = agent.provider.unstreamed();
    let mut quiet = |_: chela_proto::chat::Update<'_>| {};
    let reply = tokio::select! {
        r = provider.complete(&call, tools, &mut quiet) => r,
        () = cancel.cancelled() => return Ok(None),
    };
    reply.map(Some).map_err(|e| anyhow::anyhow!("{}", agent.provider.tell(&e)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chela_testkit::{FakeLlm, Step};

    use super::*;
    use crate::app::App;
    use crate::turn::load_history;
    use crate::workspace::Workspace;

    struct Setup {
        _dir: tempfile::TempDir,
        llm: FakeLlm,
        app: Arc<App>,
        path: std::path::PathBuf,
    }

    /// An app on the fake with a 2,000-byte budget (folding at 1,500), and a session path.
    fn setup(script: Vec<Step>) -> Setup {
        let llm = FakeLlm::start(script);
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
        ws.ensure().unwrap();
        let url = llm.anthropic_base_url();
        for (k, v) in [
            ("llm.base_url", url.as_str()),
            ("llm.api_key", "test-key"),
            ("llm.max_retries", "0"),
            ("agent.history_budget", "2000"),
            // These tests are about the fold alone; the flush before it has its own.
            ("memory.flush_before_compact", "false"),
        ] {
            crate::config::set_override(&ws, k, v).unwrap();
        }
        let path = ws.session_path("test", "c");
        Setup { _dir: dir, llm, app: Arc::new(App::load(ws).unwrap()), path }
    }

    /// Three exchanges of about 560 bytes: past the 1,500 that folds.
    fn three_exchanges() -> Vec<Message> {
        (0..3)
            .flat_map(|k| [Message::user_text(format!("({k}) {}", "q".repeat(500))), Message::assistant_text("ok")])
            .collect()
    }

    fn history(s: &Setup, messages: Vec<Message>) -> History {
        std::fs::write(&s.path, session::encode_turn(&messages, 1)).unwrap();
        History { path: s.path.clone(), messages, summary: None }
    }

    #[tokio::test]
    async fn the_summary_is_appended_after_the_live_turns_and_the_history_shrinks() {
        let s = setup(vec![Step::text("  Three questions about q.  ")]);
        let mut h = history(&s, three_exchanges());
        let before = std::fs::read_to_string(&s.path).unwrap();
        after_turn(&s.app.agent(), &mut h, &Cancel::default()).await;
        assert_eq!(s.llm.requests().len(), 1);
        assert_eq!(h.messages, three_exchanges()[4..], "the newest exchange is what stays in memory");
        let summary = h.summary.clone().expect("a summary");
        assert_eq!((summary.text.as_str(), summary.replaces, summary.keeps), ("Three questions about q.", 4, 2));
        let after = std::fs::read_to_string(&s.path).unwrap();
        assert!(after.starts_with(&before), "nothing written before is changed");
        assert_eq!(after[before.len()..], session::encode_summary(&summary));
        // A fresh load (a restart) gives the same history and summary.
        let loaded = load_history(&s.path, 2000).unwrap();
        assert_eq!((loaded.messages, loaded.summary), (h.messages, Some(summary)));
    }

    #[tokio::test]
    async fn a_file_that_no_longer_ends_with_the_conversation_is_left_alone() {
        let s = setup(vec![Step::text("A summary.")]);
        let mut h = history(&s, three_exchanges());
        // Another program started the file over meanwhile.
        let other = session::encode_turn(&[Message::user_text("hi"), Message::assistant_text("yo")], 2);
        std::fs::write(&s.path, &other).unwrap();
        after_turn(&s.app.agent(), &mut h, &Cancel::default()).await;
        assert_eq!(s.llm.requests().len(), 1, "the summary was asked for");
        assert_eq!(std::fs::read_to_string(&s.path).unwrap(), other, "but not written");
        assert_eq!((h.messages, h.summary), (three_exchanges(), None), "and the history is as it was");
    }

    #[tokio::test]
    async fn an_empty_summary_or_a_cancel_changes_nothing() {
        let s = setup(vec![Step::text("   ")]);
        let mut h = history(&s, three_exchanges());
        let before = std::fs::read_to_string(&s.path).unwrap();
        after_turn(&s.app.agent(), &mut h, &Cancel::default()).await;
        let cancel = Cancel::default();
        cancel.cancel();
        after_turn(&s.app.agent(), &mut h, &cancel).await;
        assert_eq!(std::fs::read_to_string(&s.path).unwrap(), before);
        assert_eq!((h.messages, h.summary), (three_exchanges(), None));
    }

    #[test]
    fn the_summary_goes_after_the_system_prompt() {
        let s = Summary { text: "Ada likes tea.".into(), ..Summary::default() };
        let system = system_with_summary("You are Chela.".into(), Some(&s));
        assert!(
            system.starts_with("You are Chela.\n\n# Earlier in this conversation") && system.contains("Ada likes tea.")
        );
        assert_eq!(system_with_summary("You are Chela.".into(), None), "You are Chela.");
    }
}
