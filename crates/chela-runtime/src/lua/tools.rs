//! The tools of the `lua` group.

use std::sync::Arc;
use std::time::Duration;

use super::{Host, Limits, Run, Script};
use crate::read_args;
use crate::tools::{Tool, ToolCtx, ToolError, ToolResult};

pub struct RunArgs {
    path: Option<String>,
    code: Option<String>,
    args: Option<serde_json::Map<String, serde_json::Value>>,
}

read_args!(RunArgs { path: opt, code: opt, args: opt });

const RUN_SCHEMA: &str = r#"{"type":"object","properties":{"path":{"type":"string","description":"A .lua script in the workspace, e.g. skills/x/scripts/main.lua."},"code":{"type":"string","description":"Inline Lua code, instead of path."},"args":{"type":"object","description":"The argument of the script's run(args)."}}}"#;

/// The script `a` names, read from the workspace or inline. Blocking for a path.
fn script(ctx: &ToolCtx, a: RunArgs) -> Result<Script, ToolError> {
    let args = serde_json::Value::Object(a.args.unwrap_or_default());
    match (a.path, a.code) {
        (Some(path), None) => {
            let (norm, code) = super::read_script(ctx, &path)?;
            Ok(Script { path: Some(norm), code, args })
        }
        (None, Some(code)) => {
            if code.len() as u64 > super::MAX_SCRIPT_BYTES {
                return Err(ToolError::invalid_args(format!(
                    "The code is {} bytes; scripts may be at most {} bytes.",
                    code.len(),
                    super::MAX_SCRIPT_BYTES
                )));
            }
            Ok(Script { path: None, code, args })
        }
        _ => {
            Err(ToolError::invalid_args("Give either `path` (a workspace .lua file) or `code` (inline Lua), not both."))
        }
    }
}

/// Stops the run for good if the tool call is dropped (the call timed out, the turn ended).
struct KillOnDrop(Arc<Run>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0.killed().is_none() {
            self.0.kill("the call that started the script ended before it finished".into());
        }
    }
}

pub struct LuaRun(pub Arc<Host>);

impl Tool for LuaRun {
    const NAME: &'static str = "lua_run";
    const DESCRIPTION: &'static str = "Run a Lua script (workspace path or inline code): calls its run(args) and returns \
                                       {result, output} with the value JSON-encoded and what it printed.";
    const SCHEMA: &'static str = RUN_SCHEMA;
    type Args = RunArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: RunArgs) -> ToolResult {
        let started = crate::clock::real_instant();
        let script = if a.path.is_some() {
            let ctx2 = ctx.clone();
            crate::tasks::blocking(move || script(&ctx2, a))
                .await
                .map_err(|e| ToolError::new(format!("lua_run stopped unexpectedly: {e}")))??
        } else {
            script(ctx, a)?
        };
        let limits = Limits::from_ctx(ctx, false);
        let run = Arc::new(Run::new(ctx.clone(), tokio::runtime::Handle::current(), limits, false, started));
        let guard = KillOnDrop(Arc::clone(&run));
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.0.spawn(script, Arc::clone(&run), move |o| {
            let _ = tx.send(o);
        });
        let outcome = rx.await.map_err(|_| ToolError::new("the Lua run stopped unexpectedly"))?;
        drop(guard);
        let output = {
            let out = run.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            out.lines.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>().join("\n")
        };
        match outcome {
            Ok(json) => Ok(format!("{{\"result\":{json},\"output\":{}}}", serde_json::Value::String(output))),
            Err(e) if output.is_empty() => Err(ToolError::new(format!("Lua: {e}"))),
            Err(e) => Err(ToolError::new(format!("Lua: {e}\nPrinted before that:\n{output}"))),
        }
    }
}

pub struct LuaRunAsync(pub Arc<Host>);

impl Tool for LuaRunAsync {
    const NAME: &'static str = "lua_run_async";
    const DESCRIPTION: &'static str = "Start a Lua script as a background job (same arguments as lua_run); returns \
                                       {job_id} at once. Follow it with lua_job_get.";
    const SCHEMA: &'static str = RUN_SCHEMA;
    const BLOCKING: bool = true;
    type Args = RunArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: RunArgs) -> ToolResult {
        let script = script(ctx, a)?;
        let id = self.0.jobs.start(&self.0, ctx, script)?;
        Ok(serde_json::json!({ "job_id": id }).to_string())
    }
}

pub struct GetArgs {
    job_id: String,
    since_seq: u64,
}

read_args!(GetArgs { job_id: need, since_seq: or_default });

pub struct LuaJobGet(pub Arc<Host>);

impl Tool for LuaJobGet {
    const NAME: &'static str = "lua_job_get";
    const DESCRIPTION: &'static str = "A background Lua job's status (running, done, failed, stopped, interrupted), \
                                       result or error, and its log lines numbered after since_seq.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"job_id":{"type":"string"},"since_seq":{"type":"integer","minimum":0,"description":"Only log lines after this number (0: all)."}},"required":["job_id"]}"#;
    const BLOCKING: bool = true;
    type Args = GetArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: GetArgs) -> ToolResult {
        self.0.jobs.get(ctx.ws.root(), &a.job_id, a.since_seq)
    }
}

pub struct NoArgs {}

read_args!(NoArgs {});

pub struct LuaJobList(pub Arc<Host>);

impl Tool for LuaJobList {
    const NAME: &'static str = "lua_job_list";
    const DESCRIPTION: &'static str =
        "The background Lua jobs (recent ones, also from before a restart) and their status.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{}}"#;
    const BLOCKING: bool = true;
    type Args = NoArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, _: NoArgs) -> ToolResult {
        Ok(self.0.jobs.list(ctx.ws.root()))
    }
}

pub struct StopArgs {
    job_id: String,
}

read_args!(StopArgs { job_id: need });

pub struct LuaJobStop(pub Arc<Host>);

impl Tool for LuaJobStop {
    const NAME: &'static str = "lua_job_stop";
    const DESCRIPTION: &'static str = "Stop a background Lua job: asks it first (its sleep() returns false), then stops \
                                       it by force after lua.stop_grace_ms.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"job_id":{"type":"string"}},"required":["job_id"]}"#;
    const BLOCKING: bool = true;
    type Args = StopArgs;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: StopArgs) -> ToolResult {
        self.0.jobs.stop(ctx.ws.root(), &a.job_id, grace(ctx))
    }
}

/// `lua.stop_grace_ms`.
pub(crate) fn grace(ctx: &ToolCtx) -> Duration {
    Duration::from_millis(ctx.cfg.int(chela_core::config::LUA_STOP_GRACE_MS).unsigned_abs())
}
