//! The typed sections read from a TOML value by hand. Serde's derive did this before; with a
//! catch-all map of unknown names in every section its code was some 60 KB of the binary, for a
//! few dozen fields read once at start-up. Each reader takes what serde took (a missing field
//! keeps its default, a name nobody reads goes to `unknown`) and refuses what serde refused,
//! saying what was expected in serde's words.

use std::collections::BTreeMap;

use crate::toml::{self, Value};

use super::{Channels, Feishu, Gateway, Llm, Lua, Mcp, McpServe, McpServer, PriceSetting, Settings, Telegram};

/// A value of the wrong type: what was expected there (`a string`, `u64`, `struct Gateway`).
/// Never the value itself, which may be a secret.
#[derive(Debug, PartialEq)]
pub(super) struct Wrong(&'static str);

impl Wrong {
    pub(super) fn expected(&self) -> &'static str {
        self.0
    }
}

type Read<T> = Result<T, Wrong>;

fn string(v: Value) -> Read<String> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(Wrong("a string")),
    }
}

fn boolean(v: Value) -> Read<bool> {
    match v {
        Value::Boolean(b) => Ok(b),
        _ => Err(Wrong("a boolean")),
    }
}

fn unsigned(v: Value) -> Read<u64> {
    match v {
        Value::Integer(i) => u64::try_from(i).map_err(|_| Wrong("u64")),
        _ => Err(Wrong("u64")),
    }
}

/// A price: TOML integers are numbers too.
fn number(v: Value) -> Read<Option<f64>> {
    match v {
        Value::Integer(i) => Ok(Some(i as f64)),
        Value::Float(f) => Ok(Some(f)),
        _ => Err(Wrong("f64")),
    }
}

fn strings(v: Value) -> Read<Vec<String>> {
    match v {
        Value::Array(items) => items.into_iter().map(string).collect(),
        _ => Err(Wrong("a sequence")),
    }
}

fn map<T>(v: Value, each: fn(Value) -> Read<T>) -> Read<BTreeMap<String, T>> {
    let Value::Table(t) = v else { return Err(Wrong("a map")) };
    // Inserted one by one: collecting into a `BTreeMap` would compile a sort per value type.
    let mut out = BTreeMap::new();
    for (k, v) in t {
        out.insert(k, each(v)?);
    }
    Ok(out)
}

/// The entries of a section; `what` names it as serde did (`struct Gateway`).
fn section(v: Value, what: &'static str) -> Read<toml::Table> {
    match v {
        Value::Table(t) => Ok(t),
        _ => Err(Wrong(what)),
    }
}

impl Settings {
    pub(super) fn read(v: Value) -> Read<Settings> {
        let mut s = Settings::default();
        for (k, v) in section(v, "struct Settings")? {
            match k.as_str() {
                "channels" => s.channels = Channels::read(v)?,
                "mcp" => s.mcp = Mcp::read(v)?,
                "lua" => s.lua = Lua::read(v)?,
                "gateway" => s.gateway = Gateway::read(v)?,
                "llm" => s.llm = Llm::read(v)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

impl Llm {
    fn read(v: Value) -> Read<Llm> {
        let mut s = Llm::default();
        for (k, v) in section(v, "struct Llm")? {
            match k.as_str() {
                "prices" => s.prices = map(v, PriceSetting::read)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

impl PriceSetting {
    fn read(v: Value) -> Read<PriceSetting> {
        let mut s = PriceSetting::default();
        for (k, v) in section(v, "struct PriceSetting")? {
            match k.as_str() {
                "input" => s.input = number(v)?,
                "output" => s.output = number(v)?,
                "cache_read" => s.cache_read = number(v)?,
                "cache_write" => s.cache_write = number(v)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

impl Channels {
    fn read(v: Value) -> Read<Channels> {
        let mut s = Channels::default();
        for (k, v) in section(v, "struct Channels")? {
            match k.as_str() {
                "telegram" => s.telegram = Telegram::read(v)?,
                "feishu" => s.feishu = Feishu::read(v)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

impl Telegram {
    fn read(v: Value) -> Read<Telegram> {
        let mut s = Telegram::default();
        for (k, v) in section(v, "struct Telegram")? {
            match k.as_str() {
                "token" => s.token = string(v)?,
                "allow_from" => s.allow_from = strings(v)?,
                "api_base" => s.api_base = string(v)?,
                "max_file_bytes" => s.max_file_bytes = unsigned(v)?,
                "stream_edits" => s.stream_edits = boolean(v)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

impl Feishu {
    fn read(v: Value) -> Read<Feishu> {
        let mut s = Feishu::default();
        for (k, v) in section(v, "struct Feishu")? {
            match k.as_str() {
                "app_id" => s.app_id = string(v)?,
                "app_secret" => s.app_secret = string(v)?,
                "allow_from" => s.allow_from = strings(v)?,
                "api_base" => s.api_base = string(v)?,
                "encrypt_key" => s.encrypt_key = string(v)?,
                "mode" => s.mode = string(v)?,
                "verification_token" => s.verification_token = string(v)?,
                "webhook_listen" => s.webhook_listen = string(v)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

impl Mcp {
    fn read(v: Value) -> Read<Mcp> {
        let mut s = Mcp::default();
        for (k, v) in section(v, "struct Mcp")? {
            match k.as_str() {
                "servers" => s.servers = map(v, McpServer::read)?,
                "serve" => s.serve = McpServe::read(v)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

impl McpServe {
    fn read(v: Value) -> Read<McpServe> {
        let mut s = McpServe::default();
        for (k, v) in section(v, "struct McpServe")? {
            match k.as_str() {
                "groups" => s.groups = strings(v)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

impl McpServer {
    fn read(v: Value) -> Read<McpServer> {
        let mut s = McpServer::default();
        for (k, v) in section(v, "struct McpServer")? {
            match k.as_str() {
                "command" => s.command = string(v)?,
                "args" => s.args = strings(v)?,
                "env" => s.env = map(v, string)?,
                "url" => s.url = string(v)?,
                "headers" => s.headers = map(v, string)?,
                "bearer" => s.bearer = string(v)?,
                "cwd" => s.cwd = string(v)?,
                "connect" => s.connect = string(v)?,
                "timeout_secs" => s.timeout_secs = unsigned(v)?,
                "enabled" => s.enabled = boolean(v)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

impl Lua {
    fn read(v: Value) -> Read<Lua> {
        let mut s = Lua::default();
        for (k, v) in section(v, "struct Lua")? {
            match k.as_str() {
                "enabled" => s.enabled = boolean(v)?,
                "max_memory_bytes" => s.max_memory_bytes = unsigned(v)?,
                "timeout_ms" => s.timeout_ms = unsigned(v)?,
                "job_timeout_ms" => s.job_timeout_ms = unsigned(v)?,
                "max_instructions" => s.max_instructions = unsigned(v)?,
                "max_output_bytes" => s.max_output_bytes = unsigned(v)?,
                "max_jobs" => s.max_jobs = unsigned(v)?,
                "stop_grace_ms" => s.stop_grace_ms = unsigned(v)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

impl Gateway {
    fn read(v: Value) -> Read<Gateway> {
        let mut s = Gateway::default();
        for (k, v) in section(v, "struct Gateway")? {
            match k.as_str() {
                "listen" => s.listen = string(v)?,
                "token" => s.token = string(v)?,
                "max_connections" => s.max_connections = unsigned(v)?,
                "connections_per_address" => s.connections_per_address = unsigned(v)?,
                "max_websockets" => s.max_websockets = unsigned(v)?,
                "websockets_per_address" => s.websockets_per_address = unsigned(v)?,
                "websocket_idle_secs" => s.websocket_idle_secs = unsigned(v)?,
                _ => {
                    s.unknown.insert(k, v);
                }
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
