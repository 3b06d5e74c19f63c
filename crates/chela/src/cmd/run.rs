//! `chela run`: the daemon in the foreground.
//!
//! It loads the [`Daemon`], starts each service (the gateway, every configured channel) as a
//! task that returns when the daemon's [`Shutdown`](crate::daemon::Shutdown) fires, follows
//! the settings files, and on SIGTERM or SIGINT stops within [`STOP_WITHIN`]: no new work,
//! running turns get [`GRACE`] to finish, then are cancelled (a cancelled turn still saves
//! what it did), and the process exits.
//!
//! Every task of the daemon has an owner that ends it. The services here are one `JoinSet`; each
//! service owns what it starts (the scheduler its job runs and heartbeats, the router its plans
//! and `on_event` runs, a channel its replies) and returns only once those ended. The session hub
//! owns the conversations' owners, the toolbox's Lua host the background jobs, the MCP clients
//! their connections and each connection its reader, writer and process. So the stop, in order:
//!
//! 1. [`Shutdown::trigger`](crate::daemon::Shutdown::trigger): every service stops taking work
//!    and new messages are answered "stopping".
//! 2. Running turns get [`GRACE`]; then `SessionHub::stop` cancels them (they still save).
//! 3. Lua background jobs are asked to stop and, after `lua.stop_grace_ms`, stopped by force;
//!    meanwhile, the hub drained, the services are awaited, each with its own tasks.
//! 4. The daemon's deliveries are flushed: the answers of turns that ended (or were cancelled)
//!    just now still go out, each chat's in order (`Daemon::flush`).
//! 5. The conversations' owners are ended and awaited (`SessionHub::close_all`).
//! 6. Whatever is still going when [`STOP_WITHIN`] is nearly up is aborted: dropping a set or a
//!    handle aborts its tasks.
//! 7. Last the MCP servers (a turn that was finishing may have called one): the connects still
//!    going from start-up are aborted, then each server gets its stdin closed, SIGTERM, SIGKILL.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinSet;

use crate::daemon::Daemon;
use crate::workspace::Workspace;

/// How long running turns may go on after a stop signal before they are cancelled.
const GRACE: Duration = Duration::from_secs(3);
/// Everything is down by then: the most `chela run` takes to exit after SIGTERM.
const STOP_WITHIN: Duration = Duration::from_secs(5);
/// How often the settings files are looked at (two `stat`s when nothing changed).
const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// The services of one daemon: each a task that ends when the daemon stops.
struct Services {
    set: JoinSet<(&'static str, Result<()>)>,
}

impl Services {
    fn spawn(&mut self, name: &'static str, service: impl Future<Output = Result<()>> + Send + 'static) {
        // Boxed, so the services share one task type (tokio's task code compiled once, not per service).
        let service: Pin<Box<dyn Future<Output = Result<()>> + Send>> = Box::pin(service);
        self.set.spawn(async move { (name, service.await) });
    }
}

pub async fn run(ws: Workspace, verbose: u8, quiet: bool) -> Result<ExitCode> {
    // First, so that a stop asked for while the workspace loads is a clean stop (status 0), not
    // the default action of the signal.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    init_log(&ws, verbose, quiet);
    let daemon = Arc::new(Daemon::load(ws)?);
    // Held to the end of `run`: other commands ask it whether a daemon serves this workspace.
    let info = super::presence::RunInfo::this_process(
        daemon.clock().unix_secs(),
        daemon.config().settings().gateway.addr().to_string(),
    );
    let _presence = super::presence::announce(daemon.workspace(), &info)?;
    if let Err(why) = daemon.app() {
        eprintln!("chela: no model is configured yet, so messages are answered with what to set: {why}");
    }
    let mut services = Services { set: JoinSet::new() };
    services.spawn("settings", follow_settings(Arc::clone(&daemon)));
    services.spawn("gateway", crate::gateway::serve(Arc::clone(&daemon)));
    services.spawn("scheduler", crate::jobs::scheduler::serve(Arc::clone(&daemon)));
    services.spawn("router", crate::jobs::router::serve(Arc::clone(&daemon)));
    #[cfg(feature = "board")]
    services.spawn(
        "board",
        crate::board::serve(
            Arc::clone(&daemon.tools().board),
            Arc::clone(daemon.workspace()),
            daemon.config().int(chela_core::config::BOARD_POLL_SECS).unsigned_abs(),
            daemon.clock().clone(),
            daemon.shutdown().clone(),
        ),
    );

    let mut channels = Vec::new();
    if crate::channels::telegram::configured(&daemon.config()) {
        services.spawn("telegram", crate::channels::telegram::serve(Arc::clone(&daemon)));
        channels.push(crate::channels::telegram::CHANNEL);
    }
    if crate::channels::feishu::configured(&daemon.config()) {
        services.spawn("feishu", crate::channels::feishu::serve(Arc::clone(&daemon)));
        channels.push(crate::channels::feishu::CHANNEL);
    }
    // Last, so that its first trim comes after the others' start-up (it waits for the channels).
    #[cfg(target_os = "linux")]
    services.spawn("trim", chela_daemon::trim::serve(Arc::clone(&daemon), channels));
    #[cfg(not(target_os = "linux"))]
    let _ = channels;
    // MCP servers with `connect = "start"` connect in the background; lazy ones on first need.
    daemon.tools().mcp.start(daemon.toolbox());
    chela_log::info!(
        "started: chela {} (commit {}) serving {}, pid {}",
        env!("CARGO_PKG_VERSION"),
        env!("CHELA_COMMIT"),
        daemon.workspace().root().display(),
        std::process::id()
    );

    let mut failed = false;
    loop {
        tokio::select! {
            _ = term.recv() => {
                chela_log::info!("stopping: asked to (SIGTERM)");
                break;
            }
            _ = int.recv() => {
                chela_log::info!("stopping: asked to (Ctrl-C)");
                break;
            }
            Some(done) = services.set.join_next() => match done {
                Ok((name, Ok(()))) => chela_log::debug!("{name} ended"),
                Ok((name, Err(e))) => {
                    // A service that cannot run (a port in use, a rejected token) stops the
                    // daemon: a half-running assistant that looks fine is worse.
                    eprintln!("chela: {name}: {e:#}");
                    chela_log::error!("stopping: {name} cannot run");
                    failed = true;
                    break;
                }
                Err(e) => {
                    eprintln!("chela: a service stopped unexpectedly: {e}");
                    failed = true;
                    break;
                }
            },
        }
    }
    stop(&daemon, services).await;
    chela_log::info!("stopped");
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Starts the log at the workspace's `log.level` (changed by `-v`, `-q` and `CHELA_LOG`). A
/// configuration that cannot be read is left for the daemon's load to report.
fn init_log(ws: &Workspace, verbose: u8, quiet: bool) {
    let base = match crate::config::Config::load(ws) {
        Ok(cfg) => cfg.get(chela_core::config::LOG_LEVEL).parse().unwrap_or(chela_infra::log::Level::Info),
        Err(_) => chela_infra::log::Level::Info,
    };
    let env = std::env::var("CHELA_LOG").ok();
    crate::log::init(crate::log::level_for(verbose, quiet, base, env.as_deref()));
}

/// `chela console`: prints a one-time login link for the web console of the running daemon.
pub fn console(ws: &Workspace) -> Result<ExitCode> {
    let cfg = crate::config::Config::load(ws)?;
    let link = crate::gateway::auth::console_link(ws, &cfg)?;
    outln!("{link}");
    eprintln!(
        "Open it in a browser on this machine while `chela run` is running; it works once, within {} minutes.",
        crate::gateway::login::LINK_LIFETIME_SECS / 60
    );
    Ok(ExitCode::SUCCESS)
}

/// Stops taking work, gives running turns [`GRACE`], cancels the rest and waits for them to
/// save, for their answers to be delivered and for every task to end, all within [`STOP_WITHIN`]
/// (the order is in the module's doc).
async fn stop(daemon: &Daemon, mut services: Services) {
    let started = tokio::time::Instant::now();
    daemon.shutdown().trigger();
    let hub = daemon.hub();
    if tokio::time::timeout(GRACE, hub.drained()).await.is_err() {
        chela_log::info!("cancelling the turns still running");
        hub.stop();
    }
    let left = STOP_WITHIN.saturating_sub(started.elapsed()).saturating_sub(Duration::from_millis(200));
    if tokio::time::timeout(left, async {
        // Side by side: a stubborn script's forced stop does not hold back the services.
        let joined = async {
            hub.drained().await;
            while services.set.join_next().await.is_some() {}
        };
        tokio::join!(stop_lua_jobs(daemon), joined);
        // After the turns, so the answers of turns that ended (or were cancelled) just now go out too.
        daemon.flush().await;
        hub.close_all().await;
    })
    .await
    .is_err()
    {
        chela_log::warn!("some work did not finish within {STOP_WITHIN:?}; stopping anyway");
        services.set.abort_all();
    }
    // The MCP servers last: a turn that was finishing may still have called one.
    daemon.tools().mcp.shutdown().await;
}

/// Stops the Lua background jobs, on the blocking pool (the wait for each is a condition
/// variable). Dropped by the stop's bound, the wait is left behind, but the jobs were asked.
async fn stop_lua_jobs(daemon: &Daemon) {
    #[cfg(feature = "lua")]
    {
        let lua = Arc::clone(&daemon.tools().lua);
        let grace = Duration::from_millis(daemon.config().int(chela_core::config::LUA_STOP_GRACE_MS).unsigned_abs());
        match crate::tasks::blocking(move || lua.stop_jobs(grace)).await {
            Ok(ids) if ids.is_empty() => {}
            Ok(ids) => chela_log::info!("stopped the Lua jobs {}", ids.join(", ")),
            Err(e) => chela_log::warn!("stopping the Lua jobs failed: {e}"),
        }
    }
    #[cfg(not(feature = "lua"))]
    let _ = daemon;
}

/// Applies `chela config set` and `chela cap` from other processes to the running daemon.
async fn follow_settings(daemon: Arc<Daemon>) -> Result<()> {
    let mut tick = tokio::time::interval(RELOAD_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = daemon.shutdown().wait() => return Ok(()),
        }
        // Two stats, and a parse when something changed: small enough for the async thread.
        match daemon.reload() {
            Ok(true) => chela_log::info!("settings reloaded"),
            Ok(false) => {}
            Err(e) => {
                chela_log::warn!("the settings files changed but cannot be used ({e:#}); keeping the previous ones")
            }
        }
    }
}
