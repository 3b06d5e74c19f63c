//! The xiaozhi conversation over a real 127.0.0.1 WebSocket: the gateway and daemon are real,
//! the model is the scripted fake LLM and the speech providers are the testkit's `FakeAudio`
//! (OpenAI's audio wire formats). The client plays the firmware: its handshake headers, its
//! hello, `listen`/`abort` messages and Opus frames of espeak-ng speech in protocol 1, 2 or 3.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chela_testkit::audio::FakeAudio;
use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::*;
use crate::daemon::Daemon;
use crate::devices::{Device, Devices, Info, State, token_hash};
use crate::voice::testing::espeak_16k;
use crate::workspace::Workspace;

const MAC: &str = "aa:bb:cc:dd:ee:01";
const CLIENT: &str = "3f1c2a4e-1111-4000-8000-000000000001";
const TOKEN: &str = "device-token-1";

pub(super) struct Rig {
    pub _dir: tempfile::TempDir,
    pub llm: FakeLlm,
    pub audio: FakeAudio,
    pub daemon: Arc<Daemon>,
    pub addr: SocketAddr,
}

/// A daemon over the fake LLM and fake audio, serving on 127.0.0.1, with device `MAC`
/// approved (token `TOKEN`).
pub(super) async fn rig(script: Vec<Step>, transcript: &str, limits: Limits) -> Rig {
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
    ];
    for (k, v) in &settings {
        crate::config::set_override(&ws, k, v).unwrap();
    }
    approve(&ws, MAC, TOKEN);
    let daemon = Arc::new(Daemon::load(ws).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gw = Gateway::new(Arc::clone(&daemon), addr, None, limits);
    tokio::spawn(gw.run(listener));
    Rig { _dir: dir, llm, audio, daemon, addr }
}

fn approve(ws: &Workspace, mac: &str, token: &str) {
    Devices::open(ws)
        .edit(|s| {
            s.devices.push(Device {
                id: mac.into(),
                client_id: CLIENT.into(),
                info: Info::default(),
                state: State::Approved,
                token_sha256: token_hash(token),
                created: 1,
                last_seen: 1,
                source: String::new(),
                transport: None,
            });
            Ok(())
        })
        .unwrap();
}

pub(super) type Client = tokio_tungstenite::WebSocketStream<TcpStream>;

/// Opens the conversation as the firmware does; `Err` is the HTTP status of a refusal.
pub(super) async fn dial(addr: SocketAddr, token: &str, version: Option<&str>) -> Result<Client, u16> {
    let mut req = format!("ws://{addr}/xiaozhi/v1/").into_client_request().unwrap();
    let h = req.headers_mut();
    h.insert("Authorization", format!("Bearer {token}").parse().unwrap());
    h.insert("Device-Id", MAC.parse().unwrap());
    h.insert("Client-Id", CLIENT.parse().unwrap());
    if let Some(v) = version {
        h.insert("Protocol-Version", v.parse().unwrap());
    }
    let stream = TcpStream::connect(addr).await.unwrap();
    match tokio_tungstenite::client_async(req, stream).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("{e}"),
    }
}

/// A device without MCP tools, so the conversation tests see only the conversation; a device
/// with them ([`HELLO_MCP`]) is asked for its tools first.
pub(super) const HELLO: &str = r#"{"type":"hello","version":1,"features":{"mcp":false},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;
const HELLO_MCP: &str = r#"{"type":"hello","version":1,"features":{"mcp":true},"transport":"websocket","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}"#;

/// Dials and says hello; returns the client and the server's hello.
pub(super) async fn hello(addr: SocketAddr, version: Option<&str>) -> (Client, Value) {
    let mut c = dial(addr, TOKEN, version).await.expect("the device is let in");
    c.send(WsMessage::text(HELLO)).await.unwrap();
    let answer = match next(&mut c).await {
        Got::Json(v) => v,
        other => panic!("expected hello, got {other:?}"),
    };
    (c, answer)
}

#[derive(Debug)]
pub(super) enum Got {
    Json(Value),
    Audio(Vec<u8>),
    Closed(Option<String>),
}

pub(super) async fn next(c: &mut Client) -> Got {
    loop {
        let m = timeout(Duration::from_secs(20), c.next()).await.expect("something in time");
        match m {
            None | Some(Err(_)) => return Got::Closed(None),
            Some(Ok(WsMessage::Text(t))) => return Got::Json(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(WsMessage::Binary(b))) => return Got::Audio(b.to_vec()),
            Some(Ok(WsMessage::Close(f))) => return Got::Closed(f.map(|f| f.reason.to_string())),
            Some(Ok(_)) => {}
        }
    }
}

/// Everything up to and including `tts stop`; panics on a close.
pub(super) async fn until_tts_stop(c: &mut Client) -> Vec<Got> {
    let mut got = Vec::new();
    loop {
        let g = next(c).await;
        let stop = matches!(&g, Got::Json(v) if v["type"] == "tts" && v["state"] == "stop");
        if let Got::Closed(why) = &g {
            panic!("closed ({why:?}) after {got:?}");
        }
        got.push(g);
        if stop {
            return got;
        }
    }
}

fn jsons(got: &[Got]) -> Vec<Value> {
    got.iter()
        .filter_map(|g| match g {
            Got::Json(v) => Some(v.clone()),
            _ => None,
        })
        .collect()
}

fn audio(got: &[Got]) -> Vec<&[u8]> {
    got.iter()
        .filter_map(|g| match g {
            Got::Audio(b) => Some(b.as_slice()),
            _ => None,
        })
        .collect()
}

/// Opus packets of 16 kHz speech, 60 ms each, as the device sends them.
pub(super) fn opus_packets(pcm: &[i16]) -> Vec<Vec<u8>> {
    let mut enc = crate::voice::opus::Encoder::device(16_000).unwrap();
    enc.packets(pcm).unwrap().into_iter().map(Vec::from).collect()
}

/// `text` spoken by espeak-ng with silence around it, framed in `version`.
fn speech_frames(text: &str, version: u8) -> Vec<Vec<u8>> {
    let mut pcm = vec![0i16; 16 * 300];
    pcm.extend(espeak_16k(text));
    pcm.extend(vec![0i16; 16 * 1500]);
    opus_packets(&pcm).into_iter().map(|p| frame_up(&p, version)).collect()
}

fn frame_up(payload: &[u8], version: u8) -> Vec<u8> {
    let len = u16::try_from(payload.len()).unwrap();
    match version {
        2 => {
            let mut f = vec![0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            f.extend((u32::from(len)).to_be_bytes());
            f.extend(payload);
            f
        }
        3 => {
            let mut f = vec![0, 0];
            f.extend(len.to_be_bytes());
            f.extend(payload);
            f
        }
        _ => payload.to_vec(),
    }
}

/// A downlink frame's Opus payload, checking its header for `version`.
fn unframe(frame: &[u8], version: u8) -> &[u8] {
    match version {
        2 => {
            assert_eq!(&frame[..4], &[0, 2, 0, 0], "version 2, type OPUS");
            let size = u32::from_be_bytes(frame[12..16].try_into().unwrap()) as usize;
            assert_eq!(size, frame.len() - 16);
            &frame[16..]
        }
        3 => {
            assert_eq!(frame[0], 0, "type OPUS");
            let size = u16::from_be_bytes(frame[2..4].try_into().unwrap()) as usize;
            assert_eq!(size, frame.len() - 4);
            &frame[4..]
        }
        _ => frame,
    }
}

/// Decodes downlink packets at 24 kHz: each is a real 60 ms Opus packet.
fn decode_24k(packets: &[&[u8]]) -> usize {
    let mut dec = crate::voice::opus::Decoder::new(24_000).unwrap();
    packets
        .iter()
        .map(|p| {
            let n = dec.decode(p).unwrap().len();
            assert_eq!(n, 1440, "60 ms at 24 kHz");
            n
        })
        .sum()
}

#[tokio::test]
async fn a_typed_utterance_is_a_turn_spoken_back_in_order() {
    let r = rig(vec![Step::text("😊 Hello there. How are you?")], "unused", Limits::default()).await;
    let (mut c, answer) = hello(r.addr, None).await;
    assert_eq!(answer["type"], "hello");
    assert_eq!(answer["transport"], "websocket");
    assert_eq!(
        answer["audio_params"],
        json!({"format": "opus", "sample_rate": 24000, "channels": 1, "frame_duration": 60})
    );
    let sid = answer["session_id"].as_str().unwrap().to_owned();
    assert!(!sid.is_empty());
    let detect = json!({"session_id": sid, "type": "listen", "state": "detect", "text": "hello"});
    c.send(WsMessage::text(detect.to_string())).await.unwrap();
    let got = until_tts_stop(&mut c).await;
    let js = jsons(&got);
    assert_eq!(js[0], json!({"type": "stt", "session_id": sid, "text": "hello"}));
    assert_eq!(js[1], json!({"type": "llm", "session_id": sid, "emotion": "happy", "text": "😊"}));
    let states: Vec<&str> = js[2..].iter().map(|v| v["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["start", "sentence_start", "sentence_start", "stop"], "{js:?}");
    assert_eq!(js[3]["text"], "Hello there.", "the emoji is shown, not spoken");
    assert_eq!(js[4]["text"], "How are you?");
    // `tts start` comes before the first frame.
    let first_audio = got.iter().position(|g| matches!(g, Got::Audio(_))).unwrap();
    let start = got.iter().position(|g| matches!(g, Got::Json(v) if v["state"] == "start")).unwrap();
    assert!(start < first_audio);
    let frames = audio(&got);
    let samples = decode_24k(&frames);
    // FakeAudio speaks 50 ms per character: "Hello there." + "How are you?" = 24 characters.
    assert!(samples >= 24 * 50 * 24, "{samples} samples");
    // The turn ran in the device's own session, through the model.
    let reqs = r.llm.requests();
    assert_eq!(reqs.len(), 1);
    assert!(String::from_utf8_lossy(&reqs[0].body).contains("hello"));
    let sessions = r.daemon.workspace().sessions_dir();
    let names: Vec<String> =
        std::fs::read_dir(&sessions).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().any(|n| n.contains("xiaozhi")), "{names:?}");
}

#[tokio::test]
async fn spoken_speech_in_auto_mode_is_recognised_and_answered() {
    let r = rig(vec![Step::text("It is noon.")], "what time is it", Limits::default()).await;
    let (mut c, _) = hello(r.addr, None).await;
    c.send(WsMessage::text(r#"{"type":"listen","state":"start","mode":"auto"}"#)).await.unwrap();
    for f in speech_frames("What time is it?", 1) {
        c.send(WsMessage::binary(f)).await.unwrap();
    }
    let got = until_tts_stop(&mut c).await;
    let js = jsons(&got);
    assert_eq!(js[0]["type"], "stt");
    assert_eq!(js[0]["text"], "what time is it");
    assert_eq!(js[1]["emotion"], "neutral");
    assert!(!audio(&got).is_empty());
    let calls = r.audio.calls();
    assert_eq!(calls[0].path, "/v1/audio/transcriptions");
    assert!(calls[0].file_is_wav);
    assert!(String::from_utf8_lossy(&r.llm.requests()[0].body).contains("what time is it"));
}

async fn manual_turn(version: u8) {
    let r = rig(vec![Step::text("The light is on.")], "turn on the light", Limits::default()).await;
    let v = version.to_string();
    let (mut c, _) = hello(r.addr, Some(&v)).await;
    c.send(WsMessage::text(r#"{"type":"listen","state":"start","mode":"manual"}"#)).await.unwrap();
    let mut pcm = espeak_16k("Turn on the light.");
    pcm.truncate(pcm.len() - pcm.len() % 960);
    for p in opus_packets(&pcm) {
        c.send(WsMessage::binary(frame_up(&p, version))).await.unwrap();
    }
    // Manual mode: nothing ends the utterance until `stop`.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(r.audio.calls().is_empty(), "no recognition before stop");
    c.send(WsMessage::text(r#"{"type":"listen","state":"stop"}"#)).await.unwrap();
    let got = until_tts_stop(&mut c).await;
    assert_eq!(jsons(&got)[0]["text"], "turn on the light");
    let frames: Vec<&[u8]> = audio(&got).into_iter().map(|f| unframe(f, version)).collect();
    assert!(decode_24k(&frames) > 0);
}

#[tokio::test]
async fn manual_mode_ends_at_stop_in_protocol_1() {
    manual_turn(1).await;
}

#[tokio::test]
async fn binary_protocol_2_frames_both_ways() {
    manual_turn(2).await;
}

#[tokio::test]
async fn binary_protocol_3_frames_both_ways() {
    manual_turn(3).await;
}

#[tokio::test]
async fn abort_stops_the_reply_within_one_frame() {
    let long = "This is a long answer that goes on. ".repeat(20);
    let r = rig(vec![Step::text(long)], "unused", Limits::default()).await;
    let (mut c, _) = hello(r.addr, None).await;
    c.send(WsMessage::text(r#"{"type":"listen","state":"detect","text":"tell me a story"}"#)).await.unwrap();
    let mut frames = 0;
    while frames < 8 {
        if let Got::Audio(_) = next(&mut c).await {
            frames += 1;
        }
    }
    c.send(WsMessage::text(r#"{"type":"abort","reason":"wake_word_detected"}"#)).await.unwrap();
    let mut after_abort = 0;
    loop {
        match next(&mut c).await {
            Got::Audio(_) => after_abort += 1,
            Got::Json(v) if v["type"] == "tts" && v["state"] == "stop" => break,
            Got::Json(_) => {}
            Got::Closed(w) => panic!("closed: {w:?}"),
        }
    }
    // Frames already in flight when the abort was read: at most the pacer's burst refill.
    assert!(after_abort <= 5, "{after_abort} frames after abort");
    // Nothing follows `tts stop`.
    let quiet = timeout(Duration::from_millis(600), c.next()).await;
    assert!(quiet.is_err(), "no audio after tts stop: {quiet:?}");
    // The device can talk again at once.
    r.llm.push(Step::text("Yes."));
    c.send(WsMessage::text(r#"{"type":"listen","state":"detect","text":"still there?"}"#)).await.unwrap();
    let got = until_tts_stop(&mut c).await;
    assert_eq!(jsons(&got)[0]["text"], "still there?");
}

#[tokio::test]
async fn a_new_utterance_cancels_the_running_turn() {
    let slow = Step::text("A slow answer. ".repeat(10)).delay_ms(1500);
    let r = rig(vec![slow, Step::text("The second answer.")], "unused", Limits::default()).await;
    let (mut c, _) = hello(r.addr, None).await;
    c.send(WsMessage::text(r#"{"type":"listen","state":"detect","text":"first"}"#)).await.unwrap();
    assert!(matches!(next(&mut c).await, Got::Json(v) if v["text"] == "first"));
    // The first turn is waiting for the model when the second utterance comes.
    for _ in 0..200 {
        if !r.llm.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(r.llm.requests().len(), 1);
    c.send(WsMessage::text(r#"{"type":"listen","state":"detect","text":"second"}"#)).await.unwrap();
    let got = until_tts_stop(&mut c).await;
    let said: Vec<Value> = jsons(&got).into_iter().filter(|v| v["state"] == "sentence_start").collect();
    assert_eq!(
        said,
        vec![
            json!({"type": "tts", "session_id": said[0]["session_id"], "state": "sentence_start", "text": "The second answer."})
        ]
    );
}

#[tokio::test]
async fn a_model_failure_is_shown_and_spoken_not_a_hang() {
    let r = rig(vec![Step::status(500)], "unused", Limits::default()).await;
    let (mut c, _) = hello(r.addr, None).await;
    c.send(WsMessage::text(r#"{"type":"listen","state":"detect","text":"hello"}"#)).await.unwrap();
    let got = until_tts_stop(&mut c).await;
    let js = jsons(&got);
    let alert = js.iter().find(|v| v["type"] == "alert").expect("an alert");
    assert_eq!(alert["status"], "Error");
    assert_eq!(alert["emotion"], "sad");
    assert!(!alert["message"].as_str().unwrap().is_empty());
    assert!(js.iter().any(|v| v["text"] == crate::channels::xiaozhi::turn::SPOKEN_FAILURE), "{js:?}");
}

#[tokio::test]
async fn a_speech_recognition_failure_is_an_alert() {
    let r = rig(vec![], "x", Limits::default()).await;
    r.audio.fail_next_transcription(500);
    let (mut c, _) = hello(r.addr, None).await;
    c.send(WsMessage::text(r#"{"type":"listen","state":"start","mode":"auto"}"#)).await.unwrap();
    for f in speech_frames("Hello.", 1) {
        c.send(WsMessage::binary(f)).await.unwrap();
    }
    match next(&mut c).await {
        Got::Json(v) => {
            assert_eq!(v["type"], "alert", "{v}");
            assert_eq!(v["message"], "Sorry, speech recognition is not working right now.");
        }
        other => panic!("{other:?}"),
    }
    assert!(r.llm.requests().is_empty());
}

#[tokio::test]
async fn a_silent_device_is_closed_and_a_missing_hello_too() {
    let limits = Limits {
        device_hello: Duration::from_millis(300),
        device_idle: Duration::from_millis(400),
        ..Limits::default()
    };
    let r = rig(vec![], "x", limits).await;
    let mut quiet = dial(r.addr, TOKEN, None).await.unwrap();
    match next(&mut quiet).await {
        Got::Closed(Some(why)) => assert!(why.contains("hello"), "{why}"),
        other => panic!("{other:?}"),
    }
    let (mut idle, _) = hello(r.addr, None).await;
    // A frame resets the idle clock.
    tokio::time::sleep(Duration::from_millis(250)).await;
    idle.send(WsMessage::text(r#"{"type":"listen","state":"start","mode":"auto"}"#)).await.unwrap();
    let started = tokio::time::Instant::now();
    match next(&mut idle).await {
        Got::Closed(Some(why)) => assert_eq!(why, "idle"),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_millis(350), "{:?}", started.elapsed());
}

#[tokio::test]
async fn bad_tokens_and_versions_are_refused_before_the_upgrade() {
    let r = rig(vec![], "x", Limits::default()).await;
    assert_eq!(dial(r.addr, "wrong", None).await.err(), Some(401));
    assert_eq!(dial(r.addr, TOKEN, Some("4")).await.err(), Some(400));
    assert_eq!(dial(r.addr, TOKEN, Some("two")).await.err(), Some(400));
    let ws = r.daemon.workspace();
    Devices::open(ws).edit(|s| s.revoke(MAC)).unwrap();
    assert_eq!(dial(r.addr, TOKEN, None).await.err(), Some(401), "a revoked device is refused");
}

/// The next MCP request the server sends the device (other messages are not expected here).
async fn next_mcp(c: &mut Client) -> Value {
    match next(c).await {
        Got::Json(v) if v["type"] == "mcp" => v["payload"].clone(),
        other => panic!("expected an MCP message, got {other:?}"),
    }
}

async fn answer_mcp(c: &mut Client, id: &Value, result: Value) {
    let m = json!({"session_id": "x", "type": "mcp", "payload": {"jsonrpc": "2.0", "id": id, "result": result}});
    c.send(WsMessage::text(m.to_string())).await.unwrap();
}

#[tokio::test]
async fn a_devices_mcp_tools_reach_the_model_and_stray_mcp_messages_are_dropped() {
    let r = rig(vec![Step::text("Fine.")], "x", Limits::default()).await;
    let mut c = dial(r.addr, TOKEN, None).await.expect("the device is let in");
    c.send(WsMessage::text(HELLO_MCP)).await.unwrap();
    assert!(matches!(next(&mut c).await, Got::Json(v) if v["type"] == "hello"));
    let init = next_mcp(&mut c).await;
    assert_eq!(init["method"], "initialize", "{init}");
    assert!(init["id"].is_u64(), "a device takes integer ids only: {init}");
    assert_eq!(init["params"]["protocolVersion"], "2024-11-05");
    let vision = &init["params"]["capabilities"]["vision"];
    assert_eq!(vision["url"], format!("http://{}/mcp/vision/explain", r.addr), "{init}");
    assert!(vision["token"].as_str().is_some_and(|t| !t.is_empty() && t != TOKEN), "{init}");
    let server = json!({"protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": {"name": "b", "version": "1"}});
    answer_mcp(&mut c, &init["id"], server).await;
    let list = loop {
        let m = next_mcp(&mut c).await;
        if m["method"] == "tools/list" {
            break m;
        }
        assert_eq!(m["method"], "notifications/initialized", "{m}");
    };
    let tools = json!({"tools": [{"name": "self.get_device_status", "description": "The device's state.",
        "inputSchema": {"type": "object", "properties": {}}}]});
    answer_mcp(&mut c, &list["id"], tools).await;
    // An answer to a question never asked is dropped, and the device goes on.
    answer_mcp(&mut c, &json!(999), json!({})).await;
    let group = format!("device_{}", MAC.replace(':', ""));
    for _ in 0..500 {
        if r.daemon.toolbox().registry().in_group(&group).next().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.send(WsMessage::text(r#"{"type":"listen","state":"detect","text":"ok?"}"#)).await.unwrap();
    let got = until_tts_stop(&mut c).await;
    assert_eq!(jsons(&got)[0]["text"], "ok?");
    let offered = String::from_utf8_lossy(&r.llm.requests()[0].body).into_owned();
    assert!(offered.contains(&format!("{group}_self_get_device_status")), "{offered}");
}

#[tokio::test]
async fn realtime_mode_speech_during_a_reply_interrupts_it() {
    let long = "This is a long answer that goes on. ".repeat(20);
    let r = rig(vec![Step::text(long), Step::text("Okay.")], "stop talking", Limits::default()).await;
    let (mut c, _) = hello(r.addr, None).await;
    c.send(WsMessage::text(r#"{"type":"listen","state":"start","mode":"realtime"}"#)).await.unwrap();
    c.send(WsMessage::text(r#"{"type":"listen","state":"detect","text":"tell me a story"}"#)).await.unwrap();
    let mut frames = 0;
    while frames < 3 {
        if let Got::Audio(_) = next(&mut c).await {
            frames += 1;
        }
    }
    // The device keeps its microphone open (AEC) and the person talks over the reply.
    for f in speech_frames("Stop talking please.", 1) {
        c.send(WsMessage::binary(f)).await.unwrap();
    }
    let mut seen = Vec::new();
    loop {
        match next(&mut c).await {
            Got::Json(v) if v["type"] == "stt" => {
                assert_eq!(v["text"], "stop talking");
                break;
            }
            Got::Json(v) => seen.push(v),
            Got::Audio(_) => {}
            Got::Closed(w) => panic!("closed: {w:?}"),
        }
    }
    assert!(seen.iter().any(|v| v["type"] == "tts" && v["state"] == "stop"), "the reply was stopped: {seen:?}");
    let got = until_tts_stop(&mut c).await;
    assert!(jsons(&got).iter().any(|v| v["text"] == "Okay."), "{got:?}");
}
