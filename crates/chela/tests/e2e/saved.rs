//! What is saved: a session file keeps the tools' real output even when it was elided from
//! what was sent, and a torn last line (a run stopped while saving) is skipped with a warning.

use std::fs;

use chela_testkit::{FakeLlm, Step, ToolCall};
use serde_json::json;

use crate::{Provider, Ws, body, conversation, text_of};

#[test]
fn elided_tool_output_is_sent_short_and_saved_whole() {
    for provider in Provider::BOTH {
        let read = || ToolCall::new("file_read", json!({"path": "notes/big.md"}));
        let llm = FakeLlm::start(vec![
            Step::tool_calls(vec![read()]),
            Step::tool_calls(vec![read()]),
            Step::text("Read it twice."),
        ]);
        // Two reads of a 3,000-byte file cannot both fit a 2,000-byte history.
        let ws = Ws::for_llm(provider, &llm, "\n[agent]\nhistory_budget = 2000");
        let big = format!("start {} end", "x".repeat(3000));
        fs::create_dir_all(ws.path().join("notes")).unwrap();
        fs::write(ws.path().join("notes/big.md"), &big).unwrap();
        ws.chat("Read notes/big.md twice.", &[]).expect_ok();

        let sent = conversation(provider, &body(&llm, 2));
        let sent_text = serde_json::to_string(&sent).unwrap();
        assert!(sent_text.contains("[output removed"), "{provider:?}: the first output was elided when sent");

        let session = ws.session("local");
        let results: Vec<String> = session
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["content"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(results.len(), 2, "{provider:?}: {session:#?}");
        for r in &results {
            assert!(r.contains(&big), "{provider:?}: the session keeps the whole output, not {:.80}", r);
        }
    }
}

#[test]
fn a_torn_last_line_is_skipped_with_a_warning_and_the_next_turn_saves_cleanly() {
    let llm = FakeLlm::start(vec![Step::text("First answer."), Step::text("Second answer.")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    ws.chat("First question.", &[]).expect_ok();
    // A run killed while saving leaves part of a line and no newline.
    let path = ws.session_path("local");
    let mut text = fs::read_to_string(&path).unwrap();
    text.push_str("{\"role\":\"user\",\"content\":\"Lost que");
    fs::write(&path, &text).unwrap();

    let out = ws.chat("Second question.", &[]);
    out.expect_ok().stderr_has("last line is incomplete");
    let said: Vec<String> = conversation(Provider::Anthropic, &body(&llm, 1)).iter().map(text_of).collect();
    assert_eq!(said, ["First question.", "First answer.", "Second question."]);
    // The torn line stays where it was, on a line of its own; the new turn follows whole.
    let lines: Vec<String> = fs::read_to_string(&path).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert_eq!(lines[2], "{\"role\":\"user\",\"content\":\"Lost que");
    assert!(lines[3].contains("Second question.") && lines[4].contains("Second answer."), "{lines:#?}");
    // Once it is no longer last it is an unreadable line in the middle, still skipped and reported.
    let llm2 = FakeLlm::start(vec![Step::text("Third answer.")]);
    let ws2 = Ws::for_llm(Provider::Anthropic, &llm2, "");
    fs::create_dir_all(ws2.path().join("sessions")).unwrap();
    fs::copy(&path, ws2.session_path("local")).unwrap();
    ws2.chat("Third question.", &[]).expect_ok().stderr_has("skipped 1 unreadable line");
    let said: Vec<String> = conversation(Provider::Anthropic, &body(&llm2, 0)).iter().map(text_of).collect();
    assert_eq!(said, ["First question.", "First answer.", "Second question.", "Second answer.", "Third question."]);
}
