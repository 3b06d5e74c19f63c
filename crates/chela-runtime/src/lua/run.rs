//! One run of a script: its limits, its output, and the switches that stop it. Shared between
//! the thread running the Lua state and whoever may stop it (the tool call's future when it is
//! dropped, `lua_job_stop`, `file_delete`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use chela_core::cap::Scope;
use chela_core::config as keys;
use mlua::Lua;

use crate::tools::ToolCtx;

/// Instructions between two checks of the limits. Small enough that a stop or a timeout lands
/// within microseconds, large enough that the hook costs little.
pub(crate) const HOOK_EVERY: u32 = 1000;

/// Lua calls deeper than this are refused ("recursion too deep"); checked by the hook, so a
/// runaway recursion stops long before it fills `lua.max_memory_bytes` with stack frames.
pub(crate) const MAX_DEPTH: usize = 200;

/// What bounds one run, read from the configuration when it starts.
#[derive(Clone, Debug)]
pub(crate) struct Limits {
    pub max_memory: usize,
    pub max_instructions: u64,
    pub timeout: Duration,
    /// The setting `timeout` came from, for the message when it is hit.
    pub timeout_key: &'static str,
    pub max_output: usize,
}

impl Limits {
    pub fn from_ctx(ctx: &ToolCtx, job: bool) -> Limits {
        let cfg = &ctx.cfg;
        let timeout_key = if job { keys::LUA_JOB_TIMEOUT_MS } else { keys::LUA_TIMEOUT_MS };
        Limits {
            max_memory: cfg.usize(keys::LUA_MAX_MEMORY_BYTES),
            max_instructions: cfg.int(keys::LUA_MAX_INSTRUCTIONS).unsigned_abs(),
            timeout: Duration::from_millis(cfg.int(timeout_key).unsigned_abs()),
            timeout_key: timeout_key.name,
            max_output: cfg.usize(keys::LUA_MAX_OUTPUT_BYTES),
        }
    }
}

/// Lines a script printed or logged, numbered from 1, bounded by `lua.max_output_bytes`.
#[derive(Debug, Default)]
pub(crate) struct Output {
    pub lines: Vec<(u64, String)>,
    pub bytes: usize,
    /// Lines before this index are already in the jobs journal.
    pub journaled: usize,
}

pub(crate) struct Run {
    ctx: ToolCtx,
    rt: tokio::runtime::Handle,
    pub limits: Limits,
    /// An async job may `sleep`; a synchronous run may not.
    job: bool,
    started: Instant,
    deadline: Instant,
    instructions: AtomicU64,
    /// Why the run was stopped for good; every later hook and every `pcall` re-raises it.
    killed: OnceLock<String>,
    /// A stop was asked for: `sleep` returns `false` at once so the script can finish.
    stop: Mutex<bool>,
    woken: Condvar,
    /// Wakes a `cap.call` that is waiting for a tool when the run is killed.
    kill_notify: tokio::sync::Notify,
    /// When the first instruction of the script ran, in ns after `started`.
    first_instruction_ns: AtomicU64,
    pub out: Mutex<Output>,
    /// Called at each `sleep`: a job writes its new log lines to the journal.
    checkpoint: OnceLock<Checkpoint>,
}

type Checkpoint = Box<dyn Fn(&Run) + Send + Sync>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Nothing a panic could leave half-done is kept under these locks.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Run {
    pub fn new(ctx: ToolCtx, rt: tokio::runtime::Handle, limits: Limits, job: bool, started: Instant) -> Run {
        let deadline = started + limits.timeout;
        Run {
            ctx,
            rt,
            limits,
            job,
            started,
            deadline,
            instructions: AtomicU64::new(0),
            killed: OnceLock::new(),
            stop: Mutex::new(false),
            woken: Condvar::new(),
            kill_notify: tokio::sync::Notify::new(),
            first_instruction_ns: AtomicU64::new(u64::MAX),
            out: Mutex::default(),
            checkpoint: OnceLock::new(),
        }
    }

    /// The clock of the context the run was started in.
    pub fn clock(&self) -> &crate::clock::Clock {
        &self.ctx.clock
    }

    /// Sets what each `sleep` calls first (once; later calls are ignored).
    pub fn set_checkpoint(&self, f: Checkpoint) {
        let _ = self.checkpoint.set(f);
    }

    /// The run bound to `lua` (by [`super::execute`]).
    pub fn of(lua: &Lua) -> mlua::Result<Arc<Run>> {
        lua.app_data_ref::<Arc<Run>>()
            .map(|r| Arc::clone(&r))
            .ok_or_else(|| mlua::Error::runtime("no script is running in this Lua state"))
    }

    pub fn killed(&self) -> Option<String> {
        self.killed.get().cloned()
    }

    /// Stops the run for good with `why` (the first reason wins).
    pub fn kill(&self, why: String) {
        let _ = self.killed.set(why);
        *lock(&self.stop) = true;
        self.woken.notify_all();
        self.kill_notify.notify_waiters();
    }

    /// Asks the script to finish: `sleep` returns `false` from now on.
    pub fn request_stop(&self) {
        *lock(&self.stop) = true;
        self.woken.notify_all();
    }

    pub fn stop_requested(&self) -> bool {
        *lock(&self.stop)
    }

    pub fn mark_first_instruction(&self) {
        let ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let _ = self.first_instruction_ns.compare_exchange(u64::MAX, ns, Ordering::Relaxed, Ordering::Relaxed);
    }

    pub fn first_instruction(&self) -> Option<Duration> {
        match self.first_instruction_ns.load(Ordering::Relaxed) {
            u64::MAX => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    fn kill_err(&self, why: String) -> mlua::Error {
        self.kill(why);
        mlua::Error::runtime(self.killed().unwrap_or_default())
    }

    /// Called every [`HOOK_EVERY`] instructions: enforces the instruction
    /// budget, the wall-clock limit, a forced stop and the call depth.
    pub fn on_hook(&self, too_deep: bool) -> mlua::Result<()> {
        self.charge(u64::from(HOOK_EVERY), None)?;
        if too_deep {
            return Err(mlua::Error::runtime(format!(
                "recursion too deep: more than {} nested Lua calls (stack overflow refused).",
                MAX_DEPTH
            )));
        }
        Ok(())
    }

    /// Counts `n` instructions' worth of work and enforces the instruction budget, the
    /// wall-clock limit and a forced stop. `inside` names the library function doing that work
    /// in Rust (pattern matching, `table.move`), where the hook cannot see it, for the message.
    pub fn charge(&self, n: u64, inside: Option<&str>) -> mlua::Result<()> {
        if let Some(why) = self.killed() {
            return Err(mlua::Error::runtime(why));
        }
        let within = || inside.map_or_else(String::new, |f| format!(" (it was inside {f}{})", hint(f)));
        let used = self.instructions.fetch_add(n, Ordering::Relaxed);
        if used >= self.limits.max_instructions {
            return Err(self.kill_err(format!(
                "the script ran more than {} Lua instructions{} and was stopped. The limit is the setting \
                 lua.max_instructions (`chela config set lua.max_instructions …`).",
                self.limits.max_instructions,
                within()
            )));
        }
        if crate::clock::real_instant() >= self.deadline {
            return Err(self.timeout_err(&within()));
        }
        Ok(())
    }

    fn timeout_err(&self, within: &str) -> mlua::Error {
        self.kill_err(format!(
            "the script ran longer than {} ms{within} and was stopped. The limit is the setting {} \
             (`chela config set {} …`).",
            self.limits.timeout.as_millis(),
            self.limits.timeout_key,
            self.limits.timeout_key
        ))
    }

    /// A `print` or `log.*` line; the run is stopped when its output passes the bound.
    pub fn emit(&self, kind: &str, line: String) -> mlua::Result<()> {
        let line = if kind == "print" { line } else { format!("[{kind}] {line}") };
        let mut out = lock(&self.out);
        out.bytes += line.len() + 1;
        if out.bytes > self.limits.max_output {
            drop(out);
            return Err(self.kill_err(format!(
                "the script printed more than {} bytes and was stopped. The limit is the setting \
                 lua.max_output_bytes (`chela config set lua.max_output_bytes …`).",
                self.limits.max_output
            )));
        }
        let seq = out.lines.len() as u64 + 1;
        out.lines.push((seq, line));
        Ok(())
    }

    /// `sleep(ms)` in an async job: waits, or returns `false` at once when a stop was asked for.
    pub fn sleep(&self, ms: f64) -> mlua::Result<bool> {
        if !self.job {
            return Err(mlua::Error::runtime(
                "sleep() is only available in background jobs (lua_run_async); lua_run must finish quickly",
            ));
        }
        if !ms.is_finite() || ms < 0.0 {
            return Err(mlua::Error::runtime("sleep(ms): ms must be a number of milliseconds, 0 or more"));
        }
        if let Some(f) = self.checkpoint.get() {
            f(self);
        }
        // Whole milliseconds; a float this large saturates to a wait beyond any deadline.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let until = crate::clock::real_instant() + Duration::from_millis(ms as u64);
        let mut stop = lock(&self.stop);
        loop {
            if *stop {
                drop(stop);
                return match self.killed() {
                    Some(why) => Err(mlua::Error::runtime(why)),
                    None => Ok(false),
                };
            }
            let now = crate::clock::real_instant();
            if now >= self.deadline {
                drop(stop);
                return Err(self.timeout_err(""));
            }
            if now >= until {
                return Ok(true);
            }
            stop =
                self.woken.wait_timeout(stop, until.min(self.deadline) - now).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// `cap.call(id, json)`: the tool through the same registry, with the rights of whoever
    /// started the script (the model with its conversation's unlocked groups, a person, or
    /// Chela itself for an owner's job), never more. Returns `ok` and the result or the error
    /// as JSON text.
    pub fn cap_call(&self, id: &str, json: &str) -> (bool, String) {
        let fail = |msg: &str| (false, serde_json::json!({ "error": msg }).to_string());
        if self.ctx.tools.registry().get(id).is_some_and(|c| c.group == super::GROUP) {
            return fail(&format!("`{id}` cannot be called from a Lua script (scripts do not start scripts)."));
        }
        if let Some(why) = self.killed() {
            return fail(&why);
        }
        let remaining = self.deadline.saturating_duration_since(crate::clock::real_instant());
        let scope = Scope { extra_visible: &self.ctx.scope };
        let call = self.ctx.tools.call_tool(&self.ctx, id, json, self.ctx.caller, scope);
        let result = self.rt.block_on(async {
            let killed = self.kill_notify.notified();
            tokio::pin!(killed);
            killed.as_mut().enable();
            if let Some(why) = self.killed() {
                return Err(why);
            }
            tokio::select! {
                r = tokio::time::timeout(remaining, call) => Ok(r),
                () = killed => Err(self.killed().unwrap_or_default()),
            }
        });
        match result {
            Ok(Ok(Ok(out))) => (true, out),
            Ok(Ok(Err(e))) => fail(&e.0),
            Ok(Err(_)) => {
                let _ = self.timeout_err("");
                fail(&self.killed().unwrap_or_default())
            }
            Err(why) => fail(&why),
        }
    }
}

/// What a script author can change when a library function used up a limit.
fn hint(f: &str) -> &'static str {
    match f {
        "table.move" => ": each element it copies counts as an instruction",
        "cjson.encode" | "the script's result" => {
            ": each value it writes counts as an instruction; a table that holds the same table more than \
             once is written out each time"
        }
        _ => {
            ": each step of pattern matching counts as an instruction, and a pattern with several `.-` or \
             `.*` items can backtrack for a very long time; anchor it, or match smaller pieces"
        }
    }
}
