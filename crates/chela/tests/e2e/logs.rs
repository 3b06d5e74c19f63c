//! What `chela run` tells a person on stderr at its default level: each line with its time and
//! level, in words (no Rust `Debug` output), from start to stop over a scripted session.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use chela_testkit::FakeLlm;
use chela_testkit::telegram::FakeTelegram;

use crate::gateway::Running;
use crate::telegram::{TOKEN, ws_for};
use crate::{GATEWAY_TOKEN, Provider, wait_for};

const WAIT: Duration = Duration::from_secs(20);

/// What a log line must never show: a struct, an option, a result, as Rust prints them.
const DEBUG_SYNTAX: [&str; 6] = ["{ ", " }", "Some(", "None", "Ok(", "Err("];

#[allow(unsafe_code)]
fn sigterm(d: &Running) {
    // SAFETY: kill(2) with a live child's pid and a valid signal number has no memory effects.
    assert_eq!(unsafe { libc::kill(d.pid(), libc::SIGTERM) }, 0);
}

#[test]
fn the_daemon_log_tells_start_channels_pairing_jobs_and_stop_in_words() {
    let llm = FakeLlm::start(vec![]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    let job = r#"{"id":"tea","name":"Tea","trigger":{"type":"interval","every_s":86400},"action":{"type":"cap","name":"get_current_time"}}"#;
    ws.run(&["cron", "add", job]).expect_ok();
    let mut d = Running::start(&ws);
    tg.wait_calls("getUpdates", 1, WAIT);

    // A stranger asks; the owner approves on the console's API.
    tg.push_text(99, 99, "let me in");
    let sent = tg.wait_sent(WAIT, |s| s.iter().any(|m| m.text.contains("pairing code")));
    let text = &sent.last().unwrap().text;
    let code: String = text.split("chela pairing approve ").nth(1).unwrap().chars().take(8).collect();
    let body = format!(r#"{{"code":"{code}"}}"#);
    let mut s = TcpStream::connect(d.addr).unwrap();
    write!(
        s,
        "POST /api/pairing/approve HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {GATEWAY_TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    ws.run(&["cron", "trigger", "tea"]).expect_ok();
    wait_for("the job's run in the log", WAIT, || d.stderr().contains("job ran"));
    sigterm(&d);
    assert!(d.wait(WAIT).success());
    let log = d.stderr();

    for want in [
        "INFO started: chela",
        "INFO telegram: connected, polling as @",
        "INFO pairing: telegram:99 asks to talk; approve with `chela pairing approve ",
        "INFO pairing: telegram:99 approved",
        "job ran",
        "INFO stopping: asked to (SIGTERM)",
        "INFO stopped",
    ] {
        assert!(log.contains(want), "the log lacks {want:?}:\n{log}");
    }
    for line in log.lines() {
        for bad in DEBUG_SYNTAX {
            assert!(!line.contains(bad), "Rust syntax {bad:?} in a log line:\n{line}");
        }
        let levelled = [" INFO ", " WARN ", "ERROR ", "DEBUG "].iter().any(|l| line.contains(l));
        if levelled {
            let stamp = line.split(' ').next().unwrap_or_default();
            assert!(
                stamp.len() == 24 && stamp.starts_with("20") && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
                "a log line without its time: {line}"
            );
        }
    }
}

#[test]
fn q_leaves_only_warnings_and_log_level_sets_the_default() {
    let llm = FakeLlm::start(vec![]);
    let tg = FakeTelegram::start(TOKEN);
    let ws = ws_for(Provider::Anthropic, &llm, &tg, "");
    for (args, setting, shows_info) in [
        (&["run", "-q"][..], None, false),
        (&["run"][..], Some("warn"), false),
        (&["run", "-v"][..], Some("warn"), true),
    ] {
        match setting {
            Some(level) => ws.run(&["config", "set", "log.level", level]).expect_ok(),
            None => ws.run(&["config", "unset", "log.level"]).expect_ok(),
        };
        let d = Running::start_cmd(ws.cmd(args));
        let polls = tg.calls_to("getUpdates").len();
        tg.wait_calls("getUpdates", polls + 1, WAIT);
        sigterm(&d);
        let mut d = d;
        assert!(d.wait(WAIT).success());
        let log = d.stderr();
        assert_eq!(log.contains("INFO started"), shows_info, "{args:?} with log.level {setting:?}:\n{log}");
    }
}
