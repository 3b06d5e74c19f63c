use super::*;
use alloc::vec;
use chela_proto::chat::Json;

fn call(id: &str) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![Block::ToolUse { id: id.into(), name: "t".into(), input: Json::empty_object() }],
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

fn convo() -> Vec<Message> {
    vec![
        Message::user_text("one"),
        call("a"),
        result("a", &"x".repeat(200)),
        Message::assistant_text("done one"),
        Message::user_text("two"),
        Message::assistant_text("done two"),
        Message::user_text("three"),
    ]
}

#[test]
fn trimming_drops_whole_exchanges_only() {
    let m = convo();
    let all = bytes(&m);
    assert_eq!(trim_start(&m, all, 6), 0);
    let start = trim_start(&m, all - 1, 6);
    assert_eq!(start, 4, "the first exchange goes whole, with its tool pair");
    assert_eq!(trim_start(&m, 0, 6), 6, "the protected message is kept even over budget");
    assert_eq!(trim_start(&m, 0, 4), 4);
}

#[test]
fn eliding_shrinks_old_results_but_not_the_newest() {
    let mut m = vec![
        Message::user_text("go"),
        call("a"),
        result("a", &"y".repeat(500)),
        call("b"),
        result("b", &"z".repeat(500)),
    ];
    let n = elide_tool_results(&mut m, 0, 700);
    assert_eq!(n, [(2, 0, "y".repeat(500))], "the output taken out comes back to the caller");
    assert!(matches!(&m[2].content[0], Block::ToolResult { content, .. } if content.starts_with("[output removed")));
    assert!(matches!(&m[4].content[0], Block::ToolResult { content, .. } if content.len() == 500));
}

#[test]
fn repair_keeps_good_history() {
    let mut m = convo();
    m.push(Message::assistant_text("done three"));
    let before = m.clone();
    assert_eq!(repair(&mut m), Repaired::default());
    assert_eq!(m, before);
}

#[test]
fn repair_cuts_a_torn_turn() {
    // A crash after the call was written but before its result.
    let mut m = vec![Message::user_text("one"), Message::assistant_text("ok"), Message::user_text("two"), call("a")];
    let r = repair(&mut m);
    assert_eq!(r.broken_tail, 2);
    assert_eq!(m.len(), 2);
    // A result without its call, and a history that starts with a result.
    let mut m =
        vec![result("a", "r"), Message::assistant_text("?"), Message::user_text("hi"), Message::assistant_text("yo")];
    let r = repair(&mut m);
    assert_eq!(r.leading, 2);
    assert_eq!(m.len(), 2);
    let mut m = vec![Message::user_text("hi"), call("a"), result("b", "wrong id"), Message::assistant_text("x")];
    repair(&mut m);
    assert!(m.is_empty());
    // A trailing question with no answer is dropped: its turn did not complete.
    let mut m = vec![Message::user_text("hi"), Message::assistant_text("yo"), Message::user_text("lost")];
    repair(&mut m);
    assert_eq!(m.len(), 2);
}

#[test]
fn a_torn_turn_in_the_middle_costs_only_itself() {
    // A crash tore turn "two" after its call; the next run appended turn "three".
    let mut m = vec![
        Message::user_text("one"),
        Message::assistant_text("ok"),
        Message::user_text("two"),
        call("a"),
        Message::user_text("three"),
        call("b"),
        result("b", "r"),
        Message::assistant_text("done"),
        Message::user_text("four"),
        Message::user_text("five"),
        Message::assistant_text("fine"),
    ];
    let r = repair(&mut m);
    assert_eq!(r, Repaired { leading: 0, broken_tail: 3 });
    let texts: Vec<String> = m.iter().filter(|m| starts_exchange(m)).map(Message::text).collect();
    assert_eq!(texts, ["one", "three", "five"]);
    assert_eq!(m.len(), 8);
}
