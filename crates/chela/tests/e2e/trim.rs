//! `chela run` gives the kernel back its clean file pages once started and again when quiet after
//! a turn (Linux), and answers as before afterwards.

use std::time::Duration;

use chela_testkit::FakeLlm;
use chela_testkit::Step;
use chela_testkit::telegram::FakeTelegram;

use crate::gateway::Running;
use crate::telegram::{OWNER, TOKEN, ws_for};
use crate::{Provider, wait_for};

const WAIT: Duration = Duration::from_secs(30);
/// `daemon.trim_idle_secs` here: long enough that the turn is answered and the test has read
/// the RSS well before the quiet trim can come (it needs one whole quiet period after the turn).
const QUIET_SECS: u64 = 3;

fn vm_rss_kib(pid: libc::pid_t) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The `RSS A -> B KiB` of the daemon's own log line for the trim `when`.
fn logged_rss(log: &str, when: &str) -> Option<(u64, u64)> {
    let line = log.lines().find(|l| l.contains(&format!("memory trimmed ({when})")))?;
    let rest = line.split("RSS ").nth(1)?;
    let mut n = rest.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap());
    Some((n.next()?, n.next()?))
}

#[allow(unsafe_code)]
fn sigterm(d: &Running) {
    // SAFETY: kill(2) with a live child's pid and a valid signal number has no memory effects.
    assert_eq!(unsafe { libc::kill(d.pid(), libc::SIGTERM) }, 0);
}

#[test]
fn the_daemon_trims_after_start_up_and_when_quiet_and_still_answers() {
    let llm = FakeLlm::start(vec![Step::text("first answer"), Step::text("second answer")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(
        Provider::Anthropic,
        &llm,
        &tg,
        &format!("[daemon]\ntrim_idle_secs = {QUIET_SECS}\n[log]\nlevel = \"debug\"\n"),
    );
    let mut d = Running::start(&ws);
    wait_for("the start-up trim", WAIT, || logged_rss(&d.stderr(), "start-up").is_some());
    let (before, after) = logged_rss(&d.stderr(), "start-up").unwrap();
    assert!(after < before, "start-up trim: RSS {before} -> {after} KiB");

    tg.push_text(OWNER, OWNER, "hi");
    let sent = tg.wait_sent(WAIT, |s| !s.is_empty());
    assert_eq!(sent[0].text, "first answer");
    // The turn's code and buffers are resident now; the quiet trim has not come yet.
    let after_turn = vm_rss_kib(d.pid());
    assert!(logged_rss(&d.stderr(), "idle").is_none(), "trimmed within the quiet period:\n{}", d.stderr());
    wait_for("the trim when quiet", WAIT, || logged_rss(&d.stderr(), "idle").is_some());
    let trimmed = vm_rss_kib(d.pid());
    assert!(trimmed < after_turn, "RSS {after_turn} KiB after the turn, {trimmed} KiB after the trim");
    let (before, after) = logged_rss(&d.stderr(), "idle").unwrap();
    assert!(after < before, "quiet trim: RSS {before} -> {after} KiB");

    // Everything dropped is read back from the page cache: the next turn works as the first did.
    tg.push_text(OWNER, OWNER, "again");
    let sent = tg.wait_sent(WAIT, |s| s.len() >= 2);
    assert_eq!(sent[1].text, "second answer");
    sigterm(&d);
    assert!(d.wait(WAIT).success(), "{}", d.stderr());
    assert!(!d.stderr().contains("cannot trim"), "{}", d.stderr());
}

#[test]
fn no_trim_when_switched_off() {
    let llm = FakeLlm::start(vec![Step::text("answer")]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "[daemon]\ntrim_idle_secs = 0\n[log]\nlevel = \"debug\"\n");
    let mut d = Running::start(&ws);
    wait_for("the trim's word that it is off", WAIT, || d.stderr().contains("memory trim: off"));
    tg.push_text(OWNER, OWNER, "hi");
    tg.wait_sent(WAIT, |s| !s.is_empty());
    sigterm(&d);
    assert!(d.wait(WAIT).success(), "{}", d.stderr());
    assert!(!d.stderr().contains("memory trimmed"), "{}", d.stderr());
}
