//! The JSON-RPC messages of MCP and the decisions about them, without IO: what to send for each
//! era, how to read what comes back, which era a server speaks, and how a `tools/call` result
//! becomes a tool output. `conn.rs` moves the bytes.

use chela_proto::chat::{Image, placeholder};
use serde_json::{Value, json};

use crate::tools::ToolOutput;

/// The newest handshake-era revision we ask for in `initialize`.
pub const LEGACY_VERSION: &str = "2025-11-25";
/// Handshake-era revisions we can speak (a server may answer `initialize` with any of them).
pub const LEGACY_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The stateless revision: `server/discover`, `_meta` on every request, no `initialize`.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The error a modern server answers for a revision it does not speak.
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// Which protocol a server speaks, found once per server and kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize` handshake; the revision the server agreed to.
    Legacy(String),
    /// 2026-07-28: stateless.
    Modern,
}

impl Era {
    pub fn label(&self) -> String {
        match self {
            Era::Legacy(v) => format!("{v} (initialize)"),
            Era::Modern => format!("{MODERN_VERSION} (stateless)"),
        }
    }
}

fn client_info() -> Value {
    json!({"name": "chela", "version": env!("CARGO_PKG_VERSION")})
}

/// The `params` of a request in `era`: the modern era carries protocol facts in `_meta`.
pub fn params(era: Option<&Era>, mut params: Value) -> Value {
    if matches!(era, Some(Era::Modern)) {
        if !params.is_object() {
            params = json!({});
        }
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientInfo": client_info(),
            "io.modelcontextprotocol/clientCapabilities": {},
        });
    }
    params
}

/// One line to write: a request (with `id`) or a notification.
pub fn encode(id: Option<u64>, method: &str, params: &Value) -> String {
    let mut m = json!({"jsonrpc": "2.0", "method": method, "params": params});
    if let Some(id) = id {
        m["id"] = json!(id);
    }
    // serde_json escapes newlines inside strings, so a message is always one line.
    m.to_string()
}

/// The probe for the stateless revision.
pub fn discover() -> (&'static str, Value) {
    ("server/discover", params(Some(&Era::Modern), json!({})))
}

/// The handshake request. Capabilities are declared honestly: none (no roots, no sampling).
pub fn initialize() -> (&'static str, Value) {
    ("initialize", json!({"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": client_info()}))
}

/// A JSON-RPC error as received.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    pub code: Option<i64>,
    pub message: String,
    pub data: Option<Value>,
}

/// One message from the server.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Response { id: Value, outcome: Result<Value, RpcError> },
    Notification { method: String, params: Value },
    Request { id: Value, method: String },
}

/// Reads one line. Errors say what is wrong in words the tool result can carry.
pub fn decode(line: &[u8]) -> Result<Incoming, String> {
    let v: Value = serde_json::from_slice(line).map_err(|e| format!("the server sent invalid JSON ({e})"))?;
    decode_value(&v)
}

/// Reads one message already parsed as JSON (a transport that frames messages itself: the
/// xiaozhi channel, a WebSocket).
pub fn decode_value(v: &Value) -> Result<Incoming, String> {
    let Some(obj) = v.as_object() else { return Err("the server sent JSON that is not a JSON-RPC message".into()) };
    let method = obj.get("method").and_then(Value::as_str);
    match (obj.get("id"), method) {
        (Some(id), Some(m)) => Ok(Incoming::Request { id: id.clone(), method: m.to_owned() }),
        (None, Some(m)) => Ok(Incoming::Notification {
            method: m.to_owned(),
            params: obj.get("params").cloned().unwrap_or(Value::Null),
        }),
        (Some(id), None) => {
            let outcome = match (obj.get("result"), obj.get("error")) {
                (_, Some(e)) => Err(RpcError {
                    // Some peers (xiaozhi devices) send errors without a code.
                    code: e.get("code").and_then(Value::as_i64),
                    message: e.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_owned(),
                    data: e.get("data").cloned(),
                }),
                (Some(r), None) => Ok(r.clone()),
                (None, None) => return Err("the server sent a response with neither result nor error".into()),
            };
            Ok(Incoming::Response { id: id.clone(), outcome })
        }
        (None, None) => Err("the server sent a JSON-RPC message with neither id nor method".into()),
    }
}

/// What the answer to `server/discover` says about the era: a discover
/// result or -32022 naming our revision means modern; any other error means the handshake era.
pub fn probe_outcome(answer: &Result<Value, RpcError>) -> bool {
    match answer {
        Ok(v) => v
            .get("supportedVersions")
            .and_then(Value::as_array)
            .is_some_and(|vs| vs.iter().any(|s| s.as_str() == Some(MODERN_VERSION))),
        Err(e) if e.code == Some(UNSUPPORTED_VERSION) => e
            .data
            .as_ref()
            .and_then(|d| d.get("supported"))
            .and_then(Value::as_array)
            .is_some_and(|vs| vs.iter().any(|s| s.as_str() == Some(MODERN_VERSION))),
        Err(_) => false,
    }
}

/// The revision an `initialize` result agreed to, if we speak it.
pub fn agreed_version(result: &Value) -> Result<String, String> {
    let v = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
    if LEGACY_VERSIONS.contains(&v) {
        Ok(v.to_owned())
    } else {
        Err(format!("the server wants protocol revision `{v}`, which Chela does not speak"))
    }
}

/// A modern result that is not final (`input_required`) needs input Chela cannot give.
pub fn check_result_type(result: &Value) -> Result<(), String> {
    match result.get("resultType").and_then(Value::as_str) {
        None | Some("complete") => Ok(()),
        Some("input_required") => {
            Err("the server asked for more input (elicitation or sampling), which Chela does not provide".into())
        }
        Some(other) => Err(format!("the server sent an unknown resultType `{other}`")),
    }
}

/// One tool as `tools/list` describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// The input schema as JSON text.
    pub schema: String,
}

/// One page of `tools/list`: the tools and the cursor of the next page.
pub fn tools_page(result: &Value) -> Result<(Vec<ToolDef>, Option<String>), String> {
    let tools = result.get("tools").and_then(Value::as_array).ok_or("the tools/list result has no `tools` list")?;
    let mut out = Vec::with_capacity(tools.len());
    for t in tools {
        let Some(name) = t.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
            return Err("a tool in the tools/list result has no name".into());
        };
        let description =
            t.get("description").or_else(|| t.get("title")).and_then(Value::as_str).unwrap_or("").to_owned();
        let schema = match t.get("inputSchema") {
            Some(s) if s.is_object() => s.to_string(),
            _ => r#"{"type":"object","properties":{}}"#.to_owned(),
        };
        out.push(ToolDef { name: name.to_owned(), description, schema });
    }
    let next = result.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
    Ok((out, next))
}

/// Image types both wire formats take (Anthropic's list; OpenAI's is the same).
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// A `tools/call` result as the tool output the model reads: text as it is, images as images
/// (when their type is one the models take and their data is base64), audio and binary
/// resources as a note with their type and size, `structuredContent` as JSON, links as links.
/// `isError: true` is an `Err` with the same text (images as notes), which the model sees as a
/// failed tool.
pub fn tool_output(result: &Value) -> Result<ToolOutput, String> {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for c in result.get("content").and_then(Value::as_array).into_iter().flatten() {
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
        match s("type") {
            "text" => parts.push(s("text").to_owned()),
            "image" => match image(s("mimeType"), s("data")) {
                Ok(img) => images.push(img),
                Err(note) => parts.push(note),
            },
            "audio" => {
                // base64: 4 characters carry 3 bytes.
                let bytes = s("data").len() / 4 * 3;
                parts.push(format!("[audio: {}, {bytes} bytes]", s("mimeType")));
            }
            "resource_link" => {
                let name = if s("name").is_empty() { s("uri") } else { s("name") };
                parts.push(format!("[link: {name}]({})", s("uri")));
            }
            "resource" => {
                let r = c.get("resource").unwrap_or(&Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
                match r.get("text").and_then(Value::as_str) {
                    Some(text) => parts.push(format!("[resource {uri}]\n{text}")),
                    None => parts.push(format!(
                        "[resource {uri}: {} binary]",
                        r.get("mimeType").and_then(Value::as_str).unwrap_or("")
                    )),
                }
            }
            other => parts.push(format!("[content of type `{other}`]")),
        }
    }
    if let Some(sc) = result.get("structuredContent").filter(|v| !v.is_null()) {
        // Servers are asked to repeat structured content as text; show it once.
        let json = sc.to_string();
        if !parts.iter().any(|p| p.trim() == json || serde_json::from_str::<Value>(p).ok().as_ref() == Some(sc)) {
            parts.push(json);
        }
    }
    let out = ToolOutput { text: parts.join("\n"), images };
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = out.into_text();
        Err(if text.is_empty() { "the tool failed and gave no reason".into() } else { text })
    } else {
        Ok(out)
    }
}

/// An MCP image content as an image the model can be shown, or the note that stands for it.
fn image(mime: &str, data: &str) -> Result<Image, String> {
    let media_type = mime.trim().to_ascii_lowercase();
    let size = placeholder(&media_type, data.len() / 4 * 3);
    let why = if !IMAGE_TYPES.contains(&media_type.as_str()) {
        "not a type the model takes"
    } else if data.is_empty()
        || !data.len().is_multiple_of(4)
        || !data.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    {
        "its data is not base64"
    } else {
        return Ok(Image { media_type, data: data.to_owned() });
    };
    // `[image: TYPE, SIZE]` with the reason inside the brackets.
    Err(format!("{}; {why}]", &size[..size.len() - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(code: Option<i64>, data: Option<Value>) -> Result<Value, RpcError> {
        Err(RpcError { code, message: "x".into(), data })
    }

    #[test]
    fn era_detection_follows_the_spec() {
        assert!(probe_outcome(&Ok(json!({"supportedVersions": ["2026-07-28"], "capabilities": {}}))));
        assert!(probe_outcome(&err(Some(-32022), Some(json!({"supported": ["2026-07-28"], "requested": "x"})))));
        // Method not found, a pre-initialize refusal, an error without a code: the handshake era.
        assert!(!probe_outcome(&err(Some(-32601), None)));
        assert!(!probe_outcome(&err(Some(-32600), None)));
        assert!(!probe_outcome(&err(None, None)));
        // -32022 that does not offer our revision: no modern conversation is possible.
        assert!(!probe_outcome(&err(Some(-32022), Some(json!({"supported": ["2027-01-01"]})))));
        assert!(!probe_outcome(&Ok(json!({}))));
    }

    #[test]
    fn modern_requests_carry_meta_and_legacy_ones_do_not() {
        let p = params(Some(&Era::Modern), json!({"name": "t"}));
        assert_eq!(p["_meta"]["io.modelcontextprotocol/protocolVersion"], MODERN_VERSION);
        assert_eq!(p["name"], "t");
        let p = params(Some(&Era::Legacy(LEGACY_VERSION.into())), json!({"name": "t"}));
        assert!(p.get("_meta").is_none());
        let line = encode(Some(7), "tools/call", &json!({"a": "two\nlines"}));
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap()["id"], 7);
    }

    #[test]
    fn decode_tells_messages_apart() {
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(Incoming::Response { outcome: Ok(_), .. })
        ));
        let e = decode(br#"{"jsonrpc":"2.0","id":1,"error":{"message":"no"}}"#).unwrap();
        assert!(matches!(e, Incoming::Response { outcome: Err(RpcError { code: None, .. }), .. }));
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(matches!(decode(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#), Ok(Incoming::Request { .. })));
        assert!(decode(b"{not json").unwrap_err().contains("invalid JSON"));
        assert!(decode(b"[1]").is_err());
        assert!(decode(br#"{"id":1}"#).is_err());
    }

    #[test]
    fn initialize_answers_are_checked() {
        assert_eq!(agreed_version(&json!({"protocolVersion": "2024-11-05"})).unwrap(), "2024-11-05");
        assert!(agreed_version(&json!({"protocolVersion": "1999-01-01"})).unwrap_err().contains("1999-01-01"));
        assert!(check_result_type(&json!({})).is_ok());
        assert!(check_result_type(&json!({"resultType": "complete"})).is_ok());
        assert!(check_result_type(&json!({"resultType": "input_required"})).is_err());
    }

    #[test]
    fn tools_pages_are_read() {
        let (tools, next) = tools_page(&json!({"tools": [{"name": "a.b", "description": "d", "inputSchema": {"type": "object"}}, {"name": "c"}], "nextCursor": "p2"})).unwrap();
        assert_eq!(
            tools[0],
            ToolDef { name: "a.b".into(), description: "d".into(), schema: r#"{"type":"object"}"#.into() }
        );
        assert_eq!(tools[1].schema, r#"{"type":"object","properties":{}}"#);
        assert_eq!(next.as_deref(), Some("p2"));
        assert!(tools_page(&json!({"tools": [{"description": "nameless"}]})).is_err());
        assert!(tools_page(&json!({})).is_err());
    }

    #[test]
    fn results_become_tool_output() {
        let r = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAAAAAA", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///x.txt", "name": "x.txt"},
            {"type": "resource", "resource": {"uri": "mem://a", "text": "body"}},
            {"type": "resource", "resource": {"uri": "mem://b", "blob": "AAAA", "mimeType": "application/pdf"}},
        ], "structuredContent": {"n": 1}});
        let out = tool_output(&r).unwrap();
        assert_eq!(
            out.text,
            "hello\n[audio: audio/wav, 6 bytes]\n[link: x.txt](file:///x.txt)\n[resource mem://a]\nbody\n\
             [resource mem://b: application/pdf binary]\n{\"n\":1}"
        );
        assert_eq!(out.images, [Image { media_type: "image/png".into(), data: "AAAA".into() }]);
        // Structured content repeated as text is shown once.
        let r = json!({"content": [{"type": "text", "text": "{\"n\": 1}"}], "structuredContent": {"n": 1}});
        assert_eq!(tool_output(&r).unwrap().text, "{\"n\": 1}");
        let r = json!({"content": [{"type": "text", "text": "disk full"}], "isError": true});
        assert_eq!(tool_output(&r).unwrap_err(), "disk full");
        assert!(tool_output(&json!({"isError": true})).is_err());
    }

    #[test]
    fn images_the_models_cannot_take_become_notes() {
        let one = |mime: &str, data: &str| {
            tool_output(&json!({"content": [{"type": "image", "mimeType": mime, "data": data}]})).unwrap()
        };
        // Types are compared without case.
        assert_eq!(one("Image/JPEG", "/9j/4A==").images[0].media_type, "image/jpeg");
        let svg = one("image/svg+xml", "PHN2Zz4=");
        assert!(svg.images.is_empty());
        assert_eq!(svg.text, "[image: image/svg+xml, 6 B; not a type the model takes]");
        for bad in ["", "AAA", "AA AA===", "{\"x\":1}", "AAA\n"] {
            let out = one("image/png", bad);
            assert!(out.images.is_empty(), "{bad:?}");
            assert!(out.text.ends_with("; its data is not base64]"), "{bad:?}: {}", out.text);
        }
        // A failed call's images are notes in its error.
        let r = json!({"content": [{"type": "text", "text": "half done"}, {"type": "image", "mimeType": "image/png", "data": "AAAA"}], "isError": true});
        assert_eq!(tool_output(&r).unwrap_err(), "half done\n[image: image/png, 3 B]");
    }
}
