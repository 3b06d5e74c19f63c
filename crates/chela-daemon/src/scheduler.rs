//! The scheduler's host side: the job store (`cron.json` in the workspace), the user's zone,
//! and the shared state the daemon's scheduler task, the `scheduler` tools, `chela cron` and
//! the dashboard read and change.
//!
//! The timing rules live in `chela_core::schedule` (which jobs fire when, the missed-run rule,
//! the tolerant reader); this module keeps the jobs, reads and writes the file, and remembers
//! what became of each run. The task that sleeps and fires is `jobs::scheduler`.
//!
//! The file: read with the core's tolerant loader, so a hand edit that breaks one entry costs
//! that entry (reported with its line, in the log and by `chela doctor`). While the file has bad
//! entries Chela does not rewrite it on its own (a run's `last_run` is then kept in memory);
//! a tool or `chela cron` that changes the jobs writes a whole valid file and keeps the old
//! one as `cron.json.bak`. Writes are atomic; a symlink at `cron.json` is refused, not followed.
//!
//! Events: an `on_event` job fires when the router task hands it an event of its type whose
//! fields equal its `match` ([`Scheduler::take_event`]); an `emit` job raises an event into the
//! router's queue. Each run's outcome is kept in `state/jobs.json` ([`outcomes`]).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use anyhow::{Context as _, Result, bail};
use chela_core::config as keys;
use chela_core::router::{Event, MAX_EMIT_DEPTH, Value};
use chela_core::schedule::file::{self, BadEntry, LoadedJob, MAX_FILE_LEN};
use chela_core::schedule::{Action, Job, Trigger};
use chela_core::zone::Zone;
use chela_infra::sort::sort_by_key;

use crate::config::Config;
use crate::workspace::{Workspace, write_atomic};

pub mod outcomes;
// The `scheduler` tool group: the model's hands on this service.
pub mod tools;

pub use outcomes::Outcome;

/// The job file's name in the workspace.
pub const FILE: &str = crate::authority::CRON_FILE;
/// Where the version a tool replaced is kept.
pub const BACKUP: &str = crate::authority::CRON_BACKUP;
/// The folder where `chela cron trigger` and `chela heartbeat trigger` leave requests for the
/// running daemon.
pub const REQUESTS_DIR: &str = "scheduler";
/// The most requests taken from that folder at once; more wait for the next look.
pub const MAX_REQUESTS: usize = 64;

/// The user's zone: `scheduler.timezone`, else `timezone`, else the system's (`TZ`, then
/// `/etc/localtime`), else UTC. A zone that cannot be read is said in the error.
pub fn user_zone(cfg: &Config) -> Result<Zone> {
    let name = [cfg.get(keys::SCHEDULER_TIMEZONE), cfg.get(keys::TIMEZONE)].into_iter().find(|n| !n.is_empty());
    if let Some(name) = name {
        return crate::tzdb::named_zone(name);
    }
    crate::tzdb::system_zone()
}

/// The scheduler's settings, from the configuration.
#[derive(Clone, Debug)]
pub struct Settings {
    pub zone: Zone,
    /// Grace for jobs that name none.
    pub grace_s: u64,
    pub max_jobs: usize,
}

impl Settings {
    /// [`Settings::from_config`], or the same in UTC when the zone cannot be read (a container
    /// without the tz database): the daemon still starts, and says why its times are UTC.
    pub fn or_utc(cfg: &Config) -> Settings {
        Settings::from_config(cfg).unwrap_or_else(|e| {
            chela_log::warn!("the scheduler uses UTC: {e:#}");
            Settings {
                zone: Zone::utc(),
                grace_s: cfg.int(keys::SCHEDULER_MISSED_GRACE_SECS).unsigned_abs(),
                max_jobs: cfg.usize(keys::SCHEDULER_MAX_JOBS),
            }
        })
    }

    pub fn from_config(cfg: &Config) -> Result<Settings> {
        Ok(Settings {
            zone: user_zone(cfg)?,
            grace_s: cfg.int(keys::SCHEDULER_MISSED_GRACE_SECS).unsigned_abs(),
            max_jobs: cfg.usize(keys::SCHEDULER_MAX_JOBS),
        })
    }
}

/// What the store found in the file (entries left out with their line, or the whole file).
pub type Problems = crate::automation::Problems<BadEntry>;

/// Identifies a version of the file, to notice edits from other processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

pub(crate) fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::symlink_metadata(path).ok()?;
    Some(Stamp {
        ino: m.ino(),
        len: m.len(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    })
}

/// Reads `cron.json`: the good jobs and the problems. A missing file is no jobs.
pub fn read_file(path: &Path, max_jobs: usize) -> (Vec<LoadedJob>, Problems) {
    let mut problems = Problems::default();
    let text = match read_no_follow(path, MAX_FILE_LEN) {
        Ok(None) => return (Vec::new(), problems),
        Ok(Some(text)) => text,
        Err(e) => {
            problems.whole = Some(format!("{FILE}: {e}"));
            return (Vec::new(), problems);
        }
    };
    match file::load(&text) {
        Ok(mut f) => {
            if f.jobs.len() > max_jobs {
                for extra in f.jobs.drain(max_jobs..) {
                    problems.bad.push(BadEntry {
                        index: 0,
                        line: extra.line,
                        id: Some(extra.job.id.clone()),
                        message: format!("more than scheduler.max_jobs ({max_jobs}) jobs; this one is ignored"),
                    });
                }
            }
            problems.bad.extend(f.bad);
            sort_by_key(&mut problems.bad, |b| b.line);
            (f.jobs, problems)
        }
        Err(e) => {
            problems.whole = Some(format!("{e}"));
            (Vec::new(), problems)
        }
    }
}

/// The file's text, refusing a symlink (a planted link must not make Chela read, or later
/// replace, a file elsewhere), anything but a regular file, and anything over `max` bytes.
pub(crate) fn read_no_follow(path: &Path, max: usize) -> Result<Option<String>> {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever, and
    // take the daemon's start or `chela doctor` with it; it changes nothing for a regular file.
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let f = match std::fs::OpenOptions::new().read(true).custom_flags(flags.bits() as i32).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            bail!("is a symbolic link; Chela does not follow it (replace it with the file itself)")
        }
        Err(e) => return Err(e.into()),
    };
    let meta = f.metadata()?;
    if !meta.is_file() {
        bail!("is not a regular file");
    }
    if meta.len() > max as u64 {
        bail!("is {} bytes; the limit is {max}", meta.len());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(max as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max {
        bail!("grew past {max} bytes while being read");
    }
    String::from_utf8(bytes).map(Some).map_err(|_| anyhow::anyhow!("is not UTF-8 text"))
}

/// A job as the tools, the CLI and the dashboard show it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct JobView {
    #[serde(flatten)]
    pub job: Job,
    /// The next fire time (Unix seconds), if it fires on its own.
    pub next_fire: Option<i64>,
    /// Made by the model and acting on another chat: it does nothing until the owner approves
    /// it (`chela cron approve`).
    pub pending: bool,
    /// The same in the user's zone, `2026-12-02 08:00:00 +01:00`.
    pub next_fire_local: Option<String>,
    /// What became of its last run, in one line, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The same, as data (kept in `state/jobs.json`, so it survives restarts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_outcome: Option<Outcome>,
}

struct Inner {
    settings: Settings,
    jobs: Vec<LoadedJob>,
    problems: Problems,
    stamp: Option<Stamp>,
    /// When each job was first seen by this process: nothing before it is a missed run.
    seen_at: BTreeMap<String, i64>,
    /// The last outcome of each job, as in `state/jobs.json`.
    outcomes: BTreeMap<String, Outcome>,
    /// Jobs asked to run now (`scheduler_trigger_now`).
    manual: Vec<String>,
}

/// The jobs and their file, shared by the scheduler task, the tools and the dashboard.
pub struct Scheduler {
    path: PathBuf,
    root: PathBuf,
    dir: PathBuf,
    inner: Mutex<Inner>,
    /// Wakes the task early: the jobs changed, or one was triggered.
    pub changed: tokio::sync::Notify,
}

/// A job the task should run now.
#[derive(Clone, Debug)]
pub struct Due {
    pub job: Job,
    /// The scheduled instant (or now, for a manual run).
    pub at: i64,
    pub manual: bool,
    /// How many automation steps led to this run: 0 for a clock or a person, one more than
    /// the event's depth for an `on_event` job. What the run raises carries it.
    pub depth: u8,
    /// The chat of the event that fired an `on_event` job: where an `agent` job without its
    /// own chat talks.
    pub chat: Option<(String, String)>,
}

impl Due {
    fn timed(job: Job, at: i64, manual: bool) -> Due {
        Due { job, at, manual, depth: 0, chat: None }
    }
}

impl Scheduler {
    /// Opens the store of `ws` and reads the file.
    pub fn open(ws: &Workspace, settings: Settings, now: i64) -> Scheduler {
        let path = ws.root().join(FILE);
        let (jobs, problems) = read_file(&path, settings.max_jobs);
        for p in problems.lines() {
            chela_log::warn!("{p}");
        }
        // Inserted, not collected: collecting into a map compiles a sort for this one call.
        let mut seen_at = BTreeMap::new();
        seen_at.extend(jobs.iter().map(|j| (j.job.id.clone(), now)));
        let outcomes = outcomes::read(ws.root());
        Scheduler {
            root: ws.root().to_path_buf(),
            dir: ws.root().join(REQUESTS_DIR),
            path: path.clone(),
            inner: Mutex::new(Inner {
                settings,
                jobs,
                problems,
                stamp: stamp(&path),
                seen_at,
                outcomes,
                manual: Vec::new(),
            }),
            changed: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// New settings (the zone, the grace, the bound) from a changed configuration.
    pub fn set_settings(&self, settings: Settings) {
        self.lock().settings = settings;
        self.changed.notify_one();
    }

    pub fn zone(&self) -> Zone {
        self.lock().settings.zone.clone()
    }

    /// Reads the file again if another process changed it (`chela cron`, a hand edit):
    /// `true` when it did. New problems are logged.
    pub fn refresh(&self, now: i64) -> bool {
        let mut g = self.lock();
        let current = stamp(&self.path);
        if current == g.stamp {
            return false;
        }
        let (jobs, problems) = read_file(&self.path, g.settings.max_jobs);
        for p in problems.lines() {
            chela_log::warn!("{p}");
        }
        for j in &jobs {
            g.seen_at.entry(j.job.id.clone()).or_insert(now);
        }
        g.jobs = jobs;
        g.problems = problems;
        g.stamp = current;
        drop(g);
        self.changed.notify_one();
        true
    }

    /// What is wrong with the file now.
    pub fn problems(&self) -> Problems {
        self.lock().problems.clone()
    }

    /// Every job with its next fire time after `now`.
    pub fn list(&self, now: i64) -> Vec<JobView> {
        let g = self.lock();
        g.jobs.iter().map(|j| view(&g, j, now)).collect()
    }

    /// The jobs that fire on their own, soonest first (the status report and the live view).
    pub fn upcoming(&self, now: i64) -> Vec<JobView> {
        let mut jobs: Vec<JobView> = self.list(now).into_iter().filter(|v| v.next_fire.is_some()).collect();
        sort_by_key(&mut jobs, |v| v.next_fire);
        jobs
    }

    pub fn get(&self, id: &str, now: i64) -> Option<JobView> {
        let g = self.lock();
        g.jobs.iter().find(|j| j.job.id == id).map(|j| view(&g, j, now))
    }

    /// Adds `job`, or replaces the job with its id; answers whether it replaced one. The file is
    /// written whole (see the module docs).
    pub fn upsert(&self, mut job: Job, now: i64) -> Result<bool> {
        let schedule = job.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Trigger::Once { at } = &job.trigger
            && *at <= now
            && job.last_run.is_none()
        {
            bail!("trigger.at: {at} is in the past (now is {now}); pick a later time");
        }
        // An event the job could never raise is refused now, not at its first run.
        if matches!(job.action, Action::Emit { .. }) {
            emit_event(&job, 0).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        job.created_at.get_or_insert(now);
        let mut g = self.lock();
        let replaced = match g.jobs.iter_mut().find(|j| j.job.id == job.id) {
            Some(slot) => {
                *slot = LoadedJob { job: job.clone(), schedule, line: slot.line };
                true
            }
            None => {
                if g.jobs.len() >= g.settings.max_jobs {
                    bail!("there are already {} jobs, the limit (scheduler.max_jobs); remove one first", g.jobs.len());
                }
                g.jobs.push(LoadedJob { job: job.clone(), schedule, line: 0 });
                false
            }
        };
        g.seen_at.insert(job.id.clone(), now);
        self.write(&mut g, true)?;
        drop(g);
        self.changed.notify_one();
        Ok(replaced)
    }

    /// Removes the job `id`.
    pub fn remove(&self, id: &str) -> Result<()> {
        let mut g = self.lock();
        let before = g.jobs.len();
        g.jobs.retain(|j| j.job.id != id);
        if g.jobs.len() == before {
            bail!("there is no job {id:?} (the job list shows the ids)");
        }
        self.write(&mut g, true)?;
        drop(g);
        self.changed.notify_one();
        Ok(())
    }

    /// Changes the job `id` with `f` and writes the file.
    pub fn update(&self, id: &str, now: i64, f: impl FnOnce(&mut Job)) -> Result<Job> {
        let mut g = self.lock();
        let slot = g
            .jobs
            .iter_mut()
            .find(|j| j.job.id == id)
            .ok_or_else(|| anyhow::anyhow!("there is no job {id:?} (the job list shows the ids)"))?;
        f(&mut slot.job);
        let job = slot.job.clone();
        // Resumed or enabled now: runs missed meanwhile are not made up.
        g.seen_at.insert(id.to_owned(), now);
        self.write(&mut g, true)?;
        drop(g);
        self.changed.notify_one();
        Ok(job)
    }

    /// The owner approves the model-made job `id`: it may then act beyond the chat it was made
    /// in. Only the owner's commands call this.
    pub fn approve(&self, id: &str, now: i64) -> Result<Job> {
        if self.get(id, now).is_some_and(|v| v.job.made_by.is_none()) {
            bail!("job {id:?} is the owner's (not made by the assistant): it needs no approval");
        }
        self.update(id, now, |j| {
            if let Some(m) = &mut j.made_by {
                m.approved = true;
            }
        })
    }

    /// Asks the task to run the job `id` now.
    pub fn trigger(&self, id: &str) -> Result<()> {
        let mut g = self.lock();
        if !g.jobs.iter().any(|j| j.job.id == id) {
            bail!("there is no job {id:?} (the job list shows the ids)");
        }
        if g.manual.len() >= MAX_REQUESTS {
            bail!("{MAX_REQUESTS} jobs are already waiting to run by hand; try again in a moment");
        }
        g.manual.push(id.to_owned());
        drop(g);
        self.changed.notify_one();
        Ok(())
    }

    /// The runs missed while Chela was down that should happen now: at most one per job.
    pub fn catch_up(&self, now: i64) -> Vec<Due> {
        let g = self.lock();
        let grace = g.settings.grace_s;
        g.jobs
            .iter()
            .filter_map(|j| {
                let mut job = j.job.clone();
                job.grace_s.get_or_insert(grace);
                let at = job.catch_up(&j.schedule, now, &g.settings.zone)?;
                Some(Due::timed(j.job.clone(), at, false))
            })
            .collect()
    }

    /// The jobs due at `now` (scheduled at or before it and not yet run), and the asked-for
    /// manual runs. Each due job is noted as run at `now` (so a late wake-up after a suspend
    /// runs it once, not once per missed slot); the file is written when it may be.
    pub fn take_due(&self, now: i64) -> Vec<Due> {
        let mut g = self.lock();
        let zone = g.settings.zone.clone();
        let mut due = Vec::new();
        for id in std::mem::take(&mut g.manual) {
            if let Some(j) = g.jobs.iter().find(|j| j.job.id == id) {
                due.push(Due::timed(j.job.clone(), now, true));
            }
        }
        let mut ran = false;
        let seen_at = g.seen_at.clone();
        for j in &mut g.jobs {
            let from = fire_base(&j.job, &seen_at);
            let Some(at) = j.job.next_fire(&j.schedule, from, &zone) else { continue };
            if at <= now {
                j.job.record_run(now);
                due.push(Due::timed(j.job.clone(), at, false));
                ran = true;
            }
        }
        if ran {
            g.jobs.retain(|j| !j.job.finished(&j.schedule));
            if let Err(e) = self.write(&mut g, false) {
                chela_log::warn!("cannot save the jobs' last runs: {e:#}");
            }
        }
        due
    }

    /// Notes the last run of jobs that ran by catch-up.
    pub fn record(&self, id: &str, at: i64) {
        let mut g = self.lock();
        if let Some(j) = g.jobs.iter_mut().find(|j| j.job.id == id) {
            j.job.record_run(at);
        }
        g.jobs.retain(|j| !j.job.finished(&j.schedule));
        if let Err(e) = self.write(&mut g, false) {
            chela_log::warn!("cannot save the jobs' last runs: {e:#}");
        }
    }

    /// The earliest next fire after `now` of any job.
    pub fn next_wake(&self, now: i64) -> Option<i64> {
        let g = self.lock();
        g.jobs
            .iter()
            .filter_map(|j| j.job.next_fire(&j.schedule, fire_base(&j.job, &g.seen_at), &g.settings.zone))
            .min()
            .map(|t| t.max(now))
    }

    /// Whether an active `on_event` job waits for events of type `kind` (the router task and
    /// the sources ask first, so an event nobody listens to is never built).
    pub fn listens(&self, kind: &str) -> bool {
        self.lock()
            .jobs
            .iter()
            .any(|j| j.job.active() && matches!(&j.job.trigger, Trigger::OnEvent { event, .. } if event == kind))
    }

    /// The `on_event` jobs `event` fires at `now`, each noted as run. An event already
    /// [`MAX_EMIT_DEPTH`] steps deep fires none: a job reacting to what it raised itself (or two
    /// jobs to each other's) would loop; that is logged.
    pub fn take_event(&self, event: &Event, now: i64) -> Vec<Due> {
        let mut g = self.lock();
        let fired: Vec<usize> = (0..g.jobs.len()).filter(|&i| g.jobs[i].job.fires_on(event)).collect();
        if fired.is_empty() {
            return Vec::new();
        }
        if event.depth() >= MAX_EMIT_DEPTH {
            let ids: Vec<&str> = fired.iter().map(|&i| g.jobs[i].job.id.as_str()).collect();
            chela_log::warn!(
                event = event.kind(),
                jobs = ?ids,
                "on_event jobs not run: the event is already {MAX_EMIT_DEPTH} automation steps deep (a loop?)"
            );
            return Vec::new();
        }
        let chat = (!event.channel().is_empty() && !event.chat_id().is_empty())
            .then(|| (event.channel().to_owned(), event.chat_id().to_owned()));
        let due = fired
            .into_iter()
            .map(|i| {
                let j = &mut g.jobs[i].job;
                j.record_run(now);
                Due { job: j.clone(), at: now, manual: false, depth: event.depth() + 1, chat: chat.clone() }
            })
            .collect();
        if let Err(e) = self.write(&mut g, false) {
            chela_log::warn!("cannot save the jobs' last runs: {e:#}");
        }
        due
    }

    /// Notes what became of a job's run, in memory and in `state/jobs.json`.
    pub fn set_outcome(&self, id: &str, outcome: Outcome) {
        let mut g = self.lock();
        if !g.jobs.iter().any(|j| j.job.id == id) {
            // Removed while it ran (or a finished `once` job): nothing to show it on.
            g.outcomes.remove(id);
        } else {
            g.outcomes.insert(id.to_owned(), outcome);
        }
        // Only jobs that exist are kept, so the file stays within `scheduler.max_jobs` entries.
        let Inner { jobs, outcomes, .. } = &mut *g;
        outcomes.retain(|k, _| jobs.iter().any(|j| j.job.id == *k));
        if let Err(e) = outcomes::write(&self.root, &g.outcomes) {
            chela_log::warn!("cannot save the jobs' last outcomes in {}: {e}", outcomes::FILE);
        }
    }

    /// Writes the jobs. `whole`: a tool or the CLI changed them, so a file with bad entries is
    /// replaced (the old one kept as [`BACKUP`]); otherwise such a file is left alone.
    fn write(&self, g: &mut Inner, whole: bool) -> Result<()> {
        if stamp(&self.path) != g.stamp && !whole {
            // Changed by someone else since it was read: their version wins; it is read next.
            return Ok(());
        }
        if !g.problems.is_empty() {
            if !whole {
                return Ok(());
            }
            // Keep what the person wrote, byte for byte (a symlink is not followed).
            if let Ok(Some(old)) = read_no_follow(&self.path, MAX_FILE_LEN) {
                write_atomic(&self.path.with_file_name(BACKUP), old.as_bytes())
                    .with_context(|| format!("cannot keep the old {FILE} as {BACKUP}"))?;
            }
        }
        let jobs: Vec<Job> = g.jobs.iter().map(|j| j.job.clone()).collect();
        write_atomic(&self.path, file::to_json(&jobs).as_bytes())
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        g.problems = Problems::default();
        g.stamp = stamp(&self.path);
        Ok(())
    }

    /// Takes the requests `chela cron trigger` and `chela heartbeat trigger` left: job ids,
    /// and whether a heartbeat was asked for.
    pub fn take_requests(&self) -> (Vec<String>, bool) {
        let mut ids = Vec::new();
        let mut heartbeat = false;
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return (ids, heartbeat) };
        for e in entries.flatten().take(MAX_REQUESTS) {
            let name = e.file_name().to_string_lossy().into_owned();
            // Removed first: a request is taken once even if acting on it fails.
            if std::fs::remove_file(e.path()).is_err() {
                continue;
            }
            if name == "heartbeat" {
                heartbeat = true;
            } else if let Some(id) = name.strip_prefix("run.") {
                ids.push(id.to_owned());
            }
        }
        for id in &ids {
            if let Err(e) = self.trigger(id) {
                chela_log::warn!("chela cron trigger: {e:#}");
            }
        }
        (ids, heartbeat)
    }
}

/// Leaves a request for the running daemon in the workspace (`chela cron trigger`).
pub fn request(ws: &Workspace, name: &str) -> Result<()> {
    let dir = ws.root().join(REQUESTS_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(name);
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(_) => Ok(()),
        // Already asked for and not yet taken: once is enough.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot write {}", path.display())),
    }
}

/// The instant after which a job's next fire is searched: its last run, or when this process
/// first saw it.
fn fire_base(job: &Job, seen_at: &BTreeMap<String, i64>) -> i64 {
    let seen = seen_at.get(&job.id).copied().unwrap_or(i64::MIN);
    job.last_run.map_or(seen, |r| r.max(seen))
}

fn view(g: &Inner, j: &LoadedJob, now: i64) -> JobView {
    let next = j.job.next_fire(&j.schedule, fire_base(&j.job, &g.seen_at).max(now), &g.settings.zone);
    JobView {
        job: j.job.clone(),
        next_fire: next,
        pending: j.job.pending(),
        next_fire_local: next.map(|t| local_time(t, &g.settings.zone)),
        status: g.outcomes.get(&j.job.id).map(|o| o.line(&local_time(o.at, &g.settings.zone))),
        last_outcome: g.outcomes.get(&j.job.id).cloned(),
    }
}

/// The event an `emit` job raises, `depth` automation steps deep: its type the action's `event`,
/// source `scheduler`, the extra field `job` naming the job. `data`, when given, is an object
/// whose `text`, `channel` and `chat_id` set those fields and whose other entries (strings,
/// numbers, booleans) become extra fields.
pub fn emit_event(job: &Job, depth: u8) -> Result<Event, String> {
    let Action::Emit { event, data } = &job.action else {
        return Err(format!("job {} raises no event (its action is not emit)", job.id));
    };
    let bad = |e: chela_core::router::EventError| format!("action.data: {e}");
    let mut ev = Event::new(event).and_then(|e| e.with_source("scheduler")).map_err(bad)?.with_depth(depth);
    let fields = match data {
        serde_json::Value::Null => serde_json::Map::new(),
        serde_json::Value::Object(o) => o.clone(),
        other => return Err(format!("action.data: expected an object of event fields, found {other}")),
    };
    let text = |k: &str| fields.get(k).and_then(serde_json::Value::as_str).unwrap_or_default();
    // A model-made job's event carries the chat it was made in unless it names one (which then
    // waits for the owner's approval: `Job::pending`), so what it raises is never anonymous.
    let (channel, chat_id) = match &job.made_by {
        Some(m) if !fields.contains_key("channel") && !fields.contains_key("chat_id") => {
            (m.channel.as_str(), m.chat_id.as_str())
        }
        _ => (text("channel"), text("chat_id")),
    };
    ev = ev.with_chat(channel, chat_id).and_then(|e| e.with_text(text("text"))).map_err(bad)?;
    for (k, v) in &fields {
        let value = match v {
            serde_json::Value::String(_) if ["text", "channel", "chat_id"].contains(&k.as_str()) => continue,
            serde_json::Value::String(s) => Value::Str(s.clone()),
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            other => return Err(format!("action.data.{k}: expected a string, number or boolean, found {other}")),
        };
        ev.set(k, value).map_err(bad)?;
    }
    ev.set("job", Value::Str(job.id.clone())).map_err(bad)?;
    Ok(ev)
}

/// `t` as wall-clock time in `zone`: `2026-12-02 08:00:00 +01:00`.
pub fn local_time(t: i64, zone: &Zone) -> String {
    let off = zone.offset_at(t);
    let d = chela_core::zone::DateTime::from_seconds(t + i64::from(off));
    let (sign, a) = if off < 0 { ('-', -off) } else { ('+', off) };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} {sign}{:02}:{:02}",
        d.year,
        d.month,
        d.day,
        d.hour,
        d.minute,
        d.second,
        a / 3600,
        a % 3600 / 60
    )
}

#[cfg(test)]
mod tests;
