//! A real xiaozhi client against the real `chela run`: PyPI's `xiaozhi-sdk` device simulator
//! (installed by `tests/xiaozhi/install.sh` under target/), driven by `tests/xiaozhi/device.py`,
//! which plays one scenario and prints what it saw as JSON lines. The model is the fake LLM; ASR
//! and TTS are `FakeAudio`, whose speech is a 440 Hz tone, so the audio the SDK decodes back
//! from Opus can be checked for its pitch.

use std::process::{Child, Stdio};
use std::time::Duration;

use chela_testkit::FakeLlm;
use serde_json::Value;

use crate::gateway::Running;
use crate::{Capture, Provider, Ws, wait_for};

/// The longest a scenario may run, in the driver (`--limit`) and here.
const LIMIT: Duration = Duration::from_secs(60);

/// One run of the device driver.
struct Device {
    child: Child,
    out: Capture,
    err: Capture,
}

impl Device {
    fn spawn(d: &Running, scenario: &str, mac: &str, extra: &[&str]) -> Device {
        let python = chela_testkit::peers::xiaozhi_python();
        let mut child = std::process::Command::new(python)
            .arg(chela_testkit::peers::xiaozhi_driver())
            .args([scenario, "--ota", &format!("http://{}/xiaozhi/ota/", d.addr), "--mac", mac])
            .args(["--limit", &LIMIT.as_secs().to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start the xiaozhi device driver");
        let out = Capture::start(child.stdout.take());
        let err = Capture::start(child.stderr.take());
        Device { child, out, err }
    }

    /// The complete lines so far, parsed.
    fn events(&self) -> Vec<Value> {
        let text = self.out.now();
        let complete = text.rfind('\n').map_or("", |i| &text[..i]);
        complete
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("the driver printed {l:?}: {e}")))
            .collect()
    }

    /// Waits for the first event that `pred` accepts.
    #[track_caller]
    fn wait_event(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
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
    fn approve(&self, ws: &Ws) -> String {
        let ota = self.wait_event("an activation code", |e| e["event"] == "ota");
        let code = ota["activation_code"].as_str().unwrap_or_else(|| panic!("no activation code: {ota}")).to_owned();
        self.wait_event("the activation poll answered `not yet` (202)", |e| {
            e["event"] == "activate" && e["approved"] == false
        });
        ws.run(&["device", "approve", &code]).expect_ok();
        code
    }

    /// Waits for the driver to end and returns its events; panics unless it ended with `done`.
    fn finish(mut self) -> Vec<Value> {
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

fn event<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
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

    let list = ws.run(&["device", "list"]);
    list.expect_ok().stdout_has(mac).stdout_has("approved").stdout_has("xiaozhi-sdk");
    assert!(!list.stdout.contains(&code), "the code is used up: {}", list.stdout);
}
