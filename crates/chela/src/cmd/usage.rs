//! `chela usage [--session S] [--since DATE] [--json]`: the tokens the turns of this workspace
//! used (in, read from the prompt cache, written to it, out) and their estimated cost, per
//! model and in all, from the usage log (`chela_runtime::usage`).

use std::process::ExitCode;

use anyhow::Result;
use chela_runtime::usage::{Filter, Report, day_start};

use crate::config::Config;
use crate::workspace::Workspace;

pub fn run(ws: &Workspace, session: Option<String>, since: Option<String>, as_json: bool) -> Result<ExitCode> {
    let cfg = Config::load(ws)?;
    let tz = crate::localtime::zone(cfg.get(chela_core::config::TIMEZONE));
    let since = since.map(|d| day_start(&tz, &d)).transpose().map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    let report = Report::gather(ws, &cfg, &Filter { session, since })?;
    if as_json {
        outln!("{}", serde_json::to_string_pretty(&report.json())?);
    } else {
        out!("{}", report.text());
    }
    Ok(ExitCode::SUCCESS)
}
