//! xiaozhi devices over MQTT + UDP against the real `chela run`, played by
//! `tests/xiaozhi/mqtt_device.py`, which follows the firmware: the OTA check, the owner's
//! approval, the OTA answer's `mqtt` block, CONNECT with its login, a version 3 `udp` hello,
//! Opus as AES-128-CTR datagrams both ways, device MCP over MQTT, and goodbye. The conversation
//! scenarios are the WebSocket ones (`xiaozhi_sdk.rs`), run on this transport, plus what only
//! this transport has: the login's shape, the datagram numbering, and the hostile cases.

use std::io::{Read, Write};
use std::time::Duration;

use chela_testkit::{FakeLlm, Step};
use serde_json::Value;

use crate::gateway::Running;
use crate::xiaozhi_sdk::{self as sdk, Device, Transport, Voice, event};
use crate::{Provider, Ws};

const T: Transport = Transport::Mqtt;

/// The MQTT address `chela run` says devices connect to.
fn mqtt_addr(d: &Running) -> String {
    let log = d.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("xiaozhi devices connect over"))
        .unwrap_or_else(|| panic!("no MQTT endpoint in the log:\n{log}"));
    line.split(" to ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().to_owned()
}

#[track_caller]
fn healthy(d: &Running) {
    let mut s = std::net::TcpStream::connect(d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}\n--- daemon log\n{}", d.stderr());
}

/// Every downlink audio summary: numbered from 1 after its hello, strictly increasing.
#[track_caller]
fn numbered_from_one(events: &[Value]) {
    for a in event(events, "audio") {
        if a["frames"].as_u64().unwrap() > 0 {
            assert!(a["first_seq"] == 1 && a["increasing"] == true, "{a}");
        }
    }
}

/// The conversation ends with the device's goodbye; its MQTT connection stays.
#[track_caller]
fn said_goodbye(events: &[Value]) {
    let after = event(events, "after_goodbye");
    assert_eq!(after.len(), 1, "{events:?}");
    assert_eq!(after[0]["connected"], true, "{events:?}");
}

#[test]
fn an_mqtt_device_is_onboarded_and_gets_its_login_once_the_owner_approves_its_code() {
    let llm = FakeLlm::start(vec![]);
    let ws = Ws::for_llm(Provider::OpenAi, &llm, T.config());
    let d = Running::start(&ws);
    let mac = "aa:bb:cc:dd:ee:41";
    let dev = Device::spawn_on(T, &d, "onboard", mac, &[]);
    let code = dev.approve(&ws);
    let events = dev.finish();

    let otas = event(&events, "ota");
    assert_eq!(otas.len(), 2, "{events:?}");
    // First boot: a code, and neither transport's block.
    assert!(otas[0]["activation_message"].as_str().unwrap().contains(&code), "{:?}", otas[0]);
    assert!(otas[0]["websocket"] == false && otas[0]["mqtt"] == false, "{:?}", otas[0]);
    // After approval: the MQTT block only (the firmware prefers `mqtt` when both are there).
    let m = &otas[1]["mqtt"];
    assert_eq!(otas[1]["activation_code"], Value::Null);
    assert_eq!(otas[1]["websocket"], false, "{:?}", otas[1]);
    assert_eq!(m["endpoint"], mqtt_addr(&d).as_str(), "{m}");
    let client_id = m["client_id"].as_str().unwrap();
    let parts: Vec<&str> = client_id.split("@@@").collect();
    assert!(parts.len() == 3 && parts[0].starts_with("GID_") && parts[1] == "aa_bb_cc_dd_ee_41", "{client_id}");
    assert_eq!(m["username"], mac);
    assert_eq!(m["publish_topic"], "device-server");
    assert_eq!(m["subscribe_topic"], "devices/p2p/aa_bb_cc_dd_ee_41");
    assert_eq!(m["keepalive"], 240);
    assert_eq!(otas[1]["password_len"], 64, "{:?}", otas[1]);
    // A rebooting device's check: the endpoint again, no password to replace the one it keeps.
    let again = event(&events, "ota_again");
    assert_eq!(again[0]["endpoint"], m["endpoint"]);
    assert_eq!(again[0]["has_password"], false, "{:?}", again[0]);
    ws.run(&["device", "list"]).expect_ok().stdout_has(mac).stdout_has("approved");
}

#[test]
fn mqtt_a_typed_utterance_is_answered_with_tts_over_mqtt_and_opus_over_udp_that_decodes() {
    let events = sdk::typed_utterance(T);
    // The hello's nonce is the datagram header's template: type 1, flags 0, then the ssrc.
    let hello = event(&events, "hello");
    assert!(hello[0]["nonce_head"] == "0100" && hello[0]["ssrc"] != "00000000", "{:?}", hello[0]);
    numbered_from_one(&events);
    said_goodbye(&events);
}

#[test]
fn mqtt_a_spoken_utterance_over_udp_reaches_asr_and_the_reply_decodes() {
    let events = sdk::spoken_utterance(T);
    numbered_from_one(&events);
    said_goodbye(&events);
}

#[test]
fn mqtt_the_model_calls_a_tool_the_device_serves_over_mcp_on_mqtt() {
    let events = sdk::device_tool(T);
    said_goodbye(&events);
}

/// A device that lists its tools a second after its hello (busy elsewhere): the first
/// utterance, sent before that, waits for the listing (up to the channel's bound), so the model's
/// first request already offers the device's tool.
#[test]
fn mqtt_the_first_turn_waits_for_a_slow_device_to_list_its_tools() {
    let events = sdk::device_tool_with(T, &["--list-delay", "1"]);
    said_goodbye(&events);
}

#[test]
fn mqtt_abort_stops_the_reply_and_no_datagram_follows() {
    let events = sdk::abort_stops(T);
    said_goodbye(&events);
}

/// The hostile run (`abuse` in the driver) beside a well-behaved device talking at the same
/// time: every bad login is refused, no stray datagram reaches or moves the conversation, the
/// newer of two connections with one client id wins, a silent device is closed after 1.5 × its
/// keep-alive; the other device's turn, and `/health`, are untouched.
#[test]
fn mqtt_hostile_logins_and_datagrams_and_a_vanished_device_leave_the_daemon_and_others_fine() {
    let script = (0..4).map(|_| Step::text("Fine, thanks.")).collect();
    let v = Voice::start(T, script, "unused");
    let bad = v.device("abuse", "aa:bb:cc:dd:ee:42", &["--text", "how are you?"]);
    bad.approve(&v.ws);
    let good = v.device("text", "aa:bb:cc:dd:ee:43", &["--text", "and you?"]);
    good.approve(&v.ws);
    healthy(&v.d);
    let good = good.finish();
    let events = bad.finish();
    healthy(&v.d);

    let refused = event(&events, "refused");
    assert_eq!(refused.len(), 3, "{events:?}");
    for r in &refused {
        assert!(r["reason"] != "Success" && r["closed"] == true, "{r}");
    }
    // The turns after the stray datagrams, and after the takeover, were heard by the device only.
    let audio = event(&events, "audio");
    assert_eq!(audio.len(), 2, "{events:?}");
    for a in &audio {
        assert!(a["frames"].as_u64().unwrap() > 0 && a["first_seq"] == 1 && a["increasing"] == true, "{a}");
        assert!((420.0..460.0).contains(&a["peak_hz"].as_f64().unwrap()), "{a}");
    }
    assert_eq!(event(&events, "forger")[0]["heard"], false, "{events:?}");
    assert_eq!(event(&events, "older_closed")[0]["closed"], true, "{events:?}");
    assert!(event(&events, "bad_datagram").is_empty() && event(&events, "old_datagram").is_empty(), "{events:?}");
    let vanished = event(&events, "vanished")[0];
    let after = vanished["after_ms"].as_u64().unwrap();
    // 1.5 s from the last packet; the select started a little after it.
    assert!(vanished["closed_by_server"] == true && (500..10_000).contains(&after), "{vanished}");
    // The well-behaved device's turn, meanwhile.
    assert_eq!(sdk::tts(&sdk::messages(&good)), ["start", "sentence_start Fine, thanks.", "stop"], "{good:?}");
    let a = event(&good, "audio")[0];
    assert!(a["frames"].as_u64().unwrap() > 0, "{a}");
}

/// `chela device transport`: a device approved over the WebSocket is switched to MQTT while
/// `xiaozhi.transport` stays websocket. Its next OTA check gets the `mqtt` block with a fresh
/// login (the endpoint starts for it), it talks over MQTT + UDP, and switched back it is handed
/// the WebSocket again.
#[test]
fn one_device_is_switched_to_mqtt_and_back_while_the_setting_stays_websocket() {
    let ports = "\n[xiaozhi]\nmqtt_listen = \"127.0.0.1:0\"\nudp_listen = \"127.0.0.1:0\"\n";
    let v = Voice::start_with(Transport::WebSocket, vec![Step::text("Over MQTT now.")], "unused", ports);
    let mac = "aa:bb:cc:dd:ee:44";
    let dev = v.device("onboard", mac, &[]);
    dev.approve(&v.ws);
    let events = dev.finish();
    assert_eq!(event(&events, "ota")[1]["websocket_url"], format!("ws://{}/xiaozhi/v1/", v.d.addr));
    assert!(!v.d.stderr().contains("connect over MQTT"), "no device needed MQTT yet");

    v.ws.run(&["device", "transport", mac, "mqtt"]).expect_ok().stdout_has("mqtt");
    v.ws.run(&["device", "list"]).expect_ok().stdout_has("over mqtt");
    let dev = Device::spawn_on(T, &v.d, "text", mac, &["--known", "--text", "are you there?"]);
    let events = dev.finish();
    let ota = event(&events, "ota");
    assert!(ota[0]["mqtt"] == true && ota[0]["websocket"] == false, "{ota:?}");
    assert_eq!(ota[1]["password_len"], 64, "{ota:?}");
    assert_eq!(sdk::tts(&sdk::messages(&events)), ["start", "sentence_start Over MQTT now.", "stop"], "{events:?}");
    assert!(event(&events, "audio")[0]["frames"].as_u64().unwrap() > 0, "{events:?}");
    numbered_from_one(&events);

    v.ws.run(&["device", "transport", mac, "websocket"]).expect_ok();
    let check = Device::spawn_on(T, &v.d, "check", mac, &[]).finish();
    let c = event(&check, "check")[0];
    assert!(c["websocket"] == true && c["token"] == true && c["mqtt"] == false, "{c}");
    let out = v.ws.run(&["device", "transport", mac, "udp"]);
    assert!(!out.status.success() && out.stderr.contains("not a transport"), "{}", out.stderr);
}

/// `xiaozhi.mqtt_tls_cert`/`key`: the endpoint speaks TLS only. The device, trusting the
/// certificate's CA as the firmware trusts its bundle, onboards and talks over MQTT in TLS; a
/// plain-text CONNECT gets no CONNACK.
#[test]
fn the_mqtt_endpoint_speaks_tls_with_the_configured_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let (cert_path, key_path) = (dir.path().join("mqtt.pem"), dir.path().join("mqtt.key"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let tls = format!("mqtt_tls_cert = \"{}\"\nmqtt_tls_key = \"{}\"\n", cert_path.display(), key_path.display());
    let v = Voice::start_with(T, vec![Step::text("Secure and sound.")], "unused", &tls);
    // The endpoint announces itself once bound, which may follow the gateway's own line.
    crate::wait_for("the MQTT endpoint's TLS line", crate::RUN_LIMIT, || {
        v.d.stderr().contains("connect over MQTT over TLS to")
    });

    let dev = v.device("text", "aa:bb:cc:dd:ee:45", &["--text", "hello?", "--tls-ca", cert_path.to_str().unwrap()]);
    dev.approve(&v.ws);
    let events = dev.finish();
    assert_eq!(sdk::tts(&sdk::messages(&events)), ["start", "sentence_start Secure and sound.", "stop"], "{events:?}");
    assert!(event(&events, "audio")[0]["frames"].as_u64().unwrap() > 0, "{events:?}");

    // MQTT 3.1.1 CONNECT, clean session, keep-alive 60, empty client id, in plain text.
    let mut s = std::net::TcpStream::connect(mqtt_addr(&v.d)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s.write_all(&[0x10, 12, 0, 4, b'M', b'Q', b'T', b'T', 4, 2, 0, 60, 0, 0]).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(got.first() != Some(&0x20), "a plain-text CONNECT was answered: {got:?}");
    healthy(&v.d);
}
