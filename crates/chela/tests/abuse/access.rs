//! The abuse corpus of who may talk to Chela: crowds of strangers, guessed codes, floods,
//! stale codes and broken stores, against the real gate and the real `chela pairing` binary,
//! each on its own temporary workspace.

#![allow(
    clippy::disallowed_methods,
    reason = "real processes, sockets and threads are held to real time bounds; paused time cannot reach them"
)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use chela::access::{Gate, STORE_FILE};
use chela::config::Config;
use chela::workspace::Workspace;
use chela_core::access::{
    Admission, CODE_ALPHABET, CODE_LEN, MAX_PENDING_PER_CHANNEL, MAX_TRACKED, STRANGER_REPLIES_PER_HOUR,
};

fn ws() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().to_owned())).unwrap();
    (dir, ws)
}

fn cfg(vars: &[(&str, &str)]) -> Config {
    let env: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    Config::from_layers(None, None, &env).unwrap()
}

fn chela(root: &Path, args: &[&str]) -> Output {
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_chela"));
    c.args(args).env_clear().env("HOME", &home).env("CHELA_HOME", root);
    c.stdin(Stdio::null()).output().expect("cannot run chela")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn code(a: &Admission) -> String {
    match a {
        Admission::NewCode { code } | Admission::StillPending { code } => code.clone(),
        other => panic!("expected a code, got {other:?}"),
    }
}

/// The time the gate is told; the store under test reads no clock of its own.
fn now_secs() -> u64 {
    chela::clock::Clock::system().unix_secs_u64()
}

#[test]
fn a_thousand_strangers_get_three_codes_and_a_bounded_store() {
    let (_d, ws) = ws();
    let gate = Gate::open(&ws).unwrap();
    let c = cfg(&[]);
    let now = now_secs();
    let mut codes = 0;
    for i in 0..1000 {
        match gate.admit(&c, "telegram", &format!("stranger{i}"), now) {
            Admission::NewCode { .. } => codes += 1,
            // Told the queue is full, until the replies all strangers share are spent.
            Admission::TooManyPending | Admission::Silent => {}
            other => panic!("stranger {i}: {other:?}"),
        }
    }
    assert_eq!(codes, MAX_PENDING_PER_CHANNEL);
    let l = gate.list(now).unwrap();
    assert_eq!(l.pending.len(), MAX_PENDING_PER_CHANNEL);
    assert!(l.allowed.is_empty());
    assert!(std::fs::metadata(gate.path()).unwrap().len() < 2048, "the store did not grow with the crowd");
    // And a crowd of ten thousand more leaves the counters bounded: the owner still gets in.
    let owner = cfg(&[("CHELA_CHANNELS__TELEGRAM__ALLOW_FROM", "1")]);
    for i in 0..(MAX_TRACKED * 10) {
        gate.admit(&c, "feishu", &format!("s{i}"), now);
    }
    assert_eq!(gate.admit(&owner, "telegram", "1", now), Admission::Allowed);
}

#[test]
fn guessed_codes_approve_nobody() {
    let (_d, ws) = ws();
    let gate = Gate::open(&ws).unwrap();
    let now = now_secs();
    let real = code(&gate.admit(&cfg(&[]), "telegram", "7", now));
    assert!(CODE_ALPHABET.len() >= 30 && CODE_LEN == 8, "40 bits: not guessable in a code's hour");
    // Ten thousand well-formed guesses: none is the real one by construction, none approves.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..10_000 {
        let guess: String = (0..CODE_LEN)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(CODE_ALPHABET[(state % 32) as usize])
            })
            .collect();
        if guess == real {
            continue;
        }
        assert!(gate.approve(&guess, now).is_err(), "{guess}");
    }
    // Near misses too.
    let mut near = real.clone().into_bytes();
    near[7] = if near[7] == b'2' { b'3' } else { b'2' };
    assert!(gate.approve(std::str::from_utf8(&near).unwrap(), now).is_err());
    assert!(gate.approve(&real[..7], now).is_err());
    let l = gate.list(now).unwrap();
    assert!(l.allowed.is_empty());
    assert_eq!(l.pending.len(), 1, "guesses do not use the real code up");
    assert_eq!(gate.admit(&cfg(&[]), "telegram", "7", now), Admission::StillPending { code: real });
}

#[test]
fn a_flood_from_one_sender_is_answered_once() {
    let (_d, ws) = ws();
    let gate = Gate::open(&ws).unwrap();
    let c = cfg(&[("CHELA_CHANNELS__TELEGRAM__ALLOW_FROM", "42")]);
    let now = now_secs();
    let verdicts: Vec<Admission> = (0..10_000).map(|_| gate.admit(&c, "telegram", "42", now)).collect();
    assert_eq!(verdicts.iter().filter(|a| **a == Admission::Allowed).count(), 30, "the default is 30 an hour");
    assert_eq!(verdicts.iter().filter(|a| matches!(a, Admission::RateLimited { .. })).count(), 1);
    assert_eq!(verdicts.iter().filter(|a| **a == Admission::Silent).count(), 10_000 - 31);
    // A stranger's flood costs the owner nothing: one code, then the same code, then silence.
    let stranger: Vec<Admission> = (0..1000).map(|_| gate.admit(&c, "telegram", "666", now)).collect();
    assert!(matches!(stranger[0], Admission::NewCode { .. }));
    assert_eq!(gate.list(now).unwrap().pending.len(), 1);
    assert!(stranger[999] == Admission::Silent, "{:?}", stranger[999]);
}

#[test]
fn an_expired_code_is_refused_by_the_command() {
    let (d, ws) = ws();
    let state = ws.root().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let past = now_secs() - 10;
    let store = format!(
        r#"{{"pending":[{{"channel":"telegram","sender":"7","code":"7KQ4MXT2","expires_at":{past}}},
            {{"channel":"telegram","sender":"8","code":"8KQ4MXT2","expires_at":{}}}]}}"#,
        past + 4000
    );
    std::fs::write(state.join(STORE_FILE), store).unwrap();
    let o = chela(d.path(), &["pairing", "approve", "7KQ4MXT2"]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("No pending request has the code 7KQ4MXT2"), "{err}");
    let o = chela(d.path(), &["pairing", "list"]);
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert!(out.contains("8KQ4MXT2  telegram:8") && !out.contains("7KQ4MXT2"), "{out}");
}

#[test]
fn the_command_approves_denies_and_revokes_while_the_daemon_runs() {
    let (d, ws) = ws();
    let daemon = Gate::open(&ws).unwrap();
    let c = cfg(&[]);
    let now = now_secs();
    let a = code(&daemon.admit(&c, "telegram", "7", now));
    let b = code(&daemon.admit(&c, "telegram", "8", now));
    let o = chela(d.path(), &["pairing", "approve", &a.to_lowercase()]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(text(&o).0.contains("Approved telegram:7"));
    let o = chela(d.path(), &["pairing", "deny", &b]);
    assert!(text(&o).0.contains("Denied telegram:8"), "{:?}", text(&o));
    assert_eq!(daemon.admit(&c, "telegram", "7", now), Admission::Allowed);
    assert_eq!(daemon.admit(&c, "telegram", "8", now), Admission::Denied);
    let o = chela(d.path(), &["pairing", "revoke", "telegram:7"]);
    assert!(text(&o).0.contains("Revoked telegram:7"), "{:?}", text(&o));
    assert!(matches!(daemon.admit(&c, "telegram", "7", now), Admission::NewCode { .. }));
    let o = chela(d.path(), &["pairing", "revoke", "telegram", "7"]);
    assert!(!o.status.success() && text(&o).1.contains("is not among the approved senders"), "{:?}", text(&o));
}

#[test]
fn a_broken_store_stops_the_command_and_is_kept() {
    let (d, ws) = ws();
    let state = ws.root().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let path = state.join(STORE_FILE);
    std::fs::write(&path, "{\"pending\": 12}").unwrap();
    for args in [&["pairing", "list"][..], &["pairing", "approve", "7KQ4MXT2"], &["pairing", "revoke", "t:1"]] {
        let o = chela(d.path(), args);
        let (_, err) = text(&o);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains("access.json is not a valid pairing store") && err.contains("move it away"), "{err}");
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"pending\": 12}");
}

#[test]
fn the_daemon_refuses_to_start_on_a_broken_store_and_keeps_it() {
    let (d, ws) = ws();
    let state = ws.root().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let path = state.join(STORE_FILE);
    std::fs::write(&path, "[1, 2, 3]").unwrap();
    let home = d.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_chela"))
        .arg("run")
        .env_clear()
        .env("HOME", &home)
        .env("CHELA_HOME", d.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // Polled: the daemon should exit at once; a daemon that started anyway is killed, and fails.
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("chela run started on a broken pairing store");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("access.json is not a valid pairing store") && err.contains("move it away"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "[1, 2, 3]");
}

#[test]
fn strangers_who_fill_the_queue_do_not_stop_pairing_the_owner_clears_it() {
    let (d, ws) = ws();
    let daemon = Gate::open(&ws).unwrap();
    let c = cfg(&[]);
    let now = now_secs();
    for i in 0..MAX_PENDING_PER_CHANNEL {
        assert!(matches!(daemon.admit(&c, "telegram", &format!("crowd{i}"), now), Admission::NewCode { .. }));
    }
    // The real person arrives after the crowd: no code for now.
    assert_eq!(daemon.admit(&c, "telegram", "friend", now), Admission::TooManyPending);
    // The owner sees the queue and clears it from another process while the daemon runs.
    let o = chela(d.path(), &["pairing", "list"]);
    assert!(text(&o).0.contains("chela pairing clear"), "the list says how to clear: {:?}", text(&o));
    let o = chela(d.path(), &["pairing", "clear", "telegram"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(text(&o).0.contains(&format!("Denied {MAX_PENDING_PER_CHANNEL} waiting request(s)")), "{:?}", text(&o));
    // The crowd cannot fill it again with the same senders; the real person gets a code.
    for i in 0..MAX_PENDING_PER_CHANNEL {
        assert_eq!(daemon.admit(&c, "telegram", &format!("crowd{i}"), now), Admission::Denied);
    }
    let friend = code(&daemon.admit(&c, "telegram", "friend", now));
    // New strangers fill the queue again, but cannot push the waiting code out.
    for i in 0..100 {
        daemon.admit(&c, "telegram", &format!("more{i}"), now);
    }
    assert_eq!(daemon.admit(&c, "telegram", "friend", now), Admission::StillPending { code: friend.clone() });
    let o = chela(d.path(), &["pairing", "approve", &friend]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(daemon.admit(&c, "telegram", "friend", now), Admission::Allowed);
}

#[test]
fn a_crowd_of_strangers_gets_a_bounded_number_of_replies() {
    let (_d, ws) = ws();
    let gate = Gate::open(&ws).unwrap();
    // Even with the per-sender limit off, replies to strangers have a bound of their own.
    for c in [cfg(&[]), cfg(&[("CHELA_ACCESS__RATE_PER_HOUR", "0")])] {
        let now = now_secs();
        let mut replies = 0;
        let mut codes = 0;
        for round in 0..5 {
            for i in 0..500 {
                let sender = format!("crowd{i}");
                let verdict = gate.admit(&c, "feishu", &sender, now);
                codes += usize::from(matches!(verdict, Admission::NewCode { .. }));
                replies += usize::from(verdict.reply_text().is_some());
                if round == 0 && gate.reply_to_stranger(&c, "feishu", &sender, now) != Admission::Silent {
                    replies += 1;
                }
            }
        }
        let bound = STRANGER_REPLIES_PER_HOUR as usize + codes;
        assert!(replies <= bound, "3000 messages from 500 strangers got {replies} replies (bound {bound})");
        gate.clear(None, now).unwrap();
    }
}
