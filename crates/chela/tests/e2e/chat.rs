//! A whole turn with two rounds of tools, on both wire formats, streamed and not.

use std::fs;

use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::{KEY, MODEL, Provider, Ws, body, conversation, text_of, tool_names};

const REPLY: &str = "Done: the note is in notes/today.md.";

fn two_tool_turn(provider: Provider, stream: bool) {
    let llm = FakeLlm::start(vec![
        Step::tool_call("get_current_time", json!({})).with_text("Let me check the time."),
        Step::tool_call("file_write", json!({"path": "notes/today.md", "content": "buy milk"})),
        Step::text(REPLY),
    ]);
    let ws = Ws::for_llm(provider, &llm, if stream { "" } else { "stream = false" });
    let out = ws.chat("Note that I must buy milk.", &[]);
    let ctx = format!("{provider:?} stream={stream}");

    out.expect_ok();
    // The reply alone on stdout; the narration before the tools went to stderr.
    assert_eq!(out.stdout, format!("{REPLY}\n"), "{ctx}");
    out.stderr_has("Let me check the time.");
    for (tool, args) in [("get_current_time", "{}"), ("file_write", "\"path\":\"notes/today.md\"")] {
        let line = out.stderr.lines().find(|l| l.contains(&format!("⚙ {tool} ")));
        let line = line.unwrap_or_else(|| panic!("{ctx}: no tool line for {tool}:\n{}", out.stderr));
        assert!(line.contains(args) && line.contains(" … ok (") && line.ends_with(" ms)"), "{ctx}: {line}");
    }
    assert_eq!(fs::read_to_string(ws.path().join("notes/today.md")).unwrap(), "buy milk", "{ctx}");

    let reqs = llm.requests();
    assert_eq!(reqs.len(), 3, "{ctx}");
    assert_eq!(llm.remaining(), 0, "{ctx}");
    for (i, r) in reqs.iter().enumerate() {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", provider.path()), "{ctx} #{i}");
        match provider {
            Provider::Anthropic => {
                assert_eq!(r.header("x-api-key"), Some(KEY), "{ctx} #{i}");
                assert!(r.header("anthropic-version").is_some_and(|v| !v.is_empty()), "{ctx} #{i}");
                assert_eq!(r.header("authorization"), None, "{ctx} #{i}: the key goes in x-api-key only");
            }
            Provider::OpenAi => {
                assert_eq!(r.header("authorization"), Some(format!("Bearer {KEY}").as_str()), "{ctx} #{i}");
                assert_eq!(r.header("x-api-key"), None, "{ctx} #{i}");
            }
        }
        let b = body(&llm, i);
        assert_eq!(b["model"], MODEL, "{ctx} #{i}");
        assert_eq!(b["stream"] == true, stream, "{ctx} #{i}: stream flag {}", b["stream"]);
        let system = match provider {
            Provider::Anthropic => system_text(&b["system"]),
            Provider::OpenAi => {
                assert_eq!(b["messages"][0]["role"], "system", "{ctx} #{i}");
                text_of(&b["messages"][0])
            }
        };
        // The turn's context travels with the person's message, after the cached history, in
        // every request of the turn; the system prompt has none of it.
        assert!(!system.contains("Channel: cli"), "{ctx} #{i}: the turn context is in the system prompt:\n{system}");
        let person = crate::sent_text_of(&conversation(provider, &b)[0]);
        assert!(
            person.starts_with("<turn_context>\n") && person.contains("Channel: cli"),
            "{ctx} #{i}: the person's message lacks the turn context:\n{person}"
        );
        let tools = tool_names(provider, &b);
        for t in ["get_current_time", "file_write", "memory_store"] {
            assert!(tools.iter().any(|n| n == t), "{ctx} #{i}: {t} not offered: {tools:?}");
        }
    }

    let first = conversation(provider, &body(&llm, 0));
    assert_eq!(first.len(), 1, "{ctx}: {first:?}");
    assert_eq!(first[0]["role"], "user");
    assert_eq!(crate::text_of(&first[0]), "Note that I must buy milk.");

    // The second request carries the first tool's result, the third adds the second's.
    let second = conversation(provider, &body(&llm, 1));
    let third = conversation(provider, &body(&llm, 2));
    assert_eq!(second.len(), 3, "{ctx}: {second:#?}");
    assert_eq!(third[..3], second[..], "{ctx}: the third request must extend the second");
    let time = check_round(provider, &second[1..], "get_current_time", &json!({}), &ctx);
    let time: Value = serde_json::from_str(&time).unwrap_or_else(|e| panic!("{ctx}: time result {time:?}: {e}"));
    assert!(time["iso"].is_string() && time["unix"].is_i64(), "{ctx}: {time}");
    let wrote = check_round(
        provider,
        &third[3..],
        "file_write",
        &json!({"path": "notes/today.md", "content": "buy milk"}),
        &ctx,
    );
    assert!(wrote.contains("wrote 8 bytes"), "{ctx}: {wrote}");

    // The session has the whole turn: user, (call, result) twice, answer.
    let session = ws.session("local");
    let roles: Vec<&str> = session.iter().map(|m| m["role"].as_str().unwrap_or("?")).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user", "assistant"], "{ctx}");
    assert_eq!(text_of(&session[0]), "Note that I must buy milk.");
    assert_eq!(text_of(&session[5]), REPLY);
    let kinds = |m: &Value| -> Vec<String> {
        m["content"]
            .as_array()
            .map(|b| b.iter().map(|x| x["type"].as_str().unwrap_or("?").to_owned()).collect())
            .unwrap_or_default()
    };
    assert!(kinds(&session[1]).contains(&"tool_use".to_owned()), "{ctx}: {}", session[1]);
    assert_eq!(kinds(&session[2]), ["tool_result"], "{ctx}: {}", session[2]);
    assert_eq!(kinds(&session[4]), ["tool_result"], "{ctx}: {}", session[4]);
}

/// The Anthropic `system` field: a string or text blocks.
fn system_text(system: &Value) -> String {
    match system {
        Value::String(s) => s.clone(),
        Value::Array(_) => text_of(&json!({"content": system})),
        other => panic!("no system prompt: {other}"),
    }
}

/// Checks one tool round in the wire format (the assistant's call, then its result, with
/// matching ids) and returns the result's text.
fn check_round(provider: Provider, msgs: &[Value], name: &str, input: &Value, ctx: &str) -> String {
    assert_eq!(msgs.len(), 2, "{ctx}: {msgs:#?}");
    let (call, result) = (&msgs[0], &msgs[1]);
    assert_eq!(call["role"], "assistant", "{ctx}");
    match provider {
        Provider::Anthropic => {
            let blocks = call["content"].as_array().unwrap_or_else(|| panic!("{ctx}: {call}"));
            let uses: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "tool_use").collect();
            assert_eq!(uses.len(), 1, "{ctx}: {call}");
            assert_eq!(uses[0]["name"], name, "{ctx}");
            assert_eq!(&uses[0]["input"], input, "{ctx}");
            let id = uses[0]["id"].as_str().unwrap();
            assert!(id.starts_with("toolu_01"), "{ctx}: the id must be the one the fake gave, not {id}");
            assert_eq!(result["role"], "user", "{ctx}");
            let results = result["content"].as_array().unwrap_or_else(|| panic!("{ctx}: {result}"));
            assert_eq!(results.len(), 1, "{ctx}: {result}");
            assert_eq!(results[0]["type"], "tool_result", "{ctx}");
            assert_eq!(results[0]["tool_use_id"], id, "{ctx}");
            assert_ne!(results[0]["is_error"], true, "{ctx}: {result}");
            text_of(&json!({"content": results[0]["content"]}))
        }
        Provider::OpenAi => {
            let calls = call["tool_calls"].as_array().unwrap_or_else(|| panic!("{ctx}: {call}"));
            assert_eq!(calls.len(), 1, "{ctx}: {call}");
            assert_eq!(calls[0]["type"], "function", "{ctx}");
            assert_eq!(calls[0]["function"]["name"], name, "{ctx}");
            let args: Value = serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(&args, input, "{ctx}");
            let id = calls[0]["id"].as_str().unwrap();
            assert!(id.starts_with("call_"), "{ctx}: the id must be the one the fake gave, not {id}");
            assert_eq!(result["role"], "tool", "{ctx}");
            assert_eq!(result["tool_call_id"], id, "{ctx}");
            text_of(result)
        }
    }
}

#[test]
fn anthropic_streamed_turn_with_two_tool_rounds() {
    two_tool_turn(Provider::Anthropic, true);
}

#[test]
fn anthropic_whole_turn_with_two_tool_rounds() {
    two_tool_turn(Provider::Anthropic, false);
}

#[test]
fn openai_streamed_turn_with_two_tool_rounds() {
    two_tool_turn(Provider::OpenAi, true);
}

#[test]
fn openai_whole_turn_with_two_tool_rounds() {
    two_tool_turn(Provider::OpenAi, false);
}

#[test]
fn a_dash_reads_the_message_from_stdin() {
    use std::io::Write;
    let llm = FakeLlm::start(vec![Step::text("Got it.")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let mut child = ws.cmd(&["chat", "-m", "-"]).stdin(std::process::Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"line one\nline two\n").unwrap();
    drop(stdin);
    let out = crate::finish(child, crate::RUN_LIMIT);
    out.expect_ok();
    assert_eq!(out.stdout, "Got it.\n");
    let sent = conversation(Provider::Anthropic, &body(&llm, 0));
    assert_eq!(crate::text_of(&sent[0]).trim_end(), "line one\nline two");
}

/// `chela chat -m -` with `input` on stdin.
fn chat_stdin(ws: &Ws, input: &[u8]) -> crate::Out {
    use std::io::Write;
    let mut child = ws.cmd(&["chat", "-m", "-"]).stdin(std::process::Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    crate::finish(child, crate::RUN_LIMIT)
}

#[test]
fn a_dash_drops_exactly_one_final_newline() {
    for (input, want) in [("line one\n\n", "line one\n"), ("hi\r\n", "hi"), ("no newline", "no newline")] {
        let llm = FakeLlm::start(vec![Step::text("Got it.")]);
        let ws = Ws::for_llm(Provider::OpenAi, &llm, "");
        chat_stdin(&ws, input.as_bytes()).expect_ok();
        let sent = conversation(Provider::OpenAi, &body(&llm, 0));
        assert_eq!(crate::text_of(&sent[0]), want, "{input:?}");
    }
}

#[test]
fn empty_messages_are_refused_before_any_request() {
    let llm = FakeLlm::start(vec![Step::text("unused")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let outs = [
        ws.chat("", &[]),
        ws.chat("   ", &[]),
        chat_stdin(&ws, b""),
        chat_stdin(&ws, b"\n"),
        chat_stdin(&ws, b" \r\n"),
    ];
    for out in &outs {
        out.expect_code(2).stderr_has("the message is empty");
        assert_eq!(out.stdout, "");
        assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
    }
    assert!(llm.requests().is_empty(), "nothing may be sent");
    assert!(!ws.session_path("local").exists(), "nothing may be written");
}

#[test]
fn a_message_split_by_the_shell_says_to_quote_it() {
    let llm = FakeLlm::start(vec![Step::text("unused")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let out = ws.run(&["chat", "-m", "hello", "world"]);
    out.expect_code(2).stderr_has(r#"chela chat -m "hello world""#);
    assert_eq!(out.stderr.lines().count(), 1, "one line, not the whole usage: {}", out.stderr);
    assert!(!out.stderr.contains("Usage"), "{}", out.stderr);
    assert!(llm.requests().is_empty());
}

#[test]
fn an_unknown_flag_points_at_that_commands_help() {
    let ws = Ws::empty();
    for (args, want) in [
        (&["chat", "--bogus"][..], "chela chat --help"),
        (&["config", "show", "--colour"], "chela config show --help"),
        (&["cap", "list", "-x"], "chela cap list --help"),
        (&["doctor", "--fix"], "chela doctor --help"),
    ] {
        let out = ws.run(args);
        out.expect_code(2).stderr_has(want).stderr_has(args.last().unwrap());
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
    }
}

#[test]
fn every_command_answers_help_with_its_own_usage() {
    // Each command or verb, how to ask for its help, its own usage line, and a flag or
    // argument only its help names.
    let cases: [(&[&str], &str, &str); 13] = [
        (&["chat", "--help"], "chela chat [-m MESSAGE] [--session NAME] [--new]", "--session NAME"),
        (&["config", "--help"], "chela config <show|get|set|unset|reset> [args]", "Verbs:"),
        (&["config", "show", "-h"], "chela config show", "masked"),
        (&["config", "get", "--help"], "chela config get KEY", "chela config get llm.model"),
        (&["config", "set", "--help"], "chela config set KEY VALUE [--keep-key|--drop-key]", "VALUE "),
        (
            &["config", "unset", "--help"],
            "chela config unset KEY [--keep-key|--drop-key]",
            "chela config unset llm.model",
        ),
        (&["config", "reset", "--help"], "chela config reset", "chela config reset\n"),
        (&["cap", "--help"], "chela cap <list|call|enable|disable|show|hide> [args]", "Verbs:"),
        (&["cap", "list", "--help"], "chela cap list", "chela cap list\n"),
        (&["cap", "call", "-h"], "chela cap call ID [JSON]", "JSON "),
        (&["cap", "enable", "--help"], "chela cap enable|disable GROUP", "chela cap disable web"),
        (&["cap", "hide", "--help"], "chela cap show|hide GROUP", "chela cap hide http"),
        (&["doctor", "--help"], "chela doctor", "chela doctor\n"),
    ];
    let ws = Ws::empty();
    for (args, usage, own) in cases {
        let out = ws.run(args);
        out.expect_ok();
        assert_eq!(out.stderr, "", "{args:?}");
        let first = out.stdout.lines().find(|l| l.starts_with("Usage: "));
        assert_eq!(first, Some(format!("Usage: {usage}").as_str()), "{args:?}:\n{}", out.stdout);
        out.stdout_has(own);
        assert!(out.stdout.contains("Example"), "{args:?} gives an example:\n{}", out.stdout);
        if args[0] != "chat" {
            assert!(!out.stdout.contains("--session"), "{args:?} shows chat's flags:\n{}", out.stdout);
        }
        // `help COMMAND` is the same text.
        let words: Vec<&str> = args.iter().copied().filter(|a| !a.starts_with('-')).collect();
        let via_help = ws.run(&[&["help"][..], &words].concat());
        assert_eq!(via_help.expect_ok().stdout, out.stdout, "chela help {words:?}");
    }
    let all = ws.run(&["help"]);
    all.expect_ok().stdout_has("Commands:").stdout_has("config set KEY VALUE");
}

#[test]
fn api_key_none_sends_no_key_header() {
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![Step::text("Keyless.")]);
        let ws = Ws::empty();
        ws.write_config(&format!(
            "[llm]\nprovider = \"{}\"\nbase_url = \"{}\"\napi_key = \"none\"\nmodel = \"{MODEL}\"\n",
            provider.name(),
            provider.base_url(&llm)
        ));
        let out = ws.chat("hi", &[]);
        out.expect_ok();
        assert_eq!(out.stdout, "Keyless.\n");
        let r = &llm.requests()[0];
        assert_eq!(r.header("x-api-key"), None, "{provider:?}");
        assert_eq!(r.header("authorization"), None, "{provider:?}");
    }
}
