//! The MCP client: every configured server (`[mcp.servers.NAME]`) becomes the capability group
//! `mcp_NAME`, whose tools call the server's tools.
//!
//! Why not `rmcp`: the official Rust SDK (3.x) speaks the handshake era only (its newest
//! revision is 2025-11-25), so the 2026-07-28 stateless revision would have to be written
//! beside it anyway, and its transports bring a second HTTP stack (reqwest) next to the one
//! Chela has. The protocol Chela needs as a client is small: line-delimited JSON-RPC over a
//! child's pipes, four methods. So this is our own: [`wire`] decides (no IO, unit-tested),
//! [`conn`] moves bytes for one process, and this module keeps the servers' lifecycles.
//!
//! Lifecycle of a server: not connected → (first need, or daemon start when `connect =
//! "start"`) spawn, find the era (probe `server/discover`, else `initialize`; kept per server),
//! list tools page by page, register the group → calls. A server that dies is started again
//! on the next call; a start that fails is tried again after a backoff that doubles while
//! starts keep failing (1 s … 60 s). Handshake servers that send
//! `notifications/tools/list_changed` are listed again and their group replaced, at most once
//! a second ([`listing`], shared with the peers that dial in).
//! [`Clients::shutdown`] stops every server in order.

pub mod conn;
pub mod http;
pub mod listing;
pub mod names;
pub mod wire;

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;
use tokio::time::Instant;

use chela_core::retry::Exponential;
use serde_json::{Value, json};

use self::conn::{CallError, Conn, Spawn};
use self::http::{HttpConn, Remote};
use self::names::Names;
use self::wire::{Era, ToolDef};
use crate::config::McpServer;
use crate::net::{BoxFuture, HttpClient};
use crate::tasks::TaskHandle;
use crate::tools::{ToolError, Toolbox};

/// What [`Clients::test`] learnt of a server: its era and its tools.
pub type Tested = (Era, Vec<(String, ToolDef)>);

/// How long the era probe may take before the server is taken for a handshake-era one. Long,
/// because the probe is also the server's first request: a Python server on a busy machine
/// takes seconds just to import its SDK.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of a server's tool list is read: 64 pages, 512 tools, descriptions of 2048
/// characters, input schemas of 64 KiB (a tool with a larger one is left out).
const BOUNDS: listing::Bounds = listing::Bounds { pages: 64, tools: 512, description: 2048, schema: 64 * 1024 };
/// Longest wait between restarts of a failing server.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Each step of a stop (closed stdin, SIGTERM) waits this long before the next.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// Wait before attempt number `n` (0: the first) after failures: none, then the core's
/// back-off from a second up to [`MAX_BACKOFF`].
pub fn backoff(n: u32) -> Duration {
    match n {
        0 => Duration::ZERO,
        n => Exponential::new(Duration::from_secs(1), MAX_BACKOFF).step(n - 1),
    }
}

/// Every configured server. Lives in the [`Toolbox`]; connects nothing until asked.
#[derive(Default)]
pub struct Clients {
    servers: Vec<Arc<Server>>,
    /// The background connects [`Clients::start`] began: aborted at [`Clients::shutdown`] (a
    /// server still starting then is not left half-connected) and when the clients are dropped.
    starting: Mutex<Vec<TaskHandle>>,
}

/// One line of `chela mcp list`.
#[derive(Clone, Debug)]
pub struct Status {
    pub name: String,
    pub transport: String,
    pub state: String,
    pub era: Option<String>,
    pub tools: usize,
}

impl Clients {
    /// `http` carries the remote (`url`) servers' requests.
    pub fn new(servers: &std::collections::BTreeMap<String, McpServer>, http: &HttpClient) -> Clients {
        Clients {
            servers: servers.iter().map(|(name, cfg)| Arc::new(Server::new(name, cfg, http))).collect(),
            starting: Mutex::default(),
        }
    }

    /// Connects, at the daemon's start, the servers configured with `connect = "start"`; in
    /// the background, so a slow server delays nothing.
    pub fn start(&self, toolbox: &Arc<Toolbox>) {
        let mut starting = self.starting.lock().unwrap_or_else(PoisonError::into_inner);
        // One task per configured server at most, however often this is called.
        starting.retain(|t| !t.is_finished());
        for s in self.servers.iter().filter(|s| s.cfg.enabled && !s.cfg.lazy) {
            let (s, tb) = (Arc::clone(s), Arc::downgrade(toolbox));
            starting.push(TaskHandle::spawn(async move { s.ensure(&tb).await }));
        }
    }

    /// Connects every enabled server that has no tools registered yet (and whose backoff
    /// allows a new try), all at once; returns when each is connected or failed. Cheap when
    /// all are up: what a turn calls before it builds the tool list.
    // Boxed behind plain functions, here and below: an async fn's state machine (here every
    // connect and listing under it) is compiled into each crate that awaits it, and fat LTO
    // cannot merge the copies; a boxed one is compiled only here.
    #[inline(never)]
    pub fn ensure<'a>(&'a self, toolbox: &'a Arc<Toolbox>) -> BoxFuture<'a, ()> {
        Box::pin(self.ensure_all(toolbox))
    }

    async fn ensure_all(&self, toolbox: &Arc<Toolbox>) {
        let mut set = tokio::task::JoinSet::new();
        for s in self.servers.iter().filter(|s| s.cfg.enabled && s.wants_connect()) {
            let (s, tb) = (Arc::clone(s), Arc::downgrade(toolbox));
            set.spawn(crate::tasks::boxed(async move { s.ensure(&tb).await }));
        }
        while set.join_next().await.is_some() {}
    }

    /// The servers, their state, era and tool count.
    pub fn status(&self) -> Vec<Status> {
        self.servers.iter().map(|s| s.status()).collect()
    }

    /// Connects server `name` now (again, if it was) and returns its era and tools.
    #[inline(never)]
    pub fn test<'a>(&'a self, name: &'a str, toolbox: &'a Arc<Toolbox>) -> BoxFuture<'a, Result<Tested, String>> {
        Box::pin(self.test_one(name, toolbox))
    }

    async fn test_one(&self, name: &str, toolbox: &Arc<Toolbox>) -> Result<Tested, String> {
        let s = self.servers.iter().find(|s| s.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.servers.iter().map(|s| s.name.as_str()).collect();
            format!(
                "no MCP server is called `{name}` (configured: {})",
                if names.is_empty() { "none".into() } else { names.join(", ") }
            )
        })?;
        s.connect(&Arc::downgrade(toolbox)).await?;
        let st = s.state();
        let era = st.era.clone().ok_or("the server has no era")?;
        Ok((era, st.tools.clone()))
    }

    /// Stops every server: stdin closed, then SIGTERM, then SIGKILL, each after a grace time.
    #[inline(never)]
    pub fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shutdown_all())
    }

    async fn shutdown_all(&self) {
        // First, so no connect started at start-up puts a new server in place behind this.
        drop(std::mem::take(&mut *self.starting.lock().unwrap_or_else(PoisonError::into_inner)));
        let mut set = tokio::task::JoinSet::new();
        for s in &self.servers {
            // The connection stays in place, dead: `mcp list` shows it stopped, and the next
            // call starts the server again.
            if let Some(c) = s.state().conn.clone() {
                set.spawn(crate::tasks::boxed(async move { c.shutdown(STOP_GRACE).await }));
            }
        }
        while set.join_next().await.is_some() {}
    }
}

/// A server's settings, as the connection needs them.
struct ServerCfg {
    spawn: Spawn,
    /// A remote server (`url`), and the client its requests go through.
    remote: Option<(Remote, HttpClient)>,
    enabled: bool,
    lazy: bool,
    timeout: Duration,
}

/// A connection to a local (stdio) or a remote (HTTP) server.
#[derive(Clone)]
enum Link {
    Stdio(Arc<Conn>),
    Http(Arc<HttpConn>),
}

impl Link {
    fn dead(&self) -> Option<String> {
        match self {
            Link::Stdio(c) => c.dead(),
            Link::Http(c) => c.dead(),
        }
    }

    async fn request(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, CallError> {
        match self {
            Link::Stdio(c) => c.request(method, params, timeout).await,
            Link::Http(c) => c.request(method, params, timeout).await,
        }
    }

    async fn list_changed(&self) {
        match self {
            Link::Stdio(c) => c.list_changed().await,
            Link::Http(c) => c.list_changed().await,
        }
    }

    async fn closed(&self) {
        match self {
            Link::Stdio(c) => c.closed().await,
            Link::Http(c) => c.closed().await,
        }
    }

    async fn shutdown(&self, grace: Duration) {
        match self {
            Link::Stdio(c) => c.shutdown(grace).await,
            Link::Http(c) => c.shutdown().await,
        }
    }
}

#[derive(Default)]
struct State {
    conn: Option<Link>,
    /// Follows the connection's tool-list changes; replaced (so aborted) with the connection.
    watcher: Option<TaskHandle>,
    era: Option<Era>,
    tools: Vec<(String, ToolDef)>,
    /// Starts tried since the last one that succeeded: the backoff before the next.
    failures: u32,
    last_try: Option<Instant>,
    last_error: Option<String>,
    registered: bool,
}

pub struct Server {
    name: String,
    group: String,
    cfg: ServerCfg,
    state: Mutex<State>,
    /// One connect at a time.
    connecting: tokio::sync::Mutex<()>,
    names: Mutex<Names>,
    toolbox: OnceLock<Weak<Toolbox>>,
}

impl Server {
    fn new(name: &str, cfg: &McpServer, http: &HttpClient) -> Server {
        let remote = (!cfg.url.is_empty()).then(|| {
            let mut headers: Vec<(String, String)> = cfg.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            if !cfg.bearer.is_empty() {
                headers.push(("authorization".into(), format!("Bearer {}", cfg.bearer)));
            }
            (Remote { server: name.to_owned(), url: cfg.url.clone(), headers }, http.clone())
        });
        Server {
            name: name.to_owned(),
            group: format!("mcp_{name}"),
            cfg: ServerCfg {
                spawn: Spawn {
                    server: name.to_owned(),
                    command: cfg.command.clone(),
                    args: cfg.args.clone(),
                    env: cfg.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                    cwd: (!cfg.cwd.is_empty()).then(|| cfg.cwd.clone().into()),
                },
                remote,
                enabled: cfg.enabled,
                lazy: cfg.connect == "lazy",
                timeout: Duration::from_secs(cfg.timeout_secs.max(1)),
            },
            state: Mutex::new(State::default()),
            connecting: tokio::sync::Mutex::new(()),
            names: Mutex::new(Names::default()),
            toolbox: OnceLock::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a connect should be tried now: no tools registered and the backoff elapsed.
    fn wants_connect(&self) -> bool {
        let st = self.state();
        !st.registered && self.backoff_left(&st).is_none()
    }

    fn backoff_left(&self, st: &State) -> Option<Duration> {
        let wait = backoff(st.failures);
        let since = st.last_try?.elapsed();
        (since < wait).then(|| wait - since)
    }

    fn status(&self) -> Status {
        let st = self.state();
        let transport = match (&st.conn, &self.cfg.remote) {
            (Some(Link::Http(c)), _) => c.transport().to_owned(),
            (_, Some(_)) => "http".to_owned(),
            (_, None) => "stdio".to_owned(),
        };
        let state = if !self.cfg.enabled {
            "off (enabled = false)".to_owned()
        } else {
            match (&st.conn, &st.last_error) {
                (Some(c), _) if c.dead().is_none() => "connected".to_owned(),
                (Some(c), _) => format!("stopped: {}", c.dead().unwrap_or_default()),
                (None, Some(e)) => format!("failed: {e}"),
                (None, None) if self.cfg.lazy => "not connected (connects when first needed)".to_owned(),
                (None, None) => "not connected".to_owned(),
            }
        };
        Status {
            name: self.name.clone(),
            transport,
            state,
            era: st.era.as_ref().map(Era::label),
            tools: st.tools.len(),
        }
    }

    async fn ensure(self: &Arc<Self>, tb: &Weak<Toolbox>) {
        if let Err(e) = self.connect(tb).await {
            chela_log::warn!("MCP server {}: {e}", self.name);
        }
    }

    /// A live connection, started (again) if needed and the backoff allows.
    async fn conn(self: &Arc<Self>) -> Result<Link, String> {
        if let Some(c) = self.state().conn.clone().filter(|c| c.dead().is_none()) {
            return Ok(c);
        }
        let tb = self.toolbox.get().cloned().unwrap_or_default();
        self.connect(&tb).await?;
        self.state().conn.clone().ok_or_else(|| format!("MCP server {} is not connected", self.name))
    }

    /// Starts the server, finds its era, lists its tools and (re)registers its group.
    async fn connect(self: &Arc<Self>, tb: &Weak<Toolbox>) -> Result<(), String> {
        let _one = self.connecting.lock().await;
        let _ = self.toolbox.set(tb.clone());
        let old = {
            let mut st = self.state();
            if st.conn.as_ref().is_some_and(|c| c.dead().is_none()) {
                return Ok(());
            }
            if let Some(left) = self.backoff_left(&st) {
                let why = st.last_error.clone().unwrap_or_else(|| "it stopped".into());
                return Err(format!(
                    "MCP server {} is down ({why}); the next start is tried in {} s",
                    self.name,
                    left.as_secs().max(1)
                ));
            }
            st.last_try = Some(Instant::now());
            st.failures = st.failures.saturating_add(1);
            st.watcher = None;
            st.conn.take()
        };
        if let Some(old) = old {
            old.shutdown(STOP_GRACE).await;
        }
        match self.open().await {
            Ok((conn, era, tools)) => {
                self.install(tb, &tools);
                // Handshake-era servers say so with a notification; stateless ones over HTTP on
                // their `subscriptions/listen` stream.
                let watch = matches!(era, Era::Legacy(_)) || matches!(conn, Link::Http(_));
                let mut st = self.state();
                st.conn = Some(conn.clone());
                st.era = Some(era);
                st.tools = tools;
                st.last_error = None;
                // A server that started and then died is started again at once; only failed
                // starts back off (each restart waits for a call, so one that dies on every
                // call restarts at most once per call).
                st.failures = 0;
                st.watcher = watch.then(|| TaskHandle::spawn(watch_list(Arc::downgrade(self), conn)));
                Ok(())
            }
            Err(e) => {
                self.state().last_error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Spawns the process (or reaches the remote server) and does the handshake (or not, in
    /// the stateless era).
    async fn open(&self) -> Result<(Link, Era, Vec<(String, ToolDef)>), String> {
        let cached = self.state().era.clone();
        if let Some((remote, http)) = &self.cfg.remote {
            let conn = HttpConn::new(remote.clone(), http.clone());
            let link = Link::Http(Arc::clone(&conn));
            let era = match conn.open(cached.as_ref(), self.setup_timeout()).await {
                Ok(era) => era,
                Err(e) => {
                    link.shutdown(STOP_GRACE).await;
                    return Err(e);
                }
            };
            let tools = match self.list(&link, &era).await {
                Ok(t) => t,
                Err(e) => {
                    link.shutdown(STOP_GRACE).await;
                    return Err(e);
                }
            };
            return Ok((link, era, tools));
        }
        let mut conn = Conn::spawn(&self.cfg.spawn)?;
        let era = match cached {
            Some(era) => era,
            None => {
                let (method, params) = wire::discover();
                let answer = conn.request(method, params, PROBE_TIMEOUT).await;
                match answer {
                    Ok(v) if wire::probe_outcome(&Ok(v.clone())) => Era::Modern,
                    Err(CallError::Rpc(e)) if wire::probe_outcome(&Err(e.clone())) => Era::Modern,
                    Err(CallError::Broken(_)) => {
                        // Some handshake-era servers quit on a request before `initialize`:
                        // start it again and go straight to the handshake.
                        conn.shutdown(STOP_GRACE).await;
                        conn = Conn::spawn(&self.cfg.spawn)?;
                        Era::Legacy(String::new())
                    }
                    _ => Era::Legacy(String::new()),
                }
            }
        };
        let era = match era {
            Era::Modern => Era::Modern,
            Era::Legacy(_) => {
                let (method, params) = wire::initialize();
                match conn.request(method, params, self.setup_timeout()).await {
                    Ok(result) => {
                        let version = wire::agreed_version(&result)?;
                        conn.notify("notifications/initialized", json!({}))
                            .await
                            .map_err(|e| self.explain("initialize", &e))?;
                        Era::Legacy(version)
                    }
                    // The probe's answer came after its timeout and opened a stateless
                    // connection: the server says so, and it speaks the newer revision.
                    Err(CallError::Rpc(e)) if wire::probe_outcome(&Err(e.clone())) => Era::Modern,
                    Err(e) => return Err(self.explain("initialize", &e)),
                }
            }
        };
        let link = Link::Stdio(conn);
        let tools = self.list(&link, &era).await?;
        Ok((link, era, tools))
    }

    /// Every page of `tools/list`, each tool with its id.
    async fn list(&self, conn: &Link, era: &Era) -> Result<Vec<(String, ToolDef)>, String> {
        let label = format!("MCP server {}", self.name);
        listing::list_tools(&label, &self.group, BOUNDS, &self.names, |cursor| async move {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let result = conn
                .request("tools/list", wire::params(Some(era), params), self.setup_timeout())
                .await
                .map_err(|e| self.explain("tools/list", &e))?;
            wire::check_result_type(&result)?;
            wire::tools_page(&result)
        })
        .await
    }

    /// Registers (or replaces) the group with `tools`.
    fn install(self: &Arc<Self>, tb: &Weak<Toolbox>, tools: &[(String, ToolDef)]) {
        let Some(tb) = tb.upgrade() else { return };
        let group = listing::group_of(&self.group, format!("Tools of the MCP server {}", self.name), tools, |t| {
            Arc::new(McpTool { server: Arc::clone(self), name: t.name.clone() })
        });
        if let Err(e) = tb.replace(group) {
            chela_log::warn!("MCP server {}: its tools cannot be registered: {e}", self.name);
            return;
        }
        self.state().registered = true;
    }

    /// The handshake and the tool list may take longer than a call's `timeout_secs` allows:
    /// a short call limit must not keep a slow-starting server from connecting.
    fn setup_timeout(&self) -> Duration {
        self.cfg.timeout.max(PROBE_TIMEOUT)
    }

    fn explain(&self, method: &str, e: &CallError) -> String {
        format!("MCP server {} ({method}): {e}", self.name)
    }

    /// Calls MCP tool `name` with `input` (a JSON object as text).
    async fn call(self: Arc<Self>, name: String, input: String) -> crate::tools::OutputResult {
        let args: Value = serde_json::from_str(&input)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| ToolError::invalid_args("The arguments must be a JSON object."))?;
        let conn = self.conn().await.map_err(ToolError::new)?;
        let era = self.state().era.clone();
        let params = wire::params(era.as_ref(), json!({"name": name, "arguments": args}));
        match conn.request("tools/call", params, self.cfg.timeout).await {
            Ok(result) => {
                wire::check_result_type(&result).map_err(ToolError::new)?;
                wire::tool_output(&result).map_err(ToolError::new)
            }
            Err(CallError::Rpc(e)) if e.code == Some(-32602) => Err(ToolError::invalid_args(format!(
                "MCP server {} refused the call to {name}: {}",
                self.name, e.message
            ))),
            Err(e @ CallError::Rpc(_)) => Err(ToolError::new(self.explain(&format!("tools/call {name}"), &e))),
            Err(CallError::TimedOut(s)) => Err(ToolError::timed_out(format!(
                "{s}; the call was cancelled. The limit is mcp.servers.{}.timeout_secs.",
                self.name
            ))),
            Err(CallError::Broken(s)) => Err(ToolError::new(format!(
                "{s}. The call to {name} failed; the server is started again on the next call."
            ))),
        }
    }
}

/// Lists the tools again whenever the server says they changed, until the connection ends
/// (one listing at a time, at most one a second: see [`listing::follow_changes`]).
async fn watch_list(server: Weak<Server>, conn: Link) {
    let relist = || {
        let (server, conn) = (server.clone(), conn.clone());
        async move {
            let Some(s) = server.upgrade() else { return false };
            let Some(era) = s.state().era.clone() else { return false };
            match s.list(&conn, &era).await {
                Ok(tools) => {
                    let tb = s.toolbox.get().cloned().unwrap_or_default();
                    s.install(&tb, &tools);
                    s.state().tools = tools;
                }
                Err(e) => {
                    chela_log::warn!("MCP server {}: listing its changed tools failed: {e}", s.name)
                }
            }
            true
        }
    };
    listing::follow_changes(|| conn.list_changed(), conn.closed(), relist).await;
}

/// One MCP tool as a Chela tool.
struct McpTool {
    server: Arc<Server>,
    name: String,
}

impl crate::tools::Dynamic for McpTool {
    fn call(&self, input: String) -> crate::tools::ToolFuture {
        Box::pin(Arc::clone(&self.server).call(self.name.clone(), input))
    }
}

#[cfg(test)]
#[path = "client/hostile_tests.rs"]
mod tests_hostile;
#[cfg(test)]
#[path = "client/http_tests.rs"]
mod tests_http;
#[cfg(test)]
#[path = "client/peers_tests.rs"]
mod tests_peers;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        let secs: Vec<u64> = (0..9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [0, 1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
