//! The memory flush through the session owner, against the scripted fake LLM over 127.0.0.1
//! in both wire formats, with real files.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela_core::agent::{ToolCall, ToolResult};
use chela_core::cap::{Caller, Scope};
use chela_proto::chat::Message;
use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::app::App;
use crate::fake_app::{self, FakeApp, Wire};
use crate::session::{HubLimits, SessionHub};
use crate::turn::{Cancel, Observer, TurnEnd, TurnRequest};

/// What the channel was shown: every piece of streamed text.
#[derive(Clone, Default)]
struct Shown(Arc<Mutex<String>>);

impl Observer for Shown {
    fn text(&mut self, text: &str) {
        self.0.lock().unwrap().push_str(text);
    }
    fn reply_done(&mut self, _: bool) {}
    fn tool_started(&mut self, _: &ToolCall) {}
    fn tool_finished(&mut self, _: &ToolCall, _: &ToolResult, _: Duration) {}
}

struct Setup {
    _dir: tempfile::TempDir,
    llm: FakeLlm,
    app: Arc<App>,
    hub: SessionHub,
    shown: Shown,
}

/// A 2,000-byte history budget: the third of [`turns`]'s exchanges passes the 1,500 that folds.
fn setup(wire: Wire, script: Vec<Step>, overrides: &[(&str, &str)]) -> Setup {
    let settings: Vec<(&str, &str)> =
        [("agent.history_budget", "2000")].into_iter().chain(overrides.iter().copied()).collect();
    let FakeApp { dir, llm, app } = fake_app::start(wire, script, &settings);
    let hub = SessionHub::new(app.clone(), HubLimits::from_config(&app.base.cfg));
    Setup { _dir: dir, llm, app, hub, shown: Shown::default() }
}

const FACT: &str = "By the way, my sister Ada is allergic to peanuts.";

/// The person's messages: the fact first, then long questions.
fn said(k: usize) -> String {
    let lead = if k == 1 { FACT } else { "" };
    format!("({k}) {lead} {}", "q".repeat(500))
}

/// Three turns answered "Answer k."; after the third, the first two exchanges are folded.
async fn turns(s: &Setup, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for k in 1..=n {
        let req = TurnRequest {
            channel: "test".into(),
            chat_id: "c".into(),
            user: Message::user_text(said(k)),
            scope: Vec::new(),
            caller: Caller::Manual,
            depth: 0,
            cancel: Cancel::default(),
            observer: Box::new(s.shown.clone()),
            client: None,
        };
        let end = tokio::time::timeout(Duration::from_secs(20), s.hub.submit(req).unwrap().finish())
            .await
            .expect("the turn did not finish in time");
        match end.unwrap() {
            TurnEnd::Done(o) => out.push(o.text),
            TurnEnd::Failed(e) => panic!("turn {k} failed: {e}"),
        }
    }
    out
}

fn answers() -> Vec<Step> {
    (1..=3).map(|k| Step::text(format!("Answer {k}."))).collect()
}

fn body(s: &Setup, i: usize) -> Value {
    s.llm.requests()[i].json.clone().unwrap()
}

fn tool_names(wire: Wire, body: &Value) -> Vec<String> {
    let name = |t: &Value| match wire {
        Wire::Anthropic => t["name"].as_str().map(str::to_owned),
        Wire::OpenAi => t["function"]["name"].as_str().map(str::to_owned),
    };
    body["tools"].as_array().into_iter().flatten().filter_map(name).collect()
}

fn entries(s: &Setup) -> String {
    std::fs::read_to_string(crate::memory::entries_path(&s.app.base.ws)).unwrap_or_default()
}

fn session_file(s: &Setup) -> String {
    std::fs::read_to_string(s.app.base.ws.session_path("test", "c")).unwrap()
}

const STORED: &str = "The person's sister Ada is allergic to peanuts.";
const FLUSH_TEXT: &str = "FLUSH-TALK: I stored the allergy.";

#[tokio::test]
async fn a_fact_told_early_survives_compaction_as_a_memory_entry_and_the_flush_text_reaches_no_one() {
    for wire in Wire::BOTH {
        let mut script = answers();
        script.push(
            Step::tool_call("memory_store", json!({"content": STORED, "tags": ["family"]})).with_text(FLUSH_TEXT),
        );
        script.extend([Step::text("Ada's allergy and two questions."), Step::text("Answer 4.")]);
        let s = setup(wire, script, &[]);
        assert_eq!(turns(&s, 4).await, ["Answer 1.", "Answer 2.", "Answer 3.", "Answer 4."], "{wire:?}");
        assert_eq!(s.llm.requests().len(), 6, "{wire:?}: three turns, the flush, the summary, a turn");

        // The flush: its own instruction, the memory tools that write and nothing else, the
        // folded turns (with the fact) as a transcript, and a whole reply rather than a stream.
        let flush = body(&s, 3);
        let text = flush.to_string();
        assert!(text.contains("long-term memory of Chela") && text.contains(FACT), "{wire:?}: {text:.400}");
        assert_eq!(tool_names(wire, &flush), ["memory_store", "memory_update"], "{wire:?}");
        assert!(flush.get("stream").is_none(), "{wire:?}");
        assert!(!text.contains("(3)"), "{wire:?}: the newest exchange is not folded, so not flushed");
        // The summary came after it, and the fold happened.
        assert!(body(&s, 4).to_string().contains("You keep the memory of a long conversation"), "{wire:?}");
        assert!(session_file(&s).contains("\"kind\":\"summary\""), "{wire:?}");

        // The fact outlived the fold, as an entry memory_recall finds.
        assert!(entries(&s).contains(STORED), "{wire:?}: {}", entries(&s));
        let (ctx, query) = (s.app.agent().ctx, r#"{"query":"Ada peanuts"}"#);
        let recalled =
            s.app.base.tools.toolbox.call(&ctx, "memory_recall", query, Caller::Manual, Scope::default()).await;
        assert!(recalled.unwrap().contains(STORED), "{wire:?}");

        // The flush's text went nowhere: not to the channel, the file, or a later request.
        let shown = s.shown.0.lock().unwrap().clone();
        assert!(shown.contains("Answer 3.") && shown.contains("Answer 4."), "{wire:?}: {shown}");
        assert!(!shown.contains("FLUSH-TALK"), "{wire:?}: {shown}");
        assert!(!session_file(&s).contains("FLUSH-TALK"), "{wire:?}");
        assert!(!body(&s, 5).to_string().contains("FLUSH-TALK"), "{wire:?}");
    }
}

#[tokio::test]
async fn the_flush_may_only_store_and_at_most_max_tool_calls_times() {
    for wire in Wire::BOTH {
        let mut script = answers();
        let store = |k: usize| {
            chela_testkit::ToolCall::new(
                "memory_store",
                json!({"content": format!("fact {k}: {}", ["tea", "kiwi", "oboe"][k])}),
            )
        };
        script.push(Step::tool_calls([
            chela_testkit::ToolCall::new("file_write", json!({"path": "planted.md", "content": "by the flush"})),
            store(0),
            chela_testkit::ToolCall::new("memory_forget", json!({"id": "m1"})),
            store(1),
            store(2),
        ]));
        script.push(Step::text("A summary."));
        let s = setup(wire, script, &[("agent.max_tool_calls", "2")]);
        turns(&s, 3).await;
        let ws = s.app.base.ws.root();
        assert!(!ws.join("planted.md").exists(), "{wire:?}: a file tool is refused in the flush");
        let stored = entries(&s);
        assert!(stored.contains("fact 0: tea") && stored.contains("fact 1: kiwi"), "{wire:?}: {stored}");
        assert!(!stored.contains("fact 2"), "{wire:?}: past agent.max_tool_calls, calls are refused: {stored}");
        assert_eq!(s.llm.requests().len(), 5, "{wire:?}: one step: the calls' results are not sent back");
        assert!(session_file(&s).contains("A summary."), "{wire:?}");
    }
}

#[tokio::test]
async fn a_failing_flush_neither_blocks_the_fold_nor_the_turn() {
    for wire in Wire::BOTH {
        for failure in [Step::status(500), Step::malformed()] {
            let mut script = answers();
            script.extend([failure, Step::text("Still folded.")]);
            let s = setup(wire, script, &[]);
            assert_eq!(turns(&s, 3).await[2], "Answer 3.", "{wire:?}");
            assert_eq!(s.llm.requests().len(), 5, "{wire:?}");
            assert!(session_file(&s).contains("Still folded."), "{wire:?}: the summary was written");
            assert_eq!(entries(&s), "", "{wire:?}");
        }
    }
}

#[tokio::test]
async fn switched_off_no_flush_is_asked_for() {
    let mut script = answers();
    script.push(Step::text("Only the summary."));
    let s = setup(Wire::Anthropic, script, &[("memory.flush_before_compact", "false")]);
    turns(&s, 3).await;
    assert_eq!(s.llm.requests().len(), 4);
    assert!(body(&s, 3).to_string().contains("You keep the memory of a long conversation"));
    assert!(session_file(&s).contains("Only the summary."));
}

#[tokio::test]
async fn with_the_memory_tools_hidden_no_flush_is_asked_for() {
    let mut script = answers();
    script.push(Step::text("Only the summary."));
    let s = setup(Wire::OpenAi, script, &[("caps.hidden", "memory")]);
    turns(&s, 3).await;
    assert_eq!(s.llm.requests().len(), 4);
    assert!(session_file(&s).contains("Only the summary."));
}

#[tokio::test]
async fn a_cancelled_turn_stores_and_folds_nothing() {
    let script = vec![Step::tool_call("memory_store", json!({"content": STORED})), Step::text("A summary.")];
    let s = setup(Wire::Anthropic, script, &[]);
    let path = s.app.base.ws.session_path("test", "c");
    let messages: Vec<Message> =
        (1..=3).flat_map(|k| [Message::user_text(said(k)), Message::assistant_text("ok")]).collect();
    std::fs::write(&path, chela_core::session::encode_turn(&messages, 1)).unwrap();
    let mut history = crate::turn::History { path: path.clone(), messages: messages.clone(), summary: None };
    let cancel = Cancel::default();
    cancel.cancel();
    crate::compact::after_turn(&s.app.agent(), &mut history, &cancel).await;
    assert_eq!((history.messages, history.summary), (messages.clone(), None));
    assert_eq!(entries(&s), "");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), chela_core::session::encode_turn(&messages, 1));
}
