use super::*;
use alloc::string::ToString;
use alloc::vec;
use chela_proto::chat::ArgError;
use proptest::prelude::*;

fn text_reply(t: &str) -> Reply {
    Reply {
        content: vec![Block::text(t)],
        stop_reason: StopReason::EndTurn,
        usage: Usage { input_tokens: 10, output_tokens: 2, ..Usage::default() },
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
        usage: Usage { input_tokens: 5, output_tokens: 1, ..Usage::default() },
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

/// Whether `messages` is a conversation the Messages API accepts, checked from its rules
/// directly (not with `history::repair`, which is code under test too): it starts with something
/// the person said; roles alternate; no message and no text block is empty; every `tool_use` is
/// answered by exactly one `tool_result` in the very next message, which answers nothing else;
/// tool ids are unique; and it ends with an answer, not a call.
fn check_well_formed(messages: &[Message]) -> Result<(), String> {
    let first = messages.first().ok_or("no messages")?;
    if first.role != Role::User || first.content.iter().any(|b| matches!(b, Block::ToolResult { .. })) {
        return Err("the conversation does not start with the person's message".into());
    }
    let mut ids: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if m.content.is_empty() {
            return Err(alloc::format!("message {i} is empty"));
        }
        if m.content.iter().any(|b| matches!(b, Block::Text { text } if text.is_empty())) {
            return Err(alloc::format!("message {i} has an empty text block"));
        }
        if i > 0 && messages[i - 1].role == m.role {
            return Err(alloc::format!("messages {} and {i} have the same role", i - 1));
        }
        let uses: Vec<&str> = m
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        let results: Vec<&str> = m
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolResult { tool_use_id, .. } => Some(&**tool_use_id),
                _ => None,
            })
            .collect();
        match m.role {
            Role::Assistant if !results.is_empty() => {
                return Err(alloc::format!("assistant message {i} carries tool results"));
            }
            Role::User if !uses.is_empty() => return Err(alloc::format!("user message {i} carries tool calls")),
            _ => {}
        }
        for id in &uses {
            if ids.contains(id) {
                return Err(alloc::format!("tool id {id} is used twice"));
            }
            ids.push(id);
        }
        if !results.is_empty() {
            let asked: Vec<&str> = match i.checked_sub(1).map(|p| &messages[p]) {
                Some(prev) => prev.tool_use_ids().collect(),
                None => Vec::new(),
            };
            for r in &results {
                if !asked.contains(r) {
                    return Err(alloc::format!("message {i} answers {r}, which the message before did not call"));
                }
            }
        }
        if !uses.is_empty() {
            let answers: Vec<&str> = match messages.get(i + 1) {
                Some(next) => next
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolResult { tool_use_id, .. } => Some(&**tool_use_id),
                        _ => None,
                    })
                    .collect(),
                None => return Err(alloc::format!("the calls in message {i} are never answered")),
            };
            for id in &uses {
                let n = answers.iter().filter(|a| *a == id).count();
                if n != 1 {
                    return Err(alloc::format!("call {id} is answered {n} times in message {}", i + 1));
                }
            }
        }
    }
    let last = &messages[messages.len() - 1];
    if last.role != Role::Assistant || last.tool_use_ids().next().is_some() {
        return Err("the conversation does not end with an answer".into());
    }
    Ok(())
}

fn well_formed(messages: &[Message]) -> bool {
    check_well_formed(messages).is_ok()
}

fn call(id: &str) -> Block {
    Block::ToolUse { id: id.into(), name: "t".into(), input: Json::empty_object() }
}

fn result(id: &str) -> Block {
    Block::ToolResult { tool_use_id: id.into(), content: "r".into(), images: Default::default(), is_error: false }
}

fn msg(role: Role, content: Vec<Block>) -> Message {
    Message { role, content }
}

#[test]
fn the_checker_refuses_what_the_api_refuses() {
    let ok = vec![
        Message::user_text("q"),
        msg(Role::Assistant, vec![Block::text("looking"), call("a"), call("b")]),
        msg(Role::User, vec![result("b"), result("a")]),
        Message::assistant_text("done"),
    ];
    assert_eq!(check_well_formed(&ok), Ok(()));
    let broken: Vec<(&str, Vec<Message>)> = vec![
        ("empty", vec![]),
        ("starts with the assistant", ok[1..].to_vec()),
        ("starts with tool results", vec![msg(Role::User, vec![result("a")]), Message::assistant_text("x")]),
        ("a result is missing", vec![ok[0].clone(), ok[1].clone(), msg(Role::User, vec![result("a")]), ok[3].clone()]),
        (
            "a result is given twice",
            vec![
                ok[0].clone(),
                ok[1].clone(),
                msg(Role::User, vec![result("a"), result("b"), result("a")]),
                ok[3].clone(),
            ],
        ),
        (
            "a result for no call",
            vec![
                ok[0].clone(),
                ok[1].clone(),
                msg(Role::User, vec![result("a"), result("b"), result("c")]),
                ok[3].clone(),
            ],
        ),
        (
            "results not right after the calls",
            vec![ok[0].clone(), ok[1].clone(), Message::user_text("?"), ok[2].clone(), ok[3].clone()],
        ),
        ("the same role twice", vec![Message::user_text("a"), Message::user_text("b"), Message::assistant_text("c")]),
        ("an empty message", vec![Message::user_text("a"), msg(Role::Assistant, vec![])]),
        ("an empty text block", vec![Message::user_text("a"), Message::assistant_text("")]),
        ("ends with calls", ok[..2].to_vec()),
        ("ends with the person", ok[..3].to_vec()),
        (
            "an id used twice",
            [&ok[..], &[Message::user_text("again"), ok[1].clone(), ok[2].clone(), ok[3].clone()]].concat(),
        ),
    ];
    for (why, messages) in broken {
        assert!(check_well_formed(&messages).is_err(), "accepted a conversation where {why}: {messages:?}");
    }
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
    assert_eq!(o.usage, Usage { input_tokens: 10, output_tokens: 2, ..Usage::default() });
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
            Block::ToolResult {
                tool_use_id: "b".into(),
                content: "B failed".into(),
                images: Default::default(),
                is_error: true
            },
            Block::ToolResult {
                tool_use_id: "c".into(),
                content: "C".into(),
                images: Default::default(),
                is_error: false
            },
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

/// A failed model call closes the turn with the note and marks it aborted (not cancelled);
/// `fail` says whether tools had already run, so a driver knows the record must be kept.
#[test]
fn a_failed_model_call_aborts_and_says_whether_tools_ran() {
    let mut idle = run_with(Limits::default());
    assert!(!idle.fail("(this turn stopped: the provider is down)"));
    let o = expect_done(&idle);
    assert!(o.aborted && !o.cancelled, "{o:?}");
    assert_eq!(o.text, "(this turn stopped: the provider is down)");
    assert_eq!(idle.turn_messages().len(), 2);
    assert!(well_formed(idle.turn_messages()));

    let mut worked = run_with(Limits::default());
    worked.handle_reply(tool_reply(&[("a", "memory_store")])).unwrap();
    worked.handle_tool_results(vec![ToolResult::ok(String::from("a"), "stored as m1")]).unwrap();
    assert!(worked.fail("(this turn stopped: the provider is down)"));
    assert!(expect_done(&worked).aborted);
    assert!(well_formed(worked.turn_messages()), "{:?}", worked.turn_messages());

    let mut cancelled = run_with(Limits::default());
    cancelled.cancel();
    assert!(!expect_done(&cancelled).aborted);
    let mut answered = run_with(Limits::default());
    answered.handle_reply(text_reply("hello")).unwrap();
    assert!(!expect_done(&answered).aborted);
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
            content: vec![Block::ToolResult {
                tool_use_id: "call_0".into(),
                content: "r".into(),
                images: Default::default(),
                is_error: false,
            }],
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
    /// No content, or only empty text: some models do this.
    Empty,
    /// `n` calls; the first has bad arguments; the ids repeat ones already used; text before.
    Tools {
        n: u8,
        bad: bool,
        reuse_ids: bool,
        text: bool,
    },
}

#[derive(Clone, Copy, Debug)]
enum Answer {
    All,
    None,
    /// Only the first result, recorded as a cancellable driver does, then the step closed.
    FirstOnly,
    /// Results for every call plus ones for calls that were never made, and a duplicate.
    WithStrays,
}

fn scripted_reply(s: &Scripted, step: usize) -> Reply {
    match s {
        Scripted::Text => text_reply("t"),
        Scripted::Empty => {
            let mut r = text_reply("");
            if step.is_multiple_of(2) {
                r.content.clear();
            }
            r
        }
        Scripted::Tools { n, bad, reuse_ids, text } => {
            let ids: Vec<String> = (0..*n)
                .map(|i| if *reuse_ids { alloc::format!("call_{i}") } else { alloc::format!("c{step}_{i}") })
                .collect();
            let pairs: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "t")).collect();
            let mut r = tool_reply(&pairs);
            if *text {
                r.content.insert(0, Block::text("let me check"));
                r.content.push(Block::text(""));
            }
            if *bad {
                r.arg_errors.push(ArgError { tool_use_id: ids[0].clone(), raw: "x".into() });
            }
            r
        }
    }
}

/// Earlier, finished exchanges whose tool ids (`call_0`, `call_1`) a model may well reuse.
fn past(exchanges: usize) -> Vec<Message> {
    let mut h = Vec::new();
    for i in 0..exchanges {
        let id = alloc::format!("call_{i}");
        h.push(Message::user_text(alloc::format!("question {i}")));
        h.push(msg(Role::Assistant, vec![call(&id)]));
        h.push(msg(Role::User, vec![result(&id)]));
        h.push(Message::assistant_text("answer"));
    }
    h
}

proptest! {
    #[test]
    fn any_script_ends_well_formed_within_the_budget(
        script in proptest::collection::vec(prop_oneof![
            Just(Scripted::Text),
            Just(Scripted::Empty),
            (1u8..5, any::<bool>(), any::<bool>(), any::<bool>())
                .prop_map(|(n, bad, reuse_ids, text)| Scripted::Tools { n, bad, reuse_ids, text }),
        ], 1..20),
        answers in proptest::collection::vec(prop_oneof![Just(Answer::All), Just(Answer::None), Just(Answer::FirstOnly), Just(Answer::WithStrays)], 1..8),
        stop_at in proptest::option::of((0usize..12, any::<bool>())),
        exchanges in 0usize..3,
        max_iterations in 1u32..5,
    ) {
        let limits = Limits { max_iterations, max_calls_per_step: 3, history_budget: 4096, max_tool_output: 100 };
        let history = past(exchanges);
        let mut run = AgentRun::new(history.clone(), Message::user_text("hi"), "sys".into(), limits);
        let mut model_calls = 0;
        let mut next = 0;
        let mut steps = 0;
        loop {
            if let Some((at, cancel)) = stop_at && steps == at {
                if cancel { run.cancel() } else { run.fail("The provider failed."); }
            }
            steps += 1;
            let calls = match run.next_step() {
                Step::Done(_) => break,
                Step::CallTools(calls) => calls.to_vec(),
                Step::CallModel(c) => {
                    // Every request the provider sees is well-formed once the model answers it.
                    let answered = [c.messages, &[Message::assistant_text("answer")]].concat();
                    if let Err(e) = check_well_formed(&answered) {
                        prop_assert!(false, "a request is not well-formed: {}\n{:?}", e, c.messages);
                    }
                    model_calls += 1;
                    let s = script.get(next).cloned().unwrap_or(Scripted::Text);
                    next += 1;
                    run.handle_reply(scripted_reply(&s, next)).unwrap();
                    continue;
                }
            };
            match answers[steps % answers.len()] {
                Answer::All => run.handle_tool_results(calls.iter().map(|c| ToolResult::ok(c.id.clone(), "r")).collect()).unwrap(),
                Answer::None => run.handle_tool_results(vec![]).unwrap(),
                Answer::FirstOnly => {
                    run.record_tool_result(ToolResult::ok(calls[0].id.clone(), "r")).unwrap();
                    run.handle_tool_results(vec![]).unwrap();
                }
                Answer::WithStrays => {
                    let mut rs: Vec<ToolResult> = calls.iter().map(|c| ToolResult::ok(c.id.clone(), "r")).collect();
                    rs.push(ToolResult::ok("never_called", "?"));
                    rs.push(ToolResult::error(calls[0].id.clone(), "again"));
                    run.handle_tool_results(rs).unwrap();
                }
            }
        }
        prop_assert!(model_calls <= max_iterations + 1);
        let turn = run.turn_messages();
        if let Err(e) = check_well_formed(turn) {
            prop_assert!(false, "the turn is not well-formed: {}\n{:?}", e, turn);
        }
        let whole = [&history[..], turn].concat();
        if let Err(e) = check_well_formed(&whole) {
            prop_assert!(false, "history plus the turn is not well-formed: {}\n{:?}", e, whole);
        }
        if let Err(e) = check_well_formed(run.window()) {
            prop_assert!(false, "the window is not well-formed: {}", e);
        }
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

#[test]
fn the_callers_tools_are_handed_back_and_the_others_of_that_reply_dropped() {
    let mut run = run_with(Limits::default());
    run.handle_reply(tool_reply(&[("a", "memory_recall"), ("b", "get_weather")])).unwrap();
    assert_eq!(expect_tools(&run).len(), 2);
    let back = run.hand_back(|name| name == "get_weather");
    assert_eq!(back.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["b"]);
    let outcome = expect_done(&run);
    assert_eq!(outcome.stop_reason, StopReason::ToolUse);
    assert_eq!(outcome.usage, Usage { input_tokens: 5, output_tokens: 1, ..Usage::default() });
    let turn = run.turn_messages();
    assert_eq!(turn.len(), 2, "the person's message and the call, no results: {turn:?}");
    assert_eq!(turn[1].tool_use_ids().collect::<Vec<_>>(), ["b"], "Chela's own call was dropped");
    // Answered in the caller's next message, the exchange is one the API accepts.
    let mut next = turn.to_vec();
    next.push(msg(Role::User, vec![result("b")]));
    next.push(Message::assistant_text("sunny"));
    assert!(well_formed(&next));
}

#[test]
fn handing_back_without_a_call_of_the_caller_changes_nothing() {
    let mut run = run_with(Limits::default());
    run.handle_reply(tool_reply(&[("a", "memory_recall")])).unwrap();
    assert!(run.hand_back(|name| name == "get_weather").is_empty());
    assert_eq!(expect_tools(&run).len(), 1, "still waiting for Chela's own call");
    let mut fresh = run_with(Limits::default());
    assert!(fresh.hand_back(|_| true).is_empty(), "not in a tool step");
    expect_model(&fresh);
}

#[test]
fn model_calls_carry_the_cache_hints_and_the_turn_sums_cached_tokens() {
    let history = vec![Message::user_text("earlier"), Message::assistant_text("yes")];
    let mut run = AgentRun::new(history, Message::user_text("now"), "stable|rest".into(), Limits::default());
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert!(!c.cache.mark && c.cache.system_stable == 0 && c.cache.key.is_none(), "no marks until the driver asks");
    run.set_cache("stable".len(), Some("key".into()));
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert_eq!(c.cache, Cache { mark: true, system_stable: 6, history_end: Some(1), key: Some("key") });
    assert_eq!(c.cache.split_system(c.system), ("stable", "|rest"));
    let cached = |r: Reply| Reply { usage: Usage { cache_read_tokens: 100, cache_write_tokens: 7, ..r.usage }, ..r };
    run.handle_reply(cached(tool_reply(&[("t1", "x")]))).unwrap();
    run.handle_tool_results(vec![ToolResult::ok("t1", "done")]).unwrap();
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert_eq!(c.cache.history_end, Some(1), "still the history before this turn, not the tool round");
    run.handle_reply(cached(text_reply("ok"))).unwrap();
    let o = expect_done(&run);
    assert_eq!(o.usage, Usage { input_tokens: 15, output_tokens: 3, cache_read_tokens: 200, cache_write_tokens: 14 });
    // A stable length inside a character is refused rather than splitting it.
    let mut run = AgentRun::new(vec![], Message::user_text("hi"), "é".into(), Limits::default());
    run.set_cache(1, None);
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert_eq!((c.cache.system_stable, c.cache.history_end, c.cache.mark), (0, None, false));
}

#[test]
fn every_model_call_of_the_turn_carries_the_clients_format() {
    let mut run = run_with(Limits::default());
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert_eq!(c.format, None, "free text until the driver asks");
    run.set_format(Some(Format::JsonObject));
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert_eq!(c.format, Some(&Format::JsonObject));
    run.handle_reply(tool_reply(&[("t1", "x")])).unwrap();
    run.handle_tool_results(vec![ToolResult::ok("t1", "done")]).unwrap();
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert_eq!(c.format, Some(&Format::JsonObject), "the call after a tool round asks the same");
}

#[test]
fn the_turns_context_is_sent_in_every_call_of_the_turn_and_never_kept() {
    let history = vec![Message::user_text("earlier"), Message::assistant_text("yes")];
    let mut run = AgentRun::new(history.clone(), Message::user_text("now"), "sys".into(), Limits::default());
    run.set_turn_context("<ctx>".into());
    run.set_turn_context("<again>".into());
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert_eq!(c.messages[..2], history[..], "the history is sent as it was said");
    assert_eq!(c.messages[2], Message::user_text("<ctx>\n\nnow"), "once, in front of the person's text");
    run.handle_reply(tool_reply(&[("t1", "x")])).unwrap();
    run.handle_tool_results(vec![ToolResult::ok("t1", "done")]).unwrap();
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert_eq!(c.messages[2], Message::user_text("<ctx>\n\nnow"), "the tool round's call carries it too");
    run.handle_reply(text_reply("ok")).unwrap();
    expect_done(&run);
    assert_eq!(run.turn_messages()[0], Message::user_text("now"), "what is kept is what the person said");

    // A client's answers to open calls stay first (the APIs require it); the context follows
    // them as a block of its own when the person sent no text, and goes again at the end.
    let mut run = AgentRun::new(vec![], msg(Role::User, vec![result("a")]), "sys".into(), Limits::default());
    run.set_turn_context("<ctx>".into());
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert_eq!(c.messages[0].content, [result("a"), Block::Text { text: "<ctx>".into() }]);
    run.cancel();
    assert_eq!(run.turn_messages()[0].content, [result("a")]);
    // Nothing to send: the message is left as it is.
    let mut run = run_with(Limits::default());
    run.set_turn_context(String::new());
    let Step::CallModel(c) = run.next_step() else { panic!() };
    assert_eq!(c.messages[0], Message::user_text("hi"));
}
