//! Sessions across runs: history survives a restart, `--session` keeps histories apart,
//! `--new` archives, and `--workspace` picks the folder.

use std::fs;

use chela_testkit::{FakeLlm, Step};

use crate::{Provider, Ws, body, conversation, text_of};

/// `(role, text)` of each conversation message in request `i`.
fn said(provider: Provider, llm: &FakeLlm, i: usize) -> Vec<(String, String)> {
    conversation(provider, &body(llm, i))
        .iter()
        .map(|m| (m["role"].as_str().unwrap_or("?").to_owned(), text_of(m)))
        .collect()
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.to_owned(), text.to_owned())
}

#[test]
fn history_survives_a_restart_sessions_stay_apart_and_new_archives() {
    for provider in Provider::BOTH {
        let llm = FakeLlm::start(vec![
            Step::text("Nice to meet you, Ada."),
            Step::text("Your name is Ada."),
            Step::text("Hello from the other session."),
            Step::text("A fresh start."),
        ]);
        let ws = Ws::for_llm(provider, &llm, "");

        ws.chat("My name is Ada.", &[]).expect_ok();
        let out = ws.chat("What is my name?", &[]);
        out.expect_ok();
        assert_eq!(out.stdout, "Your name is Ada.\n");
        assert_eq!(
            said(provider, &llm, 1),
            [
                pair("user", "My name is Ada."),
                pair("assistant", "Nice to meet you, Ada."),
                pair("user", "What is my name?")
            ],
            "{provider:?}: the second run must send the first run's exchange"
        );
        assert_eq!(ws.session("local").len(), 4);

        ws.chat("Hi there.", &["--session", "other"]).expect_ok();
        assert_eq!(said(provider, &llm, 2), [pair("user", "Hi there.")], "{provider:?}: another session starts empty");
        assert_eq!(ws.session("other").len(), 2);
        assert_eq!(ws.session("local").len(), 4, "{provider:?}: another session must not touch this one");

        let out = ws.chat("Start over.", &["--new"]);
        out.expect_ok().stdout_has("A fresh start.");
        assert_eq!(said(provider, &llm, 3), [pair("user", "Start over.")], "{provider:?}: --new sends no old messages");
        let fresh = ws.session("local");
        assert_eq!(fresh.len(), 2);
        assert_eq!(text_of(&fresh[0]), "Start over.");
        let archive = ws.path().join("sessions/archive");
        let archived: Vec<_> = fs::read_dir(&archive).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(archived.len(), 1, "{provider:?}: {archived:?}");
        let name = archived[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("cli_local.") && name.ends_with(".jsonl"), "{name}");
        let old = fs::read_to_string(&archived[0]).unwrap();
        assert!(old.contains("My name is Ada.") && old.contains("Your name is Ada."), "{old}");
        assert_eq!(old.lines().count(), 4);
        assert_eq!(llm.requests().len(), 4);
    }
}

#[test]
fn the_workspace_flag_wins_before_or_after_the_command() {
    let llm = FakeLlm::start(vec![Step::text("First."), Step::text("Second.")]);
    // CHELA_HOME points at an empty workspace that must stay untouched.
    let home = Ws::empty();
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let dir = ws.path().to_str().unwrap();

    home.run(&["--workspace", dir, "chat", "-m", "one"]).expect_ok().stdout_has("First.");
    home.run(&["chat", "-m", "two", "--workspace", dir]).expect_ok().stdout_has("Second.");

    let session = ws.session("local");
    assert_eq!(session.len(), 4);
    assert_eq!(text_of(&session[2]), "two");
    assert_eq!(conversation(Provider::Anthropic, &body(&llm, 1)).len(), 3, "the second run reads the same history");
    let leaked: Vec<_> = fs::read_dir(home.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(leaked.is_empty(), "CHELA_HOME must be ignored when --workspace is given: {leaked:?}");
}

#[test]
fn starting_over_twice_in_a_row_keeps_both_archives() {
    let llm = FakeLlm::start(vec![Step::text("a"), Step::text("b"), Step::text("c")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    ws.chat("first", &[]).expect_ok();
    // Quick runs land in the same second: the archive names must still differ.
    ws.chat("second", &["--new"]).expect_ok();
    ws.chat("third", &["--new"]).expect_ok();
    let archive = ws.path().join("sessions/archive");
    let mut kept: Vec<String> =
        fs::read_dir(&archive).unwrap().map(|e| fs::read_to_string(e.unwrap().path()).unwrap()).collect();
    kept.sort();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(kept[0].contains("\"first\"") && kept[1].contains("\"second\""), "{kept:?}");
    assert_eq!(text_of(&ws.session("local")[0]), "third");
}
