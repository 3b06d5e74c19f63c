use super::*;
use std::sync::{Arc, Barrier};

const T0: u64 = 1_700_000_000;

fn cfg(vars: &[(&str, &str)]) -> Config {
    let env: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    Config::from_layers(None, None, &env).unwrap()
}

fn ws() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().to_owned())).unwrap();
    (dir, ws)
}

fn code(a: &Admission) -> String {
    match a {
        Admission::NewCode { code } | Admission::StillPending { code } => code.clone(),
        other => panic!("expected a code, got {other:?}"),
    }
}

#[test]
fn a_code_issued_by_the_daemon_is_approved_by_another_process() {
    let (_d, ws) = ws();
    let c = cfg(&[]);
    let daemon = Gate::open(&ws).unwrap();
    let a = daemon.admit(&c, "telegram", "7", T0);
    assert!(matches!(a, Admission::NewCode { .. }), "{a:?}");
    let code = code(&a);
    // The CLI: its own gate, as another process has.
    let cli = Gate::open(&ws).unwrap();
    assert_eq!(cli.list(T0).unwrap().pending[0].code, code);
    let peer = cli.approve(&code, T0 + 1).unwrap();
    assert_eq!((peer.channel.as_str(), peer.sender.as_str()), ("telegram", "7"));
    // The daemon sees the change without a restart.
    assert_eq!(daemon.admit(&c, "telegram", "7", T0 + 2), Admission::Allowed);
    cli.revoke("telegram", "7").unwrap();
    assert!(matches!(daemon.admit(&c, "telegram", "7", T0 + 3), Admission::NewCode { .. }));
    let mode = std::fs::metadata(daemon.path()).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
}

#[test]
fn allow_from_and_the_rate_limit_come_from_the_settings() {
    let (_d, ws) = ws();
    let gate = Gate::open(&ws).unwrap();
    let c = cfg(&[("CHELA_CHANNELS__TELEGRAM__ALLOW_FROM", "42"), ("CHELA_ACCESS__RATE_PER_HOUR", "2")]);
    assert_eq!(gate.admit(&c, "telegram", "42", T0), Admission::Allowed);
    assert_eq!(gate.admit(&c, "telegram", "42", T0), Admission::Allowed);
    assert_eq!(gate.admit(&c, "telegram", "42", T0), Admission::RateLimited { retry_after_secs: 1800 });
    assert_eq!(gate.admit(&c, "telegram", "42", T0), Admission::Silent);
    // The same id on another channel is not listed there.
    assert!(matches!(gate.admit(&c, "feishu", "42", T0), Admission::NewCode { .. }));
    let open = cfg(&[("CHELA_CHANNELS__FEISHU__ALLOW_FROM", "*"), ("CHELA_ACCESS__RATE_PER_HOUR", "0")]);
    for _ in 0..100 {
        assert_eq!(gate.admit(&open, "feishu", "anyone", T0), Admission::Allowed);
    }
    assert!(!gate.path().exists() || gate.list(T0).unwrap().allowed.is_empty(), "allow_from is not stored");
}

/// Several owners' commands and the daemon's codes at once, each through its own gate (as
/// separate processes): every change lands.
#[test]
fn parallel_writers_lose_nothing() {
    let (_d, ws) = ws();
    let c = cfg(&[]);
    let issuer = Gate::open(&ws).unwrap();
    let channels = ["telegram", "feishu", "ws", "api"];
    let mut codes = Vec::new();
    for ch in channels {
        codes.push(code(&issuer.admit(&c, ch, "1", T0)));
    }
    let barrier = Arc::new(Barrier::new(channels.len() + 1));
    let mut handles: Vec<_> = codes
        .into_iter()
        .map(|code| {
            let (ws, barrier) = (ws.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let gate = Gate::open(&ws).unwrap();
                barrier.wait();
                gate.approve(&code, T0 + 1).unwrap();
            })
        })
        .collect();
    // Meanwhile the daemon gives strangers codes.
    let (ws2, b2) = (ws.clone(), Arc::clone(&barrier));
    handles.push(std::thread::spawn(move || {
        let gate = Gate::open(&ws2).unwrap();
        b2.wait();
        for ch in channels {
            assert!(matches!(gate.admit(&cfg(&[]), ch, "2", T0 + 1), Admission::NewCode { .. }));
        }
    }));
    for h in handles {
        h.join().unwrap();
    }
    let l = Gate::open(&ws).unwrap().list(T0 + 2).unwrap();
    assert_eq!(l.allowed.len(), channels.len(), "{l:?}");
    assert_eq!(l.pending.len(), channels.len(), "{l:?}");
    assert!(l.pending.iter().all(|p| p.sender == "2"));
}

#[test]
fn a_garbage_store_is_a_clear_error_and_is_not_overwritten() {
    let (_d, ws) = ws();
    let dir = ws.root().join("state");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(STORE_FILE);
    std::fs::write(&path, "{\"allowed\": [oops").unwrap();
    let e = Gate::open(&ws).unwrap_err().to_string();
    assert!(e.contains("access.json is not a valid pairing store") && e.contains("Chela left it as it is"), "{e}");

    // A gate opened on a good file that then goes bad: commands fail, the daemon keeps going.
    std::fs::remove_file(&path).unwrap();
    let gate = Gate::open(&ws).unwrap();
    let c = cfg(&[("CHELA_CHANNELS__TELEGRAM__ALLOW_FROM", "42")]);
    let pending = code(&gate.admit(&c, "telegram", "7", T0));
    std::fs::write(&path, "not json").unwrap();
    let e = gate.approve(&pending, T0).unwrap_err();
    assert!(matches!(e, GateError::Store(_)), "{e:?}");
    assert!(gate.list(T0).is_err());
    assert_eq!(gate.admit(&c, "telegram", "42", T0), Admission::Allowed);
    assert_eq!(gate.admit(&c, "telegram", "8", T0), Admission::Denied, "no code that could not be stored");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not json", "the bad file is left for the owner");
}

#[test]
fn an_oversize_or_out_of_bounds_store_is_refused() {
    let (_d, ws) = ws();
    let dir = ws.root().join("state");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(STORE_FILE);
    let big = format!("{{\"allowed\": [], \"pad\": \"{}\"}}", "x".repeat(MAX_STORE_BYTES as usize));
    std::fs::write(&path, &big).unwrap();
    let e = Gate::open(&ws).unwrap_err().to_string();
    assert!(e.contains("over the") && e.contains("limit"), "{e}");
    let peers: Vec<String> =
        (0..=access::MAX_ALLOWED).map(|i| format!("{{\"channel\":\"t\",\"sender\":\"{i}\"}}")).collect();
    std::fs::write(&path, format!("{{\"allowed\": [{}]}}", peers.join(","))).unwrap();
    let e = Gate::open(&ws).unwrap_err().to_string();
    assert!(e.contains("more than the 512"), "{e}");
    assert!(std::fs::read_to_string(&path).unwrap().contains("\"sender\":\"512\""), "left as it was");
}

#[test]
fn owner_mistakes_are_rule_errors() {
    let (_d, ws) = ws();
    let gate = Gate::open(&ws).unwrap();
    assert!(matches!(gate.approve("nope", T0), Err(GateError::Rule(AccessError::MalformedCode { .. }))));
    assert!(matches!(gate.deny("ABCDEFGH", T0), Err(GateError::Rule(AccessError::UnknownCode { .. }))));
    assert!(matches!(gate.revoke("telegram", "7"), Err(GateError::Rule(AccessError::NotApproved { .. }))));
}

/// The model (or anyone) writing `state/access.json` directly does not approve anybody: the
/// file has no seal, so the running gate keeps what it had and the owner's commands say why.
#[test]
fn a_planted_approval_is_not_trusted_by_the_daemon_or_the_owner_commands() {
    let (_d, ws) = self::ws();
    let c = cfg(&[]);
    let daemon = Gate::open(&ws).unwrap();
    let pending = code(&daemon.admit(&c, "telegram", "7", T0));
    daemon.approve(&pending, T0).unwrap();
    assert_eq!(daemon.admit(&c, "telegram", "7", T0 + 1), Admission::Allowed);
    let planted = r#"{"allowed": [{"channel": "telegram", "sender": "7", "since": 1},
                                  {"channel": "telegram", "sender": "999", "since": 1}]}"#;
    std::fs::write(daemon.path(), planted).unwrap();
    assert_ne!(daemon.admit(&c, "telegram", "999", T0 + 2), Admission::Allowed, "a planted approval let 999 in");
    assert!(!daemon.may_send(&c, "telegram", "999"), "Chela may not write to 999 either");
    assert_eq!(daemon.admit(&c, "telegram", "7", T0 + 3), Admission::Allowed, "the last good state holds");
    let e = Gate::open(&ws).unwrap_err().to_string();
    assert!(e.contains("changed outside Chela") && e.contains("chela state trust access.json"), "{e}");
    // The same with a copied seal from another workspace's store.
    let (_o, other) = self::ws();
    let foreign = Gate::open(&other).unwrap();
    let c2 = code(&foreign.admit(&c, "telegram", "999", T0));
    foreign.approve(&c2, T0).unwrap();
    std::fs::copy(foreign.path(), daemon.path()).unwrap();
    assert_ne!(daemon.admit(&c, "telegram", "999", T0 + 4), Admission::Allowed, "another workspace's seal");
    // The owner checks the file and trusts it: now it counts.
    std::fs::write(daemon.path(), planted).unwrap();
    crate::authority::trust(daemon.path().parent().unwrap(), STORE_FILE, MAX_STORE_BYTES).unwrap();
    assert_eq!(daemon.admit(&c, "telegram", "999", T0 + 5), Admission::Allowed);
}
