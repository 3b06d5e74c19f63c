//! `chela run`: the daemon starts, follows its settings, and stops on SIGTERM or SIGINT.

use std::time::{Duration, Instant};

use chela_testkit::FakeLlm;

use crate::{Provider, Ws, finish};

#[allow(unsafe_code)]
fn signal(child: &std::process::Child, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with a live child's pid and a valid signal number has no memory effects.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
}

/// Waits until the daemon made its workspace. `chela run` installs its signal handlers before
/// it loads (and so creates) the workspace, so once `sessions/` is there a signal is a clean
/// stop, not the default action the tests would report.
fn settle(ws: &Ws) {
    let started = Instant::now();
    while !ws.path().join("sessions").exists() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_daemon_stops_at_once_on_sigterm_and_sigint_with_status_0() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let llm = FakeLlm::start(vec![]);
        let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
        let child = ws.cmd(&["run"]).spawn().unwrap();
        settle(&ws);
        let sent = Instant::now();
        signal(&child, sig);
        let out = finish(child, Duration::from_secs(10));
        out.expect_ok();
        assert!(sent.elapsed() < Duration::from_secs(5), "took {:?} to stop", sent.elapsed());
    }
}

#[test]
fn the_daemon_starts_without_a_key_and_says_what_to_set() {
    let ws = Ws::empty();
    let child = ws.cmd(&["run"]).spawn().unwrap();
    settle(&ws);
    signal(&child, libc::SIGTERM);
    let out = finish(child, Duration::from_secs(10));
    out.expect_ok().stderr_has("no model is configured yet").stderr_has("llm.api_key");
}
