//! A graceful stop of the real `chela run` with turns in flight: the answers still go out, and
//! nothing is left running.

use std::time::Duration;

use chela_testkit::telegram::FakeTelegram;
use chela_testkit::{FakeLlm, Step};

use crate::telegram::{OWNER, TOKEN, start};
use crate::{Provider, Ws, finish, wait_for};

const WAIT: Duration = Duration::from_secs(20);

#[test]
#[allow(unsafe_code)]
fn sigterm_with_turns_in_flight_in_two_chats_still_delivers_both_answers_and_exits_cleanly() {
    let llm = FakeLlm::start(vec![Step::text("answer after the stop"), Step::text("the other chat's answer")]);
    // The model keeps its answers back until the daemon was told to stop.
    llm.hold();
    let tg = FakeTelegram::start(TOKEN);
    let settings = format!(
        "[channels.telegram]\ntoken = \"{TOKEN}\"\napi_base = \"{}\"\nallow_from = [\"{OWNER}\", \"43\"]\n",
        tg.base_url()
    );
    let ws = Ws::for_llm(Provider::Anthropic, &llm, &settings);
    let child = start(&ws, &tg);
    tg.push_text(OWNER, OWNER, "a slow question");
    tg.push_text(43, 43, "another slow question");
    wait_for("both turns at the model", WAIT, || llm.requests().len() == 2);
    assert!(tg.sent().is_empty(), "nothing answered before the stop");

    // Telegram holds the first answer up for a second: it is still on its way when the rest
    // of the daemon has stopped.
    tg.rate_limit(1, 1);
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with a live child's pid and a valid signal number has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    // Only now may the model answer: the turns end within the stop's grace, after the signal.
    llm.release();
    let out = finish(child, Duration::from_secs(10));
    out.expect_ok();
    assert!(!out.stderr.contains("did not finish"), "{}", out.stderr);
    // Which chat's turn reached the model first (and got the first scripted answer) is not fixed.
    let sent = tg.sent();
    let mut chats: Vec<i64> = sent.iter().map(|s| s.chat_id).collect();
    let mut texts: Vec<&str> = sent.iter().map(|s| s.text.as_str()).collect();
    chats.sort_unstable();
    texts.sort_unstable();
    assert_eq!(chats, [OWNER, 43]);
    assert_eq!(texts, ["answer after the stop", "the other chat's answer"]);
}
