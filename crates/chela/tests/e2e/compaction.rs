//! Long chats fold their oldest turns into a summary the model writes (`agent.compaction`):
//! the model sees the summary at the head of later requests, the session file keeps both the
//! summary and the turns it replaced, and a failed summary never fails the person's turn.
//!
//! Every `ws.chat` is a new process, so each turn after the one that compacted also proves
//! that a restart loads the summary from the file.

use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::{Provider, Ws, body, conversation, text_of, tool_names};

/// A budget of 2,000 bytes folds at 1,500 and keeps 1,000: three exchanges of these questions
/// (about 480 bytes each, the third with a tool call) pass it. The memory flush before a fold is
/// off here, so each request is where these tests count it; `a_long_chat_stores_what_matters_before_the_fold`
/// has it on.
const BUDGET: &str = "[memory]\nflush_before_compact = false\n[agent]\nhistory_budget = 2000";
const SUMMARY: &str = "Ada asked two long questions about tea.";

fn question(k: usize) -> String {
    format!("({k}) {}", "q".repeat(400))
}

fn system_of(provider: Provider, body: &Value) -> String {
    match provider {
        // A string, or text blocks once the stable part is marked for the prompt cache.
        Provider::Anthropic => match &body["system"] {
            Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
            other => other.as_str().unwrap_or_default().to_owned(),
        },
        Provider::OpenAi => body["messages"][0]["content"].as_str().unwrap_or_default().to_owned(),
    }
}

/// The first words of each message of request `i`.
fn said(provider: Provider, llm: &FakeLlm, i: usize) -> Vec<String> {
    conversation(provider, &body(llm, i)).iter().map(|m| text_of(m).chars().take(4).collect()).collect()
}

/// Three turns, the third with a tool call, so the history passes 1,500 bytes after it.
fn three_turns(ws: &Ws) {
    for k in 1..=3 {
        ws.chat(&question(k), &[]).expect_ok().stdout_has(&format!("Answer {k}."));
    }
}

fn answers_with_a_tool_call_in_the_third() -> Vec<Step> {
    vec![
        Step::text("Answer 1."),
        Step::text("Answer 2."),
        Step::tool_call("get_current_time", json!({})),
        Step::text("Answer 3."),
    ]
}

fn summary_lines(ws: &Ws) -> Vec<Value> {
    ws.session("local").into_iter().filter(|l| l["kind"] == "summary").collect()
}

#[test]
fn a_long_chat_is_folded_and_the_model_sees_the_summary_first() {
    for provider in Provider::BOTH {
        let mut script = answers_with_a_tool_call_in_the_third();
        script.extend([Step::text(SUMMARY), Step::text("Answer 4.")]);
        let llm = FakeLlm::start(script);
        let ws = Ws::for_llm(provider, &llm, BUDGET);
        three_turns(&ws);
        assert_eq!(llm.requests().len(), 5, "{provider:?}: the third turn was followed by a summary request");

        // The summary request: the fixed instruction, no tools, the two oldest exchanges as a transcript.
        let ask = body(&llm, 4);
        assert!(system_of(provider, &ask).starts_with("You keep the memory of a long conversation"), "{ask:#}");
        assert!(ask.get("tools").is_none(), "{provider:?}: no tools are offered: {ask:#}");
        assert!(ask.get("stream").is_none(), "{provider:?}: a whole reply is asked for: {ask:#}");
        assert_eq!(body(&llm, 3)["stream"], true, "{provider:?}: turns stream as configured");
        let transcript = conversation(provider, &ask);
        assert_eq!(transcript.len(), 1, "{provider:?}");
        let transcript = text_of(&transcript[0]);
        for needle in [&format!("Person: {}", question(1)), "Chela: Answer 1.", &format!("Person: {}", question(2))] {
            assert!(transcript.contains(needle), "{provider:?}: {needle:.20} missing from the transcript");
        }
        assert!(!transcript.contains("(3)"), "{provider:?}: the newest exchange is not folded");

        // The next run (a restart) loads the summary and sends it at the head, then the kept turn whole.
        ws.chat(&question(4), &[]).expect_ok().stdout_has("Answer 4.");
        let next = body(&llm, 5);
        let system = system_of(provider, &next);
        assert!(
            system.contains("# Earlier in this conversation") && system.ends_with(&format!("{SUMMARY}\n")),
            "{system}"
        );
        let said = said(provider, &llm, 5);
        assert_eq!(said.len(), 5, "{provider:?}: {said:?}");
        assert_eq!([&said[0], &said[3], &said[4]], ["(3) ", "Answ", "(4) "], "{provider:?}: {said:?}");

        // The file keeps the folded turns, the summary after the turn it keeps live, then the new turn.
        let lines = ws.session("local");
        let texts: Vec<String> = lines.iter().map(|l| text_of(l).chars().take(4).collect()).collect();
        assert_eq!(lines.len(), 11, "{provider:?}: {texts:?}");
        assert_eq!(texts[..4], ["(1) ", "Answ", "(2) ", "Answ"], "{provider:?}: the folded turns stay");
        assert_eq!(lines[8]["kind"], "summary", "{provider:?}: {texts:?}");
        assert_eq!(lines[8]["text"], SUMMARY);
        assert_eq!(lines[8]["replaces"], 4);
        assert_eq!(lines[8]["keeps"], 4, "the third turn (question, call, result, answer) stays live");
        assert_eq!(texts[9..], ["(4) ", "Answ"]);
    }
}

#[test]
fn with_compaction_off_the_oldest_turns_are_dropped_as_before() {
    for provider in Provider::BOTH {
        let mut script = answers_with_a_tool_call_in_the_third();
        script.push(Step::text("Answer 4."));
        let llm = FakeLlm::start(script);
        let ws = Ws::for_llm(provider, &llm, &format!("{BUDGET}\ncompaction = false"));
        three_turns(&ws);
        ws.chat(&question(4), &[]).expect_ok().stdout_has("Answer 4.");
        assert_eq!(llm.requests().len(), 5, "{provider:?}: no summary was asked for");
        assert!(!system_of(provider, &body(&llm, 4)).contains("Earlier in this conversation"));
        let said = said(provider, &llm, 4);
        assert_eq!(
            said.first().map(String::as_str),
            Some("(2) "),
            "{provider:?}: the first exchange was left out: {said:?}"
        );
        assert!(summary_lines(&ws).is_empty());
        assert_eq!(ws.session("local").len(), 10, "{provider:?}: every turn is in the file");
    }
}

#[test]
fn a_failed_summary_keeps_the_turn_and_is_tried_again_after_the_next() {
    let mut script = answers_with_a_tool_call_in_the_third();
    script.extend([Step::status(500), Step::text("Answer 4."), Step::text(SUMMARY), Step::text("Answer 5.")]);
    let llm = FakeLlm::start(script);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, &format!("max_retries = 0\n{BUDGET}"));
    ws.chat(&question(1), &[]).expect_ok();
    ws.chat(&question(2), &[]).expect_ok();
    let out = ws.chat(&question(3), &[]);
    out.expect_ok().stdout_has("Answer 3.").stderr_has("could not fold the oldest turns into a summary");
    assert!(summary_lines(&ws).is_empty());

    // Without a summary the next turn leaves the oldest exchange out, as before compaction.
    ws.chat(&question(4), &[]).expect_ok().stdout_has("Answer 4.");
    assert_eq!(said(Provider::Anthropic, &llm, 5)[0], "(2) ");
    // The second try folds everything but the newest exchange, the one left out too.
    let transcript = text_of(&conversation(Provider::Anthropic, &body(&llm, 6))[0]);
    assert!(
        transcript.contains("(1) ") && transcript.contains("(3) ") && !transcript.contains("(4) "),
        "{transcript:.200}"
    );
    ws.chat(&question(5), &[]).expect_ok().stdout_has("Answer 5.");
    assert!(system_of(Provider::Anthropic, &body(&llm, 7)).contains(SUMMARY));
    assert_eq!(said(Provider::Anthropic, &llm, 7), ["(4) ", "Answ", "(5) "]);
    assert_eq!(summary_lines(&ws).len(), 1);
}

#[test]
fn a_torn_summary_line_is_skipped_and_the_chat_goes_on() {
    let llm = FakeLlm::start(vec![Step::text("Answer 1."), Step::text("Answer 2.")]);
    let ws = Ws::for_llm(Provider::OpenAi, &llm, BUDGET);
    ws.chat(&question(1), &[]).expect_ok();
    // A run killed while appending its summary leaves part of the line and no newline.
    let path = ws.session_path("local");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"kind\":\"summary\",\"text\":\"Ada asked");
    std::fs::write(&path, &text).unwrap();
    ws.chat(&question(2), &[]).expect_ok().stdout_has("Answer 2.").stderr_has("last line is incomplete");
    assert_eq!(said(Provider::OpenAi, &llm, 1), ["(1) ", "Answ", "(2) "]);
    assert!(!system_of(Provider::OpenAi, &body(&llm, 1)).contains("Earlier in this conversation"));
}

#[test]
fn a_long_chat_stores_what_matters_before_the_fold() {
    const FACT: &str = "Ada takes her tea without sugar.";
    for provider in Provider::BOTH {
        let mut script = answers_with_a_tool_call_in_the_third();
        let store = Step::tool_call("memory_store", json!({"content": FACT, "tags": ["family"]}));
        script.extend([store.with_text("FLUSH-TALK: stored it."), Step::text(SUMMARY)]);
        let llm = FakeLlm::start(script);
        // The flush is on by default.
        let ws = Ws::for_llm(provider, &llm, "[agent]\nhistory_budget = 2000");
        ws.chat(&format!("By the way, my sister Ada never takes sugar in her tea. {}", question(1)), &[]).expect_ok();
        ws.chat(&question(2), &[]).expect_ok();
        let out = ws.chat(&question(3), &[]);
        out.expect_ok().stdout_has("Answer 3.");
        assert!(!out.stdout.contains("FLUSH-TALK"), "{provider:?}: {}", out.stdout);
        assert_eq!(llm.requests().len(), 6, "{provider:?}: the turns, the flush, the summary");

        let flush = body(&llm, 4);
        assert_eq!(tool_names(provider, &flush), ["memory_store", "memory_update"], "{provider:?}");
        assert!(flush.to_string().contains("never takes sugar"), "{provider:?}: the folded turns are shown");
        assert!(system_of(provider, &body(&llm, 5)).starts_with("You keep the memory"), "{provider:?}");

        let recalled = ws.run(&["cap", "call", "memory_recall", r#"{"query":"Ada tea sugar"}"#]);
        recalled.expect_ok().stdout_has(FACT);
        assert_eq!(summary_lines(&ws).len(), 1, "{provider:?}");
        let file = std::fs::read_to_string(ws.session_path("local")).unwrap();
        assert!(!file.contains("FLUSH-TALK"), "{provider:?}: the flush's text is kept nowhere");
    }
}
