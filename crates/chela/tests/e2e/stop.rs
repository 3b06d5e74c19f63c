//! A graceful stop of the real `chela run` with turns in flight on several channels: the
//! answers still go out, on Telegram, on a WebSocket and on an OpenAI-API request, and nothing
//! is left running.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use chela_testkit::telegram::FakeTelegram;
use chela_testkit::{FakeLlm, Step};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use crate::gateway::{Running, runtime};
use crate::telegram::{OWNER, TOKEN};
use crate::{GATEWAY_TOKEN, Provider, Ws, wait_for};

const WAIT: Duration = Duration::from_secs(20);

#[test]
#[allow(unsafe_code)]
fn sigterm_with_turns_in_flight_on_telegram_ws_and_the_openai_api_delivers_every_answer_and_exits_cleanly() {
    let answers = ["answer after the stop", "the other chat's answer", "a third answer", "a fourth answer"];
    let llm = FakeLlm::start(answers.iter().map(|a| Step::text(*a)).collect());
    // The model keeps its answers back until the daemon was told to stop.
    llm.hold();
    let tg = FakeTelegram::start(TOKEN);
    let settings = format!(
        "[channels.telegram]\ntoken = \"{TOKEN}\"\napi_base = \"{}\"\nallow_from = [\"{OWNER}\", \"43\"]\n",
        tg.base_url()
    );
    let ws = Ws::for_llm(Provider::Anthropic, &llm, &settings);
    let mut d = Running::start(&ws);
    tg.wait_calls("getUpdates", 1, WAIT);
    tg.push_text(OWNER, OWNER, "a slow question");
    tg.push_text(43, 43, "another slow question");
    let addr = d.addr;
    let on_ws = std::thread::spawn(move || ask_on_a_websocket(addr));
    let on_api = std::thread::spawn(move || ask_the_openai_api(addr));
    wait_for("all four turns at the model", WAIT, || llm.requests().len() == 4);
    assert!(tg.sent().is_empty(), "nothing answered before the stop");

    // Telegram holds the first answer up for a second: it is still on its way when the rest
    // of the daemon has stopped.
    tg.rate_limit(1, 1);
    // SAFETY: kill(2) with a live child's pid and a valid signal number has no memory effects.
    assert_eq!(unsafe { libc::kill(d.pid(), libc::SIGTERM) }, 0);
    // Only now may the model answer: the turns end within the stop's grace, after the signal.
    llm.release();
    let status = d.wait(Duration::from_secs(10));
    assert!(status.success(), "{status:?}\n{}", d.stderr());
    assert!(!d.stderr().contains("did not finish"), "{}", d.stderr());
    // Which chat's turn reached the model first (and got the first scripted answer) is not fixed.
    let sent = tg.sent();
    let mut chats: Vec<i64> = sent.iter().map(|s| s.chat_id).collect();
    let mut texts: Vec<String> = sent.iter().map(|s| s.text.clone()).collect();
    chats.sort_unstable();
    assert_eq!(chats, [OWNER, 43]);
    // The WebSocket stayed open until its answer was written, and the request got its response.
    texts.push(on_ws.join().expect("the WebSocket client got its answer"));
    texts.push(on_api.join().expect("the API request got its answer"));
    texts.sort_unstable();
    let mut expected = answers.map(str::to_owned);
    expected.sort_unstable();
    assert_eq!(texts, expected);
}

/// Sends one message on `/ws` and returns the answer it gets, failing if the socket closes first.
fn ask_on_a_websocket(addr: SocketAddr) -> String {
    runtime().block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let url = format!("ws://{addr}/ws?token={GATEWAY_TOKEN}");
        let (mut c, _) = tokio_tungstenite::client_async(url, stream).await.expect("upgrade");
        let ask = r#"{"type":"message","content":"a slow question on the WebSocket","chat_id":"stop"}"#;
        c.send(Message::text(ask)).await.unwrap();
        loop {
            let m = tokio::time::timeout(WAIT, c.next()).await.expect("an event in time");
            match m {
                Some(Ok(Message::Text(t))) => {
                    let e: Value = serde_json::from_str(t.as_str()).unwrap();
                    assert_ne!(e["type"], "error", "{e}");
                    if e["type"] == "response" {
                        return e["content"].as_str().unwrap().to_owned();
                    }
                }
                Some(Ok(Message::Close(_))) | None => panic!("the WebSocket closed before its answer"),
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("the WebSocket failed before its answer: {e}"),
            }
        }
    })
}

/// Asks `/v1/chat/completions` once (not streamed) and returns the answer's text.
fn ask_the_openai_api(addr: SocketAddr) -> String {
    let body = r#"{"model":"chela","user":"stop","messages":[{"role":"user","content":"a slow API question"}]}"#;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAuthorization: Bearer {GATEWAY_TOKEN}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    // Kept alive on purpose: the gateway closes the connection itself once the answer is out.
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let (status, json) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no response: {answer:?}"));
    assert!(status.starts_with("HTTP/1.1 200"), "{answer}");
    let json: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {answer}"));
    json["choices"][0]["message"]["content"].as_str().unwrap().to_owned()
}
