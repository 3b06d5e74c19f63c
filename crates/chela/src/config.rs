//! Layered configuration: built-in defaults < `chela.toml` < runtime overrides < environment.
//!
//! Runtime overrides are what `chela config set` writes, in `overrides.toml` beside
//! `chela.toml` (as MimiClaw keeps its NVS values apart from its build-time secrets): a reset
//! deletes that one file and the hand-written config is untouched. The environment wins over
//! both: `CHELA_<SECTION>__<KEY>` (e.g. `CHELA_LLM__MODEL`). `ANTHROPIC_API_KEY` and
//! `OPENAI_API_KEY` fill `llm.api_key` when no layer sets it.
//!
//! The key table and value checks live in `chela_core::config`; this module reads the layers
//! and checks the two kinds of value that need the host (time zones, proxies).

use std::collections::BTreeMap;
use std::fmt;

use anyhow::{Context, Result, bail};
use chela_core::config::{self as model, KEYS, Key, Kind};

use crate::workspace::{Workspace, read_bounded, write_atomic};

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
    /// Things worth telling the person that do not stop Chela (an unknown `CHELA_` variable).
    pub warnings: Vec<String>,
}

impl Config {
    /// Reads every layer for `ws`.
    pub fn load(ws: &Workspace) -> Result<Config> {
        let (file, overrides) = read_files(ws)?;
        let env: Vec<(String, String)> = std::env::vars().collect();
        Config::from_layers(file.as_deref(), overrides.as_deref(), &env)
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
        if let Some(text) = file {
            for (k, v) in parse_layer(text).context("in chela.toml")? {
                set(k, v, Layer::File);
            }
        }
        if let Some(text) = overrides {
            for (k, v) in parse_layer(text).context("in overrides.toml")? {
                set(k, v, Layer::Runtime);
            }
        }
        let mut warnings = Vec::new();
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
        let mut cfg = Config { entries, warnings };
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
        Kind::TimeZone if !v.is_empty() && jiff::tz::TimeZone::get(&v).is_err() => {
            bail!(
                "`{}` is not a valid value for `{}`: expected an IANA time zone name such as Europe/Berlin or Asia/Shanghai",
                key.shown(&v),
                key.name
            );
        }
        Kind::Proxy if !v.is_empty() => {
            if let Err(e) = crate::net::Proxy::parse(&v) {
                // The parser's message is masked too: the one mechanism covers every output.
                bail!("`{}` is not a valid value for `{}`: {}", key.shown(&v), key.name, model::mask_url_userinfo(&e));
            }
        }
        _ => {}
    }
    Ok(v)
}

/// Reads a TOML layer into checked `(key, value)` pairs. Sections map to the part before the
/// dot; arrays of strings become comma-separated lists.
fn parse_layer(text: &str) -> Result<Vec<(&'static Key, String)>> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| anyhow::anyhow!("{}", e.message().trim()))?;
    let mut out = Vec::new();
    let mut push = |name: String, value: &toml::Value| -> Result<()> {
        let key = model::key(&name)?;
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => {
                let mut names = Vec::new();
                for item in items {
                    match item.as_str() {
                        Some(s) => names.push(s.to_owned()),
                        None => bail!("`{name}` must be a list of strings"),
                    }
                }
                names.join(",")
            }
            _ => bail!("`{name}` must be a string, number, boolean or list of strings"),
        };
        out.push((key, check(key, &text)?));
        Ok(())
    };
    for (name, value) in &table {
        match value {
            toml::Value::Table(section) => {
                for (field, v) in section {
                    if v.is_table() {
                        bail!("`{name}.{field}` is nested too deeply: Chela's keys are `section.key`");
                    }
                    push(format!("{name}.{field}"), v)?;
                }
            }
            v => push(name.clone(), v)?,
        }
    }
    Ok(out)
}

/// Reads the runtime overrides as a sorted map (key name -> value).
fn read_overrides(ws: &Workspace) -> Result<BTreeMap<&'static str, String>> {
    let text = read_bounded(&ws.overrides_path(), MAX_CONFIG_BYTES)?.unwrap_or_default();
    Ok(parse_layer(&text).context("in overrides.toml")?.into_iter().map(|(k, v)| (k.name, v)).collect())
}

/// Writes the runtime overrides file.
fn write_overrides(ws: &Workspace, map: &BTreeMap<&'static str, String>) -> Result<()> {
    write_atomic(&ws.overrides_path(), render_overrides(map)?.as_bytes())
        .with_context(|| format!("cannot write {}", ws.overrides_path().display()))
}

/// The text of `overrides.toml` for `map`: one table per section, each value in its own TOML
/// type (numbers and booleans bare, lists as arrays), serialised by the `toml` crate so every
/// string (quotes, newlines, `"""`, any Unicode) comes back as it was.
fn render_overrides(map: &BTreeMap<&'static str, String>) -> Result<String> {
    let mut root = toml::Table::new();
    for (name, value) in map {
        let key = model::key(name)?;
        let mut table = &mut root;
        let mut parts: Vec<&str> = name.split('.').collect();
        let field = parts.pop().unwrap_or(name);
        for part in parts {
            let slot = table.entry(part).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table = slot.as_table_mut().context("a setting and a section share a name")?;
        }
        table.insert(field.to_owned(), typed(key, value));
    }
    let body = toml::to_string(&root).context("cannot write the overrides as TOML")?;
    Ok(format!("# Runtime overrides written by `chela config set`. `chela config reset` deletes this file.\n{body}"))
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

/// `chela config set`: checks and stores a runtime override. Returns the stored value.
pub fn set_override(ws: &Workspace, name: &str, value: &str) -> Result<String> {
    let key = model::key(name)?;
    let v = check(key, value)?;
    with_overrides_lock(ws, || {
        let mut map = read_overrides(ws)?;
        map.insert(key.name, v.clone());
        write_overrides(ws, &map)
    })?;
    Ok(v)
}

/// Runs a read-modify-write of `overrides.toml` under its lock (see [`crate::lock`]), so
/// parallel `config set`s of different keys all land.
fn with_overrides_lock<T>(ws: &Workspace, f: impl FnOnce() -> Result<T>) -> Result<T> {
    ws.ensure()?;
    crate::lock::with_file_lock(&ws.overrides_path(), f)
}

/// `chela config unset`: removes one runtime override. Returns whether there was one.
pub fn unset_override(ws: &Workspace, name: &str) -> Result<bool> {
    let key = model::key(name)?;
    with_overrides_lock(ws, || {
        let mut map = read_overrides(ws)?;
        let had = map.remove(key.name).is_some();
        if had {
            write_overrides(ws, &map)?;
        }
        Ok(had)
    })
}

/// `chela config reset`: drops every runtime override. Returns whether there were any.
pub fn reset_overrides(ws: &Workspace) -> Result<bool> {
    if !ws.root().is_dir() {
        return Ok(false);
    }
    with_overrides_lock(ws, || match std::fs::remove_file(ws.overrides_path()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", ws.overrides_path().display())),
    })
}

/// Changes a list key in the runtime layer (used by `chela cap`): adds or removes `item`,
/// starting from the value the layers below the environment give.
pub fn edit_list_override(ws: &Workspace, key: &'static Key, item: &str, present: bool) -> Result<()> {
    with_overrides_lock(ws, || {
        let (file, overrides) = read_files(ws)?;
        let below_env = Config::from_layers(file.as_deref(), overrides.as_deref(), &[])?;
        let mut items = below_env.list(key);
        items.retain(|i| i != item);
        if present {
            items.push(item.to_owned());
        }
        let v = check(key, &items.join(","))?;
        let mut map = read_overrides(ws)?;
        map.insert(key.name, v);
        write_overrides(ws, &map)
    })
}

#[cfg(test)]
mod tests;
