use std::sync::Arc;

use chela_core::session::{encode_summary, encode_turn};
use chela_proto::chat::{Block, Message, Role};
use proptest::prelude::*;

use super::*;
use crate::config::Config;
use crate::memory::index::Index;
use crate::testing::Fixture;
use crate::tools::memory::MemorySearch;

/// `memory_search` as the model calls it, on a runtime of its own.
fn search(fx: &Fixture, query: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(fx.call(MemorySearch, serde_json::json!({"query": query}))).unwrap()
}

/// Switches `memory.index_sessions` as `chela config set` would, for the next tool call.
fn set_sessions(fx: &mut Fixture, on: bool) {
    crate::config::set_override(&fx.ws, "memory.index_sessions", if on { "true" } else { "false" }).unwrap();
    fx.cfg = Arc::new(Config::load(&fx.ws).unwrap());
}

fn write_session(fx: &Fixture, rel: &str, text: &str) {
    let path = fx.root().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn exchange(q: &str, a: &str) -> String {
    encode_turn(&[Message::user_text(q), Message::assistant_text(a)], 1_800_000_000)
}

/// A turn with a tool call whose result holds a secret the person never said.
fn turn_with_a_secret_result() -> String {
    let call = Message {
        role: Role::Assistant,
        content: vec![Block::ToolUse {
            id: "t1".into(),
            name: "http_request".into(),
            input: chela_proto::chat::Json::parse(r#"{"url":"https://api.example/zebra-token"}"#).unwrap(),
        }],
    };
    let result = Message {
        role: Role::User,
        content: vec![Block::tool_result("t1".to_owned(), "token sk-live-quokka-4411", false)],
    };
    encode_turn(
        &[Message::user_text("fetch my balance"), call, result, Message::assistant_text("Your balance is fine.")],
        1,
    )
}

#[test]
fn past_conversations_are_found_when_on_and_absent_when_off() {
    let mut fx = Fixture::new(&[]);
    write_session(&fx, "sessions/telegram_42.jsonl", &exchange("I planted a walnut tree today", "Lovely!"));
    write_session(&fx, "sessions/archive/cli_local-1.jsonl", &exchange("hello", "The marmalade recipe is done."));
    std::fs::write(fx.root().join("MEMORY.md"), "# Memory\n\nLikes walnut bread.\n").unwrap();

    // Off by default: the notes only.
    assert_eq!(search(&fx, "walnut"), "MEMORY.md:3: Likes walnut bread.");
    assert!(search(&fx, "marmalade").starts_with("Nothing in the notes matches"));
    let notes_only = Index::open(&fx.ws).unwrap().counts().unwrap();

    set_sessions(&mut fx, true);
    let found = search(&fx, "walnut tree");
    assert_eq!(found, "sessions/telegram_42.jsonl:1-2: Person: I planted a walnut tree today Chela: Lovely!");
    let found = search(&fx, "marmalade");
    assert_eq!(found, "sessions/archive/cli_local-1.jsonl:1-2: Person: hello Chela: The marmalade recipe is done.");

    // A refresh that does not know the setting (memory_recall's) leaves them be.
    let mut ix = Index::open(&fx.ws).unwrap();
    assert_eq!(ix.refresh().unwrap().files, 0);
    assert!(search(&fx, "marmalade").starts_with("sessions/archive/"));

    // Off again: the next search drops them from the index itself.
    set_sessions(&mut fx, false);
    assert!(search(&fx, "marmalade").starts_with("Nothing in the notes matches"));
    assert_eq!(search(&fx, "walnut"), "MEMORY.md:3: Likes walnut bread.");
    assert_eq!(Index::open(&fx.ws).unwrap().counts().unwrap(), notes_only, "only the notes' pieces are left");
}

#[test]
fn only_what_the_person_and_chela_wrote_is_indexed() {
    let fx = Fixture::new(&[("memory.index_sessions", "true")]);
    let summary = chela_core::session::Summary { text: "They talked about a pelican.".into(), ..Default::default() };
    let text = format!("{}{}", turn_with_a_secret_result(), encode_summary(&summary));
    write_session(&fx, "sessions/cli_local.jsonl", &text);
    assert_eq!(
        search(&fx, "balance"),
        "sessions/cli_local.jsonl:1-4: Person: fetch my balance Chela: Your balance is fine."
    );
    for secret in ["quokka", "zebra", "http_request", "pelican"] {
        assert!(search(&fx, secret).starts_with("Nothing in the notes matches"), "{secret} was indexed");
    }
}

#[test]
fn a_growing_session_is_read_again_before_the_next_search() {
    let fx = Fixture::new(&[("memory.index_sessions", "true")]);
    let rel = "sessions/cli_local.jsonl";
    write_session(&fx, rel, &exchange("first about the heron", "ok"));
    assert!(search(&fx, "heron").starts_with("sessions/cli_local.jsonl:1-2:"));
    assert!(search(&fx, "ibis").starts_with("Nothing"));
    // A turn appended, as the session owner does.
    let mut f = std::fs::OpenOptions::new().append(true).open(fx.root().join(rel)).unwrap();
    std::io::Write::write_all(&mut f, exchange("then about the ibis", "ok").as_bytes()).unwrap();
    assert_eq!(search(&fx, "ibis"), "sessions/cli_local.jsonl:3-4: Person: then about the ibis Chela: ok");
    assert!(search(&fx, "heron").starts_with("sessions/cli_local.jsonl:1-2:"));
}

#[test]
fn corrupt_torn_and_over_long_lines_are_skipped_and_still_counted() {
    let fx = Fixture::new(&[("memory.index_sessions", "true")]);
    let huge = format!("{{\"role\":\"user\",\"content\":\"{} skua\"}}\n", "x".repeat(MAX_LINE_BYTES as usize));
    let text = format!(
        "{}{{not json at all\n\u{0}\u{ff}binary\n{}{}{}{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"te",
        exchange("the kestrel came back", "good"),
        "{\"role\":\"robot\",\"content\":\"a condor\"}\n",
        "[1,2,3]\n",
        exchange("and the plover", "nice"),
    );
    write_session(&fx, "sessions/a.jsonl", &text);
    write_session(&fx, "sessions/b.jsonl", &format!("{huge}{}", exchange("what of the osprey", "gone")));
    assert_eq!(search(&fx, "kestrel"), "sessions/a.jsonl:1-2: Person: the kestrel came back Chela: good");
    assert_eq!(search(&fx, "plover"), "sessions/a.jsonl:7-8: Person: and the plover Chela: nice");
    assert!(search(&fx, "condor").starts_with("Nothing"));
    // The over-long line is skipped unread, and counted.
    assert_eq!(search(&fx, "osprey"), "sessions/b.jsonl:2-3: Person: what of the osprey Chela: gone");
    assert!(search(&fx, "skua").starts_with("Nothing"));
}

#[test]
fn reading_stops_at_the_byte_bound_and_links_are_not_followed() {
    let fx = Fixture::new(&[("memory.index_sessions", "true")]);
    let mut text = String::new();
    let mut k = 0;
    while text.len() as u64 <= MAX_FILE_BYTES {
        text.push_str(&exchange(&format!("question {k} about plants"), "answer"));
        k += 1;
    }
    text.push_str(&exchange("the very last one mentions a lyrebird", "ok"));
    write_session(&fx, "sessions/long.jsonl", &text);
    assert!(search(&fx, "plants").starts_with("sessions/long.jsonl:"));
    assert!(search(&fx, "lyrebird").starts_with("Nothing"), "past the bound nothing is read");

    std::fs::write(fx.root().join("outside.jsonl"), exchange("the secret albatross", "ok")).unwrap();
    std::os::unix::fs::symlink(fx.root().join("outside.jsonl"), fx.root().join("sessions/link.jsonl")).unwrap();
    assert!(search(&fx, "albatross").starts_with("Nothing"));
    // A FIFO or a folder by a session's name is passed over: reading it would block or fail.
    let (fifo, fifo_type) = (fx.root().join("sessions/fifo.jsonl"), rustix::fs::FileType::Fifo);
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, fifo_type, rustix::fs::Mode::from_raw_mode(0o600), 0).unwrap();
    std::fs::create_dir(fx.root().join("sessions/dir.jsonl")).unwrap();
    assert!(search(&fx, "plants").starts_with("sessions/long.jsonl:"));
}

#[test]
fn the_number_of_session_files_is_bounded_newest_names_kept() {
    let fx = Fixture::new(&[("memory.index_sessions", "true")]);
    for k in 0..(MAX_FILES + 2) {
        write_session(&fx, &format!("sessions/chat_{k}.jsonl"), &exchange(&format!("chat {k} about the toucan"), "ok"));
    }
    std::fs::write(fx.root().join("sessions/.hidden.jsonl"), exchange("toucan", "ok")).unwrap();
    std::fs::write(fx.root().join("sessions/notes.txt"), "toucan").unwrap();
    let listed = list(fx.root()).unwrap();
    assert_eq!(listed.len(), MAX_FILES, "{listed:?}");
    assert!(listed.iter().all(|p| p.starts_with("sessions/chat_") && p.ends_with(".jsonl")), "{listed:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_bytes_give_bounded_pieces_within_the_file(bytes in proptest::collection::vec(any::<u8>(), 0..4096),
                                                      lines in proptest::collection::vec("[a-z {}\":\\[\\],]{0,80}", 0..40)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut text = bytes.clone();
        text.push(b'\n');
        for l in &lines {
            text.extend_from_slice(l.as_bytes());
            text.push(b'\n');
        }
        text.extend_from_slice(exchange("a real question", "a real answer").as_bytes());
        std::fs::write(&path, &text).unwrap();
        let pieces = pieces(&std::fs::File::open(&path).unwrap()).unwrap();
        let total = u32::try_from(text.split(|&b| b == b'\n').count()).unwrap();
        for (first, last, piece) in &pieces {
            prop_assert!(1 <= *first && first <= last && *last <= total);
            prop_assert!(piece.len() <= PIECE_LINES * (PIECE_BYTES + 16) + PIECE_BYTES * 2);
        }
        prop_assert!(pieces.last().is_some_and(|(_, _, p)| p.ends_with("Person: a real question\nChela: a real answer")),
                     "{pieces:?}");
    }
}
