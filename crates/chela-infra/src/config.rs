//! Layered configuration: built-in defaults < `chela.toml` < runtime overrides < environment.
//!
//! Runtime overrides are what `chela config set` writes, in `overrides.toml` beside
//! `chela.toml` (as MimiClaw keeps its NVS values apart from its build-time secrets): a reset
//! deletes that one file and the hand-written config is untouched. The environment wins over
//! both: `CHELA_<SECTION>__<KEY>` (e.g. `CHELA_LLM__MODEL`). `ANTHROPIC_API_KEY` and
//! `OPENAI_API_KEY` fill `llm.api_key` when no layer sets it.
//!
//! The key table and value checks live in `chela_core::config`; this module reads the layers
//! and checks the two kinds of value that need the host (time zones, proxies). Settings that
//! are more than one value (channels, MCP servers, Lua, gateway) are read once into
//! [`Settings`] (see `config/settings.rs`); every value keeps the layer it came from.
//!
//! A name nobody reads is a warning with a "did you mean", never an error: one typo must not
//! stop every command. A known key with a bad value is an error naming the file.
//!
//! Secrets: every value is shown through `Key::shown` (or [`shown_extra`] for typed values
//! without a key): a key named like a credential (`*_key`, `*token*`, `*secret*`,
//! `*password*`) is masked whole, any URL has its user-info masked. Errors quote values the
//! same way. `overrides.toml` is changed only under its lock (see [`crate::lock`]).

use std::fmt;

use anyhow::{Context, Result, bail};
use chela_core::config::{self as model, KEYS, Key, Kind};

pub use key_host::{KeyChoice, KeyWouldMove};

use crate::toml;
use crate::workspace::{CONFIG_FILE, OVERRIDES_FILE, Workspace, read_bounded, write_atomic};

mod key_host;
mod layer;
mod settings;
mod watch;
pub use settings::{
    Channels, Feishu, Gateway, Llm, Lua, MAX_MCP_SERVERS, MAX_PRICES, Mcp, McpServer, PriceSetting, Settings, Telegram,
};
pub use watch::ConfigWatch;

/// Config files larger than this are refused: they are hand-written, a few KiB at most.
const MAX_CONFIG_BYTES: u64 = 256 * 1024;

/// Where a value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layer {
    Default,
    File,
    Runtime,
    /// The environment variable that set it.
    Env(String),
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layer::Default => f.write_str("default"),
            Layer::File => f.write_str("chela.toml"),
            Layer::Runtime => f.write_str("runtime (overrides.toml)"),
            Layer::Env(var) => write!(f, "env {var}"),
        }
    }
}

/// One key's effective value.
#[derive(Clone, Debug)]
pub struct Entry {
    pub key: &'static Key,
    pub value: String,
    pub layer: Layer,
}

impl Entry {
    /// The value as it may be shown: secrets masked.
    pub fn shown(&self) -> String {
        self.key.shown(&self.value)
    }
}

/// The effective configuration.
#[derive(Clone, Debug)]
pub struct Config {
    entries: Vec<Entry>,
    /// The typed sections (channels, MCP servers, Lua, gateway), read once.
    settings: Settings,
    /// The values of the typed sections that have no flat key (MCP servers), by dotted path,
    /// with the layer that set each.
    extra: Vec<(String, toml::Value, Layer)>,
    /// Things worth telling the person that do not stop Chela (an unknown key in a file, an
    /// unknown `CHELA_` variable).
    pub warnings: Vec<String>,
}

impl Config {
    /// Reads every layer for `ws`.
    pub fn load(ws: &Workspace) -> Result<Config> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        Config::load_with_env(ws, &env)
    }

    /// Reads the file layers of `ws`, with `env` as the environment.
    pub fn load_with_env(ws: &Workspace, env: &[(String, String)]) -> Result<Config> {
        let (file, overrides) = read_files(ws)?;
        Config::from_layers(file.as_deref(), overrides.as_deref(), env)
            .with_context(|| format!("configuration in {} is not valid", ws.root().display()))
    }

    /// Builds the configuration from the layers' texts and the environment.
    pub fn from_layers(file: Option<&str>, overrides: Option<&str>, env: &[(String, String)]) -> Result<Config> {
        let mut entries: Vec<Entry> =
            KEYS.iter().map(|k| Entry { key: k, value: k.default.to_owned(), layer: Layer::Default }).collect();
        let mut set = |key: &'static Key, value: String, layer: Layer| {
            if let Some(e) = entries.iter_mut().find(|e| e.key.name == key.name) {
                e.value = value;
                e.layer = layer;
            }
        };
        let mut warnings = Vec::new();
        let mut leaves: Vec<(Vec<String>, toml::Value, Layer)> = Vec::new();
        for (text, name, layer) in [(file, CONFIG_FILE, Layer::File), (overrides, OVERRIDES_FILE, Layer::Runtime)] {
            let Some(text) = text else { continue };
            let parsed = layer::parse(text).with_context(|| format!("in {name}"))?;
            for (k, v) in parsed.values {
                set(k, v, layer.clone());
            }
            for unknown in parsed.unknown {
                warnings.push(layer::unknown_warning(&unknown, name, &layer::known_names()));
            }
            for (path, value) in parsed.typed {
                // A later layer replaces the same leaf of an earlier one.
                leaves.retain(|(p, _, _)| *p != path);
                leaves.push((path, value, layer.clone()));
            }
        }
        for (name, value) in env {
            let Some(rest) = name.strip_prefix("CHELA_") else { continue };
            match KEYS.iter().find(|k| k.env_var() == *name) {
                Some(k) => {
                    let v = check(k, value).with_context(|| format!("in the environment variable {name}"))?;
                    set(k, v, Layer::Env(name.clone()));
                }
                // CHELA_HOME and friends are not config keys; only SECTION__KEY names are meant to be.
                None if rest.contains("__") => {
                    warnings.push(format!("the environment variable {name} is not a config key; it is ignored"))
                }
                None => {}
            }
        }
        let (settings, typed_warnings) = settings::build(&leaves, &entries)?;
        warnings.extend(typed_warnings);
        crate::sort::sort_by(&mut leaves, |a, b| a.0.cmp(&b.0));
        let extra = leaves.into_iter().map(|(path, value, layer)| (path.join("."), value, layer)).collect();
        let mut cfg = Config { entries, settings, extra, warnings };
        if cfg.get(model::LLM_API_KEY).is_empty() {
            let var = match cfg.get(model::LLM_PROVIDER) {
                "openai" => "OPENAI_API_KEY",
                _ => "ANTHROPIC_API_KEY",
            };
            if let Some((_, v)) = env.iter().find(|(n, v)| n == var && !v.trim().is_empty()) {
                let e = cfg.entry_mut(model::LLM_API_KEY);
                e.value = v.trim().to_owned();
                e.layer = Layer::Env(var.to_owned());
            }
        }
        Ok(cfg)
    }

    fn entry_mut(&mut self, key: &'static Key) -> &mut Entry {
        let i = self.entries.iter().position(|e| e.key.name == key.name).unwrap_or_else(|| unknown(key));
        &mut self.entries[i]
    }

    pub fn entry(&self, key: &'static Key) -> &Entry {
        self.entries.iter().find(|e| e.key.name == key.name).unwrap_or_else(|| unknown(key))
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The typed sections: channels, MCP servers, Lua, gateway.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The typed-section values without a flat key (MCP servers), as `(dotted path, value,
    /// layer)`, sorted by path. Shown with [`shown_extra`].
    pub fn extra(&self) -> &[(String, toml::Value, Layer)] {
        &self.extra
    }

    /// Where the value at a dotted path came from: a flat key's layer, a typed leaf's file,
    /// else the default.
    pub fn layer_of(&self, path: &str) -> Layer {
        if let Some(e) = self.entries.iter().find(|e| e.key.name == path) {
            return e.layer.clone();
        }
        self.extra.iter().find(|(p, _, _)| p == path).map_or(Layer::Default, |(_, _, l)| l.clone())
    }

    pub fn get(&self, key: &'static Key) -> &str {
        &self.entry(key).value
    }

    /// The value Chela acts on: [`Config::get`], with an empty `llm.base_url` / `llm.model`
    /// replaced by the provider's default (see `chela_core::config::effective`).
    pub fn effective(&self, key: &'static Key) -> &str {
        model::effective(key, self.get(key), self.get(model::LLM_PROVIDER))
    }

    pub fn bool(&self, key: &'static Key) -> bool {
        self.get(key) == "true"
    }

    /// An integer key's value. Values were range-checked when read, so this cannot fail.
    pub fn int(&self, key: &'static Key) -> i64 {
        self.get(key).parse().unwrap_or_else(|_| key.default.parse().unwrap_or(0))
    }

    /// An integer key as a size or count.
    pub fn usize(&self, key: &'static Key) -> usize {
        usize::try_from(self.int(key)).unwrap_or(0)
    }

    pub fn list(&self, key: &'static Key) -> Vec<String> {
        self.get(key).split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect()
    }
}

/// The texts of `chela.toml` and `overrides.toml`, each `None` when missing.
fn read_files(ws: &Workspace) -> Result<(Option<String>, Option<String>)> {
    let read = |path: std::path::PathBuf| {
        read_bounded(&path, MAX_CONFIG_BYTES).with_context(|| format!("cannot read {}", path.display()))
    };
    Ok((read(ws.config_path())?, read(ws.overrides_path())?))
}

#[cold]
fn unknown(key: &Key) -> ! {
    panic!("config key {} is not in chela_core::config::KEYS", key.name)
}

/// Checks a value, including the kinds only the host can check.
pub fn check(key: &'static Key, value: &str) -> Result<String> {
    let v = model::check(key, value)?;
    match key.kind {
        Kind::TimeZone if !v.is_empty() && crate::tzdb::named_zone(&v).is_err() => {
            bail!(
                "`{}` is not a valid value for `{}`: expected an IANA time zone name such as Europe/Berlin or Asia/Shanghai",
                key.shown(&v),
                key.name
            );
        }
        Kind::Text if key.name == model::HEARTBEAT_ACTIVE_HOURS.name && !v.is_empty() => {
            if let Err(e) = chela_core::heartbeat::ActiveHours::parse(&v) {
                bail!("{e}");
            }
        }
        Kind::Text
            if key.name == model::XIAOZHI_PUBLIC_URL.name
                && !v.is_empty()
                && (!(v.starts_with("ws://") || v.starts_with("wss://")) || v.contains(char::is_whitespace)) =>
        {
            bail!(
                "`{}` is not a valid value for `{}`: expected a ws:// or wss:// URL such as ws://192.168.1.10:18789/xiaozhi/v1/",
                key.shown(&v),
                key.name
            );
        }
        // The client's own parser decides, so a URL stored here is one a request can be sent
        // to (no empty port, no port past 65535, no space in the path).
        Kind::Url if !v.is_empty() => {
            if let Err(e) = chela_net::Url::parse(&v) {
                bail!("`{}` is not a valid value for `{}`: {e}", key.shown(&v), key.name);
            }
        }
        Kind::Proxy if !v.is_empty() => {
            if let Err(e) = chela_net::Proxy::parse(&v) {
                // The parser's message is masked too: the one mechanism covers every output.
                bail!("`{}` is not a valid value for `{}`: {}", key.shown(&v), key.name, model::mask_url_userinfo(&e));
            }
        }
        _ => {}
    }
    Ok(v)
}

/// Changes `overrides.toml` under its lock (see [`crate::lock`]), so parallel `config set`s of
/// different keys all land: reads it, lets `change` edit the TOML table, checks the result
/// still reads as a valid layer, and writes it back atomically. What `change` does not touch
/// (hand-added MCP servers, comments aside) is kept.
fn edit_overrides<T>(ws: &Workspace, change: impl FnOnce(&mut toml::Table) -> Result<T>) -> Result<T> {
    ws.ensure()?;
    let path = ws.overrides_path();
    crate::lock::with_file_lock(&path, || {
        let text = read_bounded(&path, MAX_CONFIG_BYTES)?.unwrap_or_default();
        let mut table = toml::parse(&text).map_err(|e| {
            anyhow::anyhow!(
                "{} is not valid TOML ({:#}); fix it or run `chela config reset`",
                path.display(),
                layer::syntax_error(&text, &e)
            )
        })?;
        let out = change(&mut table)?;
        let text = render_overrides(&table)?;
        Config::from_layers(None, Some(&text), &[]).context("in overrides.toml")?;
        write_atomic(&path, text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(out)
    })
}

/// The text of `overrides.toml`: one table per section, written by [`toml::to_string`] so
/// every string (quotes, newlines, `"""`, any Unicode) comes back as it was.
fn render_overrides(table: &toml::Table) -> Result<String> {
    let body = toml::to_string(table);
    Ok(format!("# Runtime overrides written by `chela config set`. `chela config reset` deletes this file.\n{body}"))
}

/// Puts a checked value of `key` into a layer's table, at its dotted path.
fn put(table: &mut toml::Table, key: &'static Key, value: &str) -> Result<()> {
    let mut parts: Vec<&str> = key.name.split('.').collect();
    let field = parts.pop().unwrap_or(key.name);
    let mut t = table;
    for part in parts {
        let slot = t.entry(part.to_owned()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !slot.is_table() {
            // A stray value where the section belongs (`llm = 5`): the section wins.
            *slot = toml::Value::Table(toml::Table::new());
        }
        t = slot.as_table_mut().context("a section is a table")?;
    }
    // Scalars stay TOML strings, the form this file has always had (its readers, and the
    // crash test, expect it); lists are arrays of strings. Both read back the same.
    let stored = match key.kind {
        Kind::List => typed(key, value),
        _ => toml::Value::String(value.to_owned()),
    };
    t.insert(field.to_owned(), stored);
    Ok(())
}

/// Removes `key` from a layer's table, and the sections it leaves empty. Returns whether it
/// was there.
fn remove(table: &mut toml::Table, name: &str) -> bool {
    match name.split_once('.') {
        None => table.remove(name).is_some(),
        Some((head, rest)) => {
            let Some(toml::Value::Table(inner)) = table.get_mut(head) else { return false };
            let had = remove(inner, rest);
            if inner.is_empty() {
                table.remove(head);
            }
            had
        }
    }
}

/// A checked value in its TOML type.
pub fn typed(key: &Key, value: &str) -> toml::Value {
    match key.kind {
        Kind::Int { .. } => value.parse().map_or_else(|_| toml::Value::String(value.to_owned()), toml::Value::Integer),
        Kind::Bool => toml::Value::Boolean(value == "true"),
        Kind::List => toml::Value::Array(
            value.split(',').filter(|s| !s.is_empty()).map(|s| toml::Value::String(s.to_owned())).collect(),
        ),
        _ => toml::Value::String(value.to_owned()),
    }
}

/// A typed-section value without a flat key, as it may be shown: secret by its name
/// (`env.GITHUB_TOKEN`, `headers.Authorization`), URL user-info masked otherwise.
pub fn shown_extra(path: &str, value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) if model::is_secret_name(path) => format!("{:?}", model::mask(s)),
        toml::Value::String(s) => format!("{:?}", model::mask_url_userinfo(s)),
        toml::Value::Array(items) if model::is_secret_name(path) => format!("[{} masked]", items.len()),
        other => model::mask_url_userinfo(&other.to_string()),
    }
}

/// Whether a running `chela run` takes a new value of `key` only when it restarts. Everything
/// else applies from its next turn: the daemon re-reads the files (`llm.*`, `caps.*`, tool
/// limits, the time zone, the proxy). These are read once, by what `chela run` starts: the
/// gateway's listener, the channels' connections (a channel that reconnects with a new token
/// on its own drops its key from here), the session hub's bounds.
pub fn needs_restart(key: &str) -> bool {
    // Every channel setting but those asked per message: the channels read theirs when they start.
    key.starts_with("channels.") && !key.ends_with(".allow_from") && key != "channels.telegram.stream_edits"
        || key.starts_with("gateway.")
        || matches!(key, "sessions.max_waiting" | "sessions.max_live" | "log.level")
}

/// What `chela config set|unset` says after changing `key` when it needs a restart.
pub fn restart_note(key: &str) -> Option<String> {
    needs_restart(key).then(|| {
        format!(
            "note: a running `chela run` reads {key} only when it starts: restart it for this to take effect \
             (`systemctl --user restart chela` if it runs as a service)"
        )
    })
}

/// `chela config set`: checks and stores a runtime override. Returns the stored value. A
/// change that would send the API key to another host is refused (see [`key_host`]).
pub fn set_override(ws: &Workspace, name: &str, value: &str) -> Result<String> {
    set_overrides(ws, &[(name, value)], KeyChoice::Ask).map(|mut v| v.pop().unwrap_or_default())
}

/// Checks every `(name, value)` first, then stores them together, with `choice` for the API
/// key if they move `llm.base_url` to another host. Returns the stored values.
pub fn set_overrides(ws: &Workspace, pairs: &[(&str, &str)], choice: KeyChoice) -> Result<Vec<String>> {
    let checked = pairs
        .iter()
        .map(|(name, value)| {
            let key = model::key(name)?;
            Ok((key, check(key, value)?))
        })
        .collect::<Result<Vec<_>>>()?;
    guarded_edit(ws, choice, |table| checked.iter().try_for_each(|(key, v)| put(table, key, v)))?;
    Ok(checked.into_iter().map(|(_, v)| v).collect())
}

/// `chela config unset`: removes one runtime override. Returns whether there was one.
pub fn unset_override(ws: &Workspace, name: &str) -> Result<bool> {
    unset_override_with(ws, name, KeyChoice::Ask)
}

/// [`unset_override`] with `choice` for the API key if the removal moves `llm.base_url`.
pub fn unset_override_with(ws: &Workspace, name: &str, choice: KeyChoice) -> Result<bool> {
    let key = model::key(name)?;
    if !ws.overrides_path().exists() {
        return Ok(false);
    }
    guarded_edit(ws, choice, |table| Ok(remove(table, key.name)))
}

/// [`edit_overrides`] with the key-host check over the change.
fn guarded_edit<T>(ws: &Workspace, choice: KeyChoice, change: impl FnOnce(&mut toml::Table) -> Result<T>) -> Result<T> {
    let file = read_bounded(&ws.config_path(), MAX_CONFIG_BYTES)?;
    let env: Vec<(String, String)> = std::env::vars().collect();
    edit_overrides(ws, |table| {
        let before = table.clone();
        let out = change(table)?;
        key_host::guard(file.as_deref(), &before, table, &env, choice)?;
        Ok(out)
    })
}

/// `chela config reset`: drops every runtime override. Returns whether there were any.
pub fn reset_overrides(ws: &Workspace) -> Result<bool> {
    if !ws.root().is_dir() {
        return Ok(false);
    }
    ws.ensure()?;
    crate::lock::with_file_lock(&ws.overrides_path(), || match std::fs::remove_file(ws.overrides_path()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", ws.overrides_path().display())),
    })
}

/// Changes a list key in the runtime layer (used by `chela cap`): adds or removes `item`,
/// starting from the value the layers below the environment give.
pub fn edit_list_override(ws: &Workspace, key: &'static Key, item: &str, present: bool) -> Result<()> {
    let config_text = read_bounded(&ws.config_path(), MAX_CONFIG_BYTES)?;
    edit_overrides(ws, |table| {
        let overrides = render_overrides(table)?;
        let below_env = Config::from_layers(config_text.as_deref(), Some(&overrides), &[])?;
        let mut items = below_env.list(key);
        items.retain(|i| i != item);
        if present {
            items.push(item.to_owned());
        }
        let v = check(key, &items.join(","))?;
        put(table, key, &v)
    })
}

/// Every key, its effective value (secrets masked) and the layer it came from, in aligned
/// columns. Strings are quoted; numbers and booleans are bare; lists are arrays. Here, below both
/// `chela config show` and the model's `config_show` tool, so both print the same table.
pub fn show(cfg: &Config) -> String {
    let rows: Vec<(&str, String, String)> = cfg
        .entries()
        .iter()
        .map(|e| {
            // Strings go through `{:?}` so a newline in a value cannot break the one-line rows.
            let value = match typed(e.key, &e.key.shown(cfg.effective(e.key))) {
                toml::Value::String(s) => format!("{s:?}"),
                other => other.to_string(),
            };
            (e.key.name, value, e.layer.to_string())
        })
        .chain(
            cfg.extra().iter().map(|(path, value, layer)| (path.as_str(), shown_extra(path, value), layer.to_string())),
        )
        .collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0).min(48);
    let mut out = String::new();
    for (k, v, layer) in rows {
        let pad = w1.saturating_sub(v.chars().count());
        out.push_str(&format!("{k:<w0$}  {v}{:pad$}  # {layer}\n", ""));
    }
    out
}

#[cfg(test)]
mod tests;
