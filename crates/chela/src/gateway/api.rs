//! The dashboard's HTTP API under `/api` (see `docs/DESIGN.md`, "The gateway"): capability
//! groups, configuration, sessions, memory files, pairing and the first-run setup. Every
//! change goes where the matching command puts it (`overrides.toml`, the session archive,
//! the pairing store) and is applied to the running daemon at once.
//!
//! Names from the URL (`/api/sessions/{id}`, `/api/memory/{name}`) are checked against what
//! Chela itself writes before any path is made of them, so no name leads outside its folder.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use chela_core::access::AccessError;
use chela_core::cap::{ControlError, Registry};
use chela_core::config::{self as keys, CAPS_DISABLED, CAPS_HIDDEN, CAPS_SHOWN};
use chela_infra::sort::sort_by;
use chela_proto::chat::Block;
use hyper::{Method, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{ApiError, Gateway, Resp, boxed, json as json_response};
use crate::access::GateError;
use crate::config::{Config, KeyChoice, KeyWouldMove, edit_list_override, set_overrides, shown_extra};
use crate::daemon::Daemon;
use crate::workspace::{read_bounded, read_tail_lines, write_atomic};

/// Most sessions listed; the newest first.
const MAX_LISTED: usize = 1000;
/// The end of a session file shown by `GET /api/sessions/{id}`.
const MAX_SESSION_VIEW: u64 = 1024 * 1024;
/// Largest memory file read or written here (as `memory.rs` reads them).
const MAX_MEMORY_FILE: u64 = 1024 * 1024;
/// Largest settings file read for the setup form's test call (the settings layer bounds them too).
const MAX_SETTINGS_FILE: u64 = 1024 * 1024;
/// Memory files in the workspace folder that the dashboard may show and edit.
const HEARTBEAT: &str = "HEARTBEAT.md";

pub async fn route(gw: &Arc<Gateway>, method: &Method, path: &str, body: &[u8]) -> Result<Resp, ApiError> {
    let d = &gw.daemon;
    let ok = |v: Value| Ok(json_response(StatusCode::OK, &v));
    match (method, path) {
        (&Method::POST, "/login") => {
            // Open (see `auth::check`): the code itself is the credential.
            let r: CodeReq = parse(body)?;
            let token = gw.token.as_deref().ok_or(ApiError::Unauthorized)?;
            gw.logins.redeem(token, &r.code, d.clock().unix_secs_u64())?;
            ok(json!({"token": token}))
        }
        (&Method::GET, "/cap/groups") => ok(Value::Array(groups(d, None))),
        (&Method::POST, "/cap/groups/runtime") => {
            let r: RuntimeReq = parse(body)?;
            ok(boxed(set_group(d, &r.group_id, Switch::Enabled(r.enabled))).await?)
        }
        (&Method::POST, "/cap/groups/visibility") => {
            let r: VisibilityReq = parse(body)?;
            ok(boxed(set_group(d, &r.group_id, Switch::Visible(r.visible))).await?)
        }
        (&Method::GET, "/config") => ok(config_list(&d.config())),
        (&Method::POST, "/config") => ok(boxed(config_set(d, parse(body)?)).await?),
        (&Method::POST, "/config/check") => ok(config_check(parse(body)?)),
        (&Method::GET, "/sessions") => ok(blocking(d, sessions_list).await?),
        (&Method::GET, "/usage") => ok(blocking(d, super::api_usage::usage_view).await?),
        (&Method::GET, "/memory") => ok(blocking(d, memory_list).await?),
        (_, p) if p.starts_with("/memory/entries") => boxed(super::api_memory::route(d, method, p, body)).await,
        (&Method::GET, "/pairing") => {
            let listing = d.gate().list(d.clock().unix_secs_u64()).map_err(gate_error)?;
            ok(serde_json::to_value(listing).map_err(|e| ApiError::internal("the pairing list", e))?)
        }
        (&Method::POST, "/pairing/approve") => {
            let r: CodeReq = parse(body)?;
            let peer = d.gate().approve(&r.code, d.clock().unix_secs_u64()).map_err(gate_error)?;
            ok(json!({"channel": peer.channel, "sender": peer.sender}))
        }
        (&Method::POST, "/pairing/deny") => {
            let r: CodeReq = parse(body)?;
            let pending = d.gate().deny(&r.code, d.clock().unix_secs_u64()).map_err(gate_error)?;
            ok(json!({"channel": pending.channel, "sender": pending.sender}))
        }
        (&Method::POST, "/pairing/clear") => {
            let r: ClearReq = parse(body)?;
            let dropped = d.gate().clear(r.channel.as_deref(), d.clock().unix_secs_u64()).map_err(gate_error)?;
            ok(
                json!({"denied": dropped.iter().map(|p| json!({"channel": p.channel, "sender": p.sender})).collect::<Vec<_>>()}),
            )
        }
        (&Method::POST, "/pairing/revoke") => {
            let r: RevokeReq = parse(body)?;
            let peer = d.gate().revoke(&r.channel, &r.sender).map_err(gate_error)?;
            ok(json!({"channel": peer.channel, "sender": peer.sender}))
        }
        (_, p) if p == "/devices" || p.starts_with("/devices/") => {
            boxed(super::xiaozhi::api(gw, method, p, body)).await
        }
        (&Method::GET, "/setup") => ok(setup_state(d)),
        (&Method::GET, "/scheduler/jobs") => ok(blocking(d, scheduler_jobs).await?),
        (&Method::POST, "/scheduler/jobs/approve") => {
            let r: IdReq = parse(body)?;
            ok(blocking(d, move |d| scheduler_approve(d, &r.id)).await?)
        }
        (&Method::POST, p) if p.starts_with("/scheduler/jobs/") => {
            let r: IdReq = parse(body)?;
            let act = super::api_jobs::Act::from_path(&p["/scheduler/jobs/".len()..])?;
            ok(blocking(d, move |d| super::api_jobs::act(d, &r.id, act)).await?)
        }
        (&Method::POST, "/setup") => ok(boxed(setup(d, parse(body)?)).await?),
        (&Method::POST, "/setup/test") => ok(boxed(setup_test(d, parse(body)?)).await?),
        (_, p) if p.starts_with("/sessions/") => {
            let id = check_session_id(&p["/sessions/".len()..])?;
            match *method {
                Method::GET => ok(blocking(d, move |d| session_view(d, &id)).await?),
                Method::DELETE => ok(boxed(session_clear(d, &id)).await?),
                _ => Err(ApiError::MethodNotAllowed(format!("{method} is not used on a session; GET or DELETE it"))),
            }
        }
        (_, p) if p.starts_with("/memory/") => {
            let name = p["/memory/".len()..].to_owned();
            let path = memory_path(d, &name)?;
            match *method {
                Method::GET => ok(blocking(d, move |_| memory_read(&name, &path)).await?),
                Method::PUT => {
                    let r: ContentReq = parse(body)?;
                    ok(blocking(d, move |_| memory_write(&name, &path, &r.content)).await?)
                }
                _ => Err(ApiError::MethodNotAllowed(format!("{method} is not used on a memory file; GET or PUT it"))),
            }
        }
        _ => Err(ApiError::NotFound(format!("there is no API at /api{path} for {method}"))),
    }
}

#[derive(Deserialize)]
struct RuntimeReq {
    group_id: String,
    enabled: bool,
}

#[derive(Deserialize)]
struct VisibilityReq {
    group_id: String,
    visible: bool,
}

#[derive(Deserialize)]
struct ConfigReq {
    key: String,
    value: Value,
    #[serde(flatten)]
    key_choice: KeyChoiceReq,
}

/// What the owner says about the API key when a change moves `llm.base_url` to another host.
#[derive(Deserialize, Default)]
struct KeyChoiceReq {
    #[serde(default)]
    keep_key: bool,
    #[serde(default)]
    drop_key: bool,
}

impl KeyChoiceReq {
    fn choice(&self) -> Result<KeyChoice, ApiError> {
        match (self.keep_key, self.drop_key) {
            (false, false) => Ok(KeyChoice::Ask),
            (true, false) => Ok(KeyChoice::Keep),
            (false, true) => Ok(KeyChoice::Drop),
            (true, true) => Err(ApiError::BadRequest("keep_key and drop_key cannot both be true".into())),
        }
    }
}

/// A refused settings change: a key that would move host is a conflict the owner resolves.
fn config_error(e: anyhow::Error) -> ApiError {
    match e.downcast_ref::<KeyWouldMove>() {
        Some(moved) => ApiError::Conflict(format!("Not changed: {moved}.")),
        None => ApiError::BadRequest(format!("{e:#}")),
    }
}

#[derive(Deserialize)]
struct ContentReq {
    content: String,
}

#[derive(Deserialize)]
struct IdReq {
    id: String,
}

#[derive(Deserialize)]
struct CodeReq {
    code: String,
}

/// `POST /api/pairing/clear`: `{}` clears every channel's queue, `{"channel": "telegram"}` one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClearReq {
    #[serde(default)]
    channel: Option<String>,
}

#[derive(Deserialize)]
struct RevokeReq {
    channel: String,
    sender: String,
}

#[derive(Deserialize)]
struct SetupReq {
    provider: String,
    #[serde(default)]
    base_url: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    api_key: String,
    #[serde(default)]
    telegram_token: String,
    #[serde(flatten)]
    key_choice: KeyChoiceReq,
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("the request body is not the expected JSON: {e}")))
}

/// Runs file work (which may wait for a file lock) off the async workers.
async fn blocking<T: Send + 'static>(
    d: &Arc<Daemon>,
    f: impl FnOnce(&Daemon) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    run_blocking(Arc::clone(d), Box::new(f)).await
}

/// [`blocking`]'s body, boxed: the routes share one blocking task type per answer type instead
/// of one per route, so tokio's task code is compiled a few times, not once per route.
async fn run_blocking<T: Send + 'static>(d: Arc<Daemon>, f: FileWork<T>) -> Result<T, ApiError> {
    crate::tasks::blocking(move || f(&d)).await.map_err(|e| ApiError::internal("file work stopped", e))?
}

type FileWork<T> = Box<dyn FnOnce(&Daemon) -> Result<T, ApiError> + Send>;

/// The owner approves a job the assistant made that acts on another chat (`chela cron approve`).
fn scheduler_approve(d: &Daemon, id: &str) -> Result<Value, ApiError> {
    let job = d.scheduler().approve(id, d.clock().unix_secs()).map_err(|e| ApiError::BadRequest(format!("{e:#}")))?;
    Ok(json!({"id": job.id, "approved": true}))
}

/// The scheduled jobs with their next fire times, and what is wrong with `cron.json`.
fn scheduler_jobs(d: &Daemon) -> Result<Value, ApiError> {
    let s = d.scheduler();
    let now = d.clock().unix_secs();
    s.refresh(now);
    let zone = s.zone();
    let jobs: Vec<Value> = s.list(now).into_iter().map(|v| super::api_jobs::shown(v, &zone)).collect();
    Ok(json!({"zone": zone.name(), "jobs": jobs, "problems": s.problems().lines()}))
}

/// Re-reads the settings files and makes them the running daemon's.
fn reload(d: &Daemon) -> Result<(), ApiError> {
    let cfg = Config::load(d.workspace())
        .map_err(|e| ApiError::internal("the settings cannot be read back", format!("{e:#}")))?;
    d.apply(Arc::new(cfg));
    Ok(())
}

// ---- Capability groups ------------------------------------------------------------------------

/// The groups as the dashboard shows them (only `only` when given).
fn groups(d: &Daemon, only: Option<&str>) -> Vec<Value> {
    let reg = d.toolbox().registry();
    reg.groups()
        .iter()
        .filter(|g| only.is_none_or(|id| g.spec.id == id))
        .map(|g| {
            let tools: Vec<&str> = reg.in_group(&g.spec.id).map(|c| &*c.id).collect();
            json!({
                "group_id": g.spec.id, "tools": tools, "runtime_enabled": g.enabled || g.spec.core,
                "llm_visible": g.visible || g.spec.core, "is_core": g.spec.core,
            })
        })
        .collect()
}

enum Switch {
    Enabled(bool),
    Visible(bool),
}

/// `chela cap enable|disable|show|hide` for the dashboard: checked on the registry, stored in
/// the runtime layer, applied to the running daemon.
async fn set_group(d: &Arc<Daemon>, group: &str, switch: Switch) -> Result<Value, ApiError> {
    let mut reg = Registry::clone(&d.toolbox().registry());
    let checked = match switch {
        Switch::Enabled(on) => reg.set_enabled(group, on),
        Switch::Visible(on) => reg.set_visible(group, on),
    };
    checked.map_err(|e| match e {
        ControlError::CoreGroup { .. } => {
            ApiError::Conflict(format!("{e}. Core groups are always on and always visible."))
        }
        ControlError::UnknownGroup { .. } => ApiError::NotFound(e.to_string()),
        _ => ApiError::BadRequest(e.to_string()),
    })?;
    let default_visible = reg.group(group).is_some_and(|g| g.spec.visible_by_default);
    let group = group.to_owned();
    blocking(d, move |d| {
        let ws = d.workspace();
        let stored = match switch {
            Switch::Enabled(on) => edit_list_override(ws, CAPS_DISABLED, &group, !on),
            // Only what differs from the group's default is recorded, as `chela cap` does.
            Switch::Visible(on) => edit_list_override(ws, CAPS_HIDDEN, &group, !on && default_visible)
                .and_then(|()| edit_list_override(ws, CAPS_SHOWN, &group, on && !default_visible)),
        };
        stored.map_err(|e| ApiError::internal("the switch cannot be stored", format!("{e:#}")))?;
        reload(d)?;
        groups(d, Some(&group)).pop().ok_or_else(|| ApiError::NotFound(format!("no group {group}")))
    })
    .await
}

// ---- Configuration ----------------------------------------------------------------------------

fn config_list(cfg: &Config) -> Value {
    let mut out: Vec<Value> = cfg
        .entries()
        .iter()
        .map(|e| {
            json!({
                "key": e.key.name, "value": e.shown(), "source": e.layer.to_string(), "secret": e.key.is_secret(),
                "section": e.key.section(), "help": e.key.help,
            })
        })
        .collect();
    for (path, value, layer) in cfg.extra() {
        out.push(json!({
            "key": path, "value": shown_extra(path, value), "source": layer.to_string(),
            "secret": keys::is_secret_name(path), "section": path.split('.').next().unwrap_or_default(), "help": "",
        }));
    }
    Value::Array(out)
}

#[derive(Deserialize)]
struct CheckReq {
    key: String,
    #[serde(default)]
    value: String,
}

/// What the Config tab shows while a key and value are typed: the same checks `config set`
/// makes, stored nowhere. A mistyped key gets the one closest name, if one is close.
fn config_check(r: CheckReq) -> Value {
    let key = match keys::key(r.key.trim()) {
        Ok(k) => k,
        Err(e) => {
            let suggestion = match &e {
                keys::ConfigError::UnknownKey { suggestion, .. } => *suggestion,
                _ => None,
            };
            return json!({"ok": false, "error": e.to_string(), "suggestion": suggestion});
        }
    };
    let help = json!({"key": key.name, "help": key.help, "secret": key.is_secret(), "default": key.default});
    if r.value.is_empty() {
        return json!({"ok": true, "key": help});
    }
    match crate::config::check(key, &r.value) {
        Ok(v) => json!({"ok": true, "key": help, "value": key.shown(&v)}),
        Err(e) => json!({"ok": false, "key": help, "error": format!("{e:#}")}),
    }
}

async fn config_set(d: &Arc<Daemon>, r: ConfigReq) -> Result<Value, ApiError> {
    let value = match r.value {
        Value::String(s) => s,
        Value::Array(items) => {
            items.iter().map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned)).collect::<Vec<_>>().join(",")
        }
        other => other.to_string(),
    };
    let key = keys::key(&r.key).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let choice = r.key_choice.choice()?;
    blocking(d, move |d| {
        let stored = set_overrides(d.workspace(), &[(key.name, &value)], choice)
            .map_err(config_error)?
            .pop()
            .unwrap_or_default();
        reload(d)?;
        Ok(json!({"key": key.name, "value": key.shown(&stored), "restart_needed": crate::config::needs_restart(key.name)}))
    })
    .await
}

// ---- Sessions ---------------------------------------------------------------------------------

/// A session id as Chela names session files (`<channel>_<chat>`, see
/// `Workspace::session_path`): nothing else is looked up.
fn check_session_id(id: &str) -> Result<String, ApiError> {
    let ok = !id.is_empty()
        && id.len() <= 256
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(id.to_owned())
    } else {
        Err(ApiError::BadRequest(
            "a session id is a session file's name without .jsonl (letters, digits, _ - .), as GET /api/sessions lists"
                .to_owned(),
        ))
    }
}

/// The session file of `id`, which must be a regular file (not a link) in `sessions/`.
fn session_file(d: &Daemon, id: &str) -> Result<PathBuf, ApiError> {
    let path = d.workspace().sessions_dir().join(format!("{id}.jsonl"));
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_file() => Ok(path),
        _ => Err(ApiError::NotFound(format!("there is no session {id}"))),
    }
}

fn split_id(id: &str) -> (&str, &str) {
    id.split_once('_').unwrap_or((id, ""))
}

fn sessions_list(d: &Daemon) -> Result<Value, ApiError> {
    let dir = d.workspace().sessions_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(json!([])),
        Err(e) => return Err(ApiError::internal("the sessions folder cannot be read", e)),
    };
    let mut found: Vec<(u64, String, u64)> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".jsonl") else { continue };
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() || id.starts_with('.') {
            continue;
        }
        let modified = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs());
        found.push((modified, id.to_owned(), meta.len()));
    }
    sort_by(&mut found, |a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.truncate(MAX_LISTED);
    let list = found
        .iter()
        .map(|(modified, id, bytes)| {
            let (channel, chat) = split_id(id);
            json!({"id": id, "channel": channel, "chat_id": chat, "bytes": bytes, "modified": modified})
        })
        .collect();
    Ok(Value::Array(list))
}

fn session_view(d: &Daemon, id: &str) -> Result<Value, ApiError> {
    let path = session_file(d, id)?;
    let (text, _) = read_tail_lines(&path, MAX_SESSION_VIEW)
        .map_err(|e| ApiError::internal("the session cannot be read", e))?
        .ok_or_else(|| ApiError::NotFound(format!("there is no session {id}")))?;
    let parsed = chela_core::session::parse(&text);
    // Which tool calls failed, by id: a call's chip shows its result, which the next message holds.
    let failed: std::collections::HashSet<&str> = parsed
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolResult { tool_use_id, is_error: true, .. } => Some(&**tool_use_id),
            _ => None,
        })
        .collect();
    let messages: Vec<Value> = parsed
        .messages
        .iter()
        .map(|m| {
            let tools: Vec<Value> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, .. } => Some(json!({"name": name, "ok": !failed.contains(id.as_str())})),
                    _ => None,
                })
                .collect();
            let results = m.content.iter().filter(|b| matches!(b, Block::ToolResult { .. })).count();
            let mut v = json!({"role": m.role.as_str(), "text": m.text()});
            // Only steps that called or answered tools carry these, so the page draws them as
            // tool chips instead of empty bubbles.
            if !tools.is_empty() {
                v["tools"] = Value::Array(tools);
            }
            if results > 0 {
                v["tool_results"] = json!(results);
            }
            v
        })
        .collect();
    Ok(json!({"id": id, "messages": messages}))
}

/// Clears a session as `/new` does: through its owner (so it lands between turns), archived.
async fn session_clear(d: &Arc<Daemon>, id: &str) -> Result<Value, ApiError> {
    let d2 = Arc::clone(d);
    let idc = id.to_owned();
    blocking(d, move |_| session_file(&d2, &idc).map(drop)).await?;
    let (channel, chat) = split_id(id);
    let pending = d.restart(channel, chat).map_err(|e| ApiError::Busy(e.to_string()))?;
    pending.finish().await.map_err(|e| ApiError::internal("the session cannot be archived", format!("{e:#}")))?;
    Ok(json!({"id": id, "archived": true}))
}

// ---- Memory files -----------------------------------------------------------------------------

/// A daily note's name: `YYYY-MM-DD.md`.
fn is_daily(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 13
        && name.ends_with(".md")
        && b[..10].iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() })
}

fn known_files() -> impl Iterator<Item = &'static str> {
    crate::memory::FILES.iter().map(|(n, _)| *n).chain([HEARTBEAT])
}

/// Where a memory file named `name` lives; only the known files and daily notes have a place.
fn memory_path(d: &Daemon, name: &str) -> Result<PathBuf, ApiError> {
    if known_files().any(|k| k == name) {
        Ok(d.workspace().root().join(name))
    } else if is_daily(name) {
        Ok(crate::memory::memory_dir(d.workspace()).join(name))
    } else {
        let known: Vec<&str> = known_files().collect();
        Err(ApiError::NotFound(format!(
            "`{}` is not a memory file; these are {} and daily notes (YYYY-MM-DD.md)",
            name.chars().take(80).collect::<String>(),
            known.join(", ")
        )))
    }
}

fn memory_list(d: &Daemon) -> Result<Value, ApiError> {
    let mut out = Vec::new();
    let size = |p: PathBuf| std::fs::symlink_metadata(p).ok().filter(|m| m.is_file()).map(|m| m.len());
    for name in known_files() {
        if let Some(bytes) = size(d.workspace().root().join(name)) {
            out.push(json!({"name": name, "bytes": bytes}));
        }
    }
    let mut daily: Vec<(String, u64)> = std::fs::read_dir(crate::memory::memory_dir(d.workspace()))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let bytes = e.metadata().ok().filter(|m| m.is_file())?.len();
                    is_daily(&name).then_some((name, bytes))
                })
                .collect()
        })
        .unwrap_or_default();
    sort_by(&mut daily, |a, b| b.0.cmp(&a.0));
    daily.truncate(MAX_LISTED);
    out.extend(daily.into_iter().map(|(name, bytes)| json!({"name": name, "bytes": bytes})));
    Ok(Value::Array(out))
}

fn memory_read(name: &str, path: &std::path::Path) -> Result<Value, ApiError> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(ApiError::Forbidden(format!("{name} is not a plain file here; it is not shown")));
    }
    let content = read_bounded(path, MAX_MEMORY_FILE)
        .map_err(|e| ApiError::internal(&format!("{name} cannot be read"), e))?
        .ok_or_else(|| ApiError::NotFound(format!("{name} does not exist yet")))?;
    Ok(json!({"name": name, "content": content}))
}

fn memory_write(name: &str, path: &std::path::Path, content: &str) -> Result<Value, ApiError> {
    if content.len() as u64 > MAX_MEMORY_FILE {
        return Err(ApiError::TooLarge(format!("a memory file holds at most {MAX_MEMORY_FILE} bytes")));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ApiError::internal("the memory folder cannot be made", e))?;
    }
    // A temp file renamed over the old one: a reader sees the old text or the new, never half.
    write_atomic(path, content.as_bytes()).map_err(|e| ApiError::internal(&format!("{name} cannot be written"), e))?;
    Ok(json!({"name": name, "bytes": content.len()}))
}

// ---- Pairing ----------------------------------------------------------------------------------

fn gate_error(e: GateError) -> ApiError {
    match e {
        GateError::Rule(r @ (AccessError::UnknownCode { .. } | AccessError::NotApproved { .. })) => {
            ApiError::NotFound(r.to_string())
        }
        GateError::Rule(r) => ApiError::BadRequest(r.to_string()),
        GateError::Store(s) => ApiError::internal("the pairing store", s),
    }
}

// ---- Setup ------------------------------------------------------------------------------------

fn setup_state(d: &Daemon) -> Value {
    let cfg = d.config();
    let mut v = json!({
        "needs_setup": d.app().is_err(),
        "provider": cfg.get(keys::LLM_PROVIDER),
        "base_url": cfg.effective(keys::LLM_BASE_URL),
        "model": cfg.effective(keys::LLM_MODEL),
        // What the form switches to when the provider changes.
        "defaults": {
            "anthropic": {"base_url": keys::default_base_url("anthropic"), "model": keys::default_model("anthropic")},
            "openai": {"base_url": keys::default_base_url("openai"), "model": keys::default_model("openai")},
        },
    });
    if let Err(why) = d.app() {
        v["problem"] = Value::String(why);
    }
    v
}

/// The words of the setup form's test call; an answer of a word or two is all it needs.
const SETUP_PROBE: &str = "Reply with one word: ready";

/// The setup form's settings as `chela.toml`, `overrides.toml` and the environment would give
/// them once saved: the form's values sit below the environment, as the runtime layer does.
fn candidate(d: &Daemon, r: &SetupReq) -> Result<Config, ApiError> {
    let ws = d.workspace();
    let read =
        |p: PathBuf| read_bounded(&p, MAX_SETTINGS_FILE).map_err(|e| ApiError::internal("the settings files", e));
    let (file, overrides) = (read(ws.config_path())?, read(ws.overrides_path())?);
    let form = [
        (keys::LLM_PROVIDER, &r.provider),
        (keys::LLM_BASE_URL, &r.base_url),
        (keys::LLM_MODEL, &r.model),
        (keys::LLM_API_KEY, &r.api_key),
    ];
    let mut env: Vec<(String, String)> = Vec::new();
    for (key, value) in form {
        let v = crate::config::check(key, value).map_err(|e| ApiError::BadRequest(format!("{e:#}")))?;
        // An empty key keeps the stored one, as saving does.
        if !(v.is_empty() && key.is_secret()) {
            env.push((key.env_var(), v));
        }
    }
    env.extend(std::env::vars().filter(|(n, _)| n.starts_with("CHELA_")));
    Config::from_layers(file.as_deref(), overrides.as_deref(), &env).map_err(|e| ApiError::BadRequest(format!("{e:#}")))
}

/// The setup form's test: one tiny request with the form's settings before anything is saved,
/// as `chela doctor` makes, answering with the provider's words or its refusal explained.
async fn setup_test(d: &Arc<Daemon>, r: SetupReq) -> Result<Value, ApiError> {
    let choice = r.key_choice.choice()?;
    let d2 = Arc::clone(d);
    let cfg = blocking(d, move |_| candidate(&d2, &r)).await?;
    let now = d.config();
    let moved = cfg.effective(keys::LLM_BASE_URL) != now.effective(keys::LLM_BASE_URL);
    // The stored key goes only where it went before, unless the owner says so (as saving asks).
    if moved
        && cfg.get(keys::LLM_API_KEY) == now.get(keys::LLM_API_KEY)
        && !now.get(keys::LLM_API_KEY).is_empty()
        && !matches!(choice, KeyChoice::Keep)
    {
        return Err(ApiError::Conflict(format!(
            "Not tested: the stored API key would be sent to {}. Enter that provider's key, or keep the stored one.",
            cfg.effective(keys::LLM_BASE_URL)
        )));
    }
    let http = crate::app::http_client(&cfg).map_err(|e| ApiError::BadRequest(format!("{e:#}")))?;
    let provider =
        crate::provider::Provider::from_config(&cfg, http).map_err(|e| ApiError::BadRequest(format!("{e:#}")))?;
    let probe = provider.probe();
    let reply = probe
        .ask(SETUP_PROBE)
        .await
        .map_err(|e| ApiError::Upstream(probe.explain(&e, &cfg.entry(keys::LLM_API_KEY).layer)))?;
    let answer = reply.into_message().text();
    Ok(
        json!({"provider": provider.describe(), "model": provider.model, "answer": answer.chars().take(500).collect::<String>()}),
    )
}

/// The first-run form: every value is checked before any is stored, then they go to the
/// runtime layer together and the daemon takes them without a restart.
async fn setup(d: &Arc<Daemon>, r: SetupReq) -> Result<Value, ApiError> {
    let fields = [
        (keys::LLM_PROVIDER, r.provider),
        (keys::LLM_BASE_URL, r.base_url),
        (keys::LLM_MODEL, r.model),
        (keys::LLM_API_KEY, r.api_key),
        (keys::TELEGRAM_TOKEN, r.telegram_token),
    ];
    for (key, value) in &fields {
        crate::config::check(key, value).map_err(|e| ApiError::BadRequest(format!("{e:#}")))?;
    }
    let choice = r.key_choice.choice()?;
    blocking(d, move |d| {
        // An empty key or token keeps what is set (a keyless local server needs none).
        let pairs: Vec<(&str, &str)> = fields
            .iter()
            .filter(|(key, value)| !(value.trim().is_empty() && key.is_secret()))
            .map(|(key, value)| (key.name, value.as_str()))
            .collect();
        // Together, so the key check sees the whole change (a new provider with its own key).
        set_overrides(d.workspace(), &pairs, choice).map_err(config_error)?;
        reload(d)?;
        Ok(setup_state(d))
    })
    .await
}
