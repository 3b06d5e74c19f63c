//! The gateway of the real `chela run`: a WebSocket turn with token and tool events, and the
//! OpenAI endpoint driven by the official `openai` Python SDK (whole and streamed).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::{Capture, Provider, Ws, wait_for};

/// A running `chela run`, stopped with SIGTERM when dropped.
pub struct Running {
    child: Child,
    stderr: Capture,
    pub addr: SocketAddr,
}

impl Running {
    pub fn start(ws: &Ws) -> Running {
        Running::start_cmd(ws.cmd(&["run"]))
    }

    /// `chela run` as `cmd` says (an environment of its own).
    pub fn start_cmd(mut cmd: Command) -> Running {
        let mut child = cmd.spawn().expect("cannot start chela run");
        let stderr = Capture::start(child.stderr.take());
        let marker = "the gateway listens on http://";
        // The whole line: the stream may be read in the middle of it.
        let line_done = |t: &str| t.find(marker).is_some_and(|i| t[i..].contains('\n'));
        wait_for("the gateway's address on stderr", Duration::from_secs(20), || line_done(&stderr.now()));
        let text = stderr.now();
        let rest = &text[text.find(marker).unwrap() + marker.len()..];
        let addr = rest.split_whitespace().next().unwrap().parse().unwrap();
        Running { child, stderr, addr }
    }

    pub fn stderr(&self) -> String {
        self.stderr.now()
    }

    pub fn pid(&self) -> libc::pid_t {
        libc::pid_t::try_from(self.child.id()).unwrap()
    }

    pub fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        crate::wait_exit(&mut self.child, limit)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn a_websocket_turn_through_the_real_daemon_streams_tokens_and_tool_events() {
    let llm = FakeLlm::start(vec![Step::tool_call("get_current_time", json!({})), Step::text("the time is known")]);
    let ws = Ws::for_llm(Provider::OpenAi, &llm, "");
    let d = Running::start(&ws);
    let events: Vec<Value> = runtime().block_on(async {
        let stream = tokio::net::TcpStream::connect(d.addr).await.unwrap();
        let url = format!("ws://{}/ws?token={}", d.addr, crate::GATEWAY_TOKEN);
        let (mut c, _) = tokio_tungstenite::client_async(url, stream).await.expect("upgrade");
        c.send(Message::text(r#"{"type":"message","content":"what time is it?","chat_id":"e2e"}"#)).await.unwrap();
        let mut events = Vec::new();
        loop {
            let m = tokio::time::timeout(Duration::from_secs(20), c.next()).await.expect("an event in time");
            let Message::Text(t) = m.unwrap().unwrap() else { continue };
            let e: Value = serde_json::from_str(t.as_str()).unwrap();
            let done = e["type"] == "response";
            events.push(e);
            if done {
                return events;
            }
        }
    });
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "tool" => format!("tool {} {}", e["name"].as_str().unwrap(), e["state"].as_str().unwrap()),
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(&kinds[..2], ["tool get_current_time start", "tool get_current_time ok"], "{kinds:?}");
    assert!(kinds[2..kinds.len() - 1].iter().all(|k| k == "token") && kinds.len() > 3, "{kinds:?}");
    assert_eq!(events.last().unwrap(), &json!({"type": "response", "content": "the time is known", "chat_id": "e2e"}));
    assert!(ws.path().join("sessions/ws_e2e.jsonl").exists(), "{}", d.stderr());
}

fn openai_python() -> PathBuf {
    chela_testkit::peers::openai_python(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

const SDK_SCRIPT: &str = r#"
import sys, openai
c = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0, timeout=20)
r = c.chat.completions.create(model="chela", messages=[{"role": "user", "content": "hello"}], user="sdk")
print("WHOLE=" + r.choices[0].message.content)
s = c.chat.completions.create(model="chela", messages=[{"role": "user", "content": "again"}], user="sdk", stream=True)
print("STREAM=" + "|".join(ch.choices[0].delta.content or "" for ch in s if ch.choices))
print("MODELS=" + ",".join(m.id for m in c.models.list()))
"#;

#[test]
fn the_official_openai_sdk_talks_to_chela_whole_and_streamed() {
    let python = openai_python();
    let llm = FakeLlm::start(vec![Step::text("a whole answer"), Step::text("a streamed answer")]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let d = Running::start(&ws);
    let out = Command::new(python)
        .args(["-c", SDK_SCRIPT, &format!("http://{}/v1", d.addr), crate::GATEWAY_TOKEN])
        .output()
        .expect("cannot run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}\n{}", String::from_utf8_lossy(&out.stderr), d.stderr());
    assert!(stdout.contains("WHOLE=a whole answer\n"), "{stdout}");
    let streamed = stdout.lines().find_map(|l| l.strip_prefix("STREAM=")).unwrap();
    assert_eq!(streamed.replace('|', ""), "a streamed answer");
    let pieces = streamed.split('|').filter(|p| !p.is_empty()).count();
    assert!(pieces >= 2, "the answer came in pieces as the model streamed it: {streamed}");
    assert!(stdout.contains("MODELS=chela\n"), "{stdout}");
    // Both requests were one conversation, named by `user`.
    let second = crate::body(&llm, 1).to_string();
    assert!(second.contains("hello") && second.contains("a whole answer"), "{second}");
}

#[test]
fn sigterm_during_a_turn_stops_within_5_s_and_leaves_the_session_well_formed() {
    // The model stalls far past the stop: only the daemon's own cancel ends this turn.
    let llm = FakeLlm::start(vec![Step::text("too late").delay_ms(60_000)]);
    let ws = Ws::for_llm(Provider::Anthropic, &llm, "");
    let mut d = Running::start(&ws);
    let addr = d.addr;
    let asker = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let body = r#"{"model":"chela","user":"stop","messages":[{"role":"user","content":"a slow question"}]}"#;
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            crate::GATEWAY_TOKEN,
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
    });
    wait_for("the request at the model", Duration::from_secs(20), || llm.requests().len() == 1);
    let pid = libc::pid_t::try_from(d.child.id()).unwrap();
    let sent = std::time::Instant::now();
    // SAFETY: kill(2) with a live child's pid and a valid signal number has no memory effects.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = crate::wait_exit(&mut d.child, Duration::from_secs(10));
    let took = sent.elapsed();
    assert!(status.success(), "{status:?}\n{}", d.stderr());
    assert!(took < Duration::from_secs(5), "stopping took {took:?}");
    let answer = asker.join().unwrap();
    assert!(!answer.contains("too late"), "the stalled answer never arrived: {answer}");
    let saved = std::fs::read_to_string(ws.path().join("sessions/api_stop.jsonl")).expect("the session was saved");
    let parsed = chela_core::session::parse(&saved);
    assert_eq!(parsed.skipped_lines, 0, "every line is whole: {saved}");
    assert!(parsed.messages.iter().any(|m| m.text() == "a slow question"), "{saved}");
}
