//! The tools Chela's model (and people, with `chela cap call`) can use.
//!
//! A tool is one type implementing [`Tool`]: a `NAME`, a `DESCRIPTION`, a JSON `SCHEMA`, typed
//! arguments, and an async `call`. Each group lists its tools in one function (see
//! [`time::group`]); [`Toolbox::new`] registers every group this build includes, so the full
//! list is greppable in one place.
//!
//! Tool errors are written for the model to read and act on, and for a person to read when
//! they call a tool by hand.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

use chela_core::cap::{Caller, Capability, GroupSpec, Registry, Scope};
use serde::de::DeserializeOwned;

use crate::config::Config;
use crate::net::HttpClient;
use crate::workspace::Workspace;

#[cfg(feature = "files")]
pub mod files;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "memory")]
pub mod memory;
pub mod time;
#[cfg(feature = "web")]
pub mod web;

#[cfg(test)]
pub mod testing;

/// What a tool may use while it runs.
// A build without the optional groups uses only some of these.
#[cfg_attr(not(all(feature = "files", feature = "memory", feature = "web", feature = "http")), allow(dead_code))]
pub struct ToolCtx<'a> {
    pub ws: &'a Workspace,
    pub cfg: &'a Config,
    pub http: &'a HttpClient,
    pub tz: &'a jiff::tz::TimeZone,
}

/// A failed tool call, explained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError(pub String);

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl ToolError {
    pub fn new(msg: impl Into<String>) -> ToolError {
        ToolError(msg.into())
    }
}

pub type ToolResult = Result<String, ToolError>;

/// One tool.
pub trait Tool: 'static {
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    /// A JSON Schema object for the arguments.
    const SCHEMA: &'static str;
    /// Whether the model may call it (otherwise only people and scripts).
    const LLM_CALLABLE: bool = true;
    type Args: DeserializeOwned;

    fn call<'a>(&'a self, ctx: &'a ToolCtx<'a>, args: Self::Args) -> impl Future<Output = ToolResult> + 'a;
}

type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolResult> + 'a>>;

/// A tool with its argument type erased, so a group can hold different tools.
pub(crate) trait Erased {
    fn call_json<'a>(&'a self, ctx: &'a ToolCtx<'a>, input: &'a str) -> ToolFuture<'a>;
}

impl<T: Tool> Erased for T {
    fn call_json<'a>(&'a self, ctx: &'a ToolCtx<'a>, input: &'a str) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: T::Args = serde_json::from_str(input)
                .map_err(|e| ToolError(format!("Invalid arguments for {}: {e}. Expected: {}", T::NAME, T::SCHEMA)))?;
            self.call(ctx, args).await
        })
    }
}

/// A group as its module declares it.
pub struct Group {
    spec: GroupSpec,
    tools: Vec<(Capability, Box<dyn Erased>)>,
}

impl Group {
    pub fn new(id: &'static str, description: &'static str) -> Group {
        Group {
            spec: GroupSpec {
                id: id.into(),
                description: description.into(),
                core: false,
                visible_by_default: true,
                guidance: "".into(),
            },
            tools: Vec::new(),
        }
    }

    /// Always enabled and visible.
    pub fn core(mut self) -> Group {
        self.spec.core = true;
        self
    }

    /// Prompt guidance for this group's tools.
    #[cfg_attr(not(all(feature = "files", feature = "memory", feature = "web", feature = "http")), allow(dead_code))]
    pub fn guidance(mut self, text: &'static str) -> Group {
        self.spec.guidance = text.into();
        self
    }

    pub fn with<T: Tool>(mut self, tool: T) -> Group {
        let cap = Capability {
            id: T::NAME.into(),
            group: self.spec.id.clone(),
            description: T::DESCRIPTION.into(),
            input_schema: T::SCHEMA.into(),
            llm_callable: T::LLM_CALLABLE,
        };
        self.tools.push((cap, Box::new(tool)));
        self
    }
}

/// Every registered tool, with the registry that decides who may call what.
pub struct Toolbox {
    pub registry: Registry,
    handlers: HashMap<String, Box<dyn Erased>>,
    /// Group names in the persisted switches that this build does not have.
    pub unknown_groups: Vec<String>,
}

impl Toolbox {
    /// Registers every group compiled into this build, then applies the persisted switches.
    pub fn new(cfg: &Config) -> Toolbox {
        // Each optional group is a cargo feature: a build without it has none of its code.
        let groups = vec![
            time::group(),
            #[cfg(feature = "memory")]
            memory::group(),
            #[cfg(feature = "files")]
            files::group(),
            #[cfg(feature = "web")]
            web::group(),
            #[cfg(feature = "http")]
            http::group(),
        ];
        let mut tb = Toolbox { registry: Registry::new(), handlers: HashMap::new(), unknown_groups: Vec::new() };
        for g in groups {
            tb.add(g);
        }
        tb.apply(cfg);
        tb
    }

    fn add(&mut self, g: Group) {
        let (caps, handlers): (Vec<_>, Vec<_>) = g.tools.into_iter().unzip();
        let names: Vec<String> = caps.iter().map(|c| c.id.to_string()).collect();
        match self.registry.add_group(g.spec, caps) {
            Ok(()) => self.handlers.extend(names.into_iter().zip(handlers)),
            // Two built-in tools with one name is a programming error caught by the tests.
            Err(e) => panic!("built-in tool registration failed: {e}"),
        }
    }

    /// Applies the `caps.*` switches from the configuration.
    pub fn apply(&mut self, cfg: &Config) {
        use chela_core::config::{CAPS_DISABLED, CAPS_HIDDEN, CAPS_SHOWN};
        let (disabled, hidden, shown) = (cfg.list(CAPS_DISABLED), cfg.list(CAPS_HIDDEN), cfg.list(CAPS_SHOWN));
        self.unknown_groups = self.registry.apply(&disabled, &hidden, &shown).into_iter().map(str::to_owned).collect();
    }

    /// Runs tool `id` with JSON `input` after checking that `caller` may use it.
    pub async fn call(&self, ctx: &ToolCtx<'_>, id: &str, input: &str, caller: Caller, scope: Scope<'_>) -> ToolResult {
        self.registry.authorize(id, caller, scope).map_err(|e| ToolError(e.to_string()))?;
        let handler = self.handlers.get(id).ok_or_else(|| ToolError(format!("There is no tool called `{id}`.")))?;
        handler.call_json(ctx, input).await
    }
}
