//! The subcommands, dispatched from `main`.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;

use anyhow::Result;

use crate::app::{App, Base};
use crate::args::{Cli, Command};
use crate::workspace::Workspace;

mod backup;
mod cap;
pub(crate) mod config;
mod cron;
mod device;
pub(crate) mod doctor;
mod gateway;
mod mcp;
mod mcp_serve;
mod memory;
mod pairing;
pub(crate) mod presence;
mod run;
mod service;
mod setup;
mod skill;
mod state;
mod status;
mod usage;

/// What `chela --version` prints: the version, the commit it was built from, and the
/// optional parts (cargo features) this build has, so a bug report says what ran.
pub fn version() -> String {
    let features: Vec<&str> = [
        (cfg!(feature = "files"), "files"),
        (cfg!(feature = "memory"), "memory"),
        (cfg!(feature = "web"), "web"),
        (cfg!(feature = "http"), "http"),
        (cfg!(feature = "lua"), "lua"),
        (cfg!(feature = "board"), "board"),
        (cfg!(feature = "board-linux"), "board-linux"),
        (cfg!(feature = "voice"), "voice"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    let features = if features.is_empty() { "none".to_owned() } else { features.join(" ") };
    format!("chela {} (commit {})\nfeatures: {features}\n", env!("CARGO_PKG_VERSION"), env!("CHELA_COMMIT"))
}

/// A subcommand's future behind a pointer. Awaited in place, every subcommand's state machine
/// would be compiled into `run`'s own (one 68 KB function); boxed, each is polled through its
/// own, and only the one command that runs pays for one allocation.
type Boxed<'a> = Pin<Box<dyn Future<Output = Result<ExitCode>> + 'a>>;

fn boxed<'a>(command: impl Future<Output = Result<ExitCode>> + 'a) -> Boxed<'a> {
    Box::pin(command)
}

pub async fn run(cli: Cli) -> Result<ExitCode> {
    let ws = Workspace::locate(cli.workspace)?;
    match cli.command {
        Command::Chat(args) => boxed(crate::chat::run(App::load(ws)?, args)).await,
        Command::Config(c) => config::run(&ws, c),
        Command::Cap(c) => boxed(cap::run(Base::load(ws)?, c)).await,
        Command::Skill(c) => skill::run(&Base::load(ws)?, c),
        Command::Pairing(c) => pairing::run(&ws, c),
        Command::Device(c) => device::run(&ws, c),
        Command::State(c) => state::run(&ws, c),
        Command::Usage { session, since, json } => usage::run(&ws, session, since, json),
        Command::Memory(c) => memory::run(&ws, c),
        Command::Doctor => boxed(doctor::run(ws)).await,
        Command::Status { json } => boxed(status::run(&ws, json)).await,
        Command::Service(c) => service::run(&ws, c),
        Command::Run => boxed(run::run(ws, cli.verbose, cli.quiet)).await,
        Command::Setup(args) => boxed(setup::run(&ws, args)).await,
        Command::GatewayToken { rotate, yes } => gateway::token(&ws, rotate, yes),
        Command::GatewayHealth => boxed(gateway::health(&ws)).await,
        Command::Backup(file) => boxed(backup::backup(&ws, file)).await,
        Command::Restore { file, force } => backup::restore(&ws, &file, force),
        Command::Console => run::console(&ws),
        Command::Cron(c) => cron::run(&ws, c),
        Command::Rules(c) => cron::rules(&ws, c),
        Command::Heartbeat => cron::heartbeat(&ws),
        Command::Mcp(c) => boxed(mcp::run(Base::load(ws)?, c)).await,
        Command::McpServe => boxed(mcp_serve::run(ws)).await,
        #[cfg(feature = "board")]
        Command::Board(file) => {
            let (ok, text) = crate::board::check(&ws, file)?;
            if ok {
                outln!("{text}");
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("{text}");
                Ok(ExitCode::FAILURE)
            }
        }
        #[cfg(not(feature = "board"))]
        Command::Board(_) => anyhow::bail!("this build has no board support (the `board` cargo feature is off)"),
        // Handled before the runtime starts.
        Command::Help(_) | Command::Version => Ok(ExitCode::SUCCESS),
    }
}
