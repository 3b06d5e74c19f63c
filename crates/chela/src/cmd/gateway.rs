//! `chela gateway token [--rotate] [--yes]`: a lost token recovered, or replaced.
//!
//! The token opens the console, which can approve strangers and change settings, so it is
//! written only where the owner reads it: a terminal on both ends (a pipe or a log file would
//! keep it), unless `--yes` says otherwise. It never goes through the log.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Result, bail};
use chela_core::config::GATEWAY_TOKEN;

use super::presence::daemon_running;
use crate::config::{Config, Layer, set_override};
use crate::gateway::auth::{ensure_token, new_token};
use crate::workspace::Workspace;

pub fn token(ws: &Workspace, rotate: bool, yes: bool) -> Result<ExitCode> {
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if !(yes || terminal) {
        bail!(
            "the gateway token is a secret and is printed only to your terminal, not into a pipe or a file; \
             add --yes if that is where it should go"
        );
    }
    let cfg = Config::load(ws)?;
    if rotate {
        let entry = cfg.entry(GATEWAY_TOKEN);
        if let Layer::Env(var) = &entry.layer {
            bail!("the environment variable {var} sets gateway.token, and wins over anything stored: change it there");
        }
        let token = new_token()?;
        set_override(ws, GATEWAY_TOKEN.name, &token)?;
        outln!("{token}");
        eprintln!(
            "A new gateway.token is stored in overrides.toml; the old one no longer opens the gateway{}. Open \
             browsers log in again with the link of `chela console`.",
            if daemon_running(ws) { " (the running daemon takes it now)" } else { "" }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let set = !cfg.get(GATEWAY_TOKEN).trim().is_empty();
    let token = ensure_token(ws, &cfg)?;
    outln!("{token}");
    if !set {
        eprintln!("There was no gateway.token yet: this new one is stored in overrides.toml.");
    }
    Ok(ExitCode::SUCCESS)
}

/// `chela gateway health`: whether the gateway of `gateway.listen` answers `GET /healthz`;
/// the container's health check (it has no shell and no curl).
pub async fn health(ws: &Workspace) -> Result<ExitCode> {
    let cfg = Config::load(ws)?;
    let listen = cfg.settings().gateway.addr();
    match super::doctor::gateway_healthz(listen).await {
        Ok(()) => {
            outln!("ok");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!("chela: the gateway at {listen} is not healthy: {why}");
            Ok(ExitCode::FAILURE)
        }
    }
}
