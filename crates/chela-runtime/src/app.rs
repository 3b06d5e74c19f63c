//! What a command needs, loaded once: the workspace, its configuration, the HTTP client, the
//! tools with the services behind their groups, and (for chatting) the provider. This is where
//! the toolbox gets its groups: the toolbox knows none of the services (skills, Lua, the board,
//! the MCP servers), so the services and the toolbox depend on nothing above them.

use std::sync::Arc;

use anyhow::{Context, Result};
use chela_core::agent::Limits;
use chela_core::config as keys;

use crate::clock::Clock;
use crate::config::Config;
use crate::mcp::client::Clients;
use crate::net::{ClientOptions, HttpClient, Proxy};
use crate::provider::{Provider, ProviderError};
use crate::skills::Skills;
use crate::tools::{ToolCtx, Toolbox};
use crate::turn::Agent;
use crate::workspace::Workspace;

/// The toolbox and the services its groups are built over: made once per process and kept
/// across configuration reloads (cheap to clone: shared handles).
#[derive(Clone)]
pub struct Tools {
    pub toolbox: Arc<Toolbox>,
    /// The workspace's skills, with their cache.
    pub skills: Arc<Skills>,
    /// The configured MCP servers; each connected one is a group `mcp_NAME`.
    pub mcp: Arc<Clients>,
    /// The Lua scripts' states and jobs, shared by the `lua` tools and the file tools.
    #[cfg(feature = "lua")]
    pub lua: Arc<crate::lua::Host>,
    /// The board (board.json and its live devices), shared by the `board` tools and the poller.
    #[cfg(feature = "board")]
    pub board: Arc<crate::board::Host>,
}

impl Tools {
    /// Every group this build has, with the persisted switches applied. `http` carries the
    /// remote MCP servers' requests.
    pub fn load(cfg: &Config, http: &HttpClient) -> Tools {
        let tools = Tools {
            toolbox: Arc::new(Toolbox::new(cfg)),
            skills: Arc::new(Skills::new(cfg)),
            mcp: Arc::new(Clients::new(&cfg.settings().mcp.servers, http)),
            #[cfg(feature = "lua")]
            lua: Arc::new(crate::lua::Host::new()),
            #[cfg(feature = "board")]
            board: Arc::new(crate::board::Host::default()),
        };
        let groups = vec![
            crate::skills::tools::group(&tools.skills),
            crate::skills::tools::edit_group(&tools.skills),
            #[cfg(feature = "lua")]
            crate::lua::group(&tools.lua),
            #[cfg(feature = "board")]
            crate::board::tools::group(&tools.board),
        ];
        for g in groups {
            // Two built-in tools with one name is a programming error caught by the tests.
            if let Err(e) = tools.toolbox.register(g) {
                panic!("built-in tool registration failed: {e}");
            }
        }
        // Again, now that the groups with a setting of their own (`lua.enabled`) are there.
        tools.toolbox.apply(cfg);
        tools
    }

    /// Who is told before a file tool removes a path: the Lua host, whose jobs may run it.
    fn before_remove(&self) -> Option<Arc<dyn crate::tools::BeforeRemove>> {
        #[cfg(feature = "lua")]
        return Some(Arc::clone(&self.lua) as Arc<dyn crate::tools::BeforeRemove>);
        #[cfg(not(feature = "lua"))]
        None
    }
}

/// The parts every command shares, as handles that sessions and tool calls share in turn.
pub struct Base {
    pub ws: Arc<Workspace>,
    pub cfg: Arc<Config>,
    pub http: HttpClient,
    pub tools: Tools,
    pub tz: crate::localtime::Tz,
    /// Where every service built from these parts reads the time.
    pub clock: Clock,
}

impl Base {
    /// Loads the configuration of `ws`, creating the workspace and its default files if needed.
    pub fn load(ws: Workspace) -> Result<Base> {
        Base::load_with(ws, Clock::system())
    }

    /// [`Base::load`] reading the time from `clock` (a test's, which it moves by hand).
    pub fn load_with(ws: Workspace, clock: Clock) -> Result<Base> {
        ws.ensure()?;
        crate::memory::ensure_defaults(&ws)
            .with_context(|| format!("cannot write the memory files in {}", ws.root().display()))?;
        let cfg = Config::load(&ws)?;
        for w in &cfg.warnings {
            chela_log::warn!("{w}");
        }
        let tools = Tools::load(&cfg, &http_client(&cfg)?);
        for g in &tools.toolbox.unknown_groups() {
            chela_log::warn!("caps.* names a group this build does not have: {g}");
        }
        Base::with_config(Arc::new(ws), tools, Arc::new(cfg), clock)
    }

    /// The parts for `cfg`, keeping the workspace and the tools (whose switches the caller
    /// applies).
    pub fn with_config(ws: Arc<Workspace>, tools: Tools, cfg: Arc<Config>, clock: Clock) -> Result<Base> {
        let http = http_client(&cfg)?;
        let tz = crate::localtime::zone(cfg.get(keys::TIMEZONE));
        Ok(Base { ws, cfg, http, tools, tz, clock })
    }

    pub fn tool_ctx(&self) -> ToolCtx {
        ToolCtx {
            ws: Arc::clone(&self.ws),
            cfg: Arc::clone(&self.cfg),
            http: self.http.clone(),
            tz: self.tz.clone(),
            conversation: None,
            session: None,
            tools: Arc::clone(&self.tools.toolbox) as Arc<dyn crate::tools::CallTools>,
            before_remove: self.tools.before_remove(),
            clock: self.clock.clone(),
            depth: 0,
            // Until a call through the toolbox says who makes it: the least rights.
            caller: chela_core::cap::Caller::Model,
            scope: Vec::new(),
        }
    }
}

/// The HTTP client every outbound request uses, with the configured proxy.
pub fn http_client(cfg: &Config) -> Result<HttpClient> {
    let proxy = match cfg.get(keys::PROXY_URL) {
        "" => None,
        url => Some(Proxy::parse(url).map_err(|e| anyhow::anyhow!("proxy.url: {e}"))?),
    };
    Ok(HttpClient::new(ClientOptions { proxy, ..ClientOptions::default() }))
}

/// Everything `chela chat` needs.
pub struct App {
    pub base: Base,
    pub provider: Provider,
}

impl App {
    pub fn load(ws: Workspace) -> Result<App> {
        App::from_base(Base::load(ws)?)
    }

    /// The app over `base`, or what to set when it names no usable model.
    pub fn from_base(base: Base) -> Result<App> {
        let provider = Provider::from_config(&base.cfg, base.http.clone())?;
        Ok(App { base, provider })
    }

    /// The same workspace and tools with new settings: what the daemon swaps in when a
    /// configuration file changed. Pooled connections are kept unless the proxy changed.
    pub fn with_config(&self, cfg: Arc<Config>) -> Result<App> {
        let old = &self.base;
        let base = if cfg.get(keys::PROXY_URL) == old.cfg.get(keys::PROXY_URL) {
            let tz = crate::localtime::zone(cfg.get(keys::TIMEZONE));
            Base {
                ws: Arc::clone(&old.ws),
                cfg,
                http: old.http.clone(),
                tools: old.tools.clone(),
                tz,
                clock: old.clock.clone(),
            }
        } else {
            Base::with_config(Arc::clone(&old.ws), old.tools.clone(), cfg, old.clock.clone())?
        };
        App::from_base(base)
    }

    pub fn limits(&self) -> Limits {
        let cfg = &self.base.cfg;
        Limits {
            max_iterations: u32::try_from(cfg.int(keys::AGENT_MAX_ITERATIONS)).unwrap_or(10),
            max_calls_per_step: cfg.usize(keys::AGENT_MAX_TOOL_CALLS),
            history_budget: cfg.usize(keys::AGENT_HISTORY_BUDGET),
            max_tool_output: cfg.usize(keys::AGENT_MAX_TOOL_OUTPUT),
        }
    }

    pub fn agent(&self) -> Agent<'_> {
        Agent {
            provider: &self.provider,
            toolbox: &self.base.tools.toolbox,
            mcp: &self.base.tools.mcp,
            ctx: self.base.tool_ctx(),
            limits: self.limits(),
        }
    }

    /// The system prompt for a turn now.
    pub fn system_prompt(&self, channel: &str, chat_id: &str) -> chela_core::prompt::System {
        let b = &self.base;
        crate::memory::system_prompt(
            &b.ws,
            &b.cfg,
            &b.tools.toolbox.registry(),
            &b.tz,
            b.clock.unix_secs(),
            channel,
            chat_id,
        )
    }

    pub fn explain(&self, e: &ProviderError) -> String {
        self.provider.explain(e, &self.base.cfg.entry(keys::LLM_API_KEY).layer)
    }
}

/// Calls tools by hand, in-process, the way `chela cap call` does (same loading, same
/// registry, `Caller::Manual`). Public only for the escape-and-abuse corpus
/// (`tests/abuse/files.rs`): its race cases make thousands of calls against a thread that
/// swaps folders, and a process per call would be too slow to reach the odds of the attack.
#[cfg(feature = "files")]
#[doc(hidden)]
pub struct ManualCalls(Base);

#[cfg(feature = "files")]
impl ManualCalls {
    /// Loads the workspace at `root` as every command does (creating it if needed).
    pub fn load(root: &std::path::Path) -> anyhow::Result<ManualCalls> {
        let ws = crate::workspace::Workspace::locate(Some(root.to_owned()))?;
        Ok(ManualCalls(Base::load(ws)?))
    }

    /// Runs tool `id` with JSON `args`; the error is the text a person would see.
    pub async fn call(&self, id: &str, args: &str) -> Result<String, String> {
        let ctx = self.0.tool_ctx();
        let scope = chela_core::cap::Scope::default();
        self.0.tools.toolbox.call(&ctx, id, args, chela_core::cap::Caller::Manual, scope).await.map_err(|e| e.0)
    }
}

/// For `benches/lua.rs`: here, with the code that builds the toolbox, so the Lua host never
/// reaches up to it.
#[cfg(feature = "lua")]
impl crate::lua::BenchRig {
    /// Loads the workspace at `root` as every command does.
    pub fn load(root: &std::path::Path) -> anyhow::Result<crate::lua::BenchRig> {
        let base = Base::load(Workspace::locate(Some(root.to_owned()))?)?;
        let (ctx, toolbox, host) = (base.tool_ctx(), Arc::clone(&base.tools.toolbox), Arc::clone(&base.tools.lua));
        Ok(crate::lua::BenchRig { ctx, toolbox, host })
    }
}
