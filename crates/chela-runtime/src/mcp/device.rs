//! MCP where the other side dials in: a xiaozhi device (its tools over the conversation
//! WebSocket) or a tool host on the MCP endpoint. The peer is the
//! MCP server, Chela the client; this module knows no transport, only JSON values in and out.
//!
//! # The contract with a transport
//! - [`attach`] (a device) or [`attach_endpoint`] (a tool host) starts the client: it sends
//!   `initialize`, `notifications/initialized` and `tools/list` (page by page) into `out`, and
//!   registers the peer's tools as the capability group `device_<short id>` /
//!   `endpoint_<name>` once listed.
//! - The transport sends every value taken from `out` to the peer, each as one message:
//!   the xiaozhi WebSocket wraps it as `{"session_id":…,"type":"mcp","payload":v}`; the MCP
//!   endpoint sends it as one bare text frame. `out` should be bounded; a full queue makes
//!   requests wait (within their timeout), and a dropped receiver fails them.
//! - Each JSON-RPC message that arrives from the peer (the xiaozhi envelope's `payload`, an
//!   endpoint's text frame parsed as JSON) goes to [`Peer::deliver`], which never blocks.
//! - When the connection ends the transport drops the [`Peer`] (or calls [`Peer::close`]):
//!   the group goes, and calls still waiting fail at once with the reason.
//! - `notifications/tools/list_changed` from the peer makes the client list the tools again
//!   (same paging and bounds as the first time) and replace the group: tools gone are gone, the
//!   group keeps its name. One listing at a time, at most one a second however many
//!   notifications come (`client/listing.rs`).
//!
//! Device quirks honoured (xiaozhi's): integer ids only (an answer with another id is
//! ignored), errors may have no `code`, `nextCursor` is the next tool's name, notifications
//! from the peer are never answered, no `ping` is ever sent. `initialize` asks for 2024-11-05
//! and, for a device, carries `capabilities.vision {url, token}` (xiaozhi-sdk refuses an
//! `initialize` without it). Tools marked `annotations.audience: ["user"]` are kept from the
//! model. Everything is bounded: pages, tools, descriptions, schemas, waiting calls and time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::client::conn::CallError;
use super::client::listing;
use super::client::names::Names;
use super::client::wire::{self, Incoming, ToolDef};
use crate::tools::{ToolError, Toolbox};

/// The revision devices and endpoint hosts speak.
pub const VERSION: &str = "2024-11-05";
/// How long `initialize` and each `tools/list` page may take.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one tool call may take: calls run on the device's main loop and the camera tool
/// uploads a photo and waits for the vision model, so this is long, but bounded.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Most `tools/list` pages read from one peer.
pub const MAX_PAGES: usize = 32;
/// Most tools taken from one peer.
pub const MAX_TOOLS: usize = 256;
/// Requests waiting for an answer at once.
pub const MAX_PENDING: usize = 32;
/// How much of a peer's tool list is read: [`MAX_PAGES`] pages, [`MAX_TOOLS`] tools,
/// descriptions of 2048 characters, input schemas of 16 KiB (a tool with a larger one is left
/// out).
const BOUNDS: listing::Bounds =
    listing::Bounds { pages: MAX_PAGES, tools: MAX_TOOLS, description: 2048, schema: 16 * 1024 };

/// Who is on the other side.
#[derive(Clone, Debug)]
enum Kind {
    /// A xiaozhi device (its normalised id) and where its camera tool posts.
    Device { id: String, vision: Option<(String, String)> },
    /// A tool host on the MCP endpoint, by the name its token was issued under.
    Endpoint { name: String },
}

impl Kind {
    fn group(&self) -> String {
        match self {
            Kind::Device { id, .. } => format!("device_{}", short_id(id)),
            Kind::Endpoint { name } => format!("endpoint_{name}"),
        }
    }

    fn label(&self) -> String {
        match self {
            Kind::Device { id, .. } => format!("xiaozhi device {id}"),
            Kind::Endpoint { name } => format!("MCP endpoint host {name}"),
        }
    }

    fn initialize(&self) -> Value {
        match self {
            Kind::Device { vision, .. } => {
                let caps = match vision {
                    Some((url, token)) => json!({"vision": {"url": url, "token": token}}),
                    None => json!({}),
                };
                json!({"protocolVersion": VERSION, "capabilities": caps,
                       "clientInfo": {"name": "chela", "version": env!("CARGO_PKG_VERSION")}})
            }
            // The name the xiaozhi cloud uses; bridges may look for it.
            Kind::Endpoint { .. } => json!({"protocolVersion": VERSION, "capabilities": {},
                "clientInfo": {"name": "XiaozhiMCPEndpointClient", "version": env!("CARGO_PKG_VERSION")}}),
        }
    }

    fn list_params(&self, cursor: Option<&str>) -> Value {
        match (self, cursor) {
            // The firmware reads `cursor` and `withUserTools`; user tools are not asked for.
            (Kind::Device { .. }, c) => json!({"cursor": c.unwrap_or(""), "withUserTools": false}),
            (Kind::Endpoint { .. }, Some(c)) => json!({"cursor": c}),
            (Kind::Endpoint { .. }, None) => json!({}),
        }
    }
}

/// The short id in a device's group name: its MAC's hex digits (`aa:bb:…` → `aabb…`), or for
/// any other id a stable hash of it, so the group name is always `[a-z0-9_]` and at most 32
/// characters and names the same device after a restart.
pub fn short_id(device_id: &str) -> String {
    let hex: String = device_id.chars().filter(|c| *c != ':' && *c != '-').collect::<String>().to_ascii_lowercase();
    if !hex.is_empty() && hex.len() <= 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return hex;
    }
    let h = device_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{h:016x}")
}

type Reply = Result<Value, CallError>;

#[derive(Default)]
struct Calls {
    waiting: HashMap<u64, oneshot::Sender<Reply>>,
    /// Set once the peer is gone.
    dead: Option<String>,
}

/// Which connection owns each group name in each toolbox: a device that reconnects gets a new
/// peer before the old one is dropped, and the old one must not take the new group away.
static OWNERS: Mutex<Vec<(usize, String, u64)>> = Mutex::new(Vec::new());
static GENERATION: AtomicU64 = AtomicU64::new(1);

struct Core {
    kind: Kind,
    group: String,
    label: String,
    out: mpsc::Sender<Value>,
    calls: Mutex<Calls>,
    next_id: AtomicU64,
    toolbox: Weak<Toolbox>,
    generation: u64,
    names: Mutex<Names>,
    call_timeout: Duration,
    /// The setup's outcome: `None` while it runs, then the tool count or why it failed.
    setup: watch::Sender<Option<Result<usize, String>>>,
    /// The peer sent `notifications/tools/list_changed` (one stored signal however many came).
    changed: Notify,
    /// Set once the peer is gone.
    gone: watch::Sender<bool>,
}

/// One connected peer. Dropping it removes its group and fails its waiting calls.
pub struct Peer {
    core: Arc<Core>,
}

/// A xiaozhi device's MCP client (the name the gateway's WebSocket uses).
pub type DevicePeer = Peer;

/// Starts the MCP client of device `device_id` (normalised, as in the device store): its tools
/// become the group `device_<short id>` in `toolbox`. `vision` is the URL and token its camera
/// tool posts photos to (`/mcp/vision/explain`).
pub fn attach(
    toolbox: &Arc<Toolbox>,
    device_id: &str,
    vision: Option<(String, String)>,
    out: mpsc::Sender<Value>,
) -> DevicePeer {
    Peer::start(toolbox, Kind::Device { id: device_id.to_owned(), vision }, out, CALL_TIMEOUT)
}

/// Starts the MCP client of a tool host that dialled the MCP endpoint with the token issued as
/// `name`: its tools become the group `endpoint_<name>`.
pub fn attach_endpoint(toolbox: &Arc<Toolbox>, name: &str, out: mpsc::Sender<Value>) -> Peer {
    Peer::start(toolbox, Kind::Endpoint { name: name.to_owned() }, out, CALL_TIMEOUT)
}

impl Peer {
    fn start(toolbox: &Arc<Toolbox>, kind: Kind, out: mpsc::Sender<Value>, call_timeout: Duration) -> Peer {
        let core = Arc::new(Core {
            group: kind.group(),
            label: kind.label(),
            kind,
            out,
            calls: Mutex::new(Calls::default()),
            next_id: AtomicU64::new(1),
            toolbox: Arc::downgrade(toolbox),
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
            names: Mutex::new(Names::default()),
            call_timeout,
            setup: watch::Sender::new(None),
            changed: Notify::new(),
            gone: watch::Sender::new(false),
        });
        tokio::spawn(crate::tasks::boxed(setup(Arc::clone(&core))));
        Peer { core }
    }

    /// The capability group this peer's tools are in.
    pub fn group(&self) -> &str {
        &self.core.group
    }

    /// Takes one message from the peer. Answers go to the calls waiting for them (an id that is
    /// not an integer Chela sent is ignored); notifications are never answered; a request is
    /// answered `ping` → `{}`, anything else "method not found"; anything else is dropped.
    pub fn deliver(&self, msg: Value) {
        let c = &self.core;
        match wire::decode_value(&msg) {
            Ok(Incoming::Response { id, outcome }) => {
                let Some(id) = id.as_u64() else {
                    chela_log::debug!("{}: an answer with a non-integer id was ignored", c.label);
                    return;
                };
                let tx = c.calls().waiting.remove(&id);
                match tx {
                    Some(tx) => {
                        let _ = tx.send(outcome.map_err(CallError::Rpc));
                    }
                    None => {
                        chela_log::debug!("{}: an answer to no waiting request ({id})", c.label)
                    }
                }
            }
            Ok(Incoming::Notification { method, .. }) => {
                chela_log::debug!("{}: notification {method}", c.label);
                if method == "notifications/tools/list_changed" {
                    // Read again by the peer's own task, at most once a second.
                    c.changed.notify_one();
                }
            }
            Ok(Incoming::Request { id, method }) => {
                let answer = if method == "ping" {
                    json!({"jsonrpc": "2.0", "id": id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": id,
                           "error": {"code": -32601, "message": format!("Chela does not serve {method} here")}})
                };
                // Never wait on the transport here; a peer that floods requests loses answers.
                let _ = c.out.try_send(answer);
            }
            Err(e) => chela_log::debug!("{}: {e}", c.label),
        }
    }

    /// Waits until the tools are listed and registered (their number) or the setup failed.
    pub async fn ready(&self) -> Result<usize, String> {
        let mut rx = self.core.setup.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or_else(|| Err("the setup did not finish".into())),
            Err(_) => Err("the setup did not finish".into()),
        }
    }

    /// Resolves once the setup has an outcome (listed or failed); owns what it waits on, so a
    /// turn can wait on it while the connection's task keeps delivering the peer's answers.
    pub fn settled(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.core.setup.subscribe();
        async move {
            let _ = rx.wait_for(Option::is_some).await;
        }
    }

    /// Ends the session: the group goes and waiting calls fail. Dropping the peer does the same.
    pub fn close(&self, why: &str) {
        self.core.fail(why);
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.core.fail("the connection closed");
    }
}

impl Core {
    fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn key(&self) -> usize {
        self.toolbox.as_ptr() as usize
    }

    /// Marks the peer gone, fails every waiting call and removes the group if it is ours.
    fn fail(&self, why: &str) {
        let why = format!("{}: {why}", self.label);
        {
            let mut calls = self.calls();
            let why = calls.dead.get_or_insert(why).clone();
            for (_, tx) in calls.waiting.drain() {
                let _ = tx.send(Err(CallError::Broken(why.clone())));
            }
        }
        self.gone.send_replace(true);
        self.setup.send_if_modified(|s| {
            if s.is_none() {
                *s = Some(Err(format!("{} left before its tools were listed", self.label)));
                return true;
            }
            false
        });
        let mut owners = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
        let key = self.key();
        if let Some(i) = owners.iter().position(|(k, g, n)| *k == key && *g == self.group && *n == self.generation) {
            owners.swap_remove(i);
            if let Some(tb) = self.toolbox.upgrade() {
                tb.unregister(&self.group);
            }
        }
    }

    /// Sends a request and waits at most `timeout` for its answer.
    async fn request(&self, method: &str, params: Value, timeout: Duration) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut calls = self.calls();
            if let Some(why) = &calls.dead {
                return Err(CallError::Broken(why.clone()));
            }
            if calls.waiting.len() >= MAX_PENDING {
                return Err(CallError::Broken(format!(
                    "{MAX_PENDING} requests to the {} are already waiting; try again later",
                    self.label
                )));
            }
            calls.waiting.insert(id, tx);
        }
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let exchange = async {
            self.out
                .send(msg)
                .await
                .map_err(|_| CallError::Broken(format!("{}: the connection closed", self.label)))?;
            rx.await.map_err(|_| CallError::Broken(self.dead().unwrap_or_else(|| "the connection closed".into())))?
        };
        let reply = tokio::time::timeout(timeout, exchange).await;
        // Whatever happened, the id waits no more (an answer after this is ignored).
        let abandoned = self.calls().waiting.remove(&id).is_some();
        match reply {
            Ok(r) => r,
            Err(_) => {
                if abandoned {
                    // Devices ignore notifications; hosts on the endpoint may stop the work.
                    let _ = self.out.try_send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": id, "reason": "timed out"}}));
                }
                Err(CallError::TimedOut(format!(
                    "the {} did not answer {method} within {} s",
                    self.label,
                    timeout.as_secs()
                )))
            }
        }
    }

    fn dead(&self) -> Option<String> {
        self.calls().dead.clone()
    }

    /// Every page of `tools/list`, without the user-only tools, each with its id.
    async fn list(&self) -> Result<Vec<(String, ToolDef)>, String> {
        listing::list_tools(&self.label, &self.group, BOUNDS, &self.names, |cursor| async move {
            let result = self
                .request("tools/list", self.kind.list_params(cursor.as_deref()), SETUP_TIMEOUT)
                .await
                .map_err(|e| format!("{} (tools/list): {e}", self.label))?;
            let for_model: Vec<Value> = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("{}: the tools/list result has no `tools` list", self.label))?
                .iter()
                .filter(|t| !user_only(t))
                .cloned()
                .collect();
            wire::tools_page(&json!({"tools": for_model, "nextCursor": result.get("nextCursor")}))
                .map_err(|e| format!("{}: {e}", self.label))
        })
        .await
    }

    /// Registers the group, unless the peer has gone meanwhile. `again` (a re-list) replaces
    /// the group only while this connection still owns it: a device that reconnected has a
    /// newer one.
    fn install(self: &Arc<Self>, tools: &[(String, ToolDef)], again: bool) -> Result<(), String> {
        let Some(tb) = self.toolbox.upgrade() else { return Err("Chela is stopping".into()) };
        let group = listing::group_of(&self.group, format!("Tools of the {}", self.label), tools, |t| {
            Arc::new(PeerTool { core: Arc::downgrade(self), name: t.name.clone() })
        });
        let mut owners = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(why) = self.dead() {
            return Err(why);
        }
        let key = self.key();
        if again && !owners.iter().any(|(k, g, n)| *k == key && *g == self.group && *n == self.generation) {
            return Err(format!("the group {} belongs to a newer connection", self.group));
        }
        tb.replace(group).map_err(|e| format!("the tools of the {} cannot be registered: {e}", self.label))?;
        owners.retain(|(k, g, _)| !(*k == key && *g == self.group));
        owners.push((key, self.group.clone(), self.generation));
        Ok(())
    }

    /// Calls tool `name` with `input` (a JSON object as text).
    async fn call(self: Arc<Self>, name: String, input: String) -> crate::tools::OutputResult {
        let args: Value = serde_json::from_str(&input)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| ToolError::invalid_args("The arguments must be a JSON object."))?;
        match self.request("tools/call", json!({"name": name, "arguments": args}), self.call_timeout).await {
            Ok(result) => {
                wire::check_result_type(&result).map_err(ToolError::new)?;
                wire::tool_output(&result).map_err(ToolError::new)
            }
            Err(CallError::Rpc(e)) if e.code == Some(-32602) => {
                Err(ToolError::invalid_args(format!("The {} refused the call to {name}: {}", self.label, e.message)))
            }
            Err(CallError::Rpc(e)) => Err(ToolError::new(format!(
                "The {} answered the call to {name} with an error: {}",
                self.label, e.message
            ))),
            Err(CallError::TimedOut(s)) => Err(ToolError::timed_out(format!("{s}; the call was given up."))),
            Err(CallError::Broken(s)) => Err(ToolError::new(format!("{s}. The call to {name} did not finish."))),
        }
    }
}

/// Whether a tool is for the person at the device only (`annotations.audience` without
/// `assistant`): the model never sees it.
fn user_only(tool: &Value) -> bool {
    let Some(aud) = tool.pointer("/annotations/audience").and_then(Value::as_array) else { return false };
    aud.iter().any(|a| a == "user") && !aud.iter().any(|a| a == "assistant")
}

/// The handshake and the listing, then the group.
async fn setup(core: Arc<Core>) {
    let outcome = async {
        let result = core
            .request("initialize", core.kind.initialize(), SETUP_TIMEOUT)
            .await
            .map_err(|e| format!("{} (initialize): {e}", core.label))?;
        wire::agreed_version(&result).map_err(|e| format!("{}: {e}", core.label))?;
        core.out
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await
            .map_err(|_| format!("{}: the connection closed", core.label))?;
        let tools = core.list().await?;
        core.install(&tools, false)?;
        Ok(tools.len())
    }
    .await;
    match &outcome {
        Ok(n) => chela_log::info!("{}: {n} tools in group {}", core.label, core.group),
        Err(e) => chela_log::warn!("{e}"),
    }
    let listed = outcome.is_ok();
    core.setup.send_replace(Some(outcome));
    if listed {
        follow(core).await;
    }
}

/// Lists the tools again on each `notifications/tools/list_changed` (one listing at a time, at
/// most one a second) and replaces the group, until the peer goes.
async fn follow(core: Arc<Core>) {
    let mut gone = core.gone.subscribe();
    let closed = async move {
        let _ = gone.wait_for(|g| *g).await;
    };
    let relist = || async {
        let tools = match core.list().await {
            Ok(t) => t,
            Err(e) => {
                chela_log::warn!("listing the changed tools failed: {e}");
                return core.dead().is_none();
            }
        };
        match core.install(&tools, true) {
            Ok(()) => {
                chela_log::info!("{}: tools changed, now {} in group {}", core.label, tools.len(), core.group);
                true
            }
            Err(e) => {
                chela_log::info!("{}: the changed tools are not registered: {e}", core.label);
                false
            }
        }
    };
    listing::follow_changes(|| core.changed.notified(), closed, relist).await;
}

/// One of the peer's tools as a Chela tool. It holds the peer weakly: a tool list taken
/// before the peer left must not keep it alive.
struct PeerTool {
    core: Weak<Core>,
    name: String,
}

impl crate::tools::Dynamic for PeerTool {
    fn call(&self, input: String) -> crate::tools::ToolFuture {
        let (core, name) = (self.core.upgrade(), self.name.clone());
        Box::pin(async move {
            match core {
                Some(core) => core.call(name, input).await,
                None => Err(ToolError::new(format!("The peer that offered {name} has disconnected."))),
            }
        })
    }
}

#[cfg(any(test, feature = "testing"))]
#[path = "device_fake.rs"]
pub mod fake;
#[cfg(test)]
#[path = "device_tests.rs"]
mod tests;
