//! Skills end to end: the real binary against the fake LLM. A skill-gated group's tools are
//! absent from the request until `skill_activate`, present after it (in the same turn already),
//! in that conversation only, and still after a restart; a disabled group stays disabled.

use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::{Provider, Ws, body, tool_names};

fn offered(llm: &FakeLlm, provider: Provider, i: usize) -> Vec<String> {
    tool_names(provider, &body(llm, i))
}

fn system(provider: Provider, body: &Value) -> String {
    match provider {
        Provider::Anthropic => match &body["system"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        },
        Provider::OpenAi => body["messages"][0]["content"].as_str().unwrap_or_default().to_owned(),
    }
}

#[test]
fn a_gated_group_appears_after_skill_activate_in_that_session_only_and_after_a_restart() {
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![
            Step::text("hello"),
            Step::tool_call("skill_activate", json!({"name": "chela_settings"})),
            Step::tool_call("config_show", json!({})),
            Step::text("Your settings are fine."),
            Step::text("other chat"),
            Step::text("still here"),
            Step::text("switched off"),
        ]);
        let ws = Ws::for_llm(provider, &llm, "");
        let has = |i: usize| offered(&llm, provider, i).iter().any(|t| t == "config_show");

        ws.chat("hi", &["--session", "a"]).expect_ok();
        let tools = offered(&llm, provider, 0);
        assert!(!has(0), "{provider:?}: gated tool offered before activation: {tools:?}");
        assert!(tools.iter().any(|t| t == "skill_activate"), "{tools:?}");
        let sys = system(provider, &body(&llm, 0));
        assert!(sys.contains("## Skills") && sys.contains("- chela_settings: "), "{sys}");
        assert!(!sys.contains("Skill `chela_settings` (active)"), "{sys}");

        let out = ws.chat("How am I configured?", &["--session", "a"]);
        out.expect_ok().stdout_has("Your settings are fine.");
        assert!(!has(1), "{provider:?}: offered before the activation call");
        assert!(has(2), "{provider:?}: not offered right after activation: {:?}", offered(&llm, provider, 2));
        // The config_show call went through (not refused as hidden), secrets masked.
        let req = body(&llm, 3).to_string();
        assert!(req.contains("agent.max_iterations"), "{provider:?}: config_show result missing: {req:.400}");
        assert!(!req.contains(crate::KEY), "the API key leaked into a tool result");

        ws.chat("hi", &["--session", "b"]).expect_ok();
        assert!(!has(4), "{provider:?}: another session sees the gated tool");

        // A new process: the activation was saved beside the session.
        ws.chat("again", &["--session", "a"]).expect_ok();
        assert!(has(5), "{provider:?}: lost after a restart");
        let sys = system(provider, &body(&llm, 5));
        assert!(sys.contains("## Skill `chela_settings` (active)"), "{sys}");

        // Runtime-disabled stays disabled whatever skill is active.
        ws.run(&["cap", "disable", "settings"]).expect_ok();
        ws.chat("and now", &["--session", "a"]).expect_ok();
        assert!(!has(6), "{provider:?}: a disabled group was offered");
    }
}

#[test]
fn the_cli_activates_for_a_session_and_lists_and_deletes() {
    let llm = FakeLlm::start(vec![Step::text("one"), Step::text("two")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    ws.run(&["skill", "activate", "chela_settings", "--session", "work"])
        .expect_ok()
        .stdout_has("chela_settings: active in cli/work; unlocks settings");
    ws.chat("hi", &["--session", "work"]).expect_ok();
    assert!(offered(&llm, Provider::Anthropic, 0).iter().any(|t| t == "config_show"));
    ws.run(&["skill", "deactivate", "chela_settings", "--session", "work"]).expect_ok().stdout_has("deactivated");
    ws.chat("hi", &["--session", "work"]).expect_ok();
    assert!(!offered(&llm, Provider::Anthropic, 1).iter().any(|t| t == "config_show"));

    ws.run(&["skill", "new", "my-notes"]).expect_ok().stdout_has("skills/my-notes/SKILL.md");
    ws.run(&["skill", "new", "my-notes"]).expect_code(1).stderr_has("exists already");
    let list = ws.run(&["skill", "list"]);
    list.expect_ok().stdout_has("my-notes");
    // Names are padded to the longest, so find the skill's line rather than fixed spacing.
    let line = list.stdout.lines().find(|l| l.starts_with("chela_settings ")).unwrap_or_default();
    assert!(line.contains(" [built-in; unlocks settings] "), "{}", list.stdout);
    ws.run(&["skill", "show", "chela_settings"]).expect_ok().stdout_has("config_show");
    ws.run(&["skill", "delete", "chela_settings"]).expect_code(1).stderr_has("built-in skill");
    ws.run(&["skill", "delete", "my-notes"]).expect_ok();
    ws.run(&["skill", "new", "../x"]).expect_code(1).stderr_has("not a valid skill name");
}
