use super::*;
use alloc::string::ToString;
use alloc::vec;
use chela_proto::chat::ArgError;
use proptest::prelude::*;

fn text_reply(t: &str) -> Reply {
    Reply {
        content: vec![Block::text(t)],
        stop_reason: StopReason::EndTurn,
        usage: Usage { input_tokens: 10, output_tokens: 2 },
        arg_errors: vec![],
    }
}

fn tool_reply(calls: &[(&str, &str)]) -> Reply {
    Reply {
        content: calls
            .iter()
            .map(|(id, name)| Block::ToolUse {
                id: id.to_string(),
                name: name.to_string(),
                input: Json::empty_object(),
            })
            .collect(),
        stop_reason: StopReason::ToolUse,
        usage: Usage { input_tokens: 5, output_tokens: 1 },
        arg_errors: vec![],
    }
}

fn run_with(limits: Limits) -> AgentRun {
    AgentRun::new(vec![], Message::user_text("hi"), "sys".into(), limits)
}

fn expect_model(run: &AgentRun) -> ToolChoice {
    match run.next_step() {
        Step::CallModel(c) => c.tool_choice,
        other => panic!("expected a model call, got {other:?}"),
    }
}

fn expect_tools(run: &AgentRun) -> Vec<ToolCall> {
    match run.next_step() {
        Step::CallTools(calls) => calls.to_vec(),
        other => panic!("expected tool calls, got {other:?}"),
    }
}

fn expect_done(run: &AgentRun) -> Outcome {
    match run.next_step() {
        Step::Done(o) => o.clone(),
        other => panic!("expected done, got {other:?}"),
    }
}

fn well_formed(messages: &[Message]) -> bool {
    let mut m = messages.to_vec();
    history::repair(&mut m) == history::Repaired::default() && m.len() == messages.len()
}

#[test]
fn a_plain_answer_is_one_model_call() {
    let mut run = run_with(Limits::default());
    match run.next_step() {
        Step::CallModel(c) => {
            assert_eq!(c.system, "sys");
            assert_eq!(c.messages, &[Message::user_text("hi")]);
            assert_eq!(c.tool_choice, ToolChoice::Auto);
        }
        other => panic!("{other:?}"),
    }
    run.handle_reply(text_reply("hello")).unwrap();
    let o = expect_done(&run);
    assert_eq!(o.text, "hello");
    assert_eq!(o.iterations, 0);
    assert_eq!(o.usage, Usage { input_tokens: 10, output_tokens: 2 });
    assert_eq!(run.turn_messages(), &[Message::user_text("hi"), Message::assistant_text("hello")]);
}

#[test]
fn two_tool_iterations_then_an_answer() {
    let mut run = run_with(Limits::default());
    run.handle_reply(tool_reply(&[("a", "get_current_time")])).unwrap();
    let calls = expect_tools(&run);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "get_current_time");
    run.handle_tool_results(vec![ToolResult::ok("a", "12:00")]).unwrap();
    expect_model(&run);
    run.handle_reply(tool_reply(&[("b", "x"), ("c", "y")])).unwrap();
    assert_eq!(expect_tools(&run).len(), 2);
    // Results may come back in any order; they are stored in call order.
    run.handle_tool_results(vec![ToolResult::ok("c", "C"), ToolResult::error("b", "B failed")]).unwrap();
    run.handle_reply(text_reply("It is noon.")).unwrap();
    let o = expect_done(&run);
    assert_eq!(o.iterations, 2);
    assert_eq!(o.usage.input_tokens, 20);
    let msgs = run.turn_messages();
    assert_eq!(msgs.len(), 6);
    assert_eq!(
        msgs[4].content,
        vec![
            Block::ToolResult { tool_use_id: "b".into(), content: "B failed".into(), is_error: true },
            Block::ToolResult { tool_use_id: "c".into(), content: "C".into(), is_error: false },
        ]
    );
    assert!(well_formed(msgs));
}

#[test]
fn the_tool_budget_ends_with_a_call_without_tools() {
    let mut run = run_with(Limits { max_iterations: 2, ..Limits::default() });
    for i in 0..2 {
        assert_eq!(expect_model(&run), ToolChoice::Auto);
        let id = alloc::format!("t{i}");
        run.handle_reply(tool_reply(&[(&id, "loop")])).unwrap();
        run.handle_tool_results(vec![ToolResult::ok(id, "again")]).unwrap();
    }
    assert_eq!(expect_model(&run), ToolChoice::None);
    // A model that ignores tool_choice still cannot make the turn go on.
    run.handle_reply(tool_reply(&[("t9", "loop")])).unwrap();
    let o = expect_done(&run);
    assert!(o.hit_tool_limit);
    assert!(o.text.contains("2 rounds"), "{}", o.text);
    assert!(well_formed(run.turn_messages()));
}

#[test]
fn extra_calls_and_bad_arguments_are_answered_without_running() {
    let mut run = run_with(Limits { max_calls_per_step: 2, ..Limits::default() });
    let mut reply = tool_reply(&[("a", "t"), ("bad", "t"), ("b", "t"), ("c", "t")]);
    reply.arg_errors.push(ArgError { tool_use_id: "bad".into(), raw: "{oops".into() });
    run.handle_reply(reply).unwrap();
    let calls = expect_tools(&run);
    assert_eq!(calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    run.handle_tool_results(vec![ToolResult::ok("a", "1"), ToolResult::ok("b", "2")]).unwrap();
    let results = &run.turn_messages()[2].content;
    assert_eq!(results.len(), 4);
    assert!(
        matches!(&results[1], Block::ToolResult { is_error: true, content, .. } if content.contains("not valid JSON") && content.contains("{oops"))
    );
    assert!(matches!(&results[3], Block::ToolResult { is_error: true, content, .. } if content.contains("at most 2")));
}

#[test]
fn only_bad_calls_go_straight_back_to_the_model() {
    let mut run = run_with(Limits::default());
    let mut reply = tool_reply(&[("bad", "t")]);
    reply.arg_errors.push(ArgError { tool_use_id: "bad".into(), raw: "nope".into() });
    run.handle_reply(reply).unwrap();
    assert_eq!(expect_model(&run), ToolChoice::Auto);
}

#[test]
fn missing_results_become_errors_and_long_ones_are_cut() {
    let mut run = run_with(Limits { max_tool_output: 64, ..Limits::default() });
    run.handle_reply(tool_reply(&[("a", "t"), ("b", "t")])).unwrap();
    run.handle_tool_results(vec![ToolResult::ok("a", "z".repeat(1000)), ToolResult::ok("unknown", "?")]).unwrap();
    let results = &run.turn_messages()[2].content;
    assert!(
        matches!(&results[0], Block::ToolResult { content, is_error: false, .. } if content.len() <= 64 && content.contains("cut"))
    );
    assert!(matches!(&results[1], Block::ToolResult { content, is_error: true, .. } if content.contains("no result")));
}

#[test]
fn handlers_out_of_order_are_refused() {
    let mut run = run_with(Limits::default());
    assert_eq!(run.handle_tool_results(vec![]), Err(RunError::OutOfOrder));
    run.handle_reply(tool_reply(&[("a", "t")])).unwrap();
    assert_eq!(run.handle_reply(text_reply("x")), Err(RunError::OutOfOrder));
    run.handle_tool_results(vec![ToolResult::ok("a", "1")]).unwrap();
    run.handle_reply(text_reply("done")).unwrap();
    assert_eq!(run.handle_reply(text_reply("again")), Err(RunError::OutOfOrder));
}

#[test]
fn cancelling_mid_tools_leaves_a_well_formed_turn() {
    let mut run = run_with(Limits::default());
    run.handle_reply(tool_reply(&[("a", "slow")])).unwrap();
    run.cancel();
    let o = expect_done(&run);
    assert!(o.cancelled);
    let msgs = run.turn_messages();
    assert!(well_formed(msgs), "{msgs:?}");
    assert!(matches!(&msgs[2].content[0], Block::ToolResult { is_error: true, .. }));
    let mut fresh = run_with(Limits::default());
    fresh.cancel();
    assert!(well_formed(fresh.turn_messages()));
}

#[test]
fn old_exchanges_leave_the_window_but_stay_in_history() {
    let mut history = vec![];
    for i in 0..20 {
        history.push(Message::user_text(alloc::format!("question {i} {}", "q".repeat(100))));
        history.push(Message::assistant_text("a".repeat(100)));
    }
    let run = AgentRun::new(
        history,
        Message::user_text("now"),
        String::new(),
        Limits { history_budget: 1500, ..Limits::default() },
    );
    let window = run.window();
    assert!(history::bytes(window) <= 1500);
    assert!(window[0].text().starts_with("question "));
    assert_eq!(window.last().unwrap(), &Message::user_text("now"));
    assert_eq!(run.turn_messages().len(), 1);
}

#[test]
fn trimmed_exchanges_are_freed_not_kept() {
    let mut history = vec![];
    for i in 0..20 {
        history.push(Message::user_text(alloc::format!("question {i} {}", "q".repeat(100))));
        history.push(Message::assistant_text("a".repeat(100)));
    }
    let mut run = AgentRun::new(
        history.clone(),
        Message::user_text("now"),
        String::new(),
        Limits { history_budget: 1500, ..Limits::default() },
    );
    let window = run.window().len();
    assert!(window < 20, "{window}");
    assert_eq!(run.messages.len(), window, "the run holds only what it sends");
    assert_eq!(run.messages[..window - 1], history[history.len() - (window - 1)..]);
    run.handle_reply(tool_reply(&[("c1", "t")])).unwrap();
    run.handle_tool_results(vec![ToolResult::ok("c1", "r".repeat(300))]).unwrap();
    run.handle_reply(text_reply("done")).unwrap();
    expect_done(&run);
    assert_eq!(run.turn_messages().len(), 4, "the turn is still whole after more trimming");
    assert_eq!(run.turn_messages()[0], Message::user_text("now"));
    assert!(run.messages.len() < window + 4, "the second trim dropped more");
}

#[test]
fn elided_outputs_are_sent_short_but_saved_whole() {
    let mut run = run_with(Limits { history_budget: 2000, max_tool_output: 10_000, ..Limits::default() });
    let big = |c: char| c.to_string().repeat(1500);
    run.handle_reply(tool_reply(&[("c1", "t")])).unwrap();
    run.handle_tool_results(vec![ToolResult::ok("c1", big('x'))]).unwrap();
    run.handle_reply(tool_reply(&[("c2", "t")])).unwrap();
    run.handle_tool_results(vec![ToolResult::ok("c2", big('y'))]).unwrap();
    // The model sees the first output as a note: the turn alone is over the budget.
    let Step::CallModel(call) = run.next_step() else { panic!("expected a model call") };
    let sent: Vec<String> = call
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(sent, [history::ELIDED_NOTE.to_string(), big('y')]);
    run.handle_reply(text_reply("done")).unwrap();
    expect_done(&run);
    // What is persisted holds what the tools said.
    let msgs = run.turn_messages();
    assert!(well_formed(msgs));
    assert!(matches!(&msgs[2].content[0], Block::ToolResult { content, .. } if *content == big('x')));
    assert!(matches!(&msgs[4].content[0], Block::ToolResult { content, .. } if *content == big('y')));
    // Cancelling restores them too.
    let mut run = run_with(Limits { history_budget: 2000, max_tool_output: 10_000, ..Limits::default() });
    run.handle_reply(tool_reply(&[("c1", "t")])).unwrap();
    run.handle_tool_results(vec![ToolResult::ok("c1", big('x'))]).unwrap();
    run.handle_reply(tool_reply(&[("c2", "t")])).unwrap();
    run.handle_tool_results(vec![ToolResult::ok("c2", big('y'))]).unwrap();
    run.cancel();
    assert!(matches!(&run.turn_messages()[2].content[0], Block::ToolResult { content, .. } if *content == big('x')));
}

#[test]
fn reused_tool_ids_are_renamed() {
    let history = vec![
        Message::user_text("before"),
        Message {
            role: Role::Assistant,
            content: vec![Block::ToolUse { id: "call_0".into(), name: "t".into(), input: Json::empty_object() }],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult { tool_use_id: "call_0".into(), content: "r".into(), is_error: false }],
        },
        Message::assistant_text("ok"),
    ];
    let mut run = AgentRun::new(history, Message::user_text("again"), String::new(), Limits::default());
    run.handle_reply(tool_reply(&[("call_0", "t"), ("call_0", "t")])).unwrap();
    let ids: Vec<String> = expect_tools(&run).into_iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(|id| id != "call_0"));
    assert_ne!(ids[0], ids[1]);
}

#[derive(Clone, Debug)]
enum Scripted {
    Text,
    Tools(u8, bool),
}

proptest! {
    #[test]
    fn any_script_ends_well_formed_within_the_budget(
        script in proptest::collection::vec(prop_oneof![Just(Scripted::Text), (1u8..5, any::<bool>()).prop_map(|(n, bad)| Scripted::Tools(n, bad))], 1..20),
        answer_all in any::<bool>(),
        max_iterations in 1u32..5,
    ) {
        let limits = Limits { max_iterations, max_calls_per_step: 3, history_budget: 4096, max_tool_output: 100 };
        let mut run = run_with(limits);
        let mut model_calls = 0;
        let mut next = 0;
        loop {
            let calls = match run.next_step() {
                Step::Done(_) => break,
                Step::CallTools(calls) => calls.to_vec(),
                Step::CallModel(_) => {
                    model_calls += 1;
                    let s = script.get(next).cloned().unwrap_or(Scripted::Text);
                    next += 1;
                    let reply = match s {
                        Scripted::Text => text_reply("t"),
                        Scripted::Tools(n, bad) => {
                            let ids: Vec<String> = (0..n).map(|i| alloc::format!("c{next}_{i}")).collect();
                            let pairs: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "t")).collect();
                            let mut r = tool_reply(&pairs);
                            if bad { r.arg_errors.push(ArgError { tool_use_id: ids[0].clone(), raw: "x".into() }); }
                            r
                        }
                    };
                    run.handle_reply(reply).unwrap();
                    continue;
                }
            };
            let results = calls.iter().filter(|_| answer_all).map(|c| ToolResult::ok(c.id.clone(), "r")).collect();
            run.handle_tool_results(results).unwrap();
        }
        prop_assert!(model_calls <= max_iterations + 1);
        prop_assert!(well_formed(run.turn_messages()));
    }
}

#[test]
fn shrinking_for_a_too_long_context_drops_older_exchanges_but_keeps_the_turn() {
    let mut history = vec![];
    for i in 0..20 {
        history.push(Message::user_text(alloc::format!("question {i} {}", "q".repeat(100))));
        history.push(Message::assistant_text("a".repeat(100)));
    }
    let mut run = AgentRun::new(
        history,
        Message::user_text("now"),
        String::new(),
        Limits { history_budget: 4000, ..Limits::default() },
    );
    let before = history::bytes(run.window());
    assert!(run.shrink_for_retry(), "older exchanges were there to drop");
    let after = history::bytes(run.window());
    assert!(after < before && after <= 2000, "{before} -> {after}");
    assert_eq!(run.window().last().unwrap(), &Message::user_text("now"));
    assert!(run.window()[0].text().starts_with("question "), "whole exchanges only");
    assert_eq!(run.limits().history_budget, 2000);
    // Only the turn left: nothing more to drop, so asking again would not help.
    let mut alone = run_with(Limits::default());
    assert!(!alone.shrink_for_retry());
    assert_eq!(alone.window(), &[Message::user_text("hi")]);
}
