//! `chela setup` through the real binary: in a terminal (tmux), and with flags for scripts.
//! Settings are saved only after one test call to the (fake) provider worked.

use std::fs;
use std::io::Write;
use std::process::Stdio;

use chela_testkit::{FakeLlm, Step};

use crate::interactive::Tty;
use crate::{Provider, RUN_LIMIT, Ws, body, finish};

/// `chela setup ARGS` with `stdin` on its standard input.
fn setup_piped(ws: &Ws, args: &[&str], stdin: &str) -> crate::Out {
    let mut all = vec!["setup"];
    all.extend_from_slice(args);
    let mut child = ws.cmd(&all).stdin(Stdio::piped()).spawn().unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.as_bytes()).unwrap();
    drop(pipe);
    finish(child, RUN_LIMIT)
}

#[test]
fn flags_save_the_settings_only_after_the_test_call_worked() {
    let llm = FakeLlm::start(vec![Step::status(401), Step::text("Hello from the fake provider.")]);
    let ws = Ws::empty();
    let url = Provider::OpenAi.base_url(&llm);
    let args = ["--provider", "openai", "--base-url", &url, "--model", "e2e-model", "--api-key", "-"];

    let refused = setup_piped(&ws, &args, "sk-wrong-key\n");
    refused.expect_code(1).stderr_has("the test call failed").stderr_has("Nothing was saved");
    assert!(!ws.path().join("overrides.toml").exists(), "a refused key saves nothing");
    assert!(!refused.stderr.contains("sk-wrong-key"), "{}", refused.stderr);

    let out = setup_piped(&ws, &args, "sk-right-key\n");
    out.expect_ok().stdout_has("The provider answered").stdout_has("Hello from the fake provider.");
    let request = &llm.requests()[1];
    assert_eq!(request.header("authorization"), Some("Bearer sk-right-key"));
    assert_eq!(body(&llm, 1)["model"], "e2e-model");
    let saved = fs::read_to_string(ws.path().join("overrides.toml")).unwrap();
    for want in ["provider = \"openai\"", "model = \"e2e-model\"", "api_key = \"sk-right-key\"", &url] {
        assert!(saved.contains(want), "{want} in:\n{saved}");
    }
    // What was saved is what a chat uses.
    llm.push(Step::text("chatting"));
    ws.chat("hi", &[]).expect_ok().stdout_has("chatting");
}

#[test]
fn a_key_on_the_command_line_and_a_script_without_flags_are_refused() {
    let ws = Ws::empty();
    let out = ws.run(&["setup", "--provider", "openai", "--api-key", "sk-visible"]);
    out.expect_code(2).stderr_has("--api-key takes only `-`");
    // No terminal and no flags: nothing to ask, nothing to guess.
    ws.run(&["setup"]).expect_code(1).stderr_has("asks its questions on a terminal");
    ws.run(&["setup", "--provider", "nosuch"]).expect_code(1).stderr_has("llm.provider");
    assert!(!ws.path().join("overrides.toml").exists());
}

#[test]
fn a_terminal_is_asked_each_question_and_the_key_is_never_shown() {
    let llm = FakeLlm::start(vec![Step::status(401), Step::text("Ready when you are.")]);
    let ws = Ws::empty();
    let url = Provider::Anthropic.base_url(&llm);

    // A wrong key: the provider's refusal is shown and nothing is saved.
    let tty = Tty::start_with(&ws, "setup");
    answer_provider_questions(&tty, &url, "sk-ant-wrong-key");
    tty.wait_screen("the refusal", |s| s.contains("Nothing was saved"));
    assert!(tty.screen().contains("API key"), "{}", tty.screen());
    assert!(!tty.screen().contains("sk-ant-wrong-key"), "the key is typed without echo:\n{}", tty.screen());
    assert!(!ws.path().join("overrides.toml").exists());
    drop(tty);

    let tty = Tty::start_with(&ws, "setup");
    answer_provider_questions(&tty, &url, "sk-ant-right-key");
    tty.wait_screen("the provider's answer", |s| s.contains("Ready when you are."));
    tty.wait_screen("the Telegram question", |s| s.contains("Telegram bot token"));
    tty.keys(&["123456:telegram-secret-token", "Enter"]);
    tty.wait_screen("the pairing explanation", |s| s.contains("chela pairing approve CODE"));
    tty.wait_screen("the service question", |s| s.contains("systemd user service now? [y/N]"));
    tty.keys(&["Enter"]);
    tty.wait_screen("the way on", |s| s.contains("Next: `chela chat`"));
    let screen = tty.screen();
    assert!(!screen.contains("sk-ant-right-key") && !screen.contains("telegram-secret"), "{screen}");
    assert_eq!(llm.requests()[1].header("x-api-key"), Some("sk-ant-right-key"));
    let saved = fs::read_to_string(ws.path().join("overrides.toml")).unwrap();
    assert!(saved.contains("api_key = \"sk-ant-right-key\""), "{saved}");
    assert!(saved.contains("123456:telegram-secret-token"), "{saved}");
    assert!(saved.contains(&url), "{saved}");
}

/// Provider, address, model and key, each after its question shows.
fn answer_provider_questions(tty: &Tty, url: &str, key: &str) {
    tty.wait_screen("the provider question", |s| s.contains("Provider: anthropic, or openai"));
    tty.keys(&["anthropic", "Enter"]);
    tty.wait_screen("the address question", |s| s.contains("Address (base URL) [https://api.anthropic.com]"));
    tty.keys(&[url, "Enter"]);
    tty.wait_screen("the model question", |s| s.contains("Model [claude-sonnet-4-5]"));
    tty.keys(&["e2e-model", "Enter"]);
    tty.wait_screen("the key question", |s| s.contains("typing is not shown"));
    tty.keys(&[key, "Enter"]);
}
