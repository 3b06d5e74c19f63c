//! What a command needs, loaded once: the workspace, its configuration, the HTTP client, the
//! tools, and (for chatting) the provider.

use std::sync::Arc;

use anyhow::{Context, Result};
use chela_core::agent::Limits;
use chela_core::config as keys;

use crate::clock::Clock;
use crate::config::Config;
use crate::net::{ClientOptions, HttpClient, Proxy};
use crate::provider::{Provider, ProviderError};
use crate::tools::{ToolCtx, Toolbox};
use crate::turn::Agent;
use crate::workspace::Workspace;

/// The parts every command shares, as handles that sessions and tool calls share in turn.
pub struct Base {
    pub ws: Arc<Workspace>,
    pub cfg: Arc<Config>,
    pub http: HttpClient,
    pub toolbox: Arc<Toolbox>,
    pub tz: crate::localtime::Tz,
    /// The workspace's skills, with their cache: kept across configuration reloads.
    pub skills: Arc<crate::skills::Skills>,
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
            tracing::warn!("{w}");
        }
        let toolbox = Arc::new(Toolbox::new(&cfg));
        for g in &toolbox.unknown_groups() {
            tracing::warn!("caps.* names a group this build does not have: {g}");
        }
        let skills = Arc::new(crate::skills::Skills::new(&cfg));
        Base::with_config(Arc::new(ws), toolbox, skills, Arc::new(cfg), clock)
    }

    /// The parts for `cfg`, keeping the workspace and the tools (whose switches the caller
    /// applies).
    pub fn with_config(
        ws: Arc<Workspace>,
        toolbox: Arc<Toolbox>,
        skills: Arc<crate::skills::Skills>,
        cfg: Arc<Config>,
        clock: Clock,
    ) -> Result<Base> {
        let http = http_client(&cfg)?;
        let tz = crate::localtime::zone(cfg.get(keys::TIMEZONE));
        Ok(Base { ws, cfg, http, toolbox, tz, skills, clock })
    }

    pub fn tool_ctx(&self) -> ToolCtx {
        ToolCtx {
            ws: Arc::clone(&self.ws),
            cfg: Arc::clone(&self.cfg),
            http: self.http.clone(),
            tz: self.tz.clone(),
            conversation: None,
            skills: Arc::clone(&self.skills),
            session: None,
            toolbox: Arc::clone(&self.toolbox),
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
                toolbox: Arc::clone(&old.toolbox),
                tz,
                skills: Arc::clone(&old.skills),
                clock: old.clock.clone(),
            }
        } else {
            Base::with_config(
                Arc::clone(&old.ws),
                Arc::clone(&old.toolbox),
                Arc::clone(&old.skills),
                cfg,
                old.clock.clone(),
            )?
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
            toolbox: &self.base.toolbox,
            ctx: self.base.tool_ctx(),
            limits: self.limits(),
        }
    }

    /// The system prompt for a turn now.
    pub fn system_prompt(&self, channel: &str, chat_id: &str) -> String {
        let b = &self.base;
        crate::memory::system_prompt(&b.ws, &b.cfg, &b.toolbox.registry(), &b.tz, b.clock.unix_secs(), channel, chat_id)
    }

    pub fn explain(&self, e: &ProviderError) -> String {
        self.provider.explain(e, &self.base.cfg.entry(keys::LLM_API_KEY).layer)
    }
}
