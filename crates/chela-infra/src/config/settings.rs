//! Typed sections: settings that are more than one value (lists, per-name tables), read once
//! from the merged layers (by hand, see [`read`]).
//!
//! ```toml
//! [channels.telegram]
//! token = "123456:ABC…"            # or `chela config set channels.telegram.token -`
//! allow_from = ["123456789"]
//!
//! [channels.feishu]
//! app_id = "cli_a1b2"
//! app_secret = "…"
//! allow_from = ["ou_123"]
//!
//! [mcp.servers.github]
//! command = "github-mcp-server"
//! args = ["stdio"]
//! env = { GITHUB_TOKEN = "ghp_…" }
//!
//! [mcp.servers.search]
//! url = "https://mcp.example.com/mcp"
//! headers = { Authorization = "Bearer …" }
//!
//! [lua]
//! enabled = true
//!
//! [gateway]
//! listen = "127.0.0.1:18789"
//! token = "…"
//! ```
//!
//! Every scalar here (`channels.telegram.token`, `gateway.listen`, …) is also a key of the flat
//! table, so `config set/get/show`, the environment (`CHELA_GATEWAY__LISTEN`) and provenance
//! work for it as for any key. MCP servers are named by the person, so they have no flat
//! key: they are set in `chela.toml` (or `overrides.toml`), and `config show` lists each of
//! their values with the file it came from. A name Chela does not know is a warning.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use chela_core::config::{KEYS, TYPED_ROOTS, has_url_userinfo, mask_url_userinfo};

use super::{Entry, Layer, typed};
use crate::toml;

mod read;

/// Most MCP servers one configuration may name; each is a process or a connection.
pub const MAX_MCP_SERVERS: usize = 32;

/// The typed sections.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    pub channels: Channels,
    pub mcp: Mcp,
    pub lua: Lua,
    pub gateway: Gateway,
    pub llm: Llm,
    unknown: BTreeMap<String, toml::Value>,
}

/// The typed part of `[llm]`: `[llm.prices.MODEL]`, the person's prices in US dollars per
/// million tokens, for models whose name starts with MODEL.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Llm {
    pub prices: BTreeMap<String, PriceSetting>,
    unknown: BTreeMap<String, toml::Value>,
}

/// One `[llm.prices.MODEL]`: `input` and `output` are needed; a cache read or write not given
/// costs what an input token does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PriceSetting {
    pub input: Option<f64>,
    pub output: Option<f64>,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
    unknown: BTreeMap<String, toml::Value>,
}

/// Most models one price table may name.
pub const MAX_PRICES: usize = 64;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Channels {
    pub telegram: Telegram,
    pub feishu: Feishu,
    unknown: BTreeMap<String, toml::Value>,
}

/// `[channels.telegram]`: off while `token` is empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Telegram {
    pub token: String,
    pub allow_from: Vec<String>,
    pub api_base: String,
    pub max_file_bytes: u64,
    pub stream_edits: bool,
    unknown: BTreeMap<String, toml::Value>,
}

/// `[channels.feishu]`: off while `app_id` is empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Feishu {
    pub app_id: String,
    pub app_secret: String,
    pub allow_from: Vec<String>,
    pub api_base: String,
    pub encrypt_key: String,
    pub mode: String,
    pub verification_token: String,
    pub webhook_listen: String,
    unknown: BTreeMap<String, toml::Value>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mcp {
    pub servers: BTreeMap<String, McpServer>,
    /// `[mcp.serve]`: what Chela offers as an MCP server (`groups`, a flat key).
    pub serve: McpServe,
    unknown: BTreeMap<String, toml::Value>,
}

/// `[mcp.serve]`: what `chela mcp serve` and `/mcp` offer (also the flat key `mcp.serve.groups`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct McpServe {
    /// Capability groups served, plus `chat`.
    pub groups: Vec<String>,
    unknown: BTreeMap<String, toml::Value>,
}

/// `[mcp.servers.NAME]`: a local program (`command`, `args`, `env`) or a remote server
/// (`url`, `headers`), never both.
#[derive(Clone, Debug, PartialEq)]
pub struct McpServer {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub url: String,
    pub headers: BTreeMap<String, String>,
    /// A token sent as `Authorization: Bearer …` to a remote (`url`) server.
    pub bearer: String,
    /// The folder a local server runs in (default: Chela's own).
    pub cwd: String,
    /// `start`: the daemon connects it when it starts; `lazy`: when a turn or command first
    /// needs its tools.
    pub connect: String,
    /// Longest wait for one answer (a tool call, a page of the tool list), in seconds.
    pub timeout_secs: u64,
    /// Off: configured but not started.
    pub enabled: bool,
    unknown: BTreeMap<String, toml::Value>,
}

impl Default for McpServer {
    fn default() -> McpServer {
        McpServer {
            command: String::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
            url: String::new(),
            headers: BTreeMap::new(),
            bearer: String::new(),
            cwd: String::new(),
            connect: "start".into(),
            timeout_secs: 60,
            enabled: true,
            unknown: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lua {
    pub enabled: bool,
    pub max_memory_bytes: u64,
    pub timeout_ms: u64,
    pub job_timeout_ms: u64,
    pub max_instructions: u64,
    pub max_output_bytes: u64,
    pub max_jobs: u64,
    pub stop_grace_ms: u64,
    unknown: BTreeMap<String, toml::Value>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gateway {
    /// Checked as an address when read (`Kind::Listen`), so [`Gateway::addr`] cannot fail.
    pub listen: String,
    pub token: String,
    pub max_connections: u64,
    pub connections_per_address: u64,
    pub max_websockets: u64,
    pub websockets_per_address: u64,
    pub websocket_idle_secs: u64,
    unknown: BTreeMap<String, toml::Value>,
}

impl Gateway {
    /// The address to listen on.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.listen.parse().unwrap_or(std::net::SocketAddr::from(([127, 0, 0, 1], 18789)))
    }
}

/// Names the file leaf that made the typed sections fail, and what was expected there. The
/// reader reports no path, so each leaf is tried alone over the flat entries: the first that
/// fails by itself is the one to name. This runs only on the error path.
fn blame(leaves: &[(Vec<String>, toml::Value, Layer)], base: &toml::Table, whole: &read::Wrong) -> anyhow::Error {
    let culprit = leaves.iter().find_map(|(path, value, layer)| {
        let mut root = base.clone();
        insert(&mut root, path, value.clone()).ok()?;
        Settings::read(toml::Value::Table(root)).err().map(|e| (path.join("."), layer.to_string(), e))
    });
    let (path, file, e) = match &culprit {
        Some((path, file, e)) => (path.as_str(), file.as_str(), e),
        None => ("the typed sections", "config", whole),
    };
    // Only what was expected, never the value: it may be a secret.
    anyhow::anyhow!("{file}: `{path}` has the wrong type: expected {}", e.expected())
}

/// The fields of an MCP server, for "did you mean".
const MCP_FIELDS: &[&str] =
    &["command", "args", "env", "url", "headers", "bearer", "cwd", "connect", "timeout_secs", "enabled"];

/// Builds the typed sections from the typed leaves of the file layers (merged by path, later
/// layers winning) and the flat entries (which carry defaults and the environment). Returns
/// the settings and the warnings for names nobody reads.
pub(super) fn build(
    leaves: &[(Vec<String>, toml::Value, Layer)],
    entries: &[Entry],
) -> Result<(Settings, Vec<String>)> {
    // The flat entries (defaults, environment) come first; the file leaves are laid over them.
    let mut base = toml::Table::new();
    for e in entries.iter().filter(|e| TYPED_ROOTS.contains(&e.key.section())) {
        let path: Vec<String> = e.key.name.split('.').map(str::to_owned).collect();
        insert(&mut base, &path, typed(e.key, &e.value))?;
    }
    let mut root = toml::Table::new();
    for (path, value, _) in leaves {
        insert(&mut root, path, value.clone())?;
    }
    for e in entries.iter().filter(|e| TYPED_ROOTS.contains(&e.key.section())) {
        let path: Vec<String> = e.key.name.split('.').map(str::to_owned).collect();
        insert(&mut root, &path, typed(e.key, &e.value))?;
    }
    let settings = match Settings::read(toml::Value::Table(root)) {
        Ok(s) => s,
        Err(e) => return Err(blame(leaves, &base, &e)),
    };
    if settings.mcp.servers.len() > MAX_MCP_SERVERS {
        bail!("{} MCP servers are configured; at most {MAX_MCP_SERVERS} are supported", settings.mcp.servers.len());
    }
    for (name, s) in &settings.mcp.servers {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            bail!("the MCP server name `{name}` may hold only letters, digits, _ and -");
        }
        match (s.command.is_empty(), s.url.is_empty()) {
            (true, true) => bail!("mcp.servers.{name} needs `command` (a program to run) or `url` (a remote server)"),
            (false, false) => bail!("mcp.servers.{name} has both `command` and `url`; keep the one you mean"),
            _ => {}
        }
        if !matches!(s.connect.as_str(), "start" | "lazy") {
            bail!("mcp.servers.{name}.connect must be \"start\" or \"lazy\", not {:?}", s.connect);
        }
        if s.timeout_secs == 0 || s.timeout_secs > 3600 {
            bail!("mcp.servers.{name}.timeout_secs must be between 1 and 3600 seconds");
        }
        let url = s.url.as_str();
        if !url.is_empty() {
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains(char::is_whitespace) {
                bail!("mcp.servers.{name}.url `{}` must be an http:// or https:// URL", mask_url_userinfo(url));
            }
            if has_url_userinfo(url) {
                bail!(
                    "mcp.servers.{name}.url `{}` carries credentials; put them in `headers` (e.g. Authorization) instead",
                    mask_url_userinfo(url)
                );
            }
        }
    }
    if settings.llm.prices.len() > MAX_PRICES {
        bail!("{} models have prices in [llm.prices]; at most {MAX_PRICES} are supported", settings.llm.prices.len());
    }
    for (model, p) in &settings.llm.prices {
        if p.input.is_none() || p.output.is_none() {
            bail!("llm.prices.\"{model}\" needs `input` and `output` (US dollars per million tokens)");
        }
        let prices = [p.input, p.output, p.cache_read, p.cache_write];
        if prices.iter().flatten().any(|v| !v.is_finite() || *v < 0.0 || *v > 1_000_000.0) {
            bail!("llm.prices.\"{model}\": a price is a number of US dollars per million tokens, from 0 to 1000000");
        }
    }
    let mut warnings = Vec::new();
    let mut unknown = |prefix: &str, map: &BTreeMap<String, toml::Value>, known: &[&str]| {
        for name in map.keys() {
            let full = format!("{prefix}{name}");
            let known: Vec<String> = known.iter().map(|k| format!("{prefix}{k}")).collect();
            let known: Vec<&str> = known.iter().map(String::as_str).collect();
            // Name the file the stray name is in.
            let layer = leaves
                .iter()
                .find(|(path, _, _)| path.join(".").starts_with(&full))
                .map_or_else(|| "config".to_owned(), |(_, _, layer)| layer.to_string());
            warnings.push(super::layer::unknown_warning(&full, &layer, &known));
        }
    };
    let flat = |section: &str| -> Vec<&'static str> {
        KEYS.iter().filter(|k| k.name.starts_with(section)).map(|k| &k.name[section.len()..]).collect()
    };
    unknown("", &settings.unknown, TYPED_ROOTS);
    unknown("channels.", &settings.channels.unknown, &["telegram", "feishu"]);
    unknown("channels.telegram.", &settings.channels.telegram.unknown, &flat("channels.telegram."));
    unknown("channels.feishu.", &settings.channels.feishu.unknown, &flat("channels.feishu."));
    unknown("mcp.", &settings.mcp.unknown, &["servers", "serve"]);
    unknown("mcp.serve.", &settings.mcp.serve.unknown, &flat("mcp.serve."));
    for (name, s) in &settings.mcp.servers {
        unknown(&format!("mcp.servers.{name}."), &s.unknown, MCP_FIELDS);
    }
    unknown("lua.", &settings.lua.unknown, &flat("lua."));
    unknown("gateway.", &settings.gateway.unknown, &flat("gateway."));
    unknown("llm.", &settings.llm.unknown, &["prices"]);
    for (model, p) in &settings.llm.prices {
        unknown(&format!("llm.prices.{model}."), &p.unknown, &["input", "output", "cache_read", "cache_write"]);
    }
    Ok((settings, warnings))
}

/// Puts `value` at `path` in `root`, creating tables on the way.
fn insert(root: &mut toml::Table, path: &[String], value: toml::Value) -> Result<()> {
    let Some((last, parents)) = path.split_last() else { return Ok(()) };
    let mut table = root;
    for (i, p) in parents.iter().enumerate() {
        let slot = table.entry(p.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = slot
            .as_table_mut()
            .with_context(|| format!("`{}` is a value, but settings are nested under it", path[..=i].join(".")))?;
    }
    table.insert(last.clone(), value);
    Ok(())
}
