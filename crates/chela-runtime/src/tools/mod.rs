//! The tools Chela's model (and people, with `chela cap call`) can use.
//!
//! A tool is one type implementing [`Tool`]: a `NAME`, a `DESCRIPTION`, a JSON `SCHEMA`, typed
//! arguments, and an async `call`. Each group lists its tools in one function (see
//! [`time::group`]); [`Toolbox::new`] registers the groups that need nothing but a [`ToolCtx`],
//! and whoever builds the toolbox adds the groups that own a service (skills, Lua, the board,
//! the MCP servers, the channels' and the daemon's tools), so the toolbox knows none of them.
//!
//! Tool errors are written for the model to read and act on, and for a person to read when
//! they call a tool by hand; their [`ToolErrorKind`] says what went wrong for code that maps
//! them (MCP).
//!
//! The contract: a tool and its future are `Send + Sync`, so a turn can run on any worker of a
//! multi-threaded runtime; a tool gets shared handles ([`ToolCtx`]), never borrows of a
//! command's state; a tool whose work blocks (file IO, fsync) sets [`Tool::BLOCKING`] and runs
//! on tokio's blocking pool; every call is bounded by `tools.timeout_secs`. Groups can be
//! registered and unregistered while turns run ([`Toolbox::register`]).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use chela_core::cap::{CallError, Caller, Capability, ControlError, GroupSpec, Registry, Scope};
use serde::de::DeserializeOwned;

use crate::config::Config;
use crate::net::HttpClient;
use crate::workspace::Workspace;

pub mod args;
#[cfg(feature = "files")]
pub mod files;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "memory")]
pub mod memory;
// The file sandbox: the file tools' and the skills' only way to the workspace's files.
#[cfg_attr(not(feature = "files"), allow(dead_code))]
#[path = "files/sandbox.rs"]
pub mod sandbox;
pub mod settings;
pub mod time;
#[cfg(feature = "web")]
pub mod web;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// What a tool may use while it runs: shared handles, cheap to clone, owned by nobody in
/// particular, so a call can move to another thread or outlive the command that started it.
#[derive(Clone)]
// A build without the optional groups uses only some of these.
#[cfg_attr(
    not(all(feature = "files", feature = "memory", feature = "web", feature = "http", feature = "lua")),
    allow(dead_code)
)]
pub struct ToolCtx {
    pub ws: Arc<Workspace>,
    pub cfg: Arc<Config>,
    /// Already a shared handle inside.
    pub http: HttpClient,
    pub tz: crate::localtime::Tz,
    /// The conversation the call is made from (`channel`, `chat_id`), when there is one: the
    /// default target of what a tool sets up for later (a scheduled job).
    pub conversation: Option<(String, String)>,
    /// The conversation the call is made in (per-session tools need it); `None` outside a turn.
    pub session: Option<Arc<SessionRef>>,
    /// Calls other tools through the registry: Lua's `cap.call`, and the rules and jobs that
    /// record which hidden groups their conversation unlocked. Only that much of the toolbox.
    pub tools: Arc<dyn CallTools>,
    /// Told before a file tool deletes or moves a path (the Lua host stops the jobs running a
    /// script there); `None` when nothing needs telling.
    pub before_remove: Option<Arc<dyn BeforeRemove>>,
    /// Where the tools read the time (a test's clock, moved by hand).
    pub clock: crate::clock::Clock,
    /// How many automation steps led to this call (0: a person or a clock; a rule's `cap`
    /// action fired by a message: 1). The `cap_result` event of the call carries it, so rules
    /// reacting to results with more calls stop at the router's depth bound.
    pub depth: u8,
    /// Who made the call and the hidden groups their conversation unlocked, set by
    /// [`Toolbox::call`]: a tool that records authority (a rule, a job) knows whether the model
    /// asked for it, and a Lua script the call starts calls tools with exactly these rights, so a
    /// script never raises its caller's privileges.
    pub caller: Caller,
    pub scope: Vec<String>,
}

/// The conversation a turn runs in, for per-session tools. Shared by the turn's tool calls.
#[derive(Debug)]
pub struct SessionRef {
    pub channel: String,
    pub chat: String,
    /// The capability groups named by the skills active now (gating filters them per call).
    named_groups: Mutex<Vec<String>>,
}

impl SessionRef {
    pub fn new(channel: &str, chat: &str, named_groups: Vec<String>) -> SessionRef {
        SessionRef { channel: channel.into(), chat: chat.into(), named_groups: Mutex::new(named_groups) }
    }

    pub fn named_groups(&self) -> Vec<String> {
        self.named_groups.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Skills activated or deactivated during the turn change what the next model call sees.
    pub fn set_named_groups(&self, groups: Vec<String>) {
        *self.named_groups.lock().unwrap_or_else(PoisonError::into_inner) = groups;
    }
}

/// The narrow handle a tool gets on the toolbox (a trait, so that what a tool may do with its
/// fellows is this and nothing else: no registering, no reaching the services behind groups).
pub trait CallTools: Send + Sync {
    /// The registry as it is now.
    fn registry(&self) -> Snapshot;

    /// [`Toolbox::call`]: tool `id` with JSON `input`, if `caller` may use it in `scope`.
    fn call_tool<'a>(
        &'a self,
        ctx: &'a ToolCtx,
        id: &'a str,
        input: &'a str,
        caller: Caller,
        scope: Scope<'a>,
    ) -> Pin<Box<dyn Future<Output = ToolResult> + Send + 'a>>;
}

impl CallTools for Toolbox {
    fn registry(&self) -> Snapshot {
        Toolbox::registry(self)
    }

    fn call_tool<'a>(
        &'a self,
        ctx: &'a ToolCtx,
        id: &'a str,
        input: &'a str,
        caller: Caller,
        scope: Scope<'a>,
    ) -> Pin<Box<dyn Future<Output = ToolResult> + Send + 'a>> {
        Box::pin(self.call(ctx, id, input, caller, scope))
    }
}

/// What a file tool tells before it deletes or moves workspace path `rel` (blocking); the
/// answer is a note for the tool's reply, empty when there is nothing to say.
pub trait BeforeRemove: Send + Sync {
    fn before_remove(&self, ctx: &ToolCtx, rel: &str) -> String;
}

impl ToolCtx {
    /// The note of [`ToolCtx::before_remove`] for `rel`, empty when nobody is told.
    pub fn before_remove(&self, rel: &str) -> String {
        self.before_remove.as_ref().map(|h| h.before_remove(self, rel)).unwrap_or_default()
    }
}

/// What kind of failure a [`ToolError`] is, for code that maps it (MCP error codes, retries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The arguments do not fit the tool's schema, or a value in them is not acceptable.
    InvalidArgs,
    /// The caller may not use this tool now (switched off, hidden, people only).
    Refused,
    /// No such tool (never registered, or its group went away).
    NotFound,
    /// The tool ran and could not do what was asked.
    Failed,
    /// The tool did not finish within `tools.timeout_secs`.
    TimedOut,
}

/// A failed tool call, explained. Field `.0` is the message shown to the model or the person.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError(pub String, ToolErrorKind);

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ToolError {}

impl ToolError {
    /// The tool ran and failed ([`ToolErrorKind::Failed`]).
    pub fn new(msg: impl Into<String>) -> ToolError {
        ToolError(msg.into(), ToolErrorKind::Failed)
    }

    pub fn invalid_args(msg: impl Into<String>) -> ToolError {
        ToolError(msg.into(), ToolErrorKind::InvalidArgs)
    }

    pub fn refused(msg: impl Into<String>) -> ToolError {
        ToolError(msg.into(), ToolErrorKind::Refused)
    }

    pub fn not_found(msg: impl Into<String>) -> ToolError {
        ToolError(msg.into(), ToolErrorKind::NotFound)
    }

    pub fn timed_out(msg: impl Into<String>) -> ToolError {
        ToolError(msg.into(), ToolErrorKind::TimedOut)
    }

    pub fn kind(&self) -> ToolErrorKind {
        self.1
    }
}

impl From<CallError> for ToolError {
    fn from(e: CallError) -> ToolError {
        match e {
            CallError::Unknown { .. } => ToolError::not_found(e.to_string()),
            _ => ToolError::refused(e.to_string()),
        }
    }
}

pub type ToolResult = Result<String, ToolError>;

/// What a tool gave back when it can give more than text: its text and the images it returned
/// (an MCP server's screenshot). Built-in tools return text; MCP tools return this.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub images: Vec<chela_proto::chat::Image>,
}

impl From<String> for ToolOutput {
    fn from(text: String) -> ToolOutput {
        ToolOutput { text, images: Vec::new() }
    }
}

impl ToolOutput {
    /// The text with a note for each image (`[image: image/png, 1.2 KiB]`): for callers that
    /// show text only (`chela cap call`, Lua's `cap.call`, the MCP server, router events).
    pub fn into_text(self) -> String {
        let mut text = self.text;
        for image in &self.images {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&image.placeholder());
        }
        text
    }
}

/// A call's result with its images, as [`Toolbox::call_output`] gives it.
pub type OutputResult = Result<ToolOutput, ToolError>;

/// One tool.
pub trait Tool: Send + Sync + 'static {
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    /// A JSON Schema object for the arguments. A test checks it against [`Tool::Args`] for
    /// every registered tool, so the two cannot drift apart.
    const SCHEMA: &'static str;
    /// Argument names still read (serde aliases, e.g. a shared tool's older names) but not in
    /// the schema: the model is shown one name for each argument.
    const ALIASES: &'static [&'static str] = &[];
    /// Whether the model may call it (otherwise only people and scripts).
    const LLM_CALLABLE: bool = true;
    /// Whether `call` blocks its thread (file IO, fsync). Such tools run on tokio's blocking
    /// pool, so a slow disk never stalls the other chats on the async workers.
    const BLOCKING: bool = false;
    type Args: DeserializeOwned + Send;

    fn call<'a>(&'a self, ctx: &'a ToolCtx, args: Self::Args) -> impl Future<Output = ToolResult> + Send + 'a;
}

pub(crate) type ToolFuture = Pin<Box<dyn Future<Output = OutputResult> + Send>>;

/// A tool known only at run time (an MCP server's): its name, description and schema come in
/// a [`Capability`] given to [`Group::with_dynamic`], and it takes its arguments as JSON text.
/// Its output may carry images.
pub(crate) trait Dynamic: Send + Sync + 'static {
    fn call(&self, input: String) -> ToolFuture;
}

struct DynTool(Arc<dyn Dynamic>);

impl Erased for DynTool {
    fn call_json(self: Arc<Self>, _ctx: ToolCtx, input: String) -> ToolFuture {
        self.0.call(input)
    }

    #[cfg(test)]
    fn check_args(&self, input: &str) -> Result<(), ToolError> {
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(input)
            .map(drop)
            .map_err(|e| ToolError::invalid_args(e.to_string()))
    }

    #[cfg(any(test, feature = "testing"))]
    fn arg_fields(&self) -> Option<&'static [&'static str]> {
        None
    }
}

/// A tool with its argument type erased, so a group can hold different tools. The future owns
/// what it uses: a call can finish even after its group is unregistered.
pub trait Erased: Send + Sync {
    fn call_json(self: Arc<Self>, ctx: ToolCtx, input: String) -> ToolFuture;

    /// Parses `input` as the tool's arguments without running it.
    #[cfg(test)]
    fn check_args(&self, input: &str) -> Result<(), ToolError>;

    /// The top-level field names of the argument type, as serde sees them.
    #[cfg(any(test, feature = "testing"))]
    fn arg_fields(&self) -> Option<&'static [&'static str]>;

    /// [`Tool::ALIASES`].
    #[cfg(test)]
    fn arg_aliases(&self) -> &'static [&'static str] {
        &[]
    }
}

impl<T: Tool> Erased for T {
    // Only the parsing and the tool's own future are compiled per tool; the rest is shared.
    fn call_json(self: Arc<Self>, ctx: ToolCtx, input: String) -> ToolFuture {
        let args = match parse_args::<T>(&input) {
            Ok(args) => args,
            Err(e) => return Box::pin(std::future::ready(Err(e))),
        };
        if !T::BLOCKING {
            return Box::pin(async move { self.call(&ctx, args).await.map(ToolOutput::from) });
        }
        Box::pin(run_blocking(T::NAME, Box::pin(async move { self.call(&ctx, args).await })))
    }

    #[cfg(test)]
    fn check_args(&self, input: &str) -> Result<(), ToolError> {
        parse_args::<T>(input).map(drop)
    }

    #[cfg(any(test, feature = "testing"))]
    fn arg_fields(&self) -> Option<&'static [&'static str]> {
        testing::struct_fields::<T::Args>()
    }

    #[cfg(test)]
    fn arg_aliases(&self) -> &'static [&'static str] {
        T::ALIASES
    }
}

// JSON text is parsed by one non-generic function ([`args::parse`]); only the argument type's
// reading of the parsed value is compiled per tool.
fn parse_args<T: Tool>(input: &str) -> Result<T::Args, ToolError> {
    args::parse(input).map_err(|e| invalid_args(T::NAME, T::SCHEMA, &e))
}

// The error paths of every tool's `call_json`, not generic: compiled once, not once per tool.
#[inline(never)]
fn invalid_args(name: &str, schema: &str, e: &serde_json::Error) -> ToolError {
    ToolError::invalid_args(format!("Invalid arguments for {name}: {e}. Expected: {schema}"))
}

/// A blocking tool's call, boxed: [`run_blocking`] is compiled once for every such tool.
type BlockingCall = Pin<Box<dyn Future<Output = ToolResult> + Send>>;

/// Drives a blocking tool's future on a blocking-pool thread; IO and timers it uses still work
/// because the runtime keeps running on its own threads.
async fn run_blocking(name: &'static str, call: BlockingCall) -> OutputResult {
    let rt = tokio::runtime::Handle::current();
    crate::tasks::blocking(move || rt.block_on(call)).await.map_err(|e| stopped(name, e))?.map(ToolOutput::from)
}

#[inline(never)]
fn stopped(name: &str, e: tokio::task::JoinError) -> ToolError {
    ToolError::new(format!("{name} stopped unexpectedly: {e}"))
}

/// A group as its module declares it.
pub struct Group {
    spec: GroupSpec,
    tools: Vec<(Capability, Arc<dyn Erased>)>,
    switch: Option<Switch>,
    /// Hidden from the model while every one of these settings is empty (see [`Group::needs_one_of`]).
    needs: &'static [&'static chela_core::config::Key],
    /// The group this one splits tools off from (see [`Group::part_of`]).
    parent: Option<&'static str>,
    /// A few words on what a hidden group is for, in `tools_unlock`'s description.
    hint: &'static str,
}

/// A boolean setting that switches a whole group off when false (`lua.enabled`), and what the
/// group is in words, for the refusal.
#[derive(Clone, Copy)]
struct Switch {
    key: &'static chela_core::config::Key,
    what: &'static str,
}

impl Group {
    /// A group named `id`. Built-in groups use literals; groups added at runtime (MCP servers,
    /// scripts) name themselves.
    pub fn new(id: impl Into<chela_core::cap::Text>, description: impl Into<chela_core::cap::Text>) -> Group {
        Group {
            spec: GroupSpec {
                id: id.into(),
                description: description.into(),
                core: false,
                visible_by_default: true,
                guidance: "".into(),
            },
            tools: Vec::new(),
            switch: None,
            needs: &[],
            parent: None,
            hint: "",
        }
    }

    /// Switched off, like `caps.disabled` would, while the boolean setting `key` is false;
    /// `what` names the group in the refusal ("Lua scripts"). The switch is read when the
    /// configuration is applied ([`Toolbox::apply`]).
    #[cfg_attr(not(feature = "lua"), allow(dead_code))]
    pub fn switched_by(mut self, key: &'static chela_core::config::Key, what: &'static str) -> Group {
        self.switch = Some(Switch { key, what });
        self
    }

    /// Hidden from the model, as `caps.hidden` would, while all of `keys` are empty: a tool
    /// that can only fail (no search key) is not offered, so the model wastes no step on it.
    /// People can still call it and get the error that says what to set.
    #[cfg_attr(not(feature = "web"), allow(dead_code))]
    pub fn needs_one_of(mut self, keys: &'static [&'static chela_core::config::Key]) -> Group {
        self.needs = keys;
        self
    }

    /// Tools split off group `parent` so that they can start hidden: switched off whenever the
    /// owner switches off or hides `parent`, so hiding the parent is never undone by unlocking
    /// this part.
    #[cfg_attr(not(feature = "files"), allow(dead_code))]
    pub fn part_of(mut self, parent: &'static str) -> Group {
        self.parent = Some(parent);
        self
    }

    /// Always enabled and visible.
    pub fn core(mut self) -> Group {
        self.spec.core = true;
        self
    }

    /// Hidden from the model until a skill naming it is active in a session or the model
    /// unlocks it (`tools_unlock`, whose description names the group followed by `hint`, a few
    /// words on what it is for; empty for none).
    pub fn hidden(mut self, hint: &'static str) -> Group {
        self.spec.visible_by_default = false;
        self.hint = hint;
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
        self.tools.push((cap, Arc::new(tool)));
        self
    }

    /// Adds a tool described at run time; `cap.group` must be this group.
    pub(crate) fn with_dynamic(mut self, cap: Capability, tool: Arc<dyn Dynamic>) -> Group {
        self.tools.push((cap, Arc::new(DynTool(tool))));
        self
    }
}

/// One consistent view of the registered tools: the registry and the handlers that go with it.
#[derive(Clone, Default)]
struct State {
    registry: Registry,
    handlers: HashMap<String, Arc<dyn Erased>>,
    /// The persisted `caps.*` switches, applied again to each group registered later.
    switches: [Vec<String>; 3],
    /// Group names in the persisted switches that are not registered.
    unknown_groups: Vec<String>,
    /// The groups a boolean setting switches off, by group id.
    setting_switches: HashMap<String, Switch>,
    /// The groups hidden while their settings are empty, by group id.
    needs: HashMap<String, &'static [&'static chela_core::config::Key]>,
    /// The groups split off another, by group id, with the parent's id.
    parents: HashMap<String, &'static str>,
    /// What each hidden group is for, by group id (see [`Group::hidden`]).
    hints: HashMap<String, &'static str>,
}

/// The registry as it was when taken; changes made later do not show in it.
pub struct Snapshot(Arc<State>);

impl Deref for Snapshot {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.0.registry
    }
}

/// Every registered tool, with the registry that decides who may call what. Shared by every
/// session (`Arc<Toolbox>`); groups come and go while turns run.
pub struct Toolbox {
    // Copy-on-write: readers take an `Arc` and never hold the lock while a tool runs, and a
    // change builds a new state, so a turn sees either the old tool set or the new one.
    state: RwLock<Arc<State>>,
    /// Told of every finished call (the daemon raises `cap_result` events with it).
    on_result: std::sync::OnceLock<ResultHook>,
}

/// What [`Toolbox::on_result`] calls after each call: the context, the tool's id and its result.
pub type ResultHook = Box<dyn Fn(&ToolCtx, &str, &ToolResult) + Send + Sync>;

impl Toolbox {
    /// Registers the groups of this build that need only a [`ToolCtx`], then applies the
    /// persisted switches. The groups with a service of their own are registered by whoever
    /// owns the service (`app::Tools::load`), before it applies the configuration again.
    pub fn new(cfg: &Config) -> Toolbox {
        // Each optional group is a cargo feature: a build without it has none of its code.
        let groups = vec![
            time::group(),
            settings::group(),
            #[cfg(feature = "memory")]
            memory::group(),
            #[cfg(feature = "files")]
            files::group(),
            #[cfg(feature = "files")]
            files::manage_group(),
            #[cfg(feature = "web")]
            web::group(),
            #[cfg(feature = "http")]
            http::group(),
        ];
        let tb = Toolbox { state: RwLock::new(Arc::default()), on_result: std::sync::OnceLock::new() };
        for g in groups {
            // Two built-in tools with one name is a programming error caught by the tests.
            if let Err(e) = tb.register(g) {
                panic!("built-in tool registration failed: {e}");
            }
        }
        tb.apply(cfg);
        tb
    }

    /// The current registry, to list tools or build a prompt from.
    pub fn registry(&self) -> Snapshot {
        Snapshot(self.current())
    }

    fn current(&self) -> Arc<State> {
        // A panic elsewhere while the lock was held cannot leave a half-made state: writers
        // swap in a finished `Arc`.
        Arc::clone(&self.state.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn change<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut guard = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let mut next = State::clone(&guard);
        let out = f(&mut next);
        *guard = Arc::new(next);
        out
    }

    /// Adds a group while Chela runs (an MCP server connected, a script loaded). The persisted
    /// switches apply to it as to the built-in groups. Ids must be new.
    pub fn register(&self, g: Group) -> Result<(), ControlError> {
        self.change(|s| {
            let (caps, handlers): (Vec<_>, Vec<_>) = g.tools.into_iter().unzip();
            let names: Vec<String> = caps.iter().map(|c| c.id.to_string()).collect();
            let id = g.spec.id.to_string();
            s.registry.add_group(g.spec, caps)?;
            s.handlers.extend(names.into_iter().zip(handlers));
            if let Some(sw) = g.switch {
                s.setting_switches.insert(id.clone(), sw);
            }
            if let Some(parent) = g.parent {
                s.parents.insert(id.clone(), parent);
            }
            if !g.hint.is_empty() {
                s.hints.insert(id.clone(), g.hint);
            }
            if !g.needs.is_empty() {
                s.needs.insert(id, g.needs);
            }
            s.reapply();
            Ok(())
        })
    }

    /// Registers `g`, replacing a group of the same id in one step (an MCP server's changed
    /// tool list): a turn sees the old tools or the new ones, never none.
    pub fn replace(&self, g: Group) -> Result<(), ControlError> {
        self.change(|s| {
            let mut next = s.clone();
            let ids: Vec<String> = next.registry.in_group(&g.spec.id).map(|c| c.id.to_string()).collect();
            for id in &ids {
                next.handlers.remove(id);
            }
            next.registry.remove_group(&g.spec.id);
            let (caps, handlers): (Vec<_>, Vec<_>) = g.tools.into_iter().unzip();
            let names: Vec<String> = caps.iter().map(|c| c.id.to_string()).collect();
            next.registry.add_group(g.spec, caps)?;
            next.handlers.extend(names.into_iter().zip(handlers));
            next.reapply();
            *s = next;
            Ok(())
        })
    }

    /// Removes a group and its tools; returns whether it was there. Calls already running
    /// finish; later ones are refused as unknown.
    pub fn unregister(&self, group: &str) -> bool {
        self.change(|s| {
            let ids: Vec<String> = s.registry.in_group(group).map(|c| c.id.to_string()).collect();
            for id in &ids {
                s.handlers.remove(id);
            }
            let removed = s.registry.remove_group(group);
            s.reapply();
            removed
        })
    }

    /// Applies the `caps.*` switches from the configuration.
    pub fn apply(&self, cfg: &Config) {
        use chela_core::config::{CAPS_DISABLED, CAPS_HIDDEN, CAPS_SHOWN};
        self.change(|s| {
            let mut disabled = cfg.list(CAPS_DISABLED);
            // A group's own setting (`lua.enabled = false`) switches it off like `caps.disabled`.
            for (group, sw) in &s.setting_switches {
                if !cfg.bool(sw.key) && !disabled.contains(group) {
                    disabled.push(group.clone());
                }
            }
            let mut hidden = cfg.list(CAPS_HIDDEN);
            for (group, parent) in &s.parents {
                let parent = (*parent).to_owned();
                if (disabled.contains(&parent) || hidden.contains(&parent)) && !disabled.contains(group) {
                    disabled.push(group.clone());
                }
            }
            for (group, keys) in &s.needs {
                if keys.iter().all(|k| cfg.get(k).is_empty()) && !hidden.contains(group) {
                    hidden.push(group.clone());
                }
            }
            s.switches = [disabled, hidden, cfg.list(CAPS_SHOWN)];
            s.reapply();
        });
    }

    /// Group names in the persisted switches that this build does not have (or that are not
    /// connected now).
    pub fn unknown_groups(&self) -> Vec<String> {
        self.current().unknown_groups.clone()
    }

    /// Runs tool `id` with JSON `input` after checking that `caller` may use it in `scope`,
    /// for at most `tools.timeout_secs`.
    /// Images come back as notes in the text; [`Toolbox::call_output`] keeps them.
    pub async fn call(&self, ctx: &ToolCtx, id: &str, input: &str, caller: Caller, scope: Scope<'_>) -> ToolResult {
        self.call_output(ctx, id, input, caller, scope).await.map(ToolOutput::into_text)
    }

    /// [`Toolbox::call`] with the images the tool returned kept apart from its text: what a
    /// turn uses, so the model can see them.
    pub async fn call_output(
        &self,
        ctx: &ToolCtx,
        id: &str,
        input: &str,
        caller: Caller,
        scope: Scope<'_>,
    ) -> OutputResult {
        let result = self.call_inner(ctx, id, input, caller, scope).await;
        let Some(hook) = self.on_result.get() else { return result };
        // The hook (router events) reads text; an image is a note there.
        match result {
            Ok(out) if !out.images.is_empty() => {
                hook(ctx, id, &Ok(out.clone().into_text()));
                Ok(out)
            }
            other => {
                let text = other.map(|out| out.text);
                hook(ctx, id, &text);
                text.map(ToolOutput::from)
            }
        }
    }

    /// Sets what is told of every finished call (once; the daemon's `cap_result` events). The
    /// hook runs on the caller's task after each call, so it must be cheap: it returns at once
    /// when nothing listens.
    pub fn on_result(&self, hook: ResultHook) -> Result<(), String> {
        self.on_result.set(hook).map_err(|_| "the toolbox already reports its results".to_owned())
    }

    async fn call_inner(&self, ctx: &ToolCtx, id: &str, input: &str, caller: Caller, scope: Scope<'_>) -> OutputResult {
        let handler = {
            let state = self.current();
            state.registry.authorize(id, caller, scope).map_err(|e| refusal(e, ctx, &state))?;
            let handler = state
                .handlers
                .get(id)
                .ok_or_else(|| ToolError::not_found(format!("There is no tool called `{id}`.")))?;
            Arc::clone(handler)
        };
        let secs = ctx.cfg.int(chela_core::config::TOOLS_TIMEOUT_SECS).unsigned_abs();
        let mut ctx = ctx.clone();
        ctx.caller = caller;
        ctx.scope = scope.extra_visible.to_vec();
        match tokio::time::timeout(Duration::from_secs(secs), handler.call_json(ctx, input.to_owned())).await {
            Ok(result) => result,
            Err(_) => Err(ToolError::timed_out(format!(
                "`{id}` did not finish within {secs} s and was stopped. The limit is the setting \
                 tools.timeout_secs (`chela config set tools.timeout_secs …`)."
            ))),
        }
    }

    /// The handler behind `id`, for tests that reach past the registry.
    #[cfg(any(test, feature = "testing"))]
    pub fn handlers(&self) -> Vec<(String, Arc<dyn Erased>)> {
        let state = self.current();
        state
            .registry
            .capabilities()
            .iter()
            .filter_map(|c| Some((c.id.to_string(), Arc::clone(state.handlers.get(c.id.as_ref())?))))
            .collect()
    }
}

/// Why a call is refused, in words; a tool whose group's own setting is off (`lua.enabled`)
/// names that setting.
fn refusal(e: CallError, ctx: &ToolCtx, state: &State) -> ToolError {
    if let CallError::GroupDisabled { id, group } = &e
        && let Some(sw) = state.setting_switches.get(group.as_ref() as &str)
        && !ctx.cfg.bool(sw.key)
    {
        let (what, key) = (sw.what, sw.key.name);
        return ToolError::refused(format!(
            "The tool `{id}` is switched off: {what} are off ({key} = false). Turn them on with \
             `chela config set {key} true`."
        ));
    }
    ToolError::from(e)
}

impl State {
    fn reapply(&mut self) {
        let [disabled, hidden, shown] = &self.switches;
        self.unknown_groups = self.registry.apply(disabled, hidden, shown).into_iter().map(str::to_owned).collect();
        // `tools_unlock` names exactly the groups it can open now, so a build or a daemon with
        // more hidden groups pays for their names and nothing else does.
        let open = crate::skills::unlock::openable(&self.registry, hidden);
        let text =
            crate::skills::unlock::describe(open.iter().map(|g| (*g, self.hints.get(*g).copied().unwrap_or(""))));
        self.registry.describe(crate::skills::unlock::NAME, text.into());
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod budget_tests;
