//! Which conversation a MimiClaw WebSocket message belongs to, as a client written from
//! MimiClaw's documentation sees it: `{"type":"message","content":…,"chat_id":…}` over a real
//! 127.0.0.1 socket, the model being the scripted fake LLM.

use chela_testkit::Step;
use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::tests::{harness, next_json, until_answer, ws_connect};

fn message(content: &str, chat_id: Option<&str>) -> WsMessage {
    let mut m = json!({"type": "message", "content": content});
    if let Some(c) = chat_id {
        m["chat_id"] = json!(c);
    }
    WsMessage::text(m.to_string())
}

/// The user messages of the model's last request, in order, as people wrote them (without the
/// turn's context Chela sends in front of the newest).
fn user_texts(llm: &chela_testkit::FakeLlm) -> Vec<String> {
    let last = llm.requests().into_iter().filter_map(|r| r.json).next_back().expect("the model was asked");
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            parts => parts.as_array().unwrap().iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
        })
        .map(|t| chela_testkit::person_text(&t).to_owned())
        .collect()
}

#[tokio::test]
async fn a_named_chat_id_sticks_to_the_connection_and_the_last_named_wins() {
    let script = vec![Step::text("noted"), Step::text("blue"), Step::text("kitchen here"), Step::text("still kitchen")];
    let h = harness(script, "127.0.0.1:18789", None);
    let addr = h.serve().await;
    let mut c = ws_connect(addr, "/ws").await;
    c.send(message("remember: my colour is blue", Some("ws_override"))).await.unwrap();
    assert_eq!(until_answer(&mut c).await.last().unwrap()["chat_id"], "ws_override");

    // No chat_id: the conversation goes on where the first message put it, with its history.
    c.send(message("what is my colour?", None)).await.unwrap();
    let answer = until_answer(&mut c).await;
    assert_eq!(answer.last().unwrap(), &json!({"type": "response", "content": "blue", "chat_id": "ws_override"}));
    assert_eq!(user_texts(&h.llm), ["remember: my colour is blue", "what is my colour?"]);

    // Refused ids change nothing: too long, or not an id at all.
    for bad in ["x".repeat(129), "../ws_override".to_owned()] {
        c.send(message("hi", Some(&bad))).await.unwrap();
        assert_eq!(next_json(&mut c).await["type"], "error");
    }
    // A later id switches the connection to it.
    c.send(message("hello kitchen", Some("kitchen"))).await.unwrap();
    assert_eq!(until_answer(&mut c).await.last().unwrap()["chat_id"], "kitchen");
    c.send(message("and again", None)).await.unwrap();
    assert_eq!(until_answer(&mut c).await.last().unwrap()["chat_id"], "kitchen");
    assert_eq!(user_texts(&h.llm), ["hello kitchen", "and again"]);
}

#[tokio::test]
async fn a_chat_id_naming_another_channel_stays_a_websocket_conversation() {
    let h = harness(vec![Step::text("ok")], "127.0.0.1:18789", None);
    let addr = h.serve().await;
    let mut c = ws_connect(addr, "/ws").await;
    c.send(message("hi", Some("telegram:42"))).await.unwrap();
    assert_eq!(until_answer(&mut c).await.last().unwrap()["chat_id"], "telegram:42");
    let ws = h.daemon.workspace();
    assert!(ws.session_path("ws", "telegram:42").exists());
    assert!(!ws.session_path("telegram", "42").exists());
}

/// The id of the first connection of a fresh daemon that names no chat id.
async fn first_chat_id() -> String {
    let h = harness(vec![Step::text("hi")], "127.0.0.1:18789", None);
    let addr = h.serve().await;
    let mut c = ws_connect(addr, "/ws").await;
    c.send(message("hello", None)).await.unwrap();
    let id = until_answer(&mut c).await.last().unwrap()["chat_id"].as_str().unwrap().to_owned();
    // A second connection gets its own.
    let mut d = ws_connect(addr, "/ws").await;
    h.llm.push(Step::text("hi again"));
    d.send(message("hello", None)).await.unwrap();
    assert_ne!(until_answer(&mut d).await.last().unwrap()["chat_id"], id.as_str());
    id
}

#[tokio::test]
async fn connections_without_a_chat_id_get_random_ids_that_a_restart_does_not_repeat() {
    let (a, b) = (first_chat_id().await, first_chat_id().await);
    for id in [&a, &b] {
        let hex = id.strip_prefix("ws_").unwrap_or_else(|| panic!("{id}"));
        assert!(hex.len() == 16 && hex.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    }
    assert_ne!(a, b, "two daemons' first connections got the same chat id");
}
