//! Ctrl-C: it cancels the turn in progress. A one-shot chat then exits 130; the interactive
//! chat goes back to its prompt and keeps working.

use std::io::Write;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use chela_testkit::{FakeLlm, Step};

use crate::{Capture, Provider, Ws, body, conversation, finish, text_of, wait_exit, wait_for};

/// How late the scripted answers come: far longer than a cancelled turn may take to end.
const SLOW_MS: u64 = 5000;

/// Sends SIGINT, as a terminal does on Ctrl-C.
// The one unsafe call in these tests: std has no way to send a signal other than SIGKILL.
#[allow(unsafe_code)]
pub fn interrupt(child: &Child) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with a live child's pid and a valid signal number has no memory effects.
    let rc = unsafe { libc::kill(pid, libc::SIGINT) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
}

#[test]
fn ctrl_c_cancels_a_one_shot_turn_with_status_130() {
    let llm = FakeLlm::start(vec![Step::text("Too late.").delay_ms(SLOW_MS)]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let child = ws.cmd(&["chat", "-m", "Take your time."]).spawn().unwrap();
    wait_for("the model request", Duration::from_secs(10), || llm.requests().len() == 1);
    let sent = Instant::now();
    interrupt(&child);
    let out = finish(child, Duration::from_secs(10));
    let took = sent.elapsed();

    out.expect_code(130).stderr_has("cancelled");
    assert_eq!(out.stdout, "");
    assert!(took < Duration::from_millis(2000), "the cancelled turn took {took:?} to end");
    // The request was dropped, not waited for.
    wait_for("chela to hang up", Duration::from_secs(2), || llm.open_connections() == 0);
    let session = ws.session("local");
    assert_eq!(session.len(), 2, "{session:?}");
    assert_eq!(text_of(&session[0]), "Take your time.");
    assert_eq!(session[1]["role"], "assistant");
    assert_eq!(text_of(&session[1]), "(turn cancelled by the user)");
}

#[test]
fn ctrl_c_in_the_interactive_chat_cancels_only_the_turn() {
    let llm = FakeLlm::start(vec![Step::text("Too late.").delay_ms(SLOW_MS), Step::text("Second answer.")]);
    let ws = Ws::for_llm(Provider::OpenAi, &llm, "");
    let mut child = ws.cmd(&["chat"]).stdin(Stdio::piped()).spawn().unwrap();
    let stdout = Capture::start(child.stdout.take());
    let stderr = Capture::start(child.stderr.take());
    let mut stdin = child.stdin.take().unwrap();

    writeln!(stdin, "first question").unwrap();
    wait_for("the first request", Duration::from_secs(10), || llm.requests().len() == 1);
    let sent = Instant::now();
    interrupt(&child);
    wait_for("the cancel notice", Duration::from_secs(2), || stderr.now().contains("(turn cancelled)"));
    assert!(sent.elapsed() < Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "chela left after Ctrl-C during a turn:\n{}", stderr.now());
    wait_for("chela to hang up", Duration::from_secs(2), || llm.open_connections() == 0);

    writeln!(stdin, "second question").unwrap();
    wait_for("the second answer", Duration::from_secs(10), || stdout.now().contains("Second answer."));
    // The cancelled exchange stays in the history, closed with a note.
    let said: Vec<String> = conversation(Provider::OpenAi, &body(&llm, 1)).iter().map(text_of).collect();
    assert_eq!(said, ["first question", "(turn cancelled by the user)", "second question"]);

    drop(stdin);
    let status = wait_exit(&mut child, Duration::from_secs(10));
    let (stdout, stderr) = (stdout.finish(), stderr.finish());
    assert_eq!(status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stdout.contains("Too late."), "{stdout}");
    assert_eq!(llm.requests().len(), 2);
    assert_eq!(ws.session("local").len(), 4);
}
