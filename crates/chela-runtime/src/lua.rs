//! Sandboxed Lua 5.4 scripts (the `lua` capability group, cargo feature `lua`).
//!
//! What it is: `lua_run` runs a workspace script (`{"path": …}`) or inline `code`, calls its
//! `run(args)` and returns the value JSON-encoded with everything it printed; `lua_run_async`
//! starts the same as a background job, which `lua_job_get`/`lua_job_list`/`lua_job_stop`
//! follow. Scripts call tools with `cap.call(id, json) -> ok, result_json` through the same
//! registry, with the rights of whoever started them: a script the model starts sees what that
//! conversation sees (hidden groups only if it unlocked them, no people-only tools), one a
//! person or an owner's job starts keeps that caller's rights.
//!
//! What it is not: a general Lua. The sandbox ([`sandbox`]) has only `base` (no binary chunks,
//! `dofile`, `loadfile`, collector tuning), `string`, `table`, `math`, `utf8`, `coroutine` and
//! `os.time/clock/date`. Every run has its own fresh state and the limits `lua.max_memory_bytes`,
//! `lua.max_instructions`, `lua.timeout_ms` (`lua.job_timeout_ms` for jobs) and
//! `lua.max_output_bytes`; hitting one stops that run only, with a message naming the setting.
//! The library functions that loop in C where the instruction hook cannot see them run
//! metered instead ([`strlib`], the prelude's `table` wrappers): their steps count as
//! instructions and the deadline and a forced stop reach them.
//!
//! How it is driven: [`Host`] is owned by whoever builds the toolbox (one per process); it is
//! told before a file tool removes a script ([`crate::tools::BeforeRemove`]); its tools run each
//! script on tokio's blocking pool with a state prepared ahead of time, so a call does not pay
//! for building one. Jobs are recorded in `state/lua_jobs.jsonl` ([`jobs`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mlua::{Lua, Value};

use crate::tools::{BeforeRemove, Group, ToolCtx, ToolError};

mod jobs;
mod run;
mod sandbox;
mod strlib;
mod tools;

pub(crate) use run::{Limits, Run};

/// The capability group's id.
pub const GROUP: &str = "lua";

/// Prepared states kept ready. Two cover a call and the one right after it while the first
/// state's replacement is being built.
const POOL: usize = 2;

/// The largest script file `lua_run` reads.
pub(crate) const MAX_SCRIPT_BYTES: u64 = 1024 * 1024;

pub fn group(host: &Arc<Host>) -> Group {
    Group::new(GROUP, "Run sandboxed Lua scripts that call tools with cap.call.")
        .hidden("")
        .switched_by(chela_core::config::LUA_ENABLED, "Lua scripts")
        .guidance(
            "Lua scripts: lua_run {path|code, args} calls the script's run(args) and returns its value and \
             printed output. Scripts use cap.call(id, json) -> ok, result_json to call tools, \
             require(\"cjson\") for JSON and require(\"log\"); lua_run_async starts a background job \
             (sleep(ms) works there; it returns false once the job is asked to stop).",
        )
        .with(tools::LuaRun(Arc::clone(host)))
        .with(tools::LuaRunAsync(Arc::clone(host)))
        .with(tools::LuaJobGet(Arc::clone(host)))
        .with(tools::LuaJobList(Arc::clone(host)))
        .with(tools::LuaJobStop(Arc::clone(host)))
}

/// The Lua side of a running Chela: prepared states and the background jobs.
#[derive(Default)]
pub struct Host {
    pool: Mutex<Vec<Lua>>,
    pub(crate) jobs: jobs::Jobs,
}

/// A script to run: its name for messages and the journal, its text, and `run`'s argument.
#[derive(Clone, Debug)]
pub(crate) struct Script {
    /// The workspace path, normalised (`a/b.lua`), or `None` for inline code.
    pub path: Option<String>,
    pub code: String,
    pub args: serde_json::Value,
}

impl Script {
    pub fn name(&self) -> &str {
        self.path.as_deref().unwrap_or("<inline>")
    }
}

/// How a run ended: `run`'s value as JSON, or why it failed.
pub(crate) type Outcome = Result<String, String>;

impl Host {
    pub fn new() -> Host {
        Host::default()
    }

    /// A prepared state, or a new one when the pool is empty (a burst of calls).
    fn take(&self) -> Result<Lua, String> {
        if let Some(lua) = self.pool.lock().unwrap_or_else(PoisonError::into_inner).pop() {
            return Ok(lua);
        }
        sandbox::prepare().map_err(|e| format!("cannot create a Lua state: {e}"))
    }

    /// Fills the pool back up; called on the blocking thread after a run has answered.
    fn refill(&self) {
        loop {
            if self.pool.lock().unwrap_or_else(PoisonError::into_inner).len() >= POOL {
                return;
            }
            let Ok(lua) = sandbox::prepare() else { return };
            let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
            if pool.len() >= POOL {
                return;
            }
            pool.push(lua);
        }
    }

    /// Runs `script` on a blocking-pool thread with a fresh state; `done` gets the outcome
    /// before the thread drops the state and prepares the next one.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        script: Script,
        run: Arc<Run>,
        done: impl FnOnce(Outcome) + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let host = Arc::clone(self);
        // Boxed, so the scripts and the jobs share one blocking task type.
        let work: Box<dyn FnOnce() + Send> = Box::new(move || {
            let outcome = match host.take() {
                Ok(lua) => {
                    #[cfg(test)]
                    tests_limits::record_worker(&script.code);
                    let out = execute(&lua, &script, &run);
                    done(out);
                    drop(lua);
                    host.refill();
                    return;
                }
                Err(e) => Err(e),
            };
            done(outcome);
        });
        tokio::task::spawn_blocking(work)
    }
}

impl Host {
    /// Stops every background job (see [`jobs::Jobs::stop_all`]); their ids. Blocking.
    pub fn stop_jobs(&self, grace: Duration) -> Vec<String> {
        self.jobs.stop_all(grace)
    }
}

impl BeforeRemove for Host {
    /// Stops the running jobs of the script at `rel` (or beneath it) before a file tool deletes
    /// or moves it; the note names them, empty when none ran. Blocking.
    fn before_remove(&self, ctx: &ToolCtx, rel: &str) -> String {
        let ids = self.jobs.stop_path(ctx.ws.root(), rel, tools::grace(ctx));
        if ids.is_empty() {
            String::new()
        } else {
            format!(" (stopped the Lua jobs running it first: {})", ids.join(", "))
        }
    }
}

/// Reads the script at workspace path `rel` through the file sandbox. Blocking.
pub(crate) fn read_script(ctx: &ToolCtx, rel: &str) -> Result<(String, String), ToolError> {
    use std::io::Read;
    let norm = normalise(rel)?;
    let (f, size) = crate::tools::files::open_workspace_file(ctx, rel)?;
    if size > MAX_SCRIPT_BYTES {
        return Err(ToolError::invalid_args(format!(
            "`{rel}` is {size} bytes; scripts may be at most {MAX_SCRIPT_BYTES} bytes."
        )));
    }
    let mut code = String::new();
    f.take(MAX_SCRIPT_BYTES + 1)
        .read_to_string(&mut code)
        .map_err(|e| ToolError::new(format!("Cannot read `{rel}`: {e} (a script must be UTF-8 text).")))?;
    Ok((norm, code))
}

/// `rel` as `a/b.lua`: `.` and empty parts dropped, `..` and absolute paths refused (as the
/// file tools refuse them), so a job's script and a deleted path compare equal.
pub(crate) fn normalise(rel: &str) -> Result<String, ToolError> {
    let rel = rel.trim();
    if rel.starts_with('/') || rel.starts_with('~') {
        return Err(ToolError::invalid_args(format!(
            "`{rel}` is an absolute path; use a path relative to the workspace, e.g. scripts/hello.lua."
        )));
    }
    let mut parts = Vec::new();
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                return Err(ToolError::invalid_args(format!(
                    "`{rel}` uses `..`; paths must stay inside the workspace."
                )));
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

/// Runs `script` in `lua` under `run`'s limits: the chunk, then its global `run(args)` if it
/// defines one (otherwise the chunk's own return value is the result).
fn execute(lua: &Lua, script: &Script, run: &Arc<Run>) -> Outcome {
    let _ = lua.set_memory_limit(0);
    let base = lua.used_memory();
    lua.set_app_data(Arc::clone(run));
    // The limit counts what the script adds to the prepared state.
    let _ = lua.set_memory_limit(base.saturating_add(run.limits.max_memory));
    let result = (|| {
        let chunk = lua
            .load(script.code.as_str())
            .set_name(format!("@{}", script.name()))
            .set_mode(mlua::ChunkMode::Text)
            .into_function()?;
        run.mark_first_instruction();
        let value = sandbox::first(chunk.call::<mlua::MultiValue>(())?);
        let value = match lua.globals().raw_get::<Value>("run")? {
            Value::Function(f) => sandbox::first(f.call::<mlua::MultiValue>(sandbox::from_json(lua, &script.args)?)?),
            _ => value,
        };
        let mut out = String::new();
        sandbox::to_json(&value, 0, &mut out, &mut strlib::Meter::new(lua, "the script's result"))?;
        Ok(out)
    })();
    result.map_err(|e: mlua::Error| explain(&e, run))
}

/// The message for a failed run: the limit that stopped it, or Lua's own error.
fn explain(e: &mlua::Error, run: &Run) -> String {
    if let Some(why) = run.killed() {
        return why;
    }
    let mut e = e;
    while let mlua::Error::CallbackError { cause, .. } = e {
        e = cause;
    }
    match e {
        mlua::Error::MemoryError(_) => format!(
            "the script used more than {} bytes of memory and was stopped. The limit is the setting \
             lua.max_memory_bytes (`chela config set lua.max_memory_bytes …`).",
            run.limits.max_memory
        ),
        mlua::Error::SyntaxError { message, .. } => format!("syntax error: {message}"),
        mlua::Error::RuntimeError(m) if m.contains("stack overflow") => {
            format!("recursion too deep: more than {} nested Lua calls (stack overflow refused).", sandbox::MAX_DEPTH)
        }
        // The traceback is Lua's view of the sandbox's own wrappers; the first line says it.
        mlua::Error::RuntimeError(m) => m.split("\nstack traceback:").next().unwrap_or(m).to_owned(),
        other => other.to_string(),
    }
}

/// Runs inline `code` with `args` the way `lua_run` does and reports how long it took to reach
/// the first instruction. For `benches/lua.rs` only; `BenchRig::load` is with the code that
/// builds the toolbox (`app.rs`).
#[doc(hidden)]
pub struct BenchRig {
    /// The context of a call by hand, as the loaded workspace gives it.
    pub(crate) ctx: ToolCtx,
    pub(crate) toolbox: Arc<crate::tools::Toolbox>,
    pub(crate) host: Arc<Host>,
}

impl BenchRig {
    /// One run of `code`: its outcome, the time to its first instruction and the total.
    pub async fn run(&self, code: &str) -> (Result<String, String>, Duration, Duration) {
        let ctx = self.ctx.clone();
        let started = crate::clock::real_instant();
        let run = Arc::new(Run::new(
            ctx.clone(),
            tokio::runtime::Handle::current(),
            Limits::from_ctx(&ctx, false),
            false,
            started,
        ));
        let script = Script { path: None, code: code.to_owned(), args: serde_json::json!({}) };
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.host.spawn(script, Arc::clone(&run), move |o| {
            let _ = tx.send(o);
        });
        let out = rx.await.unwrap_or_else(|_| Err("the run stopped unexpectedly".into()));
        (out, run.first_instruction().unwrap_or_default(), started.elapsed())
    }

    /// A tool call as the model makes it (through the registry), e.g. `lua_run`.
    pub async fn call(&self, id: &str, args: &str) -> Result<String, String> {
        let scope = chela_core::cap::Scope::default();
        self.toolbox.call(&self.ctx, id, args, chela_core::cap::Caller::Model, scope).await.map_err(|e| e.0)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
#[path = "lua/limits_tests.rs"]
mod tests_limits;
