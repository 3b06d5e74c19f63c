//! The event router's host side: the rule store (`rules.json` in the workspace) and the queue
//! of work for the daemon's router task.
//!
//! The matching rules live in `chela_core::router` (which rules an event fires, the tolerant
//! loader, the emit depth bound); this module keeps the rules, reads and writes the file, and
//! hands what fired to the router task (`jobs::router`), which runs the actions.
//!
//! The file: read with the core's tolerant loader, so a hand edit that breaks one rule costs that
//! rule (reported with its line, in the log and by `chela doctor`). It is read again when it
//! changes (the task looks every second). Chela writes it only when a tool changes the rules;
//! if the file then has bad rules, the old one is kept byte for byte as `rules.json.bak` first.
//! Writes are atomic; a symlink at `rules.json` is refused, not followed, and so is a file over
//! the core's size bound (a tool then cannot write either, until the file is fixed by hand).
//!
//! Events: a chat message is planned at once, in [`Daemon::submit`](crate::daemon::Daemon),
//! because whether a rule consumes it decides whether the agent answers; the plan is queued for
//! the task. Events of other sources (the scheduler's `emit` and the `scheduler` event of a run,
//! the router's own `emit`, `cap_result` after a tool call) are queued as events and planned by
//! the task, which then hands them to the scheduler's `on_event` jobs. The queue is bounded:
//! what does not fit is dropped, counted and logged.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;

use anyhow::{Context as _, Result, bail};
use chela_core::router::{Added, Event, EventError, MAX_EMIT_DEPTH, MAX_FILE_BYTES, Plan, Problem, Router, Value};
use serde_json::Value as Json;
use tokio::sync::mpsc;

use crate::scheduler::{Scheduler, Stamp, read_no_follow, stamp};
use crate::tools::{ResultHook, ToolCtx, ToolResult};
use crate::workspace::{Workspace, write_atomic};

// The `router` tool group: the model's hands on this service.
pub mod tools;

/// The rule file's name in the workspace.
pub const FILE: &str = crate::authority::RULES_FILE;
/// Where the version a tool replaced is kept when it had bad rules.
pub const BACKUP: &str = crate::authority::RULES_BACKUP;
/// How many plans and events wait for the router task; more are dropped and counted.
pub const QUEUE: usize = 256;

/// What the store found wrong in the file (rules left out with their line, or the whole file).
pub type Problems = crate::automation::Problems<Problem>;

/// Reads `rules.json`: the router of its good rules and the problems. A missing file is no rules.
pub fn read_file(path: &Path) -> (Router, Problems) {
    let mut problems = Problems::default();
    match read_no_follow(path, MAX_FILE_BYTES) {
        Ok(None) => (Router::new(), problems),
        Ok(Some(text)) => {
            let loaded = Router::load(&text);
            problems.bad = loaded.problems;
            (loaded.router, problems)
        }
        Err(e) => {
            problems.whole = Some(format!("{FILE}: {e:#}"));
            (Router::new(), problems)
        }
    }
}

/// The type of the event raised after each tool call.
pub const CAP_RESULT: &str = "cap_result";
/// The most output a `cap_result` event carries (its `text` and `output`), in bytes.
pub const MAX_RESULT_EXCERPT: usize = 1024;

/// Whether a rule or an active `on_event` job may want events of type `kind`.
pub fn listened(rules: &Rules, scheduler: &Scheduler, kind: &str) -> bool {
    rules.listens(kind) || scheduler.listens(kind)
}

/// Queues `event` for the router task (its rules, then the `on_event` jobs) if anyone listens
/// to its type; `true` when it was queued. An event deeper than the core's `MAX_EMIT_DEPTH`
/// is not raised (rules and jobs raising each other's events would loop): that is logged.
pub fn raise(rules: &Rules, scheduler: &Scheduler, event: Event) -> bool {
    if event.depth() > MAX_EMIT_DEPTH {
        chela_log::warn!(
            event = event.kind(),
            source = event.source(),
            "event not raised: it is more than {MAX_EMIT_DEPTH} automation steps deep (rules or jobs answering each other?)"
        );
        return false;
    }
    listened(rules, scheduler, event.kind()) && rules.raise(event)
}

/// The toolbox's hook that raises a `cap_result` event after every tool call: source and
/// field `cap` the tool's name, `ok`, the output (or the error) cut to
/// [`MAX_RESULT_EXCERPT`] bytes as its text and field `output`, the call's conversation as its
/// chat, the call's depth. Nothing is built when no rule or job listens to `cap_result`.
pub fn cap_results(rules: Arc<Rules>, scheduler: Arc<Scheduler>) -> ResultHook {
    Box::new(move |ctx: &ToolCtx, name: &str, result: &ToolResult| {
        if !listened(&rules, &scheduler, CAP_RESULT) {
            return;
        }
        match cap_result_event(ctx, name, result) {
            Ok(event) => {
                raise(&rules, &scheduler, event);
            }
            Err(e) => chela_log::warn!(cap = name, "no cap_result event for the call: {e}"),
        }
    })
}

fn cap_result_event(ctx: &ToolCtx, name: &str, result: &ToolResult) -> Result<Event, EventError> {
    let (ok, out) = match result {
        Ok(out) => (true, out.as_str()),
        Err(e) => (false, e.0.as_str()),
    };
    let excerpt = chela_core::text::prefix(out, MAX_RESULT_EXCERPT);
    let (channel, chat_id) = ctx.conversation.as_ref().map_or(("", ""), |(c, id)| (c.as_str(), id.as_str()));
    Ok(Event::new(CAP_RESULT)?
        .with_source(name)?
        .with_chat(channel, chat_id)?
        .with_text(excerpt)?
        .with("cap", Value::Str(name.to_owned()))?
        .with("ok", Value::Bool(ok))?
        .with("output", Value::Str(excerpt.to_owned()))?
        .with_depth(ctx.depth))
}

/// One piece of work for the router task.
#[derive(Debug)]
pub enum Work {
    /// What a chat message fired, planned when it arrived.
    Plan(Plan),
    /// An event to plan and run (from the scheduler or an `emit`), then to hand to the
    /// scheduler's `on_event` jobs unless a rule consumed it.
    Event(Event),
    /// A chat message the rules already planned and did not consume: for the `on_event` jobs.
    Jobs(Event),
}

struct Inner {
    router: Router,
    problems: Problems,
    stamp: Option<Stamp>,
}

/// The rules and their file, shared by the channels (through the daemon), the router task, the
/// scheduler and the `router` tools.
pub struct Rules {
    path: PathBuf,
    inner: Mutex<Inner>,
    /// The origin of the monotonic milliseconds the core's cooldowns count in.
    start: Instant,
    tx: mpsc::Sender<Work>,
    rx: Mutex<Option<mpsc::Receiver<Work>>>,
    dropped: AtomicU64,
}

impl Rules {
    /// Opens the store of `ws` and reads the file; bad rules are logged.
    pub fn open(ws: &Workspace) -> Rules {
        Rules::with_queue(ws, QUEUE)
    }

    /// [`Rules::open`] with a queue of `queue` entries.
    pub fn with_queue(ws: &Workspace, queue: usize) -> Rules {
        let path = ws.root().join(FILE);
        let (router, problems) = read_file(&path);
        for p in problems.lines() {
            chela_log::warn!("{p}");
        }
        let (tx, rx) = mpsc::channel(queue.max(1));
        Rules {
            inner: Mutex::new(Inner { router, problems, stamp: stamp(&path) }),
            path,
            start: Instant::now(),
            tx,
            rx: Mutex::new(Some(rx)),
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Milliseconds since the store was opened, on the monotonic clock.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Reads the file again if another process changed it (a hand edit): `true` when it did.
    /// New problems are logged. The file is read outside the lock, so a message being planned
    /// meanwhile waits for no disk.
    pub fn refresh(&self) -> bool {
        let current = stamp(&self.path);
        if current == self.lock().stamp {
            return false;
        }
        let (router, problems) = read_file(&self.path);
        for p in problems.lines() {
            chela_log::warn!("{p}");
        }
        let mut g = self.lock();
        g.router = router;
        g.problems = problems;
        g.stamp = current;
        true
    }

    /// What is wrong with the file now.
    pub fn problems(&self) -> Problems {
        self.lock().problems.clone()
    }

    /// The number of rules loaded.
    pub fn len(&self) -> usize {
        self.lock().router.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rules as the tools list them: each rule's JSON, whether it is enabled, and how long
    /// ago it last fired.
    pub fn list(&self) -> Vec<Json> {
        let now = self.now_ms();
        let g = self.lock();
        g.router
            .rules()
            .map(|r| {
                serde_json::json!({
                    "id": r.id,
                    "enabled": r.enabled,
                    "made_by": r.made_by.map_or_else(
                        || "owner".to_owned(),
                        |m| format!("assistant in {}{}", m.chat(), if m.approved { ", approved by the owner" } else { "" })
                    ),
                    "pending": r.pending,
                    "last_fired_ms_ago": r.last_fired.map(|t| now.saturating_sub(t)),
                    "rule": r.spec,
                })
            })
            .collect()
    }

    /// Adds `spec`, or replaces the rule with its id; the core checks it and its error says
    /// what is wrong. The file is written whole.
    pub fn add(&self, spec: Json) -> Result<Added> {
        let mut g = self.lock();
        let mut router = Router::load(&g.router.to_json()).router;
        let added = router.add_rule(spec).map_err(|e| anyhow::anyhow!("{e}"))?;
        self.write(&mut g, router)?;
        Ok(added)
    }

    /// Whether the rule `id` waits for the owner's approval.
    pub fn pending(&self, id: &str) -> bool {
        self.lock().router.rules().any(|r| r.id == id && r.pending)
    }

    /// The owner approves the model-made rule `id` (`chela rules approve`, the console).
    pub fn approve(&self, id: &str) -> Result<()> {
        let mut g = self.lock();
        let mut router = Router::load(&g.router.to_json()).router;
        router.approve_rule(id).map_err(|e| anyhow::anyhow!("{e} (`chela rules list` shows the rules)"))?;
        self.write(&mut g, router)
    }

    /// Removes the rule `id`.
    pub fn remove(&self, id: &str) -> Result<()> {
        let mut g = self.lock();
        let mut router = Router::load(&g.router.to_json()).router;
        if !router.remove_rule(id) {
            bail!("there is no rule {id:?} (router_list_rules shows the ids)");
        }
        self.write(&mut g, router)
    }

    /// Writes `router` as the whole file and makes it the rules. A file with bad rules is kept
    /// as [`BACKUP`] first; one that could not be read at all (a symlink, too large) is not
    /// replaced.
    fn write(&self, g: &mut Inner, router: Router) -> Result<()> {
        if let Some(why) = &g.problems.whole {
            bail!("{why}; fix or move {} by hand first", self.path.display());
        }
        if !g.problems.bad.is_empty()
            && let Some(old) = read_no_follow(&self.path, MAX_FILE_BYTES)
                .with_context(|| format!("cannot keep the old {FILE} as {BACKUP}"))?
        {
            write_atomic(&self.path.with_file_name(BACKUP), old.as_bytes())
                .with_context(|| format!("cannot keep the old {FILE} as {BACKUP}"))?;
        }
        write_atomic(&self.path, router.to_json().as_bytes())
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        // The router was rebuilt from the rules' JSON: after a tool's change every cooldown
        // starts afresh.
        g.router = router;
        g.problems = Problems::default();
        g.stamp = stamp(&self.path);
        Ok(())
    }

    /// Plans `event` now: the fired rules' actions, and whether a rule consumed it.
    pub fn plan(&self, event: &Event) -> Plan {
        let now = self.now_ms();
        let plan = self.lock().router.handle_event(event, now);
        for id in &plan.waiting {
            chela_log::warn!(
                event = event.kind(),
                "{}",
                crate::automation::waiting_line("rule", id, "chela rules approve")
            );
        }
        if plan.emits_refused > 0 {
            chela_log::warn!(
                event = event.kind(),
                refused = plan.emits_refused,
                "emit actions left out: the event is already {} emits deep",
                chela_core::router::MAX_EMIT_DEPTH
            );
        }
        plan
    }

    /// Plans a chat message and queues what fired for the task; answers whether a rule consumed
    /// it (the agent then does not answer it). `for_jobs`: `on_event` jobs wait for messages,
    /// so the event is queued for them too unless consumed.
    pub fn raise_message(&self, event: &Event, for_jobs: bool) -> bool {
        let plan = self.plan(event);
        let consumed = plan.consumed;
        if !plan.fired.is_empty() {
            self.push(Work::Plan(plan));
        }
        if for_jobs && !consumed {
            self.push(Work::Jobs(event.clone()));
        }
        consumed
    }

    /// Whether a rule may fire on events of type `kind`.
    pub fn listens(&self, kind: &str) -> bool {
        self.lock().router.listens(kind)
    }

    /// Queues `event` for the task to plan and run; `false` when the queue was full and it
    /// was dropped (counted and logged). Sources call [`Daemon::raise`](crate::daemon::Daemon::raise),
    /// which skips events nobody listens to and ones past the depth bound.
    pub fn raise(&self, event: Event) -> bool {
        self.push(Work::Event(event))
    }

    fn push(&self, work: Work) -> bool {
        let Err(e) = self.tx.try_send(work) else { return true };
        let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        let what = match e.into_inner() {
            Work::Plan(p) => {
                format!("the actions of rule(s) {:?}", p.fired.iter().map(|f| &f.rule).collect::<Vec<_>>())
            }
            Work::Event(ev) | Work::Jobs(ev) => format!("a {} event", ev.kind()),
        };
        chela_log::warn!(dropped_total = n, "the router's queue is full ({QUEUE}); {what} dropped");
        false
    }

    /// How many plans and events were dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The queue's receiving end, for the one task that runs it; `None` once taken.
    pub fn take_queue(&self) -> Option<mpsc::Receiver<Work>> {
        self.rx.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

#[cfg(test)]
mod tests;
#[cfg(all(test, feature = "board"))]
mod tests_board;
