//! Two `chela` processes on one session at once: the session lock keeps the turns whole and in
//! order, and the later turn starts from the earlier one.

use chela_testkit::{FakeLlm, Step};

use crate::{Provider, RUN_LIMIT, Ws, body, conversation, finish, text_of, wait_for};

#[test]
fn two_chat_processes_on_one_session_take_turns_and_the_second_sees_the_first() {
    // The first answer is slow, so the second process starts while the first turn runs.
    let llm = FakeLlm::start(vec![Step::text("one").delay_ms(700), Step::text("two")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let first = ws.cmd(&["chat", "-m", "first"]).spawn().unwrap();
    wait_for("the first turn at the model", RUN_LIMIT, || !llm.requests().is_empty());
    let second = ws.cmd(&["chat", "-m", "second"]).spawn().unwrap();
    let (first, second) = (finish(first, RUN_LIMIT), finish(second, RUN_LIMIT));
    first.expect_ok().stdout_has("one");
    second.expect_ok().stdout_has("two");

    let sent: Vec<String> = conversation(Provider::Anthropic, &body(&llm, 1)).iter().map(text_of).collect();
    assert_eq!(sent, ["first", "one", "second"], "the second turn waited for the first and saw it");
    let saved: Vec<String> = ws.session("local").iter().map(text_of).collect();
    assert_eq!(saved, ["first", "one", "second", "two"], "every line whole, the turns in order");
}
