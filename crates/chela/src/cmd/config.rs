//! `chela config show|get|set|unset|reset`.

use std::io::{IsTerminal, Read};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use chela_core::config as model;

use super::presence::daemon_running;
use crate::args::ConfigCmd;
use crate::config::{Config, reset_overrides, restart_note, set_overrides, show, unset_override_with};
use crate::workspace::Workspace;

pub fn run(ws: &Workspace, cmd: ConfigCmd) -> Result<ExitCode> {
    match cmd {
        ConfigCmd::Show => {
            let cfg = Config::load(ws)?;
            out!("{}", show(&cfg));
            outln!("\n# workspace: {}", ws.root().display());
            for w in &cfg.warnings {
                eprintln!("warning: {w}");
            }
        }
        ConfigCmd::Get(key) => {
            let k = model::key(&key)?;
            let cfg = Config::load(ws)?;
            outln!("{}", k.shown(cfg.effective(k)));
        }
        ConfigCmd::Set(key, value, choice) => {
            let value = if value == "-" { read_value_from_stdin(&key)? } else { value };
            let stored = set_overrides(ws, &[(&key, &value)], choice)?.pop().unwrap_or_default();
            let k = model::key(&key)?;
            outln!("{key} = {:?} (runtime override)", k.shown(&stored));
            if let Ok(v) = std::env::var(k.env_var()) {
                eprintln!(
                    "note: the environment variable {} ({:?}) still overrides this value",
                    k.env_var(),
                    k.shown(&v)
                );
            }
            if let Some(note) = restart_note(k.name).filter(|_| daemon_running(ws)) {
                eprintln!("{note}");
            }
        }
        ConfigCmd::Unset(key, choice) => {
            if unset_override_with(ws, &key, choice)? {
                outln!("{key}: runtime override removed");
                if let Some(note) = restart_note(&key).filter(|_| daemon_running(ws)) {
                    eprintln!("{note}");
                }
            } else {
                outln!("{key}: had no runtime override");
            }
        }
        ConfigCmd::Reset => {
            if reset_overrides(ws)? {
                outln!("runtime overrides cleared");
            } else {
                outln!("there were no runtime overrides");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The largest value `config set KEY -` reads: keys and tokens are a few hundred bytes.
const MAX_STDIN_VALUE: u64 = 64 * 1024;

/// `chela config set KEY -`: the value from standard input, so a secret never sits in the
/// shell history or in `ps`. One trailing newline (what `echo` and a terminal add) is dropped.
fn read_value_from_stdin(key: &str) -> Result<String> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!("Type the value for {key}, then press Enter and Ctrl-D:");
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .take(MAX_STDIN_VALUE + 1)
        .read_to_end(&mut bytes)
        .context("cannot read the value from standard input")?;
    if bytes.len() as u64 > MAX_STDIN_VALUE {
        bail!("the value on standard input is over {MAX_STDIN_VALUE} bytes; a setting is never that long");
    }
    let mut text = String::from_utf8(bytes).map_err(|_| anyhow!("the value on standard input is not UTF-8 text"))?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}
