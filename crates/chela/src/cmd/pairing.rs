//! `chela pairing list|approve|deny|revoke|clear`: the owner's side of pairing, on the same store the
//! running daemon reads (see [`crate::access`]).

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;

use crate::access::{Gate, Listing, allow_from};
use crate::args::PairingCmd;
use crate::config::Config;
use crate::workspace::Workspace;

pub fn run(ws: &Workspace, cmd: PairingCmd) -> Result<ExitCode> {
    let cfg = Config::load(ws)?;
    let gate = Gate::open(ws)?;
    let now = crate::clock::Clock::system().unix_secs_u64();
    let out = match cmd {
        PairingCmd::List => list(&gate.list(now)?, &cfg, now),
        PairingCmd::Approve(code) => {
            let p = gate.approve(&code, now)?;
            format!("Approved {}:{}. Their next message reaches Chela.\n", p.channel, p.sender)
        }
        PairingCmd::Deny(code) => {
            let p = gate.deny(&code, now)?;
            format!("Denied {}:{}. They get no new code for an hour.\n", p.channel, p.sender)
        }
        PairingCmd::Clear(channel) => {
            let dropped = gate.clear(channel.as_deref(), now)?;
            let queue = channel.map_or_else(|| "No requests".to_owned(), |c| format!("No {c} requests"));
            match dropped.len() {
                0 => format!("{queue} were waiting.\n"),
                n => {
                    let who: Vec<String> = dropped.iter().map(|p| format!("{}:{}", p.channel, p.sender)).collect();
                    format!("Denied {n} waiting request(s): {}. They get no new code for an hour.\n", who.join(", "))
                }
            }
        }
        PairingCmd::Revoke { channel, sender } => {
            let listed = chela_core::access::listed(allow_from(&cfg, &channel), &sender);
            match gate.revoke(&channel, &sender) {
                Ok(p) => {
                    let mut out =
                        format!("Revoked {}:{}. Their next message gets a new pairing code.\n", p.channel, p.sender);
                    if listed {
                        let _ = writeln!(
                            out,
                            "Note: {channel}'s allow_from setting still lets them in; change it with `chela config set`."
                        );
                    }
                    out
                }
                Err(e) if listed => {
                    anyhow::bail!(
                        "{e} They are let in by {channel}'s allow_from setting: change it with `chela config set`."
                    )
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    out!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// The text of `chela pairing list`.
fn list(l: &Listing, cfg: &Config, now: u64) -> String {
    let mut out = String::new();
    if l.pending.is_empty() {
        out.push_str("No pairing requests are waiting.\n");
    } else {
        out.push_str(
            "Waiting (approve with `chela pairing approve CODE`, refuse with `chela pairing deny CODE`, \
             all at once with `chela pairing clear`):\n",
        );
        for p in &l.pending {
            let mins = p.expires_at.saturating_sub(now).div_ceil(60);
            let _ = writeln!(out, "  {}  {}:{}  expires in {mins} min", p.code, p.channel, p.sender);
        }
    }
    if l.allowed.is_empty() {
        out.push_str("Nobody is approved by pairing.\n");
    } else {
        out.push_str("Approved (take back with `chela pairing revoke CHANNEL:SENDER`):\n");
        for p in &l.allowed {
            let since = i64::try_from(p.since).map_or_else(
                |_| "?".to_owned(),
                |t| {
                    let l = crate::localtime::Local::at(&chela_core::zone::Zone::utc(), t);
                    format!("{} {} UTC", l.date(), l.hour_minute())
                },
            );
            let _ = writeln!(out, "  {}:{}  since {since}", p.channel, p.sender);
        }
    }
    for channel in ["telegram", "feishu"] {
        let listed = allow_from(cfg, channel);
        if !listed.is_empty() {
            let _ = writeln!(out, "channels.{channel}.allow_from = {}", listed.join(", "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chela_core::access::{Peer, PendingCode};

    #[test]
    fn the_list_shows_codes_minutes_left_and_settings() {
        let env = [("CHELA_CHANNELS__TELEGRAM__ALLOW_FROM".to_owned(), "42".to_owned())];
        let cfg = Config::from_layers(None, None, &env).unwrap();
        let l = Listing {
            pending: vec![PendingCode {
                channel: "telegram".into(),
                sender: "7".into(),
                code: "7KQ4MXT2".into(),
                expires_at: 1000 + 59 * 60 + 1,
            }],
            allowed: vec![Peer { channel: "feishu".into(), sender: "ou_1".into(), since: 0 }],
        };
        let text = list(&l, &cfg, 1000);
        assert!(text.contains("7KQ4MXT2  telegram:7  expires in 60 min"), "{text}");
        assert!(text.contains("feishu:ou_1  since 1970-01-01 00:00 UTC"), "{text}");
        assert!(text.contains("channels.telegram.allow_from = 42"), "{text}");
        let empty =
            list(&Listing { pending: vec![], allowed: vec![] }, &Config::from_layers(None, None, &[]).unwrap(), 0);
        assert_eq!(empty, "No pairing requests are waiting.\nNobody is approved by pairing.\n");
    }
}
