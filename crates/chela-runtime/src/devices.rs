//! The xiaozhi device store, `state/devices.json`: which voice devices may talk to Chela.
//!
//! Deny by default. A device Chela has not seen gets a 6-digit activation code from its OTA
//! check ([`DeviceState::ota`]) and nothing else; it is bound only when the owner approves the
//! code (`chela device approve CODE`, or the dashboard). Its first OTA check after that (same
//! `Device-Id` MAC and `Client-Id`, from the address that asked for the code) gets a WebSocket
//! token, shown in that answer only: the file keeps its SHA-256, compared in constant time.
//! Later checks get the URL without a token (the
//! firmware keeps the one it stored) unless they prove they hold the current token
//! (`Authorization: Bearer`), which rotates it: MAC and Client-Id travel in clear on every check,
//! so repeating them must neither hand out a token nor invalidate the device's. The WebSocket
//! takes a token only with the MAC and Client-Id it was issued to. Revoking clears it.
//!
//! Bounds: at most `xiaozhi.max_pending` unapproved devices wait, at most
//! [`MAX_PENDING_PER_SOURCE`] of them from one address; a request beyond either is refused and
//! the ones already waiting are kept, so made-up MACs cannot push out the code of a device the
//! owner is about to approve (the owner sees the queue with `chela device list` and clears it
//! with `chela device deny all`). A MAC waits under one Client-Id: another Client-Id asking for
//! it is refused until that request is approved, denied or expired. At most [`MAX_DEVICES`] are
//! bound, and every string a device reports is clipped.
//!
//! The rules are plain functions of [`DeviceState`] with `now` and random bytes passed in; the
//! file side ([`Devices`]) applies them under the file's lock with an atomic write, as the
//! pairing store does. A file that is not JSON (or over [`MAX_STORE_BYTES`], or not a regular
//! file) is never overwritten: owner commands report it and the OTA endpoint answers 503. One
//! entry that does not read is skipped with a warning; the others still work.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use ring::digest::{SHA256, digest};
use serde::{Deserialize, Serialize};

use crate::workspace::{Replace, Workspace, create_private_dir, open_dir, write_atomic_at};

/// The store's file name, in the workspace's `state/` folder.
pub const STORE_FILE: &str = crate::authority::DEVICES_STORE;
/// Largest store read: room for [`MAX_DEVICES`] bound devices and the most `xiaozhi.max_pending`
/// allows waiting, every reported string at its longest (a test checks it).
pub const MAX_STORE_BYTES: u64 = 8 << 20;
/// Most bound (approved or revoked) devices; approving one more is refused. A home or a
/// classroom of devices fits; the MQTT endpoint takes this many connections too.
pub const MAX_DEVICES: usize = 1024;
/// How long an activation code stays valid.
pub const CODE_TTL_SECS: u64 = 30 * 60;
/// `activation.timeout_ms` of the OTA answer: how long the device polls `…/activate`.
pub const ACTIVATION_TIMEOUT_MS: u64 = 30_000;
/// Largest firmware image offered and served (ESP32 OTA partitions are a few MiB).
pub const MAX_FIRMWARE_BYTES: u64 = 16 * 1024 * 1024;
/// Longest `Client-Id`; the firmware's is a 36-character UUID.
pub const MAX_CLIENT_ID: usize = 64;
/// Waiting requests from one address (`Pending::source`) at once.
pub const MAX_PENDING_PER_SOURCE: usize = 4;
/// Longest reported string kept (board name, app version…).
const MAX_INFO: usize = 64;

/// What a device reports about itself, for `chela device list`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Info {
    pub board: String,
    pub name: String,
    pub app_version: String,
    pub chip: String,
    pub language: String,
    pub serial: String,
}

impl Info {
    /// Every field clipped and stripped of control characters.
    pub fn clipped(self) -> Info {
        let c = |s: String| -> String { s.chars().filter(|c| !c.is_control()).take(MAX_INFO).collect() };
        Info {
            board: c(self.board),
            name: c(self.name),
            app_version: c(self.app_version),
            chip: c(self.chip),
            language: c(self.language),
            serial: c(self.serial),
        }
    }
}

/// A bound device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// The Wi-Fi MAC, lowercase `aa:bb:cc:dd:ee:ff`.
    pub id: String,
    pub client_id: String,
    #[serde(default)]
    pub info: Info,
    pub state: State,
    /// SHA-256 (hex) of the WebSocket token last issued; empty until the first OTA check after
    /// approval (which is given the token, once), and after a revoke.
    #[serde(default)]
    pub token_sha256: String,
    pub created: u64,
    pub last_seen: u64,
    /// The address its approved request came from: the first token goes only there, so a check
    /// that replays the device's headers from elsewhere cannot take it first.
    #[serde(default)]
    pub source: String,
    /// The transport its OTA answer hands out; none: the `xiaozhi.transport` setting's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
}

/// How a bound device talks to Chela after its OTA check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    Websocket,
    Mqtt,
}

impl Transport {
    pub fn parse(raw: &str) -> Option<Transport> {
        match raw.trim() {
            "websocket" => Some(Transport::Websocket),
            "mqtt" => Some(Transport::Mqtt),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Websocket => "websocket",
            Transport::Mqtt => "mqtt",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Approved,
    Revoked,
}

/// A device waiting for the owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub id: String,
    pub client_id: String,
    #[serde(default)]
    pub info: Info,
    pub code: String,
    /// Random hex the device may sign (HMAC) in `…/activate`.
    pub challenge: String,
    pub expires_at: u64,
    pub created: u64,
    pub last_seen: u64,
    /// The address the request came from (the per-source bound; shown to the owner).
    #[serde(default)]
    pub source: String,
}

/// A firmware image offered to devices older than `version`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirmwareOffer {
    /// The file's name in `firmware/` of the workspace: `<version>.bin`, checked plain.
    pub file: String,
    pub version: String,
    /// Only this device (a MAC), or every device when empty.
    #[serde(default)]
    pub device: String,
    pub size: u64,
}

/// The whole store.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceState {
    pub devices: Vec<Device>,
    pub pending: Vec<Pending>,
    pub firmware: Option<FirmwareOffer>,
}

/// One OTA check, as the gateway received it.
#[derive(Clone, Debug)]
pub struct Check<'a> {
    pub id: &'a str,
    pub client_id: &'a str,
    pub info: Info,
    /// The token the request presented (`Authorization: Bearer`): proof that it is the device.
    pub bearer: Option<&'a str>,
    /// The address it came from.
    pub source: &'a str,
    pub now: u64,
}

/// What an OTA check gives a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Bound. `token` is a new one (shown this once) for the first check after approval or a
    /// check that proved it holds the current one; otherwise none, and the device keeps its own.
    Bound { token: Option<String> },
    /// Waiting for the owner: show this code.
    Waiting { code: String, challenge: String },
}

/// What `…/activate` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// 200: approved.
    Done,
    /// 202: still waiting.
    Waiting,
    /// Not waiting at all (never asked, expired, revoked, or another Client-Id).
    Unknown,
    /// The challenge is not the one this device was given.
    WrongChallenge,
}

/// Why an owner's action or a device's request failed.
#[derive(Debug)]
pub enum DeviceError {
    /// The request itself (HTTP 4xx).
    Rule(String),
    /// Too many requests at once; try again later (HTTP 503).
    Busy(String),
    /// The request fits, but the store's state does not allow it (HTTP 409).
    Conflict(String),
    /// The store could not be read or written (HTTP 5xx).
    Store(String),
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::Rule(m) | DeviceError::Busy(m) | DeviceError::Conflict(m) | DeviceError::Store(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for DeviceError {}

impl From<io::Error> for DeviceError {
    fn from(e: io::Error) -> Self {
        DeviceError::Store(e.to_string())
    }
}

/// A `Device-Id` as the store keeps it: a MAC, lowercased. Anything else is refused.
pub fn normalize_id(raw: &str) -> Option<String> {
    let id = raw.trim().to_ascii_lowercase();
    let parts: Vec<&str> = id.split(':').collect();
    let ok = parts.len() == 6 && parts.iter().all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()));
    ok.then_some(id)
}

/// A `Client-Id` the store accepts: 1 to [`MAX_CLIENT_ID`] visible ASCII characters.
pub fn valid_client_id(raw: &str) -> bool {
    !raw.is_empty() && raw.len() <= MAX_CLIENT_ID && raw.bytes().all(|b| b.is_ascii_graphic())
}

pub use crate::authority::hex_of;

/// The hex SHA-256 of a token.
pub fn token_hash(token: &str) -> String {
    hex_of(digest(&SHA256, token.as_bytes()).as_ref())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl DeviceState {
    /// An OTA check from a device. `random` supplies the token, code and challenge;
    /// `may_issue` is asked before a new code is made (the gateway's rate limit) and its refusal
    /// is returned as is. Refusals write nothing.
    pub fn ota(
        &mut self,
        c: Check<'_>,
        max_pending: usize,
        random: &[u8; 48],
        may_issue: impl FnOnce() -> Result<(), DeviceError>,
    ) -> Result<Admission, DeviceError> {
        if let Some(d) =
            self.devices.iter_mut().find(|d| d.id == c.id && d.client_id == c.client_id && d.state == State::Approved)
        {
            let first = d.token_sha256.is_empty();
            let from_its_address = d.source.is_empty() || d.source == c.source;
            let proved = !first
                && c.bearer.is_some_and(|t| constant_time_eq(token_hash(t).as_bytes(), d.token_sha256.as_bytes()));
            let owed = first && from_its_address;
            if !owed && !proved {
                // Anyone who saw the device's clear-text headers can send them again: such a check
                // learns the URL only and changes nothing, so the device's stored token stays valid.
                return Ok(Admission::Bound { token: None });
            }
            let token = hex_of(&random[..32]);
            d.token_sha256 = token_hash(&token);
            d.info = c.info;
            d.last_seen = c.now;
            return Ok(Admission::Bound { token: Some(token) });
        }
        self.pending.retain(|p| p.expires_at > c.now);
        if let Some(p) = self.pending.iter_mut().find(|p| p.id == c.id && p.client_id == c.client_id) {
            p.last_seen = c.now;
            p.info = c.info;
            return Ok(Admission::Waiting { code: p.code.clone(), challenge: p.challenge.clone() });
        }
        // The code a device shows is what the owner approves; replacing a waiting request would
        // let anyone who knows a MAC swap in their own Client-Id behind that code.
        if let Some(p) = self.pending.iter().find(|p| p.id == c.id) {
            let mins = p.expires_at.saturating_sub(c.now).div_ceil(60);
            return Err(DeviceError::Conflict(format!(
                "device {} already waits for approval with another Client-Id; the owner approves or denies \
                 that code first (`chela device list`, `chela device deny CODE`), or it expires in {mins} min",
                c.id
            )));
        }
        let max = max_pending.max(1);
        let clear = "the owner sees them with `chela device list` and clears them with `chela device deny all`";
        if self.pending.len() >= max {
            // The ones waiting stay: one of them may be the device the owner is about to approve.
            return Err(DeviceError::Busy(format!(
                "{max} devices already wait for approval, the most Chela keeps (xiaozhi.max_pending); {clear}. \
                 Try again once they are approved, denied or expired"
            )));
        }
        if self.pending.iter().filter(|p| p.source == c.source).count() >= MAX_PENDING_PER_SOURCE {
            return Err(DeviceError::Busy(format!(
                "{MAX_PENDING_PER_SOURCE} devices from {} already wait for approval, the most from one address; \
                 {clear}. Try again once they are approved, denied or expired",
                c.source
            )));
        }
        may_issue()?;
        let code = self.fresh_code(&random[32..40]);
        let challenge = hex_of(&random[40..48]);
        self.pending.push(Pending {
            id: c.id.to_owned(),
            client_id: c.client_id.to_owned(),
            info: c.info,
            code: code.clone(),
            challenge: challenge.clone(),
            expires_at: c.now + CODE_TTL_SECS,
            created: c.now,
            last_seen: c.now,
            source: c.source.to_owned(),
        });
        Ok(Admission::Waiting { code, challenge })
    }

    /// A 6-digit code no waiting device has: all of `random` (8 bytes, 64 bits) folded into one
    /// number taken modulo a million (the bias of 2^64 mod 10^6 is below one in 10^13), then the
    /// next free code after it when that one is taken.
    fn fresh_code(&self, random: &[u8]) -> String {
        let taken = |c: &str| self.pending.iter().any(|p| p.code == c);
        let n = random.iter().fold(0u64, |n, b| n << 8 | u64::from(*b)) % 1_000_000;
        (0..1_000_000u64).map(|i| format!("{:06}", (n + i) % 1_000_000)).find(|c| !taken(c)).unwrap_or_default()
    }

    /// A poll of `…/activate`.
    pub fn activate(&self, id: &str, client_id: &str, challenge: Option<&str>, now: u64) -> Activation {
        if self.devices.iter().any(|d| d.id == id && d.client_id == client_id && d.state == State::Approved) {
            return Activation::Done;
        }
        match self.pending.iter().find(|p| p.id == id && p.client_id == client_id && p.expires_at > now) {
            Some(p) if challenge.is_some_and(|c| !c.is_empty() && c != p.challenge) => Activation::WrongChallenge,
            Some(_) => Activation::Waiting,
            None => Activation::Unknown,
        }
    }

    /// The owner approves a code. A device bound before under the same MAC is replaced.
    pub fn approve(&mut self, code: &str, now: u64) -> Result<Device, DeviceError> {
        let code = code.trim();
        if code.len() != 6 || !code.bytes().all(|b| b.is_ascii_digit()) {
            return Err(DeviceError::Rule(format!(
                "`{}` is not an activation code: it is the 6 digits the device shows and says",
                code.chars().take(20).collect::<String>()
            )));
        }
        let Some(at) = self.pending.iter().position(|p| p.code == code) else {
            return Err(DeviceError::Rule(format!(
                "no device is waiting with code {code}; `chela device list` shows the codes waiting"
            )));
        };
        if self.pending[at].expires_at <= now {
            self.pending.remove(at);
            return Err(DeviceError::Rule(format!("code {code} has expired; restart the device to get a new one")));
        }
        self.devices.retain(|d| d.id != self.pending[at].id);
        if self.devices.len() >= MAX_DEVICES {
            // Revoked devices are history; the oldest of them goes first.
            if let Some(i) = self
                .devices
                .iter()
                .enumerate()
                .filter(|(_, d)| d.state == State::Revoked)
                .min_by_key(|(_, d)| d.last_seen)
                .map(|(i, _)| i)
            {
                self.devices.remove(i);
            } else {
                return Err(DeviceError::Rule(format!(
                    "{MAX_DEVICES} devices are bound, the most Chela keeps; revoke one first"
                )));
            }
        }
        let p = self.pending.remove(at);
        let device = Device {
            id: p.id,
            client_id: p.client_id,
            info: p.info,
            state: State::Approved,
            token_sha256: String::new(),
            created: now,
            last_seen: p.last_seen,
            source: p.source,
            transport: None,
        };
        self.devices.push(device.clone());
        chela_log::info!("device {} approved with code {code}", device.id);
        Ok(device)
    }

    /// The owner takes a device's access away: its token stops working at once.
    pub fn revoke(&mut self, id: &str) -> Result<Device, DeviceError> {
        let norm = normalize_id(id).unwrap_or_else(|| id.trim().to_owned());
        let was_waiting = self.pending.len();
        self.pending.retain(|p| p.id != norm);
        let Some(d) = self.devices.iter_mut().find(|d| d.id == norm && d.state == State::Approved) else {
            if self.pending.len() < was_waiting {
                return Ok(Device {
                    id: norm,
                    client_id: String::new(),
                    info: Info::default(),
                    state: State::Revoked,
                    token_sha256: String::new(),
                    created: 0,
                    last_seen: 0,
                    source: String::new(),
                    transport: None,
                });
            }
            return Err(DeviceError::Rule(format!(
                "no approved device has the id {}; `chela device list` shows them",
                norm.chars().take(40).collect::<String>()
            )));
        };
        d.state = State::Revoked;
        d.token_sha256.clear();
        Ok(d.clone())
    }

    /// The owner picks the transport of an approved device (`None`: the setting's). A change
    /// clears its token: the login of the other transport is derived from a token handed out
    /// with it, and the firmware stores only what its OTA answer names, so its next OTA check
    /// (from the address it was approved from) gets a fresh token with the new block.
    pub fn set_transport(&mut self, id: &str, transport: Option<Transport>) -> Result<Device, DeviceError> {
        let norm = normalize_id(id).unwrap_or_else(|| id.trim().to_owned());
        let Some(d) = self.devices.iter_mut().find(|d| d.id == norm && d.state == State::Approved) else {
            return Err(DeviceError::Rule(format!(
                "no approved device has the id {}; `chela device list` shows them",
                norm.chars().take(40).collect::<String>()
            )));
        };
        if d.transport != transport {
            d.transport = transport;
            d.token_sha256.clear();
        }
        Ok(d.clone())
    }

    /// The transport device `id` was set to, if any.
    pub fn transport_of(&self, id: &str) -> Option<Transport> {
        self.devices.iter().find(|d| d.id == id && d.state == State::Approved).and_then(|d| d.transport)
    }

    /// The owner turns a waiting device away: its code is forgotten at once, so its activation
    /// poll gets 403 and it must run the OTA check again (a new code) to ask once more.
    pub fn deny(&mut self, code: &str) -> Result<Pending, DeviceError> {
        let code = code.trim();
        let Some(at) = self.pending.iter().position(|p| p.code == code) else {
            return Err(DeviceError::Rule(format!(
                "no device is waiting with code {}; `chela device list` shows the codes waiting",
                code.chars().take(20).collect::<String>()
            )));
        };
        Ok(self.pending.remove(at))
    }

    /// The owner turns every waiting device away at once (a flood of made-up ones), returning
    /// them.
    pub fn deny_all(&mut self) -> Vec<Pending> {
        std::mem::take(&mut self.pending)
    }

    /// Whether `token` is the current token of the approved device `id`, presented with the
    /// `client_id` it was issued to (for the WebSocket).
    pub fn token_ok(&self, id: &str, client_id: &str, token: &str) -> bool {
        let Some(d) = self.devices.iter().find(|d| d.id == id && d.state == State::Approved) else { return false };
        if !constant_time_eq(d.client_id.as_bytes(), client_id.as_bytes()) {
            return false;
        }
        !d.token_sha256.is_empty() && constant_time_eq(token_hash(token).as_bytes(), d.token_sha256.as_bytes())
    }

    /// The bearer the camera tool of the approved device `id` sends to `/mcp/vision/explain`
    /// (handed over in the MCP `initialize`): an HMAC of the id keyed by the hash of the
    /// device's current WebSocket token. Nothing more is stored, and it stops working when the
    /// device is revoked or gets a new token.
    pub fn vision_token(&self, id: &str) -> Option<String> {
        let d = self.devices.iter().find(|d| d.id == id && d.state == State::Approved)?;
        if d.token_sha256.is_empty() {
            return None;
        }
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, d.token_sha256.as_bytes());
        Some(hex_of(ring::hmac::sign(&key, format!("chela vision|{id}").as_bytes()).as_ref()))
    }

    /// Whether `token` is the current vision bearer of device `id`.
    pub fn vision_token_ok(&self, id: &str, token: &str) -> bool {
        self.vision_token(id).is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes()))
    }

    /// The firmware offered to `id`, running `current`: the offer when it is for this device
    /// (or all) and newer.
    pub fn firmware_for(&self, id: &str, current: &str) -> Option<&FirmwareOffer> {
        self.firmware.as_ref().filter(|f| {
            (f.device.is_empty() || f.device == id) && chela_proto::xiaozhi::ota::newer(&f.version, current)
        })
    }
}

/// The file as read: each entry on its own, so one bad entry does not lose the others.
#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    devices: Vec<serde_json::Value>,
    #[serde(default)]
    pending: Vec<serde_json::Value>,
    #[serde(default)]
    firmware: Option<serde_json::Value>,
}

/// Parses the store's text. Entries that do not read, or break a rule (an id that is not a
/// MAC, a duplicate), are dropped and counted in the second value.
pub fn parse(text: &str) -> Result<(DeviceState, usize), String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if !value.is_object() {
        return Err("it is not a JSON object".to_owned());
    }
    let raw: Raw = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let mut skipped = 0;
    let mut state = DeviceState::default();
    for v in raw.devices {
        match serde_json::from_value::<Device>(v) {
            Ok(d)
                if normalize_id(&d.id).as_deref() == Some(d.id.as_str())
                    && valid_client_id(&d.client_id)
                    && state.devices.len() < MAX_DEVICES
                    && !state.devices.iter().any(|o| o.id == d.id) =>
            {
                state.devices.push(Device { info: d.info.clone().clipped(), ..d });
            }
            _ => skipped += 1,
        }
    }
    for v in raw.pending {
        match serde_json::from_value::<Pending>(v) {
            Ok(p)
                if normalize_id(&p.id).as_deref() == Some(p.id.as_str())
                    && valid_client_id(&p.client_id)
                    && p.code.len() == 6
                    && state.pending.len() < 1000
                    && !state.pending.iter().any(|o| o.id == p.id || o.code == p.code) =>
            {
                state.pending.push(Pending { info: p.info.clone().clipped(), ..p });
            }
            _ => skipped += 1,
        }
    }
    if let Some(v) = raw.firmware.filter(|v| !v.is_null()) {
        match serde_json::from_value::<FirmwareOffer>(v) {
            Ok(f) if plain_bin_name(&f.file) => state.firmware = Some(f),
            _ => skipped += 1,
        }
    }
    Ok((state, skipped))
}

/// A firmware file name Chela writes: `[A-Za-z0-9._-]+.bin`, no leading dot.
pub fn plain_bin_name(name: &str) -> bool {
    name.len() <= 80
        && name.ends_with(".bin")
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The store on disk.
#[derive(Clone, Debug)]
pub struct Devices {
    path: PathBuf,
}

impl Devices {
    pub fn open(ws: &Workspace) -> Devices {
        Devices { path: ws.root().join("state").join(STORE_FILE) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder firmware images are kept in.
    pub fn firmware_dir(&self) -> PathBuf {
        self.path.parent().and_then(Path::parent).unwrap_or(Path::new(".")).join("firmware")
    }

    /// Reads the store; a missing file is empty.
    pub fn load(&self) -> Result<DeviceState, DeviceError> {
        let left = "Chela left it as it is: fix it, or move it away to start over with no devices";
        let text = match crate::authority::read_sealed(&self.path, MAX_STORE_BYTES) {
            Ok(None) => return Ok(DeviceState::default()),
            Ok(Some(text)) => text,
            Err(e @ crate::authority::SealError::Untrusted { .. }) => return Err(DeviceError::Store(format!("{e}."))),
            Err(e) => return Err(DeviceError::Store(format!("cannot read the device store: {e}. {left}."))),
        };
        let (state, skipped) = parse(&text).map_err(|e| {
            DeviceError::Store(format!("{} is not a valid device store ({e}). {left}.", self.path.display()))
        })?;
        if skipped > 0 {
            chela_log::warn!("{}: {skipped} entries could not be read and are left out", self.path.display());
        }
        Ok(state)
    }

    /// Applies `change` under the file's lock and writes the result atomically if it succeeds.
    pub fn edit<T>(&self, change: impl FnOnce(&mut DeviceState) -> Result<T, DeviceError>) -> Result<T, DeviceError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| DeviceError::Store(format!("cannot create {}: {e}", dir.display())))?;
        crate::lock::with_file_lock(&self.path, || {
            let mut state = self.load()?;
            let out = change(&mut state)?;
            let json = serde_json::to_vec_pretty(&state).map_err(|e| DeviceError::Store(e.to_string()))?;
            let written = crate::authority::seal(&self.path, &json).and_then(|json| {
                open_dir(dir).and_then(|fd| write_atomic_at(&fd, STORE_FILE.as_ref(), &json, Replace::Yes))
            });
            written.map_err(|e| DeviceError::Store(format!("cannot write {}: {e}", self.path.display())))?;
            Ok(out)
        })
    }
}

/// `N` random bytes from the kernel.
pub fn random<const N: usize>() -> Result<[u8; N], DeviceError> {
    let mut bytes = [0u8; N];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty())
        .map_err(|e| DeviceError::Store(format!("cannot read random bytes: {e}")))?;
    Ok(bytes)
}

#[cfg(test)]
#[path = "devices_tests.rs"]
mod tests;
