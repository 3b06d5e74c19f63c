//! xiaozhi devices over MQTT + UDP on real 127.0.0.1 sockets: the OTA answer's `mqtt` block,
//! the MQTT endpoint's login and session rules, the hello's `udp` block, and a conversation
//! whose audio goes both ways as AES-128-CTR datagrams. The client plays the firmware
//! (`mqtt_protocol.cc`): it never subscribes, publishes to `device-server`, numbers its
//! datagrams from 1 off the server's nonce. The model is the scripted fake LLM, speech the
//! testkit's `FakeAudio`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chela_proto::xiaozhi::udp as wire;
use chela_testkit::audio::FakeAudio;
use chela_testkit::xiaozhi_mqtt::{Device as Dev, HELLO, write};
use chela_testkit::{FakeLlm, Step};
use rumqttc::mqttbytes::v4::{Connect, ConnectReturnCode, Packet};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::timeout;

use super::tests_xiaozhi_ws::opus_packets;
use super::*;
use crate::channels::xiaozhi::mqtt;
use crate::daemon::Daemon;
use crate::devices::{Device, Devices, Info, State, token_hash};
use crate::voice::testing::espeak_16k;
use crate::workspace::Workspace;

const MAC: &str = "aa:bb:cc:dd:ee:31";
const OTHER: &str = "aa:bb:cc:dd:ee:32";
const CLIENT: &str = "3f1c2a4e-3131-4000-8000-000000000001";
const PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 50000);

struct Rig {
    _dir: tempfile::TempDir,
    llm: FakeLlm,
    audio: FakeAudio,
    gw: Arc<Gateway>,
    mqtt: SocketAddr,
}

/// A daemon with `xiaozhi.transport = mqtt` on ephemeral ports, devices `OTHER` approved with
/// a known token (so its MQTT password is known) and `MAC` not yet known.
async fn rig(script: Vec<Step>, transcript: &str) -> Rig {
    let llm = FakeLlm::start(script);
    let audio = FakeAudio::start(transcript);
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    let settings = [
        ("llm.provider", "anthropic".to_owned()),
        ("llm.base_url", llm.anthropic_base_url()),
        ("llm.api_key", "test-key".to_owned()),
        ("llm.max_retries", "0".to_owned()),
        ("voice.asr_base_url", audio.base_url()),
        ("voice.tts_base_url", audio.base_url()),
        ("xiaozhi.transport", "mqtt".to_owned()),
        ("xiaozhi.mqtt_listen", "127.0.0.1:0".to_owned()),
        ("xiaozhi.udp_listen", "127.0.0.1:0".to_owned()),
    ];
    for (k, v) in &settings {
        crate::config::set_override(&ws, k, v).unwrap();
    }
    Devices::open(&ws)
        .edit(|s| {
            s.devices.push(Device {
                id: OTHER.into(),
                client_id: CLIENT.into(),
                info: Info::default(),
                state: State::Approved,
                token_sha256: token_hash("token-of-other"),
                created: 1,
                last_seen: 1,
                source: String::new(),
                transport: None,
            });
            Ok(())
        })
        .unwrap();
    let daemon = Arc::new(Daemon::load(ws).unwrap());
    let gw = Gateway::new(
        Arc::clone(&daemon),
        "127.0.0.1:18789".parse().unwrap(),
        Some("gw-token".into()),
        Limits::default(),
    );
    xiaozhi::start_mqtt(&gw).await.unwrap();
    let mqtt = gw.mqtt.get().unwrap().tcp;
    Rig { _dir: dir, llm, audio, gw, mqtt }
}

fn other_login() -> (String, String, String) {
    let pass = mqtt::password_for_token(OTHER, CLIENT, "token-of-other").unwrap();
    (mqtt::client_id(OTHER, CLIENT), OTHER.to_owned(), pass)
}

async fn ota(r: &Rig, mac: &str) -> Value {
    let req = hyper::Request::builder()
        .method("POST")
        .uri("/xiaozhi/ota/")
        .header("host", "127.0.0.1:18789")
        .header("Device-Id", mac)
        .header("Client-Id", CLIENT)
        .header("User-Agent", "bread-compact-wifi/2.0.5")
        .header("Content-Type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")))
        .unwrap();
    let resp = r.gw.handle(PEER, req).await;
    assert_eq!(resp.status(), hyper::StatusCode::OK);
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

/// Device `OTHER` (or whoever the login names) on MQTT: the testkit's firmware-like device.
async fn connect(
    addr: SocketAddr,
    (client_id, user, pass): (String, String, String),
    keepalive: u16,
) -> Result<Dev, ConnectReturnCode> {
    Dev::connect(addr, None, &client_id, &user, &pass, keepalive).await
}

fn decode_24k(packets: &[(u32, Vec<u8>)]) -> usize {
    let mut dec = crate::voice::opus::Decoder::new(24_000).unwrap();
    packets.iter().map(|(_, p)| dec.decode(p).unwrap().len()).sum()
}

#[tokio::test]
async fn an_approved_device_gets_the_mqtt_block_only_after_approval() {
    let r = rig(vec![], "unused").await;
    let a = ota(&r, MAC).await;
    assert!(a.get("mqtt").is_none() && a.get("websocket").is_none(), "{a}");
    let code = a["activation"]["code"].as_str().unwrap().to_owned();
    let ws = r.gw.daemon.workspace().clone();
    Devices::open(&ws).edit(|s| s.approve(&code, 2)).unwrap();
    let a = ota(&r, MAC).await;
    assert!(a.get("activation").is_none() && a.get("websocket").is_none(), "{a}");
    let m = &a["mqtt"];
    assert_eq!(m["endpoint"], r.mqtt.to_string());
    assert_eq!(m["client_id"], format!("GID_chela@@@aa_bb_cc_dd_ee_31@@@{CLIENT}"));
    assert_eq!(m["username"], MAC);
    assert_eq!(m["publish_topic"], "device-server");
    assert_eq!(m["subscribe_topic"], "devices/p2p/aa_bb_cc_dd_ee_31");
    assert_eq!(m["keepalive"], 240);
    let password = m["password"].as_str().unwrap().to_owned();
    let login = (m["client_id"].as_str().unwrap().to_owned(), MAC.to_owned(), password.clone());
    assert!(connect(r.mqtt, login.clone(), 60).await.is_ok(), "the OTA answer's credentials open MQTT");
    let again = ota(&r, MAC).await;
    assert!(again["mqtt"].get("password").is_none(), "the password is handed out once: {again}");
    // Revoking the device revokes its MQTT password with its token.
    Devices::open(&ws).edit(|s| s.revoke(MAC)).unwrap();
    assert_eq!(connect(r.mqtt, login, 60).await.err(), Some(ConnectReturnCode::BadUserNamePassword));
}

#[tokio::test]
async fn a_typed_utterance_is_answered_with_tts_over_mqtt_and_opus_over_udp() {
    let r = rig(vec![Step::text("😊 Hello there. How are you?")], "unused").await;
    let mut d = connect(r.mqtt, other_login(), 60).await.unwrap();
    let a = d.hello().await;
    assert_eq!(a["transport"], "udp");
    assert_eq!(a["version"], 3);
    assert_eq!(a["udp"]["encryption"], "aes-128-ctr");
    assert_eq!(a["udp"]["key"].as_str().unwrap().len(), 32);
    assert_eq!(&d.nonce[..2], &[1, 0], "type and flags the device copies into each header");
    assert_eq!(a["audio_params"]["sample_rate"], 24000);
    let sid = a["session_id"].as_str().unwrap().to_owned();
    // The device's first datagram is where the server learns its address.
    d.send_audio(&opus_packets(&[0i16; 960])[0]).await;
    let detect = json!({"session_id": sid, "type": "listen", "state": "detect", "text": "hello"});
    d.publish(&detect.to_string()).await;
    let (js, audio) = d.until_tts_stop().await;
    assert_eq!(js[0], json!({"type": "stt", "session_id": sid, "text": "hello"}));
    assert_eq!(js[1]["emotion"], "happy");
    let states: Vec<&str> = js[2..].iter().map(|v| v["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["start", "sentence_start", "sentence_start", "stop"], "{js:?}");
    let seqs: Vec<u32> = audio.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=u32::try_from(seqs.len()).unwrap()).collect::<Vec<_>>(), "downlink numbered from 1");
    assert!(decode_24k(&audio) >= 24 * 50 * 24, "the answer decodes as speech");
    assert_eq!(r.llm.requests().len(), 1);

    // Goodbye ends the conversation, not the connection: a new hello gets new keys and
    // downlink sequences from 1 again.
    let old_key = d.key;
    d.publish(&json!({"session_id": sid, "type": "goodbye"}).to_string()).await;
    let b = d.hello().await;
    assert_ne!(b["session_id"], a["session_id"]);
    assert_ne!(d.key, old_key);
}

#[tokio::test]
async fn spoken_speech_over_udp_is_recognised_and_answered() {
    let r = rig(vec![Step::text("It is noon.")], "what time is it").await;
    let mut d = connect(r.mqtt, other_login(), 60).await.unwrap();
    d.hello().await;
    d.publish(r#"{"type":"listen","state":"start","mode":"auto"}"#).await;
    let mut pcm = vec![0i16; 16 * 300];
    pcm.extend(espeak_16k("What time is it?"));
    pcm.extend(vec![0i16; 16 * 1500]);
    // A device sends a packet per 60 ms; three times faster here, so well inside the uplink
    // queue's bound (a burst of more than `udp::AUDIO_QUEUE` at once is dropped by design).
    let mut pace = tokio::time::interval(Duration::from_millis(20));
    for p in opus_packets(&pcm) {
        pace.tick().await;
        d.send_audio(&p).await;
    }
    let (js, audio) = d.until_tts_stop().await;
    assert_eq!(js[0]["type"], "stt");
    assert_eq!(js[0]["text"], "what time is it");
    assert!(decode_24k(&audio) > 0);
    assert!(r.audio.calls()[0].file_is_wav);
}

#[tokio::test]
async fn wrong_logins_are_refused_with_the_reason() {
    let r = rig(vec![], "unused").await;
    let (id, user, pass) = other_login();
    let bad = |c: &str, u: &str, p: &str| (c.to_owned(), u.to_owned(), p.to_owned());
    assert_eq!(connect(r.mqtt, bad(&id, &user, "wrong"), 60).await.err(), Some(ConnectReturnCode::BadUserNamePassword));
    assert_eq!(connect(r.mqtt, bad(&id, MAC, &pass), 60).await.err(), Some(ConnectReturnCode::BadUserNamePassword));
    let stranger = mqtt::client_id(MAC, CLIENT);
    assert_eq!(
        connect(r.mqtt, bad(&stranger, MAC, &pass), 60).await.err(),
        Some(ConnectReturnCode::BadUserNamePassword)
    );
    assert_eq!(
        connect(r.mqtt, bad("not-a-device", &user, &pass), 60).await.err(),
        Some(ConnectReturnCode::BadClientId)
    );
    let other_client = mqtt::client_id(OTHER, "another-client");
    assert_eq!(
        connect(r.mqtt, bad(&other_client, &user, &pass), 60).await.err(),
        Some(ConnectReturnCode::BadUserNamePassword)
    );
    assert!(connect(r.mqtt, (id, user, pass), 60).await.is_ok());
}

#[tokio::test]
async fn a_second_connection_of_one_device_closes_the_first() {
    let r = rig(vec![], "unused").await;
    let mut first = connect(r.mqtt, other_login(), 60).await.unwrap();
    let mut second = connect(r.mqtt, other_login(), 60).await.unwrap();
    assert!(first.packet().await.is_none(), "the older connection is closed");
    second.hello().await;
}

#[tokio::test]
#[allow(
    clippy::disallowed_methods,
    reason = "the endpoint's keep-alive runs on real sockets; the test waits for the close itself and only checks it was not early"
)]
async fn a_silent_device_is_gone_after_one_and_a_half_keepalives() {
    let r = rig(vec![], "unused").await;
    let mut d = connect(r.mqtt, other_login(), 1).await.unwrap();
    let started = std::time::Instant::now();
    assert!(d.packet().await.is_none(), "closed");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1400), "not before 1.5 × keep-alive: {took:?}");
    // A device that pings stays.
    let mut e = connect(r.mqtt, other_login(), 1).await.unwrap();
    for _ in 0..3 {
        e.send(&Packet::PingReq).await;
        assert_eq!(e.packet().await, Some(Packet::PingResp));
    }
}

#[tokio::test]
async fn oversized_and_out_of_order_packets_close_the_connection() {
    let r = rig(vec![], "unused").await;
    let mut d = connect(r.mqtt, other_login(), 60).await.unwrap();
    let big = "x".repeat(crate::channels::xiaozhi::mqtt_wire::MAX_PACKET + 1);
    d.publish(&big).await;
    assert!(d.packet().await.is_none(), "an oversized packet closes");
    let mut d = connect(r.mqtt, other_login(), 60).await.unwrap();
    d.send(&Packet::Connect(Connect::new("again"))).await;
    assert!(d.packet().await.is_none(), "a second CONNECT closes");
    // A first packet that is not CONNECT gets nothing.
    let mut raw = TcpStream::connect(r.mqtt).await.unwrap();
    write(&mut raw, &Packet::PingReq).await;
    let mut b = [0u8; 8];
    assert_eq!(timeout(Duration::from_secs(20), raw.read(&mut b)).await.unwrap().unwrap(), 0);
    assert!(connect(r.mqtt, other_login(), 60).await.is_ok(), "the endpoint still serves");
}

#[tokio::test]
async fn forged_replayed_and_early_datagrams_move_nothing() {
    let r = rig(vec![Step::text("Fine.")], "unused").await;
    let mut d = connect(r.mqtt, other_login(), 60).await.unwrap();
    let udp_at = r.gw.mqtt.get().unwrap().udp;
    let attacker = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // Before any hello: garbage and well-formed datagrams for no channel.
    for i in 0..200u32 {
        let mut g = wire::header(&[1, 0, 0, 0, 0, 0, 0, i as u8, 0, 0, 0, 0, 0, 0, 0, 0], 3, 0, i).unwrap().to_vec();
        g.extend_from_slice(&[1, 2, 3]);
        attacker.send_to(&g, udp_at).await.unwrap();
        attacker.send_to(b"junk", udp_at).await.unwrap();
    }
    let a = d.hello().await;
    let sid = a["session_id"].as_str().unwrap().to_owned();
    let first = opus_packets(&[0i16; 960]).remove(0);
    d.send_audio(&first).await;
    // The attacker knows the ssrc (it is in the clear) but not the key: its datagrams come from
    // another address, or replay the device's sequence.
    for i in 0..200u32 {
        let mut h = wire::header(&d.nonce, 16, 0, d.up + 1 + i).unwrap().to_vec();
        h.extend_from_slice(&[0xAB; 16]);
        attacker.send_to(&h, udp_at).await.unwrap();
        let replay = d.datagram(1, &first);
        attacker.send_to(&replay, udp_at).await.unwrap();
    }
    // The conversation carries on, its audio to the device's own address.
    d.publish(&json!({"session_id": sid, "type": "listen", "state": "detect", "text": "hi"}).to_string()).await;
    let (js, audio) = d.until_tts_stop().await;
    assert_eq!(js[0]["text"], "hi");
    assert!(decode_24k(&audio) > 0, "the device, not the forger, hears the answer");
    let mut buf = [0u8; 64];
    assert!(attacker.try_recv_from(&mut buf).is_err(), "nothing went to the forger");
}

async fn next_mcp(d: &mut Dev) -> Value {
    let v = d.json().await;
    assert_eq!(v["type"], "mcp", "{v}");
    v["payload"].clone()
}

async fn answer_mcp(d: &mut Dev, id: &Value, result: Value) {
    let m = json!({"session_id": "x", "type": "mcp", "payload": {"jsonrpc": "2.0", "id": id, "result": result}});
    d.publish(&m.to_string()).await;
}

/// Waits (bounded) until the device's tool group is there or gone.
async fn group_present(r: &Rig, group: &str, want: bool) -> bool {
    for _ in 0..500 {
        if r.gw.daemon.toolbox().registry().in_group(group).next().is_some() == want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn the_model_calls_a_device_tool_over_mqtt_and_a_vanished_device_takes_its_tools_along() {
    let group = format!("device_{}", OTHER.replace(':', ""));
    let tool = format!("{group}_self_audio_speaker_set_volume");
    let r = rig(vec![Step::tool_call(&tool, json!({"volume": 50})), Step::text("Done.")], "unused").await;
    let mut d = connect(r.mqtt, other_login(), 60).await.unwrap();
    let a = d.hello_with(&HELLO.replace(r#""mcp":false"#, r#""mcp":true"#)).await;
    assert_eq!(a["type"], "hello");
    let init = next_mcp(&mut d).await;
    assert_eq!(init["method"], "initialize", "{init}");
    assert!(init["params"]["capabilities"]["vision"]["token"].is_string(), "{init}");
    let server = json!({"protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": {"name": "b", "version": "1"}});
    answer_mcp(&mut d, &init["id"], server).await;
    let list = loop {
        let m = next_mcp(&mut d).await;
        if m["method"] == "tools/list" {
            break m;
        }
    };
    let tools = json!({"tools": [{"name": "self.audio_speaker.set_volume", "description": "Set the volume.",
        "inputSchema": {"type": "object", "properties": {"volume": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": ["volume"]}}]});
    answer_mcp(&mut d, &list["id"], tools).await;
    assert!(group_present(&r, &group, true).await, "the device's tools are registered");
    d.send_audio(&opus_packets(&[0i16; 960])[0]).await;
    d.publish(r#"{"type":"listen","state":"detect","text":"louder"}"#).await;
    let call = loop {
        let v = d.json().await;
        if v["type"] == "mcp" && v["payload"]["method"] == "tools/call" {
            break v["payload"].clone();
        }
    };
    assert_eq!(call["params"], json!({"name": "self.audio_speaker.set_volume", "arguments": {"volume": 50}}));
    answer_mcp(&mut d, &call["id"], json!({"content": [{"type": "text", "text": "true"}], "isError": false})).await;
    let (js, _) = d.until_tts_stop().await;
    assert!(js.iter().any(|v| v["text"] == "Done."), "{js:?}");
    let second = String::from_utf8_lossy(&r.llm.requests()[1].body).into_owned();
    assert!(second.contains("true"), "the device's answer reached the model: {second}");
    // The device vanishes without a DISCONNECT: its tools go with the connection.
    drop(d);
    assert!(group_present(&r, &group, false).await, "the group is removed");
}

#[test]
fn mqtt_tls_takes_both_files_or_neither_and_only_a_matching_pair() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let one = rcgen::generate_simple_self_signed(vec!["chela.lan".to_owned()]).unwrap();
    let two = rcgen::generate_simple_self_signed(vec!["chela.lan".to_owned()]).unwrap();
    let cert = write("cert.pem", one.cert.pem());
    let key = write("key.pem", one.key_pair.serialize_pem());
    let other_key = write("other.pem", two.key_pair.serialize_pem());
    let err = |c: &str, k: &str| format!("{:#}", xiaozhi::mqtt_tls(c, k).err().expect("refused"));
    assert!(xiaozhi::mqtt_tls("", "").unwrap().is_none(), "no files: plain MQTT");
    assert!(xiaozhi::mqtt_tls(&cert, &key).unwrap().is_some());
    assert!(err(&cert, "").contains("set both, or neither"));
    assert!(err("", &key).contains("set both, or neither"));
    assert!(err(&dir.path().join("absent.pem").to_string_lossy(), &key).contains("xiaozhi.mqtt_tls_cert"));
    assert!(err(&key, &key).contains("xiaozhi.mqtt_tls_cert"), "a key is no certificate");
    assert!(err(&cert, &cert).contains("xiaozhi.mqtt_tls_key"), "a certificate is no key");
    assert!(err(&cert, &other_key).contains("do not make a TLS identity"));
}
