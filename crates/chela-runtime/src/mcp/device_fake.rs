//! A fake xiaozhi device for tests here and above: it speaks the firmware's quirks over the
//! device MCP client (integer ids only, pages cut by the next tool's name, errors without
//! `code`, user-only tools, a camera call that never ends).

use std::sync::{Arc, Mutex, Weak};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Peer;

/// How the fake device behaves.
#[derive(Clone)]
pub struct Behaviour {
    /// Tools per `tools/list` page.
    pub per_page: usize,
    /// How many `self.extra.tN` tools it has besides the usual ones.
    pub extra: usize,
    /// Answers `initialize` at all.
    pub answers_initialize: bool,
    /// Sends every page's cursor as the same name (a broken device).
    pub stuck_cursor: bool,
    /// The tools it lists now, when the test changes them (else [`tools`]).
    pub live: Option<Arc<Mutex<Vec<Value>>>>,
}

impl Default for Behaviour {
    fn default() -> Behaviour {
        Behaviour { per_page: 2, extra: 0, answers_initialize: true, stuck_cursor: false, live: None }
    }
}

pub fn tools(b: &Behaviour) -> Vec<Value> {
    let mut t = vec![
        json!({"name": "self.get_device_status", "description": "Status of the device", "inputSchema": {"type": "object", "properties": {}}}),
        json!({"name": "self.audio_speaker.set_volume", "description": "Set the volume",
               "inputSchema": {"type": "object", "properties": {"volume": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": ["volume"]}}),
        // Sent although `withUserTools` was false: the client must still keep it from the model.
        json!({"name": "self.reboot", "description": "Reboot", "inputSchema": {"type": "object", "properties": {}},
               "annotations": {"audience": ["user"]}}),
        json!({"name": "self.camera.take_photo", "description": "Take a photo and ask about it",
               "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}),
        json!({"name": "self.screen.set_theme", "description": "Theme", "inputSchema": {"type": "object", "properties": {"theme": {"type": "string"}}}}),
    ];
    for i in 0..b.extra {
        t.push(json!({"name": format!("self.extra.t{i}"), "description": "x", "inputSchema": {"type": "object"}}));
    }
    t
}

/// Everything the fake device received, in order.
pub type Seen = Arc<Mutex<Vec<Value>>>;

/// Runs the fake device: reads what the client sends and answers through `deliver`.
pub fn fake_device(b: Behaviour, mut rx: mpsc::Receiver<Value>, peer: Weak<Peer>, seen: Seen) {
    tokio::spawn(async move {
        let mut all = tools(&b);
        while let Some(m) = rx.recv().await {
            if let Some(live) = &b.live {
                all.clone_from(&live.lock().unwrap());
            }
            seen.lock().unwrap().push(m.clone());
            let method = m["method"].as_str().unwrap_or("").to_owned();
            // The firmware silently drops requests whose id is not an integer, and notifications.
            let Some(id) = m.get("id").and_then(Value::as_u64) else { continue };
            let answer = match method.as_str() {
                "initialize" => {
                    // xiaozhi-sdk refuses an initialize without the vision capability.
                    if !b.answers_initialize || m.pointer("/params/capabilities/vision/url").is_none() {
                        continue;
                    }
                    json!({"result": {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                                      "serverInfo": {"name": "fake-board", "version": "2.0.5"}}})
                }
                "tools/list" => {
                    let cursor = m.pointer("/params/cursor").and_then(Value::as_str).unwrap_or("");
                    let start = if cursor.is_empty() {
                        0
                    } else {
                        all.iter().position(|t| t["name"] == cursor).unwrap_or(all.len())
                    };
                    let page: Vec<Value> = all.iter().skip(start).take(b.per_page).cloned().collect();
                    let mut r = json!({"tools": page});
                    if let Some(next) = all.get(start + b.per_page) {
                        r["nextCursor"] = if b.stuck_cursor { all[1]["name"].clone() } else { next["name"].clone() };
                    }
                    json!({"result": r})
                }
                "tools/call" => match m.pointer("/params/name").and_then(Value::as_str).unwrap_or("") {
                    "self.audio_speaker.set_volume" => {
                        match m.pointer("/params/arguments/volume").and_then(Value::as_i64) {
                            Some(v) if (0..=100).contains(&v) => {
                                json!({"result": {"content": [{"type": "text", "text": "true"}], "isError": false}})
                            }
                            _ => json!({"error": {"message": "Missing valid argument: volume"}}),
                        }
                    }
                    "self.get_device_status" => {
                        json!({"result": {"content": [{"type": "text", "text": "{\"battery\":{\"level\":80}}"}], "isError": false}})
                    }
                    // Slow: never answers within a test.
                    "self.camera.take_photo" => continue,
                    other => json!({"error": {"message": format!("Unknown tool: {other}")}}),
                },
                // Devices error on ping.
                other => json!({"error": {"message": format!("Method not implemented: {other}")}}),
            };
            let mut msg = json!({"jsonrpc": "2.0", "id": id});
            msg.as_object_mut().unwrap().extend(answer.as_object().unwrap().clone());
            let Some(p) = peer.upgrade() else { return };
            p.deliver(msg);
        }
    });
}

pub fn vision() -> Option<(String, String)> {
    Some(("http://127.0.0.1:1/mcp/vision/explain".into(), "tok".into()))
}
