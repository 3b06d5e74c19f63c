//! `chela device list|approve|deny|revoke|firmware`: the owner's side of xiaozhi device onboarding,
//! on the same store the running daemon's OTA endpoint reads (see [`crate::devices`]).

use std::fmt::Write as _;
use std::io::Read as _;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::args::DeviceCmd;
use crate::devices::{DeviceState, Devices, FirmwareOffer, MAX_FIRMWARE_BYTES, State, normalize_id};
use crate::workspace::{Workspace, write_atomic};

pub fn run(ws: &Workspace, cmd: DeviceCmd) -> Result<ExitCode> {
    let store = Devices::open(ws);
    let now = crate::clock::Clock::system().unix_secs_u64();
    let out = match cmd {
        DeviceCmd::List => list(&store.load()?, now),
        DeviceCmd::Approve(code) => {
            let d = store.edit(|s| s.approve(&code, now))?;
            format!(
                "Approved {} ({}). Its next OTA check (a restart, or the activation it is polling) gets its \
                 WebSocket URL and token.\n",
                d.id,
                if d.info.board.is_empty() { "unknown board" } else { &d.info.board }
            )
        }
        DeviceCmd::Deny(code) if code.trim() == "all" => {
            let gone = store.edit(|s| Ok(s.deny_all()))?;
            format!("Turned away {} waiting device(s); their codes no longer work.\n", gone.len())
        }
        DeviceCmd::Deny(code) => {
            let p = store.edit(|s| s.deny(&code))?;
            format!("Turned away {} (code {}); it must ask again to get a new code.\n", p.id, p.code)
        }
        DeviceCmd::Revoke(id) => {
            let d = store.edit(|s| s.revoke(&id))?;
            format!("Revoked {}. Its token no longer works; it must be approved again to talk to Chela.\n", d.id)
        }
        DeviceCmd::Transport(id, transport) => {
            let d = store.edit(|s| s.set_transport(&id, transport))?;
            let what = transport.map_or("the xiaozhi.transport setting's", |t| t.name());
            format!("{} now gets {what} transport. Restart it: its next OTA check hands it a new login for it.\n", d.id)
        }
        DeviceCmd::FirmwareSet { file, version, device } => firmware_set(&store, &file, &version, device.as_deref())?,
        DeviceCmd::FirmwareClear => {
            let old = store.edit(|s| Ok(s.firmware.take()))?;
            match old {
                Some(f) => {
                    let _ = std::fs::remove_file(store.firmware_dir().join(&f.file));
                    format!("Firmware {} is no longer offered.\n", f.version)
                }
                None => "No firmware was offered.\n".to_owned(),
            }
        }
    };
    out!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Copies the image into `firmware/` of the workspace (atomically) and records the offer.
fn firmware_set(store: &Devices, file: &std::path::Path, version: &str, device: Option<&str>) -> Result<String> {
    let version = version.trim();
    let plain = !version.is_empty()
        && version.len() <= 32
        && version.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !plain {
        bail!("`{version}` is not a firmware version: write it as the firmware does, like 2.0.6");
    }
    let device = match device {
        Some(d) => {
            Some(normalize_id(d).with_context(|| format!("`{d}` is not a device id (a MAC like aa:bb:cc:dd:ee:ff)"))?)
        }
        None => None,
    };
    let f = std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        bail!("{} is not a regular file", file.display());
    }
    if meta.len() > MAX_FIRMWARE_BYTES {
        bail!(
            "{} is {} bytes, over the {MAX_FIRMWARE_BYTES}-byte limit for a firmware image",
            file.display(),
            meta.len()
        );
    }
    let mut bytes = Vec::new();
    f.take(MAX_FIRMWARE_BYTES + 1).read_to_end(&mut bytes)?;
    // ESP32 app images start with the magic byte 0xE9.
    if bytes.first() != Some(&0xE9) {
        bail!("{} does not look like an ESP32 firmware image (.bin made by idf.py build)", file.display());
    }
    let name = format!("xiaozhi-{version}.bin");
    let dir = store.firmware_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_atomic(&dir.join(&name), &bytes).with_context(|| format!("cannot write {}", dir.join(&name).display()))?;
    let offer = FirmwareOffer {
        file: name,
        version: version.to_owned(),
        device: device.clone().unwrap_or_default(),
        size: bytes.len() as u64,
    };
    let old = store.edit(|s| Ok(s.firmware.replace(offer.clone())))?;
    if let Some(old) = old.filter(|o| o.file != offer.file) {
        let _ = std::fs::remove_file(dir.join(old.file));
    }
    let who = device.map_or_else(|| "every device".to_owned(), |d| format!("device {d}"));
    Ok(format!(
        "Firmware {version} ({} bytes) is offered to {who} running an older version, at its next OTA check.\n",
        bytes.len()
    ))
}

/// The text of `chela device list`.
fn list(s: &DeviceState, now: u64) -> String {
    let mut out = String::new();
    let waiting: Vec<_> = s.pending.iter().filter(|p| p.expires_at > now).collect();
    if waiting.is_empty() {
        out.push_str("No device is waiting for approval.\n");
    } else {
        out.push_str(
            "Waiting (approve the code the device shows with `chela device approve CODE`; \
             turn away with `chela device deny CODE`, or `deny all`):\n",
        );
        for p in waiting {
            let mins = p.expires_at.saturating_sub(now).div_ceil(60);
            let from = if p.source.is_empty() { String::new() } else { format!("  from {}", p.source) };
            let _ = writeln!(
                out,
                "  {}  {}  {}  expires in {mins} min{from}",
                p.code,
                p.id,
                show(&p.info.board, &p.info.app_version)
            );
        }
    }
    if s.devices.is_empty() {
        out.push_str("No device is approved.\n");
    } else {
        out.push_str("Devices (revoke with `chela device revoke ID`):\n");
        for d in &s.devices {
            let state = match d.state {
                State::Approved if d.token_sha256.is_empty() => "approved, no token yet",
                State::Approved => "approved",
                State::Revoked => "revoked",
            };
            let seen = ago(now, d.last_seen);
            let over = d.transport.map_or(String::new(), |t| format!("  over {}", t.name()));
            let _ = writeln!(
                out,
                "  {}  {}  {state}{over}  last seen {seen}",
                d.id,
                show(&d.info.board, &d.info.app_version)
            );
        }
    }
    if let Some(f) = &s.firmware {
        let who = if f.device.is_empty() { "every device" } else { &f.device };
        let _ = writeln!(out, "Firmware {} ({} bytes) is offered to {who}.", f.version, f.size);
    }
    out
}

fn show(board: &str, version: &str) -> String {
    match (board.is_empty(), version.is_empty()) {
        (true, _) => "unknown board".to_owned(),
        (false, true) => board.to_owned(),
        (false, false) => format!("{board} {version}"),
    }
}

fn ago(now: u64, then: u64) -> String {
    let s = now.saturating_sub(then);
    match s {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", s / 60),
        3600..86_400 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}
