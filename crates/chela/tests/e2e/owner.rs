//! The owner's housekeeping through the real binary: the gateway token shown and rotated, the
//! container's health check, and backups restored (and hostile archives refused).

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use chela_testkit::{FakeLlm, Step};

use crate::gateway::Running;
use crate::{Provider, RUN_LIMIT, Ws, finish};

/// `chela ARGS` without the test's fixed gateway token: the workspace keeps its own.
fn own_token(ws: &Ws, args: &[&str]) -> Command {
    let mut c = ws.cmd(args);
    c.env_remove("CHELA_GATEWAY__TOKEN");
    c
}

/// The status code of `GET path` on the gateway, with `token` as the bearer if given.
fn status_of(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let code = answer.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

#[test]
fn the_gateway_token_goes_only_to_a_terminal_and_a_rotation_locks_the_old_one_out_at_once() {
    let llm = FakeLlm::start(vec![]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let piped = finish(own_token(&ws, &["gateway", "token"]).spawn().unwrap(), RUN_LIMIT);
    piped.expect_code(1).stderr_has("printed only to your terminal");
    assert!(piped.stdout.is_empty(), "{}", piped.stdout);

    let d = Running::start_cmd(own_token(&ws, &["run"]));
    let shown = finish(own_token(&ws, &["gateway", "token", "--yes"]).spawn().unwrap(), RUN_LIMIT);
    let old = shown.expect_ok().stdout.trim().to_owned();
    assert_eq!(old.len(), 64, "{old}");
    assert_eq!(status_of(d.addr, "/v1/models", Some(&old)).0, 200);

    let rotated = finish(own_token(&ws, &["gateway", "token", "--rotate", "--yes"]).spawn().unwrap(), RUN_LIMIT);
    let new = rotated.expect_ok().stdout.trim().to_owned();
    assert_ne!(new, old);
    assert_eq!(status_of(d.addr, "/v1/models", Some(&old)).0, 401, "the old token stops working at once");
    assert_eq!(status_of(d.addr, "/v1/models", Some(&new)).0, 200);
    let log = d.stderr();
    assert!(!log.contains(&old) && !log.contains(&new), "no token in the daemon's log:\n{log}");

    // The health check needs no token and says nothing but ok.
    let (code, body) = status_of(d.addr, "/healthz", None);
    assert_eq!((code, body.trim()), (200, r#"{"status":"ok"}"#));
    let mut health = ws.cmd(&["gateway", "health"]);
    health.env("CHELA_GATEWAY__LISTEN", d.addr.to_string());
    finish(health.spawn().unwrap(), RUN_LIMIT).expect_ok().stdout_has("ok");
    drop(d);
    let mut health = ws.cmd(&["gateway", "health"]);
    health.env("CHELA_GATEWAY__LISTEN", "127.0.0.1:9");
    finish(health.spawn().unwrap(), RUN_LIMIT).expect_code(1).stderr_has("not healthy");

    // A token from the environment cannot be rotated by a file.
    ws.run(&["gateway", "token", "--rotate", "--yes"]).expect_code(1).stderr_has("CHELA_GATEWAY__TOKEN");
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_backup_restores_into_an_empty_workspace_with_its_modes_and_not_over_a_full_one() {
    let llm = FakeLlm::start(vec![Step::text("Noted.")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    ws.chat("remember the tea", &[]).expect_ok();
    ws.run(&["config", "set", "sessions.max_live", "9"]).expect_ok();
    fs::write(ws.path().join("notes.txt"), "shared notes").unwrap();
    fs::set_permissions(ws.path().join("notes.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    let away = tempfile::tempdir().unwrap();
    let archive = away.path().join("b.tar");

    let out = ws.run(&["backup", archive.to_str().unwrap()]);
    out.expect_ok().stdout_has("Wrote").stderr_has("API keys");
    assert_eq!(mode(&archive), 0o600, "the archive holds secrets");
    // Any tar reads it.
    let listed = Command::new("tar").arg("-tvf").arg(&archive).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains("chela.toml") && listed.contains("sessions/cli_local.jsonl"), "{listed}");
    assert!(!listed.contains(".lock"), "lock sidecars are not state:\n{listed}");

    let fresh = away.path().join("restored");
    let into = |extra: &[&str]| {
        let mut args = vec!["restore", archive.to_str().unwrap(), "--workspace", fresh.to_str().unwrap()];
        args.extend_from_slice(extra);
        ws.run(&args)
    };
    into(&[]).expect_ok().stdout_has("Restored");
    for file in ["chela.toml", "overrides.toml", "notes.txt", "sessions/cli_local.jsonl"] {
        assert_eq!(fs::read(ws.path().join(file)).unwrap(), fs::read(fresh.join(file)).unwrap(), "{file}");
        assert_eq!(mode(&ws.path().join(file)), mode(&fresh.join(file)), "{file}");
    }
    assert_eq!(mode(&fresh.join("chela.toml")), 0o600);
    assert_eq!(mode(&fresh.join("notes.txt")), 0o640);

    fs::write(fresh.join("notes.txt"), "changed since").unwrap();
    into(&[]).expect_code(1).stderr_has("already holds files").stderr_has("--force");
    assert_eq!(fs::read_to_string(fresh.join("notes.txt")).unwrap(), "changed since");
    into(&["--force"]).expect_ok();
    assert_eq!(fs::read_to_string(fresh.join("notes.txt")).unwrap(), "shared notes");
}

/// One ustar header (and data) as another tar could write it: any name, any type.
fn entry(name: &str, kind: u8, data: &[u8], link: &str) -> Vec<u8> {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(format!("{:011o}\0", data.len()).as_bytes());
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().next_multiple_of(512), 0);
    out
}

#[test]
fn restore_refuses_archives_that_climb_out_hold_links_or_go_through_a_planted_link() {
    let ws = Ws::empty();
    let away = tempfile::tempdir().unwrap();
    let outside = away.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let hostile: [(&str, Vec<u8>); 5] = [
        ("climbs", entry("../outside/escaped.txt", b'0', b"x", "")),
        ("absolute", entry(&format!("{}/abs.txt", outside.display()), b'0', b"x", "")),
        (
            "symlink",
            [entry("link", b'2', b"", outside.to_str().unwrap()), entry("link/via.txt", b'0', b"x", "")].concat(),
        ),
        ("hardlink", entry("hard", b'1', b"", "/etc/passwd")),
        ("device", entry("dev", b'3', b"", "")),
    ];
    for (what, mut bytes) in hostile {
        // A good entry first: a refused archive writes nothing at all.
        bytes.splice(0..0, entry("first.txt", b'0', b"fine", ""));
        bytes.resize(bytes.len() + 1024, 0);
        let file = away.path().join(format!("{what}.tar"));
        fs::write(&file, &bytes).unwrap();
        let target = away.path().join(format!("ws-{what}"));
        let out = ws.run(&["restore", file.to_str().unwrap(), "--workspace", target.to_str().unwrap()]);
        out.expect_code(1).stderr_has("is refused");
        assert!(!target.join("first.txt").exists(), "{what}: nothing is written");
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0, "{what}: nothing escaped");
    }
    // A link planted in the workspace does not carry a restore elsewhere, even with --force.
    let target = away.path().join("ws-planted");
    fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(&outside, target.join("sessions")).unwrap();
    let mut bytes = entry("sessions/cli_x.jsonl", b'0', b"{}\n", "");
    bytes.resize(bytes.len() + 1024, 0);
    let file = away.path().join("planted.tar");
    fs::write(&file, &bytes).unwrap();
    let out = ws.run(&["restore", file.to_str().unwrap(), "--workspace", target.to_str().unwrap(), "--force"]);
    out.expect_code(1).stderr_has("symbolic link");
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
}

#[test]
fn status_shows_each_channels_live_state_from_the_running_daemon() {
    use chela_testkit::telegram::FakeTelegram;
    let llm = FakeLlm::start(vec![]);
    let tg = FakeTelegram::start(crate::telegram::TOKEN);
    let mut ws = crate::telegram::ws_for(Provider::Anthropic, &llm, &tg, "");
    // `chela status` finds the daemon at its configured address, so the port is fixed here.
    ws.set_env("CHELA_GATEWAY__LISTEN", &free_port());
    let d = Running::start(&ws);
    tg.wait_calls("getUpdates", 1, std::time::Duration::from_secs(20));
    ws.run(&["status"]).expect_ok().stdout_has("telegram connected for ");
    let json: serde_json::Value = serde_json::from_str(&ws.run(&["status", "--json"]).stdout).unwrap();
    let telegram = &json["channels"][0];
    assert_eq!((telegram["name"].as_str(), telegram["connected"].as_bool()), (Some("telegram"), Some(true)), "{json}");
    drop(d);

    // Telegram unreachable: the daemon keeps trying, and status says why it fails.
    let mut ws = Ws::for_llm(
        Provider::Anthropic,
        &llm,
        &format!("[channels.telegram]\ntoken = \"{}\"\napi_base = \"http://127.0.0.1:9\"\n", crate::telegram::TOKEN),
    );
    ws.set_env("CHELA_GATEWAY__LISTEN", &free_port());
    let _d = Running::start(&ws);
    let mut out = ws.run(&["status"]);
    crate::wait_for("the failure to be reported", RUN_LIMIT, || {
        out = ws.run(&["status"]);
        out.stdout.contains("telegram failing: ")
    });
    out.expect_ok().stdout_has("connect");
    let json: serde_json::Value = serde_json::from_str(&ws.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(json["channels"][0]["connected"], false, "{json}");
    assert!(json["channels"][0]["last_error"].as_str().is_some_and(|e| !e.is_empty()), "{json}");
}

#[test]
fn status_lists_the_devices_connected_to_the_running_daemon_while_they_are() {
    use crate::xiaozhi_sdk::Device;
    let llm = FakeLlm::start(vec![Step::text("Hello."), Step::text("Bye.")]);
    // The device waits for each reply to be spoken: speech comes from the fake audio API.
    let audio = chela_testkit::audio::FakeAudio::start("unused");
    let url = audio.base_url();
    let voice = format!("\n[voice]\nasr_base_url = \"{url}\"\ntts_base_url = \"{url}\"\n");
    let mut ws = Ws::for_llm(Provider::OpenAi, &llm, &voice);
    ws.set_env("CHELA_GATEWAY__LISTEN", &free_port());
    let d = Running::start(&ws);
    let online = |ws: &Ws| -> serde_json::Value {
        let json: serde_json::Value = serde_json::from_str(&ws.run(&["status", "--json"]).stdout).unwrap();
        json["devices"].clone()
    };
    assert_eq!(online(&ws)["online"], 0, "no device yet");
    // The daemon's report needs the gateway token.
    assert_eq!(status_of(d.addr, "/api/live", None).0, 401);

    let mac = "aa:bb:cc:dd:ee:42";
    let mut dev = Device::spawn(&d, "text", mac, &["--text", "hi", "--then", "bye"]);
    dev.approve(&ws);
    // Between its two utterances the device stays connected.
    dev.wait_event("the pause between the utterances", |e| e["event"] == "waiting");
    ws.run(&["status"]).expect_ok().stdout_has(&format!("online:    1 device(s) connected now: {mac}"));
    let devices = online(&ws);
    assert_eq!((devices["online"].as_u64(), devices["online_ids"][0].as_str()), (Some(1), Some(mac)), "{devices}");

    dev.go();
    dev.finish();
    crate::wait_for("the device to be gone", RUN_LIMIT, || online(&ws)["online"] == 0);
    ws.run(&["status"]).expect_ok().stdout_has("online:    0 device(s) connected now\n");
    drop(d);
    // With no daemon the files speak, and nobody is connected.
    assert!(online(&ws)["online"].is_null());
}

/// A loopback address whose port was free a moment ago.
fn free_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string()
}
