//! Scheduled jobs on the chip: `cron_add`, `cron_list` and `cron_remove` for the model (the
//! core's contract, `chela_core::contract::cron`, as on the host), the jobs kept in flash, and
//! the jobs that are due handed to the main loop, which runs each as a turn.
//!
//! The maths are the host's: every job is a `chela_core::schedule::Job` (interval, one-shot or
//! cron expression), validated by `Job::validate`, and a job is due when `Job::catch_up` says a
//! firing instant passed since its last run (or its creation) within its grace window, so a
//! device that was off runs a missed job once at most, and not at all past the window. The
//! chip keeps UTC: cron expressions are read in UTC.
//!
//! The jobs are one replace record (`chela_core::schedule::file`'s `cron.json` text) under
//! [`CRON_KEY`]: a power cut leaves the old list or the new one. A job that no longer reads is
//! skipped at boot and reported, never fatal.
//!
//! Who made a job is recorded beside it (`made_by`), by the device from the turn's origin, never
//! from the model's arguments (`cron_add` refuses a `made_by`): on the chip its `chat_id` is the
//! id the channel's allowlist names for that person, the sender's open_id (`ou_…`) on Feishu,
//! where `feishu_allow` names people and a group chat holds others too; the chat on Telegram,
//! where `tg_allow` names chats (a group in it lets all its members talk, so the group is who
//! made it); the gateway chat (its token is the only key). It is kept only when it is not the
//! job's chat itself (a Feishu chat, `oc_…`, is never a person): a job's list is one flash
//! record, and a sector holds 4 KiB. A job runs only while its maker is still allowed on its
//! own channel ([`maker_allowed`]), so a person taken off the allowlist loses the jobs they set
//! up in a group chat the device still talks in.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::ops::ControlFlow;

use chela_core::console::{ChipConfig, Field};
use chela_core::contract::{Args, cron};
use chela_core::flash::{Flash, Order};
use chela_core::router::MadeBy;
use chela_core::schedule::file::{self, LoadedJob};
use chela_core::schedule::{Action, Job, Trigger};
use chela_core::zone::Zone;
use chela_proto::chat::ToolSpec;

use crate::Board;
use crate::console::Channels;
use crate::tools::Toolbox;
use crate::turn::Chip;

/// The store key of the job list (under `chip/`: not a chat session).
pub const CRON_KEY: &str = "chip/cron";
/// Jobs the device keeps, at most.
pub const MAX_JOBS: usize = 16;
/// The shortest interval: one model call a minute is already a lot for a battery and a bill.
pub const MIN_INTERVAL_S: u64 = 60;
/// The longest message a job may carry.
pub const MAX_MESSAGE: usize = 1024;

/// The cron tools' specs: the core's contract, as the host offers them.
pub const SPECS: [ToolSpec<'static>; 3] = [cron::ADD, cron::LIST, cron::REMOVE];

/// A job that is due: run `message` as a turn in `chat_id` of `channel`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fired {
    pub id: String,
    pub message: String,
    pub channel: String,
    pub chat_id: String,
    /// Who made it (see the module docs); `None` when it is the chat itself, or for a job
    /// stored before makers were recorded.
    pub made_by: Option<MadeBy>,
}

impl Fired {
    /// Who the job's turn runs for (a job it adds is theirs): its maker, or without one, its
    /// chat (the id `tg_allow` or the gateway names, or a Feishu user; a job in a Feishu chat
    /// without a maker never runs: [`maker_allowed`]).
    pub fn maker(&self) -> &str {
        self.made_by.as_ref().map_or(&self.chat_id, |m| &m.chat_id)
    }
}

/// Where a turn the device starts itself (a due job, the heartbeat) runs, and where its answer
/// goes: always a chat of the chat channel in use (or the gateway), never another chat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// A Telegram chat in `tg_allow`: the turn in its session, the answer sent there.
    Telegram(i64),
    /// A Feishu chat (`oc_…`), or a user in `feishu_allow` (`ou_…`: the bot's chat with them).
    Feishu(String),
    /// A gateway chat: the turn in its session (`ws_…`), the answer pushed to the clients
    /// connected in that chat (`gateway::Chats`), or kept in the session when none is.
    Gateway(String),
}

impl Route {
    /// The session the turn runs in ([`crate::boot::session_key`]): the chat's own.
    pub fn session(&self) -> String {
        match self {
            Route::Telegram(id) => crate::boot::session_key("telegram", &format!("{id}")),
            Route::Feishu(chat) => crate::boot::session_key("feishu", chat),
            Route::Gateway(chat) => crate::boot::session_key("ws", chat),
        }
    }
}

/// Where a turn for `chat_id` of `channel` may run now, given the settings and the channels
/// they open (`console::channels`; `feishu_built`: the image has Feishu), or why it may not.
/// A chat is reached only on its own channel, only while that channel is the one in use, and
/// only while its allowlist still names it: a job is never moved to another chat.
pub fn route(
    channel: &str,
    chat_id: &str,
    config: &ChipConfig,
    on: Channels,
    feishu_built: bool,
) -> Result<Route, String> {
    let not_now = |name: &str| Err(format!("its chat is on {name}, which is not the chat channel in use"));
    let gone = |allow: Field| Err(format!("`{chat_id}` is not a chat in {} now", allow.name()));
    match channel {
        "telegram" if !on.telegram => not_now("Telegram"),
        "telegram" => match chat_id.parse::<i64>() {
            Ok(id) if crate::console::access(config).is_ok_and(|a| a.admits(id)) => Ok(Route::Telegram(id)),
            _ => gone(Field::TgAllow),
        },
        "feishu" if !feishu_built => Err("its chat is on Feishu, which this image leaves out".into()),
        "feishu" if !on.feishu => not_now("Feishu"),
        // A user is reached only while allowed; a chat (`oc_…`) is one an allowed user wrote in.
        "feishu" if chat_id.starts_with("ou_") && !crate::feishu::Access::from_config(config).admits(chat_id) => {
            gone(Field::FeishuAllow)
        }
        "feishu" if chat_id.starts_with("oc_") || chat_id.starts_with("ou_") => Ok(Route::Feishu(chat_id.into())),
        "ws" if !on.gateway => Err("its chat is on the gateway, which is off (no gateway_token) in this image".into()),
        "ws" if chat_id.len() <= crate::gateway::MAX_CHAT_ID
            && chela_proto::gateway::check_chat_id(chat_id).is_ok() =>
        {
            Ok(Route::Gateway(chat_id.into()))
        }
        _ => Err(format!("`{channel}` chat `{chat_id}` is not a chat this device talks in")),
    }
}

/// Whether the person who made a job for `chat_id` of `channel` may still have it run: its
/// maker is still on the channel's allowlist, and was made on that channel (a record naming a
/// maker on another channel is not honoured). A job without a maker is its chat's: it runs on
/// Telegram and the gateway, whose allowlists name the chat itself ([`route`] checks it), and
/// to a Feishu user (`ou_…`: the chat is the person). In a Feishu chat (`oc_…`, a group or a
/// direct chat, which its id does not tell apart) the device always records the maker, so a
/// job there without one was stored before it did: who made it is unknown, anyone in the group
/// could have, and it is refused (said once) until it is made again.
pub fn maker_allowed(
    channel: &str,
    chat_id: &str,
    made_by: Option<&MadeBy>,
    config: &ChipConfig,
) -> Result<(), String> {
    let Some(m) = made_by else {
        return if channel == "feishu" && !chat_id.starts_with("ou_") {
            Err("it was stored before the device recorded who makes a job, and in a Feishu chat anyone in \
                 it could have; make it again (cron_remove, then cron_add)"
                .into())
        } else {
            Ok(())
        };
    };
    let gone = |allow: Field| Err(format!("its maker `{}` is not in {} now", m.chat_id, allow.name()));
    match m.channel.as_str() {
        c if c != channel => Err(format!("it names a maker on {c}, not on its own chat's channel")),
        "feishu" if crate::feishu::Access::from_config(config).admits(&m.chat_id) => Ok(()),
        "feishu" => gone(Field::FeishuAllow),
        "telegram" => match m.chat_id.parse::<i64>() {
            Ok(id) if crate::console::access(config).is_ok_and(|a| a.admits(id)) => Ok(()),
            _ => gone(Field::TgAllow),
        },
        "ws" => Ok(()),
        c => Err(format!("its maker is on `{c}`, a channel this device does not talk in")),
    }
}

/// The chat a turn comes from, and who it runs for: where a job it adds fires, and its maker.
#[derive(Debug)]
struct Origin {
    channel: String,
    chat_id: String,
    maker: String,
}

/// The device's jobs. See the module docs.
#[derive(Debug, Default)]
pub struct Cron {
    jobs: Vec<LoadedJob>,
    /// The chat the current turn comes from: a job added in it fires there, made by its maker.
    origin: Option<Origin>,
    /// Jobs whose chat could not be reached, already said on the console (RAM only: said again
    /// after a restart, and after the job ran once more).
    said: Vec<String>,
}

impl Cron {
    /// The jobs kept in `chip`'s flash, and a line for each entry that could not be read.
    pub fn load<F: Flash, B: Board>(chip: &Chip<F, B>) -> (Cron, Vec<String>) {
        let mut record = Vec::new();
        let read = chip.store.read(CRON_KEY, Order::OldestFirst, &mut |r| {
            record.clear();
            record.extend_from_slice(r.payload);
            ControlFlow::Continue(())
        });
        if let Err(e) = read {
            return (Cron::default(), alloc::vec![format!("the jobs could not be read: {e}")]);
        }
        if record.is_empty() {
            return (Cron::default(), Vec::new());
        }
        let text = String::from_utf8_lossy(&record);
        match file::load(&text) {
            Ok(f) => {
                let mut bad: Vec<String> = f.bad.iter().map(ToString::to_string).collect();
                let mut jobs = f.jobs;
                if jobs.len() > MAX_JOBS {
                    bad.push(format!("{} jobs beyond the device's {MAX_JOBS} were ignored", jobs.len() - MAX_JOBS));
                    jobs.truncate(MAX_JOBS);
                }
                (Cron { jobs, origin: None, said: Vec::new() }, bad)
            }
            Err(e) => (Cron::default(), alloc::vec![format!("the job list is unreadable and was ignored: {e}")]),
        }
    }

    /// Where jobs added from now on fire: the chat the turn about to run comes from; and who
    /// makes them: `maker`, the id the channel's allowlist names for the person the turn runs
    /// for (a message's sender on Feishu, the chat on Telegram and the gateway; a job's own
    /// maker in its turn, the owner in the heartbeat's). Set by the device, never by the model.
    pub fn set_origin(&mut self, channel: &str, chat_id: &str, maker: &str) {
        self.origin = Some(Origin { channel: channel.into(), chat_id: chat_id.into(), maker: maker.into() });
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The jobs due at `now` (Unix seconds), each marked as run and one-shots removed, the list
    /// saved. Nothing is due before the clock is set. If flash refuses the save, the jobs still
    /// fire (they are marked in RAM) and the error is returned beside them.
    pub fn due<F: Flash, B: Board>(&mut self, chip: &mut Chip<F, B>) -> (Vec<Fired>, Option<String>) {
        let Some(now) = chip.board.unix().and_then(|s| i64::try_from(s).ok()) else {
            return (Vec::new(), None);
        };
        let zone = Zone::utc();
        let mut fired = Vec::new();
        for j in &mut self.jobs {
            if j.job.catch_up(&j.schedule, now, &zone).is_none() {
                continue;
            }
            j.job.record_run(now);
            if let Action::Agent { message, channel, chat_id } = &j.job.action {
                fired.push(Fired {
                    id: j.job.id.clone(),
                    message: message.clone(),
                    channel: channel.clone().unwrap_or_default(),
                    chat_id: chat_id.clone().unwrap_or_default(),
                    made_by: j.job.made_by.clone(),
                });
            }
        }
        if fired.is_empty() {
            return (fired, None);
        }
        self.jobs.retain(|j| !j.job.finished(&j.schedule));
        let err = self.save(chip).err();
        (fired, err)
    }

    /// Where the due `job` runs now ([`route`], while its maker is allowed: [`maker_allowed`]);
    /// else `Err` with the console's line, or `None` when it was said already: a job that
    /// cannot run is reported once, not at each of its runs.
    pub fn route(
        &mut self,
        job: &Fired,
        config: &ChipConfig,
        on: Channels,
        feishu_built: bool,
    ) -> Result<Route, Option<String>> {
        let said = self.said.contains(&job.id);
        let jobs = &self.jobs;
        // Only jobs still kept (an id given again to a new job is said again), each once.
        self.said.retain(|id| *id != job.id && jobs.iter().any(|j| j.job.id == *id));
        let routed = route(&job.channel, &job.chat_id, config, on, feishu_built)
            .and_then(|r| maker_allowed(&job.channel, &job.chat_id, job.made_by.as_ref(), config).map(|()| r));
        let why = match routed {
            Ok(r) => return Ok(r),
            Err(_) if said => None,
            Err(why) => Some(format!("{}: {why}; skipped (said once)", job.id)),
        };
        self.said.push(job.id.clone());
        Err(why)
    }

    /// Seconds from `now` to the earliest next run, if any job will run.
    pub fn next_in(&self, now: u64) -> Option<u64> {
        let now = i64::try_from(now).ok()?;
        let zone = Zone::utc();
        self.jobs
            .iter()
            .filter_map(|j| j.job.next_fire(&j.schedule, now, &zone))
            .min()
            .map(|at| at.saturating_sub(now).max(0) as u64)
    }

    fn save<F: Flash, B: Board>(&self, chip: &mut Chip<F, B>) -> Result<(), String> {
        let jobs: Vec<Job> = self.jobs.iter().map(|j| j.job.clone()).collect();
        chip.store
            .replace(CRON_KEY, file::to_json(&jobs).as_bytes())
            .map_err(|e| format!("The jobs could not be saved to flash: {e}"))
    }

    fn add<F: Flash, B: Board>(&mut self, chip: &mut Chip<F, B>, a: cron::AddArgs) -> Result<String, String> {
        let now = chip
            .board
            .unix()
            .and_then(|s| i64::try_from(s).ok())
            .ok_or("The clock is not set yet (no time server reached), so nothing can be scheduled.")?;
        if self.jobs.len() >= MAX_JOBS {
            return Err(format!("The device keeps at most {MAX_JOBS} jobs; remove one first."));
        }
        if a.message.trim().is_empty() || a.message.len() > MAX_MESSAGE {
            return Err(format!("The message must be 1 to {MAX_MESSAGE} bytes."));
        }
        let cron::Plan { trigger, delete_after_run } = a.plan(now)?;
        if let Trigger::Interval { every_s, .. } = trigger
            && every_s < MIN_INTERVAL_S
        {
            return Err(format!("interval_s is {every_s}; the shortest interval is {MIN_INTERVAL_S} s."));
        }
        let Origin { channel, chat_id, maker } =
            self.origin.as_ref().ok_or("This turn has no chat for the job to report to.")?;
        let (channel, chat_id) = (channel.clone(), chat_id.clone());
        // The chip's jobs only ever talk in the chat they were made in: a job for another chat
        // would need the host's approval rules, which the chip does not have.
        if a.channel.as_ref().is_some_and(|c| *c != channel) || a.chat_id.as_ref().is_some_and(|c| *c != chat_id) {
            return Err("A job on this device reports to the chat it is made in; leave channel and chat_id out.".into());
        }
        // From the turn's origin, never the arguments, and only when it is not the chat itself
        // (see the module docs); no approval rules apply (see the origin check above).
        let made_by = (*maker != chat_id).then(|| MadeBy::new(&channel, maker, Vec::new()));
        let id = self.fresh_id();
        let job = Job {
            id: id.clone(),
            name: a.name,
            enabled: true,
            paused: false,
            trigger,
            action: Action::Agent { message: a.message, channel: Some(channel), chat_id: Some(chat_id) },
            grace_s: None,
            delete_after_run,
            created_at: Some(now),
            last_run: None,
            made_by,
        };
        let schedule = job.validate().map_err(|e| format!("The job is not valid: {e}"))?;
        let next = job.next_fire(&schedule, now, &Zone::utc());
        self.jobs.push(LoadedJob { job, schedule, line: 0 });
        if let Err(e) = self.save(chip) {
            self.jobs.pop();
            return Err(e);
        }
        Ok(match next {
            Some(at) => format!("Scheduled {id}; next run {}.", utc(at)),
            None => format!("Scheduled {id}, but it will never run (its time cannot come)."),
        })
    }

    fn list<B: Board>(&self, board: &B) -> String {
        if self.jobs.is_empty() {
            return "No jobs are scheduled.".into();
        }
        let now = board.unix().and_then(|s| i64::try_from(s).ok());
        let zone = Zone::utc();
        let mut out = String::new();
        for j in &self.jobs {
            let when = match &j.job.trigger {
                Trigger::Interval { every_s, .. } => format!("every {every_s} s"),
                Trigger::Once { at } => format!("once at {}", utc(*at)),
                Trigger::Cron { expr, .. } => format!("cron `{expr}` UTC"),
                Trigger::OnEvent { event, .. } => format!("on {event}"),
            };
            let next = now.and_then(|n| j.job.next_fire(&j.schedule, n, &zone)).map_or_else(|| "none".into(), utc);
            let message = match &j.job.action {
                Action::Agent { message, .. } => message.as_str(),
                _ => "",
            };
            out.push_str(&format!("{}: {when}; next {next}; \"{message}\"\n", j.job.id));
        }
        out.pop();
        out
    }

    fn remove<F: Flash, B: Board>(&mut self, chip: &mut Chip<F, B>, id: &str) -> Result<String, String> {
        let Some(i) = self.jobs.iter().position(|j| j.job.id == id) else {
            return Err(format!("There is no job `{id}`; cron_list shows the ids."));
        };
        let gone = self.jobs.remove(i);
        if let Err(e) = self.save(chip) {
            self.jobs.insert(i, gone);
            return Err(e);
        }
        Ok(format!("Removed {id}."))
    }

    fn fresh_id(&self) -> String {
        let n = self.jobs.iter().filter_map(|j| j.job.id.strip_prefix("job-")?.parse::<u32>().ok()).max().unwrap_or(0);
        format!("job-{}", n + 1)
    }
}

fn utc(at: i64) -> String {
    match u64::try_from(at) {
        Ok(s) => crate::time::utc(s).0,
        Err(_) => format!("{at} (before 1970)"),
    }
}

impl<F: Flash, B: Board> Toolbox<F, B> for Cron {
    fn specs(&self) -> &[ToolSpec<'static>] {
        &SPECS
    }

    fn guidance(&self) -> &str {
        " Schedule reminders and recurring checks with cron_add (times are UTC); cron_list and cron_remove manage them."
    }

    fn run(&mut self, chip: &mut Chip<F, B>, name: &str, input: &str) -> Option<Result<String, String>> {
        Some(match name {
            "cron_add" => cron::AddArgs::parse(input).and_then(|a| self.add(chip, a)),
            "cron_list" => Ok(self.list(&chip.board)),
            "cron_remove" => cron::RemoveArgs::parse(input).and_then(|a| self.remove(chip, &a.job_id)),
            _ => return None,
        })
    }
}
