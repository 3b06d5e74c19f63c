//! A device MCP peer's tools in a real turn of the daemon, against the fake xiaozhi device.

use std::sync::Arc;
use std::time::Duration;

use chela_proto::chat::Message;
use chela_testkit::{FakeLlm, Step};
use serde_json::json;
use tokio::sync::mpsc;

use crate::daemon::{Daemon, Incoming as Inbound, Submitted};
use crate::mcp::device::attach;
use crate::mcp::device::fake::{Behaviour, Seen, fake_device, vision};
use crate::turn::{Cancel, Quiet};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_calls_a_device_tool_in_a_turn() {
    let llm = FakeLlm::start(vec![
        Step::tool_call("device_aabbccddee01_self_audio_speaker_set_volume", json!({"volume": 30})),
        Step::text("Volume set."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let ws = crate::workspace::Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    for (k, v) in [
        ("llm.provider", "anthropic".to_owned()),
        ("llm.base_url", llm.anthropic_base_url()),
        ("llm.api_key", "k".to_owned()),
        ("llm.max_retries", "0".to_owned()),
    ] {
        crate::config::set_override(&ws, k, &v).unwrap();
    }
    let d = Daemon::load(ws).unwrap();
    let (tx, rx) = mpsc::channel(16);
    let peer = Arc::new(attach(d.toolbox(), "aa:bb:cc:dd:ee:01", vision(), tx));
    let seen = Seen::default();
    fake_device(Behaviour::default(), rx, Arc::downgrade(&peer), Arc::clone(&seen));
    peer.ready().await.unwrap();
    let msg = Inbound {
        channel: "ws".into(),
        chat_id: "owner-chat".into(),
        sender: "owner".into(),
        user: Message::user_text("turn it down"),
        cancel: Cancel::default(),
    };
    let Submitted::Queued(p) = d.submit(msg, Box::new(Quiet)) else { panic!("not queued") };
    let end = tokio::time::timeout(Duration::from_secs(30), p.finish()).await.unwrap();
    assert_eq!(d.reply_text(&end), "Volume set.");
    let call = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(call["params"], json!({"name": "self.audio_speaker.set_volume", "arguments": {"volume": 30}}));
    let reqs = llm.requests();
    let offered = reqs[0].json.as_ref().unwrap()["tools"].to_string();
    assert!(offered.contains("device_aabbccddee01_self_get_device_status"), "{offered}");
    assert!(!offered.contains("reboot"), "user-only tools are never shown: {offered}");
    let second = reqs[1].json.as_ref().unwrap()["messages"].to_string();
    assert!(second.contains("\"tool_result\""), "{second}");
    assert!(second.contains("true"), "{second}");
}
