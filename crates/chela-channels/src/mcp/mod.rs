//! Chela as an MCP server: its tools (the groups in `mcp.serve.groups`) and a `chat` tool that
//! runs a whole Chela turn, to any MCP client. Two transports drive the same [`Server`]:
//! [`stdio`] (`chela mcp serve`, one JSON-RPC message per line; stdout is the protocol, logs go
//! to stderr) and [`http`] (Streamable HTTP at `/mcp` on the daemon's gateway).
//!
//! Both eras of the protocol are answered on both transports:
//! - the handshake era (2024-11-05 … 2025-11-25): `initialize` negotiates a version, the
//!   connection (or HTTP session, `Mcp-Session-Id`) remembers it, and a change of the served
//!   tools is announced with `notifications/tools/list_changed` (on stdio, and on an HTTP
//!   session's GET stream);
//! - the stateless revision 2026-07-28: no `initialize`; every request names its version in
//!   `params._meta`, `server/discover` says what the server speaks, every result carries
//!   `resultType`, and an unsupported version is error -32022 listing the supported ones.
//!
//! Why a JSON-RPC server of our own rather than `rmcp`: rmcp's newest revision is 2025-11-25,
//! so the 2026-07-28 requests would need a second dispatcher in front of it that looks at every
//! message anyway; both eras must share one HTTP endpoint that also lives on our own hyper
//! gateway (its auth, Origin check and body bounds), and the server half of the protocol that
//! Chela needs (ping, initialize, discover, tools/list, tools/call, cancellation) is small. A
//! second HTTP stack and its dependency tree would cost more than this file.
//!
//! How to drive it: classify each incoming message with [`classify`]; answer `initialize` with
//! [`Server::initialize`] (which yields the connection's new [`Session`]), any other request
//! with [`Server::request`], a batch with [`Server::batch`] (the one batch path of both
//! transports), and keep what [`Server::notification`] says. [`Server::tool_names`]
//! tells a driver when the served tools changed.

use std::sync::Arc;

use chela_core::cap::{Caller, Scope};
use chela_core::config::{CAPS_DISABLED, MCP_SERVE_GROUPS};
use chela_proto::chat::Message;
use serde_json::{Map, Value, json};

use crate::daemon::{Daemon, Incoming, Waiter};
use crate::tools::{ToolCtx, ToolErrorKind};
use crate::turn::{Cancel, Quiet, TurnEnd};

pub mod http;
pub mod stdio;

/// The handshake-era versions answered, oldest first; the last is offered to a client that
/// asks for one Chela does not know.
pub const LEGACY_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The stateless revision.
pub const MODERN: &str = "2026-07-28";
/// The pseudo-group (and tool) that runs a whole turn; not a group of the toolbox, since
/// Chela's own model must not call itself.
pub const CHAT: &str = "chat";
/// Most messages in one JSON-RPC batch (batches exist only before 2025-06-18).
pub const MAX_BATCH: usize = 32;
/// Longest `chat` message accepted.
const MAX_CHAT_BYTES: usize = 64 * 1024;

/// How long a stateless client may keep `tools/list` and `server/discover` results.
const LIST_TTL_MS: u64 = 5_000;

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT: &str = "io.modelcontextprotocol/clientInfo";
const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
const META_SERVER: &str = "io.modelcontextprotocol/serverInfo";
/// The method a 2026-07-28 client opens its change stream with.
pub const LISTEN: &str = "subscriptions/listen";

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const UNSUPPORTED_VERSION: i64 = -32022;

const CHAT_DESCRIPTION: &str = "Talk to Chela, a personal assistant with its own memory and tools: sends one message \
     and returns Chela's whole answer. The conversation is kept between calls (per client, or per `session`).";
const CHAT_SCHEMA: &str = r#"{"type":"object","properties":{"message":{"type":"string","description":"What to say to Chela."},"session":{"type":"string","description":"Optional conversation name (letters, digits, _ - . : @); default: one conversation per MCP client."}},"required":["message"]}"#;

/// What a handshake-era connection agreed on; empty before `initialize` (and always, in the
/// stateless era).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Session {
    /// The negotiated version.
    pub version: Option<String>,
    /// `clientInfo.name`, the default conversation of the `chat` tool.
    pub client: Option<String>,
    /// `notifications/initialized` arrived.
    pub initialized: bool,
}

impl Session {
    /// Whether this connection may send JSON-RPC batches: only before 2025-06-18.
    pub fn allows_batches(&self) -> bool {
        matches!(self.version.as_deref(), Some("2024-11-05" | "2025-03-26"))
    }
}

/// One incoming JSON-RPC message, sorted.
#[derive(Debug, PartialEq)]
pub enum Kind {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// A response to a request of ours (Chela sends none, so it is ignored).
    Response,
    /// Not a JSON-RPC message: answer with this error response.
    Invalid(Value),
}

/// Sorts one message (an element of a batch, or a whole line).
pub fn classify(msg: Value) -> Kind {
    let Value::Object(mut obj) = msg else {
        return Kind::Invalid(error(Value::Null, INVALID_REQUEST, "a JSON-RPC message is a JSON object"));
    };
    let id = obj.remove("id");
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Kind::Invalid(error(id.unwrap_or(Value::Null), INVALID_REQUEST, "`jsonrpc` must be \"2.0\""));
    }
    let params = obj.remove("params").unwrap_or(Value::Object(Map::new()));
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => {
            return Kind::Invalid(error(id.unwrap_or(Value::Null), INVALID_REQUEST, "`method` must be a string"));
        }
        None if id.is_some() && (obj.contains_key("result") || obj.contains_key("error")) => return Kind::Response,
        None => return Kind::Invalid(error(id.unwrap_or(Value::Null), INVALID_REQUEST, "the message has no `method`")),
    };
    if !params.is_object() && !params.is_array() {
        return Kind::Invalid(error(id.unwrap_or(Value::Null), INVALID_REQUEST, "`params` must be an object"));
    }
    match id {
        None => Kind::Notification { method, params },
        Some(id @ (Value::String(_) | Value::Number(_))) => Kind::Request { id, method, params },
        Some(_) => Kind::Invalid(error(Value::Null, INVALID_REQUEST, "`id` must be a string or a number")),
    }
}

/// A JSON-RPC error response.
pub fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The version a stateless request names in `params._meta`, if it names one.
pub fn meta_version(params: &Value) -> Option<&str> {
    params.get("_meta")?.get(META_VERSION)?.as_str()
}

/// Which era a request is answered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Era {
    Legacy,
    Modern,
}

/// The server: what it exposes, and the daemon whose tools and turns it uses.
pub struct Server {
    daemon: Arc<Daemon>,
}

impl Server {
    pub fn new(daemon: Arc<Daemon>) -> Server {
        Server { daemon }
    }

    /// The groups served now: those in `mcp.serve.groups` that are registered and enabled (a
    /// core group is always enabled), and `chat` unless `caps.disabled` names it.
    fn groups(&self) -> Vec<String> {
        let cfg = self.daemon.config();
        let disabled = cfg.list(CAPS_DISABLED);
        let reg = self.daemon.toolbox().registry();
        cfg.list(MCP_SERVE_GROUPS)
            .into_iter()
            .filter(|g| match reg.group(g) {
                Some(group) => group.enabled || group.spec.core,
                None => g == CHAT && !disabled.iter().any(|d| d == CHAT),
            })
            .collect()
    }

    /// The tools served now, as `tools/list` lists them.
    fn tools(&self) -> Vec<Value> {
        let groups = self.groups();
        let reg = self.daemon.toolbox().registry();
        let mut out: Vec<Value> = reg
            .capabilities()
            .iter()
            .filter(|c| c.llm_callable && groups.iter().any(|g| *g == *c.group))
            .map(|c| {
                let schema: Value = serde_json::from_str(&c.input_schema).unwrap_or_else(|_| json!({"type": "object"}));
                json!({"name": c.id, "description": c.description, "inputSchema": schema})
            })
            .collect();
        if groups.iter().any(|g| g == CHAT) {
            let schema: Value = serde_json::from_str(CHAT_SCHEMA).unwrap_or_default();
            out.push(json!({"name": CHAT, "description": CHAT_DESCRIPTION, "inputSchema": schema}));
        }
        out
    }

    /// The names of the served tools: a driver compares them to notice a change.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools().iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
    }

    /// Answers `initialize`: the version (the client's if Chela speaks it, else its newest
    /// handshake-era one) and the connection's new state.
    pub fn initialize(&self, id: Value, params: &Value) -> (Value, Session) {
        let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
        let version = LEGACY_VERSIONS.iter().find(|v| **v == asked).unwrap_or(&LEGACY_VERSIONS[3]);
        let client = params.pointer("/clientInfo/name").and_then(Value::as_str).map(str::to_owned);
        let reply = result(
            id,
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": server_info(),
                "instructions": INSTRUCTIONS,
            }),
        );
        (reply, Session { version: Some((*version).to_owned()), client, initialized: false })
    }

    /// Takes a notification; returns the id of the request to cancel, if it asks for that.
    pub fn notification(&self, session: &mut Session, method: &str, params: &Value) -> Option<Value> {
        match method {
            "notifications/initialized" => {
                session.initialized = true;
                None
            }
            "notifications/cancelled" => params.get("requestId").cloned(),
            // Anything else (progress, roots changed) needs nothing from Chela.
            _ => None,
        }
    }

    /// Answers one request other than `initialize` on a connection in state `session`.
    pub async fn request(&self, session: &Session, id: Value, method: &str, params: Value, cancel: &Cancel) -> Value {
        let era = match meta_version(&params) {
            Some(MODERN) => Era::Modern,
            Some(other) => {
                let mut e = error(id, UNSUPPORTED_VERSION, &format!("protocol version {other} is not supported"));
                e["error"]["data"] = json!({"supported": [MODERN], "requested": other});
                return e;
            }
            None if method == "server/discover" => Era::Modern,
            None if method == "initialize" => {
                return error(id, INVALID_REQUEST, "initialize was already answered on this connection");
            }
            None if session.version.is_some() || method == "ping" => Era::Legacy,
            None => {
                return error(
                    id,
                    INVALID_REQUEST,
                    &format!(
                        "send `initialize` first, or use protocol version {MODERN} with \
                         params._meta[\"{META_VERSION}\"]"
                    ),
                );
            }
        };
        let answer = match (era, method) {
            (Era::Legacy, "ping") => Ok(json!({})),
            (_, "server/discover") => Ok(json!({
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {"listChanged": true}},
                "instructions": INSTRUCTIONS,
                "_meta": {"io.modelcontextprotocol/serverInfo": server_info()},
            })),
            (_, "tools/list") => self.list(&params),
            (_, "tools/call") => {
                let client = match era {
                    Era::Modern => params.pointer(&format!("/_meta/{}/name", META_CLIENT.replace('/', "~1"))),
                    Era::Legacy => None,
                }
                .and_then(Value::as_str)
                .or(session.client.as_deref())
                .unwrap_or("client")
                .to_owned();
                self.call(&client, &params, cancel).await
            }
            _ => Err((METHOD_NOT_FOUND, format!("Chela does not serve the method `{method}`"))),
        };
        match answer {
            Ok(mut value) => {
                if era == Era::Modern {
                    value["resultType"] = json!("complete");
                    if matches!(method, "server/discover" | "tools/list") {
                        // Cacheable results say for how long; the served tools change when a
                        // group is switched off, so clients are asked to look again soon.
                        value["ttlMs"] = json!(LIST_TTL_MS);
                        value["cacheScope"] = json!("private");
                    }
                }
                result(id, value)
            }
            Err((code, msg)) => error(id, code, &msg),
        }
    }

    /// Takes a JSON-RPC batch on a connection in state `session`, the one path both transports
    /// use. Refused whole (the error response to send) when the session may not send batches
    /// or the batch is empty or too long. Otherwise its notifications take effect on `session`
    /// at once, as they would one by one, and the [`Batch`] returned answers its requests.
    pub fn batch(&self, session: &mut Session, msgs: Vec<Value>) -> Result<Batch, Value> {
        if !session.allows_batches() {
            let v = session.version.as_deref().unwrap_or("none yet");
            let why = format!(
                "JSON-RPC batches are not accepted (protocol version {v}): only sessions of 2024-11-05 or \
                 2025-03-26 may send them"
            );
            return Err(error(Value::Null, INVALID_REQUEST, &why));
        }
        if msgs.is_empty() || msgs.len() > MAX_BATCH {
            return Err(error(Value::Null, INVALID_REQUEST, &format!("a batch holds 1 to {MAX_BATCH} messages")));
        }
        let mut slots = Vec::with_capacity(msgs.len());
        let mut cancels = Vec::new();
        for msg in msgs {
            match classify(msg) {
                Kind::Request { id, method, .. } if method == "initialize" => {
                    slots.push(Slot::Ready(error(id, INVALID_REQUEST, "initialize may not be sent in a batch")));
                }
                Kind::Request { id, method, params } => slots.push(Slot::Ask { id, method, params }),
                Kind::Notification { method, params } => cancels.extend(self.notification(session, &method, &params)),
                Kind::Response => {}
                Kind::Invalid(e) => slots.push(Slot::Ready(e)),
            }
        }
        Ok(Batch { session: session.clone(), slots, cancels })
    }

    fn list(&self, params: &Value) -> Result<Value, (i64, String)> {
        // One page holds every tool; a cursor can only come from someone else.
        if params.get("cursor").is_some_and(|c| !c.is_null()) {
            return Err((INVALID_PARAMS, "this server hands out no cursors; list without one".to_owned()));
        }
        Ok(json!({"tools": self.tools()}))
    }

    async fn call(&self, client: &str, params: &Value, cancel: &Cancel) -> Result<Value, (i64, String)> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| (INVALID_PARAMS, "tools/call needs the tool's `name`".to_owned()))?;
        let args = match params.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(a @ Value::Object(_)) => a.clone(),
            Some(_) => return Err((INVALID_PARAMS, "`arguments` must be an object".to_owned())),
        };
        let groups = self.groups();
        let served = self.tools().iter().any(|t| t["name"] == name);
        if !served {
            return Err((INVALID_PARAMS, format!("Unknown tool: `{name}` is not served here (see tools/list)")));
        }
        if name == CHAT {
            return Ok(self.chat(client, &args, cancel).await);
        }
        let ctx = self.tool_ctx().map_err(|e| (INVALID_PARAMS, e))?;
        let toolbox = Arc::clone(self.daemon.toolbox());
        let scope = Scope { extra_visible: &groups };
        let input = args.to_string();
        let call = toolbox.call(&ctx, name, &input, Caller::Model, scope);
        let outcome = tokio::select! {
            r = call => r,
            () = cancel.cancelled() => return Ok(tool_result("the call was cancelled", true)),
        };
        match outcome {
            Ok(text) => Ok(tool_result(&text, false)),
            // Switched off or removed between the check above and the call.
            Err(e) if matches!(e.kind(), ToolErrorKind::NotFound | ToolErrorKind::Refused) => {
                Err((INVALID_PARAMS, e.0))
            }
            Err(e) => Ok(tool_result(&e.0, true)),
        }
    }

    /// What the tools of a call use: the daemon's current settings.
    fn tool_ctx(&self) -> Result<ToolCtx, String> {
        if let Ok(app) = self.daemon.app() {
            return Ok(app.base.tool_ctx());
        }
        // No model configured: the tools still work, with a context of their own.
        let cfg = self.daemon.config();
        crate::app::Base::with_config(
            Arc::clone(self.daemon.workspace()),
            self.daemon.tools().clone(),
            cfg,
            self.daemon.clock().clone(),
        )
        .map(|b| b.tool_ctx())
        .map_err(|e| format!("{e:#}"))
    }

    /// Runs one turn in the conversation `mcp`/`session` (default: the client's name).
    async fn chat(&self, client: &str, args: &Value, cancel: &Cancel) -> Value {
        let Some(message) = args.get("message").and_then(Value::as_str) else {
            return tool_result("`message` (a string) is required", true);
        };
        if message.trim().is_empty() || message.len() > MAX_CHAT_BYTES {
            return tool_result(&format!("`message` must have 1 to {MAX_CHAT_BYTES} bytes"), true);
        }
        let chat_id = match args.get("session").and_then(Value::as_str) {
            Some(s) => s.to_owned(),
            None => chat_id_for(client),
        };
        if let Err(e) = crate::channels::ws::check_chat_id(&chat_id) {
            return tool_result(&format!("`session`: {e}"), true);
        }
        let incoming = Incoming {
            channel: "mcp".to_owned(),
            chat_id,
            sender: "owner".to_owned(),
            user: Message::user_text(message.to_owned()),
            cancel: cancel.clone(),
        };
        let (reply, answer) = Waiter::new();
        self.daemon.converse(incoming, Box::new(Quiet), Box::new(reply));
        match answer.await {
            Ok(a) => {
                let ok = matches!(&a.end, Some(Ok(TurnEnd::Done(o))) if !o.cancelled);
                tool_result(&a.text, !ok)
            }
            Err(_) => tool_result("a router rule took this message; there is no answer", true),
        }
    }
}

/// One open `subscriptions/listen` stream: the request's id (the subscription id) and
/// whether it asked for tool list changes.
#[derive(Clone, Debug, PartialEq)]
pub struct Listen {
    pub id: Value,
    pub tools: bool,
}

impl Listen {
    fn meta(&self) -> Value {
        json!({ META_SUBSCRIPTION: self.id })
    }

    /// The first message of the stream: what it will carry.
    pub fn ack(&self) -> Value {
        let honored = if self.tools { json!({"toolsListChanged": true}) } else { json!({}) };
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": honored, "_meta": self.meta()},
        })
    }

    /// What the stream carries when the served tools changed; nothing if it did not ask.
    pub fn tools_changed(&self) -> Option<Value> {
        self.tools.then(|| {
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": self.meta()}})
        })
    }

    /// The listen request's result, the last message of a stream the server ends (a client
    /// tells it from a dropped connection by this).
    pub fn closed(&self) -> Value {
        let mut meta = self.meta();
        meta[META_SERVER] = server_info();
        result(self.id.clone(), json!({"resultType": "complete", "_meta": meta}))
    }
}

impl Server {
    /// Takes a `subscriptions/listen` request: the stream to open, or the error response that
    /// refuses it. Only the 2026-07-28 revision has the method; to a handshake-era client it is
    /// unknown, as to the reference servers.
    pub fn listen(&self, id: &Value, params: &Value) -> Result<Listen, Value> {
        match meta_version(params) {
            Some(MODERN) => {}
            Some(other) => {
                let mut e =
                    error(id.clone(), UNSUPPORTED_VERSION, &format!("protocol version {other} is not supported"));
                e["error"]["data"] = json!({"supported": [MODERN], "requested": other});
                return Err(e);
            }
            None => {
                let why = format!("`{LISTEN}` belongs to protocol version {MODERN}; name it in params._meta");
                return Err(error(id.clone(), METHOD_NOT_FOUND, &why));
            }
        }
        let Some(filter) = params.get("notifications").and_then(Value::as_object) else {
            return Err(error(id.clone(), INVALID_PARAMS, "`notifications` (the kinds to receive) must be an object"));
        };
        for (key, value) in filter {
            let ok = match key.as_str() {
                "toolsListChanged" | "promptsListChanged" | "resourcesListChanged" => value.is_boolean(),
                "resourceSubscriptions" => value.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
                // Kinds of a later revision: not honored, so not looked at.
                _ => true,
            };
            if !ok {
                return Err(error(
                    id.clone(),
                    INVALID_PARAMS,
                    &format!("`notifications.{}` has the wrong type", clip(key)),
                ));
            }
        }
        // Chela has no prompts or resources: only tool list changes are honored.
        let tools = filter.get("toolsListChanged") == Some(&Value::Bool(true));
        Ok(Listen { id: id.clone(), tools })
    }
}

/// At most 64 characters of a client's text, for an error message.
pub(crate) fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

/// A batch taken by [`Server::batch`]: its requests, still to be answered.
pub struct Batch {
    session: Session,
    slots: Vec<Slot>,
    /// The ids of the requests its `notifications/cancelled` named: the transport stops those
    /// that are in flight.
    pub cancels: Vec<Value>,
}

enum Slot {
    Ready(Value),
    Ask { id: Value, method: String, params: Value },
}

impl Batch {
    /// Answers the requests one after another; the replies in the batch's order, or `None`
    /// when it held no request (nothing is sent back then).
    pub async fn answer(self, server: &Server, cancel: &Cancel) -> Option<Value> {
        let mut replies = Vec::with_capacity(self.slots.len());
        for slot in self.slots {
            replies.push(match slot {
                Slot::Ready(v) => v,
                Slot::Ask { id, method, params } => server.request(&self.session, id, &method, params, cancel).await,
            });
        }
        (!replies.is_empty()).then_some(Value::Array(replies))
    }
}

/// A conversation name from an MCP client's name: the characters a chat id may hold.
fn chat_id_for(client: &str) -> String {
    let id: String = client
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') { c } else { '_' })
        .take(48)
        .collect();
    if id.is_empty() { "client".to_owned() } else { id }
}

fn tool_result(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

fn server_info() -> Value {
    json!({"name": "chela", "title": "Chela", "version": env!("CARGO_PKG_VERSION")})
}

const INSTRUCTIONS: &str = "Chela is a personal assistant. Its tools work on its own workspace (memory, files, \
     schedules); `chat` hands a whole request to Chela, which answers with its own model and tools.";
