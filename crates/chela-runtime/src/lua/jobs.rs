//! Background jobs (`lua_run_async`) and their journal, `state/lua_jobs.jsonl`.
//!
//! The journal is a file of JSON lines, appended with fsync: `start` when a job starts, `log`
//! lines at each `sleep` and at the end, and `end` with the status, result or error. The reader
//! skips lines it cannot parse (a torn last line after a crash, a hand edit). A job with a
//! `start` but no `end` was running when Chela stopped: it is listed as `interrupted`.
//! Bounds: the last [`KEEP`] jobs are kept; at most [`READ_MAX`] bytes of the journal's tail are
//! read; a journal larger than [`COMPACT_AT`] is rewritten (atomically) with the kept jobs only.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Host, Outcome, Run, Script};
use crate::tools::{ToolCtx, ToolError};

/// Jobs kept (running ones always are; the oldest ended ones go first).
pub(crate) const KEEP: usize = 64;
/// Bytes of the journal's end that are read when Chela starts.
const READ_MAX: u64 = 4 * 1024 * 1024;
/// A journal larger than this is compacted when read.
const COMPACT_AT: u64 = 1024 * 1024;

pub(crate) const JOURNAL: &str = "state/lua_jobs.jsonl";

#[derive(Default)]
pub(crate) struct Jobs {
    inner: Mutex<Inner>,
    ended: Condvar,
    /// Serialises appends, so two jobs' lines never interleave inside one write.
    journal_lock: Mutex<()>,
}

#[derive(Default)]
struct Inner {
    /// The journal, once it has been read (on the first use of the jobs).
    journal: Option<PathBuf>,
    list: Vec<Job>,
    counter: u64,
}

struct Job {
    id: String,
    /// Normalised workspace path, or `None` for inline code.
    path: Option<String>,
    started_ms: i64,
    state: State,
}

enum State {
    Running(Arc<Run>),
    Ended { status: String, result: Option<Value>, error: Option<String>, logs: Vec<(u64, String)> },
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Job {
    fn status(&self) -> &str {
        match &self.state {
            State::Running(_) => "running",
            State::Ended { status, .. } => status,
        }
    }

    fn script(&self) -> &str {
        self.path.as_deref().unwrap_or("<inline>")
    }
}

impl Jobs {
    /// The jobs, with the journal of the workspace read in on first use.
    fn inner(&self, root: &Path) -> MutexGuard<'_, Inner> {
        let mut inner = lock(&self.inner);
        if inner.journal.is_none() {
            let path = root.join(JOURNAL);
            inner.list = load(&path);
            inner.journal = Some(path);
        }
        inner
    }

    fn append(&self, path: &Path, records: &[Value]) {
        if records.is_empty() {
            return;
        }
        let mut text = String::new();
        for r in records {
            text.push_str(&r.to_string());
            text.push('\n');
        }
        let _guard = lock(&self.journal_lock);
        let result = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| crate::workspace::append_durable(path, &text));
        if let Err(e) = result {
            // The job itself goes on; only its record is incomplete.
            chela_log::warn!("cannot write the Lua jobs journal {}: {e}", path.display());
        }
    }

    /// Starts `script` as a job; refused when `lua.max_jobs` jobs are running.
    pub fn start(&self, host: &Arc<Host>, ctx: &ToolCtx, script: Script) -> Result<String, ToolError> {
        let max = ctx.cfg.usize(chela_core::config::LUA_MAX_JOBS);
        let (id, journal, run) = {
            let mut inner = self.inner(ctx.ws.root());
            let running = inner.list.iter().filter(|j| matches!(j.state, State::Running(_))).count();
            if running >= max {
                return Err(ToolError::refused(format!(
                    "{running} Lua jobs are running already, the most allowed. Stop one with lua_job_stop, or raise \
                     the setting lua.max_jobs (`chela config set lua.max_jobs …`)."
                )));
            }
            inner.counter += 1;
            let started_ms = ctx.clock.unix_millis();
            let id = format!("lua-{started_ms:x}-{}", inner.counter);
            let run = Arc::new(Run::new(
                ctx.clone(),
                tokio::runtime::Handle::current(),
                super::Limits::from_ctx(ctx, true),
                true,
                crate::clock::real_instant(),
            ));
            inner.list.push(Job {
                id: id.clone(),
                path: script.path.clone(),
                started_ms,
                state: State::Running(Arc::clone(&run)),
            });
            trim(&mut inner.list);
            let journal = inner.journal.clone().unwrap_or_default();
            self.append(
                &journal,
                &[json!({"ev": "start", "id": id, "script": script.name(), "path": script.path, "at": started_ms})],
            );
            (id, journal, run)
        };
        let (h, job) = (Arc::clone(host), id.clone());
        run.set_checkpoint(Box::new(move |r: &Run| h.jobs.flush_logs(&journal, &job, r)));
        let (h, job, run2) = (Arc::clone(host), id.clone(), Arc::clone(&run));
        host.spawn(script, run, move |outcome| h.jobs.finish(&job, &run2, outcome));
        Ok(id)
    }

    /// Appends the lines `run` logged since the last flush.
    fn flush_logs(&self, journal: &Path, id: &str, run: &Run) {
        let records: Vec<Value> = {
            let mut out = lock(&run.out);
            let from = out.journaled;
            out.journaled = out.lines.len();
            out.lines[from..]
                .iter()
                .map(|(seq, line)| json!({"ev": "log", "id": id, "seq": seq, "line": line}))
                .collect()
        };
        self.append(journal, &records);
    }

    fn finish(&self, id: &str, run: &Run, outcome: Outcome) {
        let journal = lock(&self.inner).journal.clone().unwrap_or_default();
        self.flush_logs(&journal, id, run);
        let status = match &outcome {
            _ if run.stop_requested() && run.killed().is_none_or(|w| w.starts_with(STOPPED)) => "stopped",
            Ok(_) => "done",
            Err(_) => "failed",
        };
        let result = outcome.as_ref().ok().map(|j| serde_json::from_str(j).unwrap_or(Value::Null));
        let error = outcome.err();
        self.append(
            &journal,
            &[json!({"ev": "end", "id": id, "status": status, "result": result, "error": error, "at": run.clock().unix_millis()})],
        );
        let logs = std::mem::take(&mut lock(&run.out).lines);
        let mut inner = lock(&self.inner);
        if let Some(j) = inner.list.iter_mut().find(|j| j.id == id) {
            j.state = State::Ended { status: status.into(), result, error, logs };
        }
        trim(&mut inner.list);
        drop(inner);
        self.ended.notify_all();
    }

    /// Status, result and the log lines after `since`.
    pub fn get(&self, root: &Path, id: &str, since: u64) -> Result<String, ToolError> {
        let inner = self.inner(root);
        let job = inner.list.iter().find(|j| j.id == id).ok_or_else(|| unknown(id))?;
        let pick = |lines: &[(u64, String)]| -> Vec<Value> {
            lines.iter().filter(|(s, _)| *s > since).map(|(s, l)| json!({"seq": s, "line": l})).collect()
        };
        let mut v =
            json!({"job_id": job.id, "script": job.script(), "status": job.status(), "started_ms": job.started_ms});
        match &job.state {
            State::Running(run) => v["logs"] = Value::Array(pick(&lock(&run.out).lines)),
            State::Ended { result, error, logs, .. } => {
                v["logs"] = Value::Array(pick(logs));
                if let Some(r) = result {
                    v["result"] = r.clone();
                }
                if let Some(e) = error {
                    v["error"] = Value::String(e.clone());
                }
            }
        }
        Ok(v.to_string())
    }

    pub fn list(&self, root: &Path) -> String {
        let inner = self.inner(root);
        let jobs: Vec<Value> = inner
            .list
            .iter()
            .map(|j| json!({"job_id": j.id, "script": j.script(), "status": j.status(), "started_ms": j.started_ms}))
            .collect();
        json!({ "jobs": jobs }).to_string()
    }

    /// Asks job `id` to stop, waits `grace` for it to finish, then stops it by force. Blocking.
    pub fn stop(&self, root: &Path, id: &str, grace: Duration) -> Result<String, ToolError> {
        let run = {
            let inner = self.inner(root);
            let job = inner.list.iter().find(|j| j.id == id).ok_or_else(|| unknown(id))?;
            match &job.state {
                State::Running(run) => Arc::clone(run),
                State::Ended { status, .. } => return Ok(format!("Job {id} is not running (it is {status}).")),
            }
        };
        Ok(if self.stop_run(id, &run, grace) {
            // It may have ended otherwise within the grace (a limit, or its last result).
            match self.inner(root).list.iter().find(|j| j.id == id).map(Job::status) {
                Some(status) if status != "stopped" => {
                    format!("Job {id} ended before it stopped (it is {status}); lua_job_get shows why.")
                }
                _ => format!("Job {id} stopped."),
            }
        } else {
            format!(
                "Job {id} did not stop within lua.stop_grace_ms ({} ms) and was stopped by force.",
                grace.as_millis()
            )
        })
    }

    /// Whether the job stopped by itself within `grace` (otherwise it is killed, and waited for).
    fn stop_run(&self, id: &str, run: &Run, grace: Duration) -> bool {
        run.request_stop();
        let ended = |inner: &Inner| {
            inner.list.iter().find(|j| j.id == id).is_none_or(|j| !matches!(j.state, State::Running(_)))
        };
        let inner = lock(&self.inner);
        let (inner, timeout) =
            self.ended.wait_timeout_while(inner, grace, |i| !ended(i)).unwrap_or_else(PoisonError::into_inner);
        if !timeout.timed_out() {
            return true;
        }
        drop(inner);
        run.kill(format!("{STOPPED} by force after lua.stop_grace_ms ({} ms).", grace.as_millis()));
        // The hook fires within a few thousand instructions; a job inside a tool call is woken.
        let inner = lock(&self.inner);
        let _ = self.ended.wait_timeout_while(inner, FORCED_WAIT, |i| !ended(i));
        false
    }

    /// Stops every running job whose script is `rel` or lies beneath it (the file is about to
    /// be deleted or moved). Returns the ids stopped. Blocking.
    pub fn stop_path(&self, root: &Path, rel: &str, grace: Duration) -> Vec<String> {
        let rel = match super::normalise(rel) {
            Ok(rel) if !rel.is_empty() => rel,
            _ => return Vec::new(),
        };
        let running: Vec<(String, Arc<Run>)> = self
            .inner(root)
            .list
            .iter()
            .filter_map(|j| match (&j.state, &j.path) {
                (State::Running(run), Some(p)) if *p == rel || p.starts_with(&format!("{rel}/")) => {
                    Some((j.id.clone(), Arc::clone(run)))
                }
                _ => None,
            })
            .collect();
        for (id, run) in &running {
            self.stop_run(id, run, grace);
        }
        running.into_iter().map(|(id, _)| id).collect()
    }
}

impl Jobs {
    /// Stops every running job, each asked first and stopped by force after `grace`; returns
    /// their ids once each ended (or its forced stop's wait ran out): the daemon is stopping, and
    /// a job's thread must not go on after it. Blocking.
    pub fn stop_all(&self, grace: Duration) -> Vec<String> {
        let running: Vec<(String, Arc<Run>)> = lock(&self.inner)
            .list
            .iter()
            .filter_map(|j| match &j.state {
                State::Running(run) => Some((j.id.clone(), Arc::clone(run))),
                State::Ended { .. } => None,
            })
            .collect();
        // All asked at once, so the graces run side by side rather than one after another.
        for (_, run) in &running {
            run.request_stop();
        }
        for (id, run) in &running {
            self.stop_run(id, run, grace);
        }
        running.into_iter().map(|(id, _)| id).collect()
    }
}

/// How long a forced stop waits for the job's thread to notice.
const FORCED_WAIT: Duration = Duration::from_secs(5);

/// The start of the message of a job stopped by `lua_job_stop` or a file tool.
const STOPPED: &str = "the job was stopped";

fn unknown(id: &str) -> ToolError {
    ToolError::invalid_args(format!("There is no Lua job `{id}`; lua_job_list shows the jobs."))
}

/// Drops the oldest ended jobs beyond [`KEEP`].
fn trim(list: &mut Vec<Job>) {
    while list.len() > KEEP {
        let Some(i) = list.iter().position(|j| !matches!(j.state, State::Running(_))) else { return };
        list.remove(i);
    }
}

/// The jobs recorded in the journal at `path`; those without an `end` are `interrupted`.
fn load(path: &Path) -> Vec<Job> {
    let Ok(mut f) = std::fs::File::open(path) else { return Vec::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let skip = len.saturating_sub(READ_MAX);
    let mut bytes = Vec::new();
    if f.seek(SeekFrom::Start(skip)).is_err() || f.take(READ_MAX).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    if skip > 0 {
        // The first line read from the middle of the file is a piece of one.
        lines.next();
    }
    let mut list: Vec<Job> = Vec::new();
    for line in lines {
        let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
        let id = v["id"].as_str().unwrap_or_default();
        if id.is_empty() || id.len() > 64 {
            continue;
        }
        let found = list.iter().position(|j| j.id == id);
        match (v["ev"].as_str(), found) {
            (Some("start"), None) => list.push(Job {
                id: id.to_owned(),
                path: v["path"].as_str().map(str::to_owned),
                started_ms: v["at"].as_i64().unwrap_or(0),
                state: State::Ended { status: "interrupted".into(), result: None, error: None, logs: Vec::new() },
            }),
            (Some("log"), Some(i)) => {
                if let State::Ended { logs, .. } = &mut list[i].state {
                    logs.push((v["seq"].as_u64().unwrap_or(0), v["line"].as_str().unwrap_or_default().to_owned()));
                }
            }
            (Some("end"), Some(i)) => {
                if let State::Ended { status, result, error, .. } = &mut list[i].state {
                    *status = v["status"].as_str().unwrap_or("failed").to_owned();
                    *result = Some(v["result"].clone()).filter(|r| !r.is_null());
                    *error = v["error"].as_str().map(str::to_owned);
                }
            }
            _ => {}
        }
    }
    for j in &mut list {
        if let State::Ended { status, error, .. } = &mut j.state
            && status == "interrupted"
        {
            *error = Some("Chela stopped while this job was running.".into());
        }
    }
    let drop_n = list.len().saturating_sub(KEEP);
    list.drain(..drop_n);
    if len > COMPACT_AT {
        compact(path, &list);
    }
    list
}

/// Rewrites the journal with only `list`, atomically.
fn compact(path: &Path, list: &[Job]) {
    let mut text = String::new();
    for j in list {
        let State::Ended { status, result, error, logs } = &j.state else { continue };
        let mut push = |v: Value| {
            text.push_str(&v.to_string());
            text.push('\n');
        };
        push(json!({"ev": "start", "id": j.id, "script": j.script(), "path": j.path, "at": j.started_ms}));
        for (seq, line) in logs {
            push(json!({"ev": "log", "id": j.id, "seq": seq, "line": line}));
        }
        push(json!({"ev": "end", "id": j.id, "status": status, "result": result, "error": error}));
    }
    if let Err(e) = crate::workspace::write_atomic(path, text.as_bytes()) {
        chela_log::warn!("cannot compact the Lua jobs journal {}: {e}", path.display());
    }
}
