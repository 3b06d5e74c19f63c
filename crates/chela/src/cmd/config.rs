//! `chela config show|get|set|unset|reset`.

use std::process::ExitCode;

use anyhow::Result;
use chela_core::config as model;

use crate::args::ConfigCmd;
use crate::config::{Config, reset_overrides, set_override, unset_override};
use crate::workspace::Workspace;

pub fn run(ws: &Workspace, cmd: ConfigCmd) -> Result<ExitCode> {
    match cmd {
        ConfigCmd::Show => {
            let cfg = Config::load(ws)?;
            print!("{}", show(&cfg));
            println!("\n# workspace: {}", ws.root().display());
            for w in &cfg.warnings {
                eprintln!("warning: {w}");
            }
        }
        ConfigCmd::Get(key) => {
            let k = model::key(&key)?;
            let cfg = Config::load(ws)?;
            println!("{}", cfg.entry(k).shown());
        }
        ConfigCmd::Set(key, value) => {
            let stored = set_override(ws, &key, &value)?;
            let k = model::key(&key)?;
            let shown = if k.is_secret() { model::mask(&stored) } else { stored };
            println!("{key} = {shown:?} (runtime override)");
            if let Ok(v) = std::env::var(k.env_var()) {
                eprintln!("note: the environment variable {} ({v:?}) still overrides this value", k.env_var());
            }
        }
        ConfigCmd::Unset(key) => {
            if unset_override(ws, &key)? {
                println!("{key}: runtime override removed");
            } else {
                println!("{key}: had no runtime override");
            }
        }
        ConfigCmd::Reset => {
            if reset_overrides(ws)? {
                println!("runtime overrides cleared");
            } else {
                println!("there were no runtime overrides");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Every key, its effective value (secrets masked) and the layer it came from, in aligned columns.
pub fn show(cfg: &Config) -> String {
    let rows: Vec<(&str, String, String)> =
        cfg.entries().iter().map(|e| (e.key.name, format!("{:?}", e.shown()), e.layer.to_string())).collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0).min(48);
    let mut out = String::new();
    for (k, v, layer) in rows {
        let pad = w1.saturating_sub(v.chars().count());
        out.push_str(&format!("{k:<w0$}  {v}{:pad$}  # {layer}\n", ""));
    }
    out
}
