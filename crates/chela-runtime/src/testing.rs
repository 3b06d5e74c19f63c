//! A workspace with a configuration and the toolbox every command builds, for tool tests here
//! and in the crates above.

// A build without the optional groups has fewer tool tests to use these helpers.
#![cfg_attr(not(all(feature = "files", feature = "memory", feature = "web", feature = "http")), allow(dead_code))]

use std::path::Path;
use std::sync::Arc;

use crate::config::Config;
use crate::net::{ClientOptions, HttpClient};
use crate::tools::{BeforeRemove, CallTools, Erased, SessionRef, Tool, ToolCtx, ToolOutput, ToolResult, Toolbox};
use crate::workspace::Workspace;

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub ws: Arc<Workspace>,
    pub cfg: Arc<Config>,
    pub http: HttpClient,
    pub tz: crate::localtime::Tz,
    pub skills: Arc<crate::skills::Skills>,
    /// The conversation tool calls are made in; `None` as for `chela cap call`.
    pub session: Option<Arc<SessionRef>>,
    /// Every built-in group, with the fixture's switches applied.
    pub toolbox: Arc<Toolbox>,
    /// The toolbox with its services, built as every command builds them.
    pub tools: crate::app::Tools,
    /// The tools' clock: the system's unless a test puts a manual one here.
    pub clock: crate::clock::Clock,
}

impl Fixture {
    /// A fresh workspace whose runtime layer sets `overrides` (key, value) pairs.
    pub fn new(overrides: &[(&str, &str)]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
        ws.ensure().unwrap();
        for (k, v) in overrides {
            crate::config::set_override(&ws, k, v).unwrap();
        }
        let cfg = Arc::new(Config::load(&ws).unwrap());
        let http = HttpClient::new(ClientOptions::default());
        let tools = crate::app::Tools::load(&cfg, &http);
        let (skills, toolbox) = (Arc::clone(&tools.skills), Arc::clone(&tools.toolbox));
        Fixture {
            _dir: dir,
            ws: Arc::new(ws),
            cfg,
            http,
            tz: std::sync::Arc::new(chela_core::zone::Zone::utc()),
            skills,
            session: None,
            toolbox,
            tools,
            clock: crate::clock::Clock::system(),
        }
    }

    /// The Lua host, told before a file tool removes a script, as in every command.
    fn tools_before_remove(&self) -> Option<Arc<dyn BeforeRemove>> {
        #[cfg(feature = "lua")]
        return Some(Arc::clone(&self.tools.lua) as Arc<dyn BeforeRemove>);
        #[cfg(not(feature = "lua"))]
        None
    }

    pub fn root(&self) -> &Path {
        self.ws.root()
    }

    pub fn ctx(&self) -> ToolCtx {
        ToolCtx {
            ws: Arc::clone(&self.ws),
            cfg: Arc::clone(&self.cfg),
            http: self.http.clone(),
            tz: self.tz.clone(),
            conversation: None,
            session: self.session.clone(),
            tools: Arc::clone(&self.toolbox) as Arc<dyn CallTools>,
            before_remove: self.tools_before_remove(),
            clock: self.clock.clone(),
            depth: 0,
            // A test that calls a tool directly is Chela itself; calls through the toolbox say
            // who makes them.
            caller: chela_core::cap::Caller::Internal,
            scope: Vec::new(),
        }
    }

    /// Calls `tool` with `args` as the model would: JSON text in, result or error out.
    pub async fn call<T: Tool>(&self, tool: T, args: serde_json::Value) -> ToolResult {
        Arc::new(tool).call_json(self.ctx(), args.to_string()).await.map(ToolOutput::into_text)
    }
}
