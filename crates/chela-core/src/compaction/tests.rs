use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use chela_proto::chat::{Block, Json, Message, Role};
use proptest::prelude::*;

use super::*;
use crate::history::{self, Repaired};

fn call(id: &str) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![Block::ToolUse { id: id.into(), name: "file_read".into(), input: Json::empty_object() }],
    }
}

fn result(id: &str, body: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![Block::ToolResult {
            tool_use_id: id.into(),
            content: body.into(),
            images: Default::default(),
            is_error: false,
        }],
    }
}

/// Exchange `k`: a question, a tool call with a `size`-byte output, an answer.
fn exchange(k: usize, size: usize) -> Vec<Message> {
    let id = alloc::format!("t{k}");
    vec![
        Message::user_text(alloc::format!("question {k}")),
        call(&id),
        result(&id, &"o".repeat(size)),
        Message::assistant_text(alloc::format!("answer {k}")),
    ]
}

fn chat(sizes: &[usize]) -> Vec<Message> {
    sizes.iter().enumerate().flat_map(|(k, &s)| exchange(k, s)).collect()
}

#[test]
fn nothing_is_folded_while_the_history_is_under_the_trigger() {
    let policy = Policy::for_budget(4096);
    let h = chat(&[500, 500]);
    assert!(history::bytes(&h) <= policy.trigger);
    assert_eq!(plan(&h, &policy), None);
    assert_eq!(plan(&[], &policy), None);
}

#[test]
fn the_oldest_whole_exchanges_are_folded_until_the_rest_fits_half_the_budget() {
    let policy = Policy::for_budget(4096);
    let h = chat(&[1000, 1000, 1000, 200]);
    let p = plan(&h, &policy).expect("over the trigger");
    assert_eq!(p.fold, 8, "two exchanges go, each with its tool call and result");
    assert!(history::starts_exchange(&h[p.fold]));
    assert!(history::bytes(&h[p.fold..]) <= policy.keep);
    assert!(history::bytes(&h[p.fold - 4..]) > policy.keep, "no more is folded than needed");
}

#[test]
fn the_newest_exchange_is_never_folded() {
    let policy = Policy::for_budget(4096);
    // One exchange alone over the budget: there is nothing older to fold.
    assert_eq!(plan(&chat(&[9000]), &policy), None);
    // An old small one and a huge newest one: only the old one goes.
    let h = chat(&[100, 9000]);
    assert_eq!(plan(&h, &policy), Some(Plan { fold: 4 }));
}

#[test]
fn the_request_is_one_user_message_with_the_previous_summary_and_the_transcript() {
    let policy = Policy::for_budget(64 * 1024);
    let folded = chat(&[10]);
    let req = request(&folded, Some("Ada likes tea."), &policy);
    assert_eq!(req.len(), 1);
    assert_eq!(req[0].role, Role::User);
    let text = req[0].text();
    assert!(text.contains("Ada likes tea."), "{text}");
    for needle in ["Person: question 0", "Chela called file_read", "Tool result: oooooooooo", "Chela: answer 0"] {
        assert!(text.contains(needle), "{needle:?} missing from {text}");
    }
    assert!(text.find("Ada likes tea.") < text.find("question 0"), "the summary so far comes first");
}

#[test]
fn a_huge_folded_part_is_sent_bounded_newest_first_with_a_note() {
    let policy = Policy::for_budget(4096);
    let folded: Vec<Message> = (0..200).flat_map(|k| exchange(k, 3000)).collect();
    let text = request(&folded, None, &policy)[0].text();
    assert!(text.len() <= policy.max_request, "{} bytes", text.len());
    assert!(text.contains("answer 199"), "the newest part is kept");
    assert!(!text.contains("question 0\n"), "the oldest part gave way");
    assert!(text.contains("earlier message(s) left out"), "{text}");
    // Tool outputs are clipped to their gist.
    assert!(!text.contains(&"o".repeat(1500)));
}

#[test]
fn the_flush_request_shows_what_is_remembered_then_the_folded_turns_bounded() {
    let policy = Policy::for_budget(4096);
    let text = flush_request(&chat(&[10]), "[m1] Ada likes tea.", &policy)[0].text();
    assert!(text.find("Ada likes tea.") < text.find("Person: question 0"), "{text}");
    assert!(text.contains("Chela: answer 0") && text.ends_with("or call no tool."), "{text}");
    assert!(!flush_request(&chat(&[10]), "  \n", &policy)[0].text().contains("Already remembered"));
    let folded: Vec<Message> = (0..200).flat_map(|k| exchange(k, 3000)).collect();
    let huge = flush_request(&folded, &"r".repeat(100_000), &policy)[0].text();
    assert!(huge.len() <= policy.max_request, "{} bytes", huge.len());
    assert!(huge.contains("answer 199") && huge.contains("earlier message(s) left out"));
}

#[test]
fn an_empty_reply_is_refused_and_a_long_one_cut() {
    let policy = Policy::for_budget(4096);
    assert_eq!(accept("  \n ", &policy), Err(SummaryError::Empty));
    assert_eq!(accept("  Ada likes tea.\n", &policy).unwrap(), "Ada likes tea.");
    let long = accept(&"é".repeat(5000), &policy).unwrap();
    assert!(long.len() <= policy.max_summary && long.contains("cut"), "{}", long.len());
}

#[test]
fn the_system_note_carries_the_summary() {
    let note = system_note("Ada likes tea.");
    assert!(note.starts_with("\n\n# Earlier in this conversation") && note.contains("Ada likes tea."), "{note}");
}

fn any_history() -> impl Strategy<Value = Vec<Message>> {
    proptest::collection::vec((0usize..3, 0usize..2000), 1..12).prop_map(|shape| {
        let mut out = Vec::new();
        for (k, (calls, size)) in shape.into_iter().enumerate() {
            out.push(Message::user_text(alloc::format!("question {k}")));
            for c in 0..calls {
                let id = alloc::format!("t{k}_{c}");
                out.push(call(&id));
                out.push(result(&id, &"r".repeat(size)));
            }
            out.push(Message::assistant_text(String::from("x").repeat(size / 2)));
        }
        out
    })
}

proptest! {
    #[test]
    fn a_fold_splits_between_whole_exchanges_and_keeps_the_newest(h in any_history(), budget in 1024usize..20_000) {
        let policy = Policy::for_budget(budget);
        match plan(&h, &policy) {
            None => {
                let exchanges = h.iter().filter(|m| history::starts_exchange(m)).count();
                prop_assert!(history::bytes(&h) <= policy.trigger || exchanges == 1);
            }
            Some(p) => {
                prop_assert!(p.fold > 0 && p.fold < h.len());
                prop_assert!(history::starts_exchange(&h[p.fold]), "the kept part starts with the person");
                // Both parts are well-formed on their own: no tool call left without its result.
                for part in [&h[..p.fold], &h[p.fold..]] {
                    let mut m = part.to_vec();
                    prop_assert_eq!(history::repair(&mut m), Repaired::default());
                }
                let last = h.iter().rposition(history::starts_exchange).unwrap();
                prop_assert!(p.fold <= last, "the newest exchange stays");
                prop_assert!(history::bytes(&h[p.fold..]) <= policy.keep || p.fold == last);
                let text = request(&h[..p.fold], Some("so far"), &policy)[0].text();
                prop_assert!(text.len() <= policy.max_request);
            }
        }
    }
}
