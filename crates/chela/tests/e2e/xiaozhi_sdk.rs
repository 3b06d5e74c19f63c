//! A real xiaozhi client against the real `chela run`: PyPI's `xiaozhi-sdk` device simulator
//! (installed by `tests/xiaozhi/install.sh` under target/), driven by `tests/xiaozhi/device.py`,
//! which plays one scenario and prints what it saw as JSON lines. The model is the fake LLM; ASR
//! and TTS are `FakeAudio`, whose speech is a 440 Hz tone, so the audio the SDK decodes back
//! from Opus can be checked for its pitch.
//!
//! The scenarios run on both transports: [`Transport::Mqtt`] spawns `tests/xiaozhi/mqtt_device.py`
//! instead (paho-mqtt, UDP, AES-128-CTR, opuslib), which plays the same scenarios and prints the
//! same lines; its own tests are in `xiaozhi_mqtt.rs`.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use chela_testkit::audio::FakeAudio;
use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use crate::gateway::Running;
use crate::{Capture, Provider, Ws, wait_for};

/// The longest a scenario may run, in the driver (`--limit`) and here.
const LIMIT: Duration = Duration::from_secs(60);

/// How the device talks to Chela after onboarding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    WebSocket,
    Mqtt,
}

impl Transport {
    fn driver(self) -> PathBuf {
        match self {
            Transport::WebSocket => chela_testkit::peers::xiaozhi_driver(),
            Transport::Mqtt => chela_testkit::peers::xiaozhi_mqtt_driver(),
        }
    }

    /// The settings that make the daemon hand this transport out, on ephemeral ports.
    pub fn config(self) -> &'static str {
        match self {
            Transport::WebSocket => "",
            Transport::Mqtt => {
                "\n[xiaozhi]\ntransport = \"mqtt\"\nmqtt_listen = \"127.0.0.1:0\"\nudp_listen = \"127.0.0.1:0\"\n"
            }
        }
    }
}

/// One run of the device driver.
pub struct Device {
    child: Child,
    out: Capture,
    err: Capture,
}

impl Device {
    pub fn spawn(d: &Running, scenario: &str, mac: &str, extra: &[&str]) -> Device {
        Device::spawn_on(Transport::WebSocket, d, scenario, mac, extra)
    }

    pub fn spawn_on(t: Transport, d: &Running, scenario: &str, mac: &str, extra: &[&str]) -> Device {
        let python = chela_testkit::peers::xiaozhi_python();
        let mut child = std::process::Command::new(python)
            .arg(t.driver())
            .args([scenario, "--ota", &format!("http://{}/xiaozhi/ota/", d.addr), "--mac", mac])
            .args(["--limit", &LIMIT.as_secs().to_string()])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start the xiaozhi device driver");
        let out = Capture::start(child.stdout.take());
        let err = Capture::start(child.stderr.take());
        Device { child, out, err }
    }

    /// Lets a driver waiting between two utterances (`--then`) go on.
    pub fn go(&mut self) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().expect("the driver's stdin");
        stdin.write_all(b"go\n").and_then(|()| stdin.flush()).expect("cannot write to the driver");
    }

    /// The complete lines so far, parsed.
    pub fn events(&self) -> Vec<Value> {
        let text = self.out.now();
        let complete = text.rfind('\n').map_or("", |i| &text[..i]);
        complete
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("the driver printed {l:?}: {e}")))
            .collect()
    }

    /// Waits for the first event that `pred` accepts.
    #[track_caller]
    pub fn wait_event(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(what, LIMIT, || self.events().iter().any(|e| pred(e) || e["event"] == "error") || !self.out_open());
        let events = self.events();
        events.iter().find(|e| pred(e)).cloned().unwrap_or_else(|| {
            panic!("the device never saw {what}:\n{}\n--- driver log\n{}", self.out.now(), self.err.now())
        })
    }

    fn out_open(&self) -> bool {
        !self.events().iter().any(|e| e["event"] == "done" || e["event"] == "error")
    }

    /// Onboarding's part on the owner's side: waits for the code the device got, checks that the
    /// device is told to wait, and approves it with `chela device approve`.
    pub fn approve(&self, ws: &Ws) -> String {
        let ota = self.wait_event("an activation code", |e| e["event"] == "ota");
        let code = ota["activation_code"].as_str().unwrap_or_else(|| panic!("no activation code: {ota}")).to_owned();
        self.wait_event("the activation poll answered `not yet` (202)", |e| {
            e["event"] == "activate" && e["approved"] == false
        });
        ws.run(&["device", "approve", &code]).expect_ok();
        code
    }

    /// Waits for the driver to end and returns its events; panics unless it ended with `done`.
    pub fn finish(mut self) -> Vec<Value> {
        let status = crate::wait_exit(&mut self.child, LIMIT + Duration::from_secs(10));
        // The last line was written before the exit; the reader thread may still be on it.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while self.out_open() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let events = self.events();
        let (out, log) = (self.out.now(), self.err.now());
        assert!(
            status.success() && events.last().is_some_and(|e| e["event"] == "done"),
            "the device driver failed ({status:?}):\n{out}\n--- driver log\n{log}"
        );
        events
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn event<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

#[test]
fn the_sdk_device_is_onboarded_through_ota_url_once_the_owner_approves_its_code() {
    let llm = FakeLlm::start(vec![]);
    let ws = Ws::for_llm(Provider::OpenAi, &llm, "");
    let d = Running::start(&ws);
    let mac = "aa:bb:cc:dd:ee:01";
    let dev = Device::spawn(&d, "onboard", mac, &[]);
    let code = dev.approve(&ws);
    let events = dev.finish();

    let otas = event(&events, "ota");
    assert_eq!(otas.len(), 2, "{events:?}");
    // First boot: a code to show and speak, no way in yet.
    assert!(code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()), "{code}");
    assert!(otas[0]["activation_message"].as_str().unwrap().contains(&code), "{:?}", otas[0]);
    assert_eq!(otas[0]["websocket"], false);
    assert!(otas[0]["server_time"] == true && otas[0]["firmware"]["version"] == "0.5.1", "{:?}", otas[0]);
    // The poll said `not yet` until the approval, then 200.
    let polls: Vec<bool> = event(&events, "activate").iter().map(|e| e["approved"].as_bool().unwrap()).collect();
    assert!(polls.len() >= 2 && polls[..polls.len() - 1].iter().all(|a| !a) && polls[polls.len() - 1], "{polls:?}");
    // The OTA check after activation: the WebSocket to dial and a token, no code.
    assert_eq!(otas[1]["activation_code"], Value::Null);
    assert_eq!(otas[1]["websocket_url"], format!("ws://{}/xiaozhi/v1/", d.addr));
    assert_eq!(otas[1]["websocket_version"], 1);
    assert!(otas[1]["token_len"].as_u64().unwrap() >= 32, "{:?}", otas[1]);
    // The check a rebooting device makes: the URL again, and no token to replace the one it keeps
    // (handed out once; anyone repeating its MAC and Client-Id would otherwise get one).
    let again = event(&events, "ota_again");
    assert_eq!(again.len(), 1, "{events:?}");
    assert_eq!(again[0]["websocket_url"], otas[1]["websocket_url"]);
    assert_eq!(again[0]["has_token"], false, "{:?}", again[0]);

    let list = ws.run(&["device", "list"]);
    list.expect_ok().stdout_has(mac).stdout_has("approved").stdout_has("xiaozhi-sdk");
    assert!(!list.stdout.contains(&code), "the code is used up: {}", list.stdout);
}

/// A daemon with the fake LLM and `FakeAudio` as both ASR and TTS, handing out one transport.
pub struct Voice {
    pub llm: FakeLlm,
    pub audio: FakeAudio,
    pub ws: Ws,
    pub d: Running,
    pub t: Transport,
}

impl Voice {
    pub fn start(t: Transport, script: Vec<Step>, transcript: &str) -> Voice {
        Voice::start_with(t, script, transcript, "")
    }

    /// With `extra` TOML after the transport's settings.
    pub fn start_with(t: Transport, script: Vec<Step>, transcript: &str, extra: &str) -> Voice {
        let llm = FakeLlm::start(script);
        let audio = FakeAudio::start(transcript);
        let url = audio.base_url();
        let ws = Ws::for_llm(
            Provider::OpenAi,
            &llm,
            &format!("\n[voice]\nasr_base_url = \"{url}\"\ntts_base_url = \"{url}\"\n{}{extra}", t.config()),
        );
        let d = Running::start(&ws);
        Voice { llm, audio, ws, d, t }
    }

    pub fn device(&self, scenario: &str, mac: &str, extra: &[&str]) -> Device {
        Device::spawn_on(self.t, &self.d, scenario, mac, extra)
    }

    /// The texts the fake TTS was asked to speak, in order.
    fn spoken(&self) -> Vec<String> {
        let calls = self.audio.calls();
        calls
            .iter()
            .filter(|c| c.path.ends_with("/audio/speech"))
            .map(|c| c.fields["input"].as_str().unwrap().to_owned())
            .collect()
    }

    /// How long the fake TTS's answers were, in ms (it speaks `MS_PER_CHAR` per character).
    fn spoken_ms(&self) -> u64 {
        self.spoken().iter().map(|s| s.chars().count() as u64 * u64::from(chela_testkit::audio::MS_PER_CHAR)).sum()
    }
}

/// The JSON messages the device got (stt, llm, tts, alert…), in order.
pub fn messages(events: &[Value]) -> Vec<Value> {
    event(events, "message").iter().map(|e| e["data"].clone()).collect()
}

pub fn tts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["type"] == "tts")
        .map(|m| match m["text"].as_str() {
            Some(t) => format!("{} {t}", m["state"].as_str().unwrap()),
            None => m["state"].as_str().unwrap().to_owned(),
        })
        .collect()
}

/// The reply's audio, as the SDK decoded it from Opus: there, a 440 Hz tone as long as the fake
/// TTS spoke, and paced (the first to last frame spans about the audio's length, less the
/// first burst of 5 frames).
#[track_caller]
pub fn check_audio(v: &Voice, events: &[Value]) {
    let audio = event(events, "audio");
    let a = audio.last().unwrap_or_else(|| panic!("no audio summary: {events:?}"));
    let frames = a["frames"].as_u64().unwrap();
    let ms = a["ms"].as_u64().unwrap();
    let want = v.spoken_ms();
    assert!(
        frames > 0 && ms >= want * 9 / 10 && ms <= want + 60 * 2 * v.spoken().len() as u64 + 120,
        "{a} for {want} ms of speech"
    );
    let hz = a["peak_hz"].as_f64().unwrap();
    assert!((420.0..460.0).contains(&hz), "the decoded audio is not the 440 Hz tone: {a}");
    assert!(a["rms"].as_f64().unwrap() > 2000.0, "{a}");
    let span = a["span_ms"].as_u64().unwrap();
    assert!(span >= frames.saturating_sub(5) * 60 * 7 / 10, "a burst, not paced in real time: {a}");
}

#[test]
fn a_typed_utterance_is_answered_with_tts_events_and_audio_the_sdk_decodes() {
    typed_utterance(Transport::WebSocket);
}

pub fn typed_utterance(t: Transport) -> Vec<Value> {
    let v = Voice::start(t, vec![Step::text("It is sunny today. Take a hat!")], "unused");
    let dev = v.device("text", "aa:bb:cc:dd:ee:02", &["--text", "what is the weather?"]);
    dev.approve(&v.ws);
    let events = dev.finish();
    let msgs = messages(&events);
    assert_eq!(
        tts(&msgs),
        ["start", "sentence_start It is sunny today.", "sentence_start Take a hat!", "stop"],
        "{msgs:?}"
    );
    assert!(
        msgs.iter().any(|m| m["type"] == "llm" && m["emotion"].as_str().is_some_and(|e| !e.is_empty())),
        "{msgs:?}"
    );
    assert_eq!(v.spoken(), ["It is sunny today.", "Take a hat!"]);
    check_audio(&v, &events);
    let asked = crate::conversation(Provider::OpenAi, &crate::body(&v.llm, 0));
    assert!(crate::text_of(asked.last().unwrap()).contains("what is the weather?"), "{asked:?}");
    events
}

#[test]
fn a_spoken_utterance_reaches_asr_and_the_reply_is_decoded_back_from_opus() {
    spoken_utterance(Transport::WebSocket);
}

pub fn spoken_utterance(t: Transport) -> Vec<Value> {
    let transcript = "what is the weather like today";
    let v = Voice::start(t, vec![Step::text("Sunny and warm.")], transcript);
    let dev = v.device("speech", "aa:bb:cc:dd:ee:03", &["--say", "What is the weather like today?"]);
    dev.approve(&v.ws);
    let events = dev.finish();
    let msgs = messages(&events);
    let stt: Vec<&Value> = msgs.iter().filter(|m| m["type"] == "stt").collect();
    assert_eq!(stt.len(), 1, "{msgs:?}");
    assert_eq!(stt[0]["text"], transcript);
    // The ASR got the utterance as a WAV about as long as what the device said.
    let calls = v.audio.calls();
    let asr: Vec<_> = calls.iter().filter(|c| c.path.ends_with("/audio/transcriptions")).collect();
    assert_eq!(asr.len(), 1, "{calls:?}");
    assert!(asr[0].file_is_wav, "{:?}", asr[0]);
    let said = event(&events, "speech")[0]["ms"].as_u64().unwrap();
    let silence = event(&events, "silence")[0]["ms"].as_u64().unwrap();
    let heard = (asr[0].file_bytes.unwrap() as u64 - 44) / 32;
    assert!(
        heard >= said / 2 && heard <= said + silence + 500,
        "heard {heard} ms of {said} ms speech + {silence} ms silence"
    );
    assert_eq!(tts(&msgs), ["start", "sentence_start Sunny and warm.", "stop"], "{msgs:?}");
    check_audio(&v, &events);
    let asked = crate::conversation(Provider::OpenAi, &crate::body(&v.llm, 0));
    assert!(crate::text_of(asked.last().unwrap()).contains(transcript), "{asked:?}");
    events
}

#[test]
fn the_model_calls_a_tool_the_sdk_device_serves_over_mcp_and_reads_its_result() {
    device_tool(Transport::WebSocket);
}

pub fn device_tool(t: Transport) -> Vec<Value> {
    device_tool_with(t, &[])
}

/// [`device_tool`] with more of the device driver's options (`extra`).
pub fn device_tool_with(t: Transport, extra: &[&str]) -> Vec<Value> {
    let v = Voice::start(t, vec![Step::text("Hello there.")], "unused");
    let mut args = vec![
        "--text",
        "hi",
        "--then",
        "how is your battery?",
        "--tool",
        "self.get_battery_level",
        "--tool-result",
        "72%",
    ];
    args.extend_from_slice(extra);
    let mut dev = v.device("mcp", "aa:bb:cc:dd:ee:04", &args);
    dev.approve(&v.ws);
    dev.wait_event("the first reply", |e| e["event"] == "waiting");
    // The device's tool was offered to the model in the first turn, under a provider-safe name.
    let names = crate::tool_names(Provider::OpenAi, &crate::body(&v.llm, 0));
    let tool = names.iter().find(|n| n.contains("get_battery_level")).unwrap_or_else(|| panic!("{names:?}")).clone();
    assert!(tool.starts_with("device_") && !tool.contains('.'), "{tool}");
    v.llm.push(Step::tool_call(&tool, json!({})));
    v.llm.push(Step::text("The battery is at 72 percent."));
    dev.go();
    let events = dev.finish();
    let init = event(&events, "mcp").into_iter().find(|e| e["method"] == "initialize").cloned().unwrap();
    assert_eq!(init["params"]["protocolVersion"], "2024-11-05");
    assert!(
        init["params"]["capabilities"]["vision"]["url"].as_str().unwrap().ends_with("/mcp/vision/explain"),
        "{init}"
    );
    let calls = event(&events, "tool_call");
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0]["name"], "self.get_battery_level");
    // The device's answer reached the model in the request after the call.
    let after = crate::body(&v.llm, 2).to_string();
    assert!(after.contains("72%"), "{after}");
    let msgs = messages(&events);
    assert!(tts(&msgs).contains(&"sentence_start The battery is at 72 percent.".to_owned()), "{msgs:?}");
    events
}

#[test]
fn abort_stops_the_reply_and_no_audio_follows() {
    abort_stops(Transport::WebSocket);
}

pub fn abort_stops(t: Transport) -> Vec<Value> {
    let long = "This is the first of many long sentences about the weather. \
                The second one goes on about the clouds and the rain. \
                The third talks about the wind that blows across the hills. \
                The fourth one is about the sun that will come out tomorrow. \
                The fifth describes the temperature in great and boring detail.";
    let v = Voice::start(t, vec![Step::text(long)], "unused");
    let dev = v.device("abort", "aa:bb:cc:dd:ee:06", &["--text", "tell me everything", "--abort-after", "8"]);
    dev.approve(&v.ws);
    let events = dev.finish();
    let at = events.iter().position(|e| e["event"] == "abort_sent").unwrap();
    let after = event(&events, "after_abort")[0].clone();
    // At most a frame or two already on their way (or not yet read by the SDK's loop on a
    // loaded machine); nothing in the 1.5 s after, where a reply still speaking sends 25.
    let late: Vec<u64> = after["ms_after_abort"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert!(late.len() <= 2 && late.iter().all(|&ms| ms <= 250), "audio after abort: {after}");
    // The device is told the speech is over, after the abort.
    assert!(
        events[at..]
            .iter()
            .any(|e| e["event"] == "message" && e["data"]["type"] == "tts" && e["data"]["state"] == "stop"),
        "{events:?}"
    );
    let frames = event(&events, "audio")[0]["frames"].as_u64().unwrap();
    assert!(frames < 20, "the whole reply was {} ms; the device got {frames} frames", long.len() * 50);
    events
}
