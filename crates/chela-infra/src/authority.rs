//! The authority rule: what the model writes is data, never authority.
//!
//! Some files decide who may talk to Chela, which devices and tool hosts are approved, which pins
//! it may drive, which programs it starts and which capability groups are on. The model must
//! never change them, whatever tool it reaches them through (the file tools, a Lua script's
//! `cap.call`, a skill, a rule or a job): a prompt-injected model could otherwise give a stranger
//! lasting access without the owner approving anything.
//!
//! Two kinds of such files, and one rule for each:
//! - **The owner's files**, written by hand or by the owner's commands: `chela.toml` and
//!   `overrides.toml` (keys, MCP servers, capability switches), `board.json` (the hardware
//!   allowlist), `rules.json` and `cron.json` (changed through the router and scheduler tools,
//!   which record who made each entry). The file tools, and so everything that calls them, refuse
//!   to write them; the configuration files and the folders below cannot even be read.
//!   [`PROTECTED`] is that list; the file tools' sandbox (`tools::sandbox`) is the one place every
//!   model-driven file access passes.
//! - **Chela's own records of the owner's decisions** in `state/` (the pairing store, the
//!   approved devices, the MCP endpoint tokens): the whole folder is out of the file tools'
//!   reach, and the stores in [`SEALED`] carry a seal, an HMAC-SHA256 over the file's bytes with
//!   a key kept in `state/seal.key`. Chela writes them only when the owner acts (`chela pairing
//!   approve`, the console, …). A store whose seal is missing or does not match was changed
//!   outside Chela: it is refused, not trusted silently, and the owner is told how to accept it
//!   (`chela state trust FILE`) after checking it.
//!
//! Upgrading: the key is made at the first start ([`prepare`], from `Workspace::ensure`) or the
//! first time a store is needed; stores already there then (written by an older Chela, before
//! seals) are recorded in the key file as adopted, byte for byte; such a store is trusted as it
//! is until Chela next writes it, sealed. Nothing is rewritten, so no
//! lock is needed and a store being written meanwhile is never lost.
//!
//! What this does not protect against: a program of the same user that writes to `state/`
//! directly (it can read the key too). Seals stop the model's tools and a hand-planted file, not
//! another process with the owner's rights.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use ring::hmac;

use crate::fsio::{Replace, create_private_dir, open_dir, read_bounded, write_atomic_at};

/// The config file inside the workspace.
pub const CONFIG_FILE: &str = "chela.toml";
/// Runtime overrides written by `chela config set`.
pub const OVERRIDES_FILE: &str = "overrides.toml";
/// The folder of Chela's records, in the workspace.
pub const STATE_DIR: &str = "state";
/// The seal key's file, in [`STATE_DIR`].
pub const KEY_FILE: &str = "seal.key";
/// The sealed stores, in [`STATE_DIR`].
pub const SEALED: &[&str] = &[ACCESS_STORE, DEVICES_STORE, ENDPOINTS_STORE];
/// The pairing store (who may talk to Chela), in [`STATE_DIR`].
pub const ACCESS_STORE: &str = "access.json";
/// The approved voice devices, in [`STATE_DIR`].
pub const DEVICES_STORE: &str = "devices.json";
/// The MCP endpoints' tokens, in [`STATE_DIR`].
pub const ENDPOINTS_STORE: &str = "mcp_endpoints.json";
// The stores' names live here, not with their owners, because this rule lists them and every
// owner seals through it: the names sit under both.
/// The board description (its owner, `board::FILE`, is an alias).
pub const BOARD_FILE: &str = "board.json";
/// The router's rule file and the version a tool replaced.
pub const RULES_FILE: &str = "rules.json";
pub const RULES_BACKUP: &str = "rules.json.bak";
/// The scheduler's job file and the version a tool replaced.
pub const CRON_FILE: &str = "cron.json";
pub const CRON_BACKUP: &str = "cron.json.bak";

/// How a protected name may be reached by the file tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Neither read nor written (nor listed).
    None,
    /// Read, never written, moved or deleted.
    ReadOnly,
}

/// A name in the workspace folder that the file tools do not change, and why.
#[derive(Clone, Copy, Debug)]
pub struct Protected {
    pub name: &'static str,
    pub reach: Reach,
    pub why: &'static str,
}

const KEYS_WHY: &str = "it holds the configuration and API keys; only you change it (chela config set, or by hand)";
const SESSIONS_WHY: &str = "it holds the conversation records";
const STATE_WHY: &str = "it holds who may talk to Chela, the approved devices and endpoints, and Chela's own records";
const BOARD_WHY: &str =
    "it decides which pins and devices Chela may drive; only the owner changes it, then board_reload";
const RULES_WHY: &str =
    "rules change only through router_add_rule and router_remove_rule, which record who made each one";
const CRON_WHY: &str = "jobs change only through the scheduler tools, which record who made each one";

/// The protected names of the workspace folder (compared without regard to ASCII case).
pub const PROTECTED: &[Protected] = &[
    Protected { name: CONFIG_FILE, reach: Reach::None, why: KEYS_WHY },
    Protected { name: OVERRIDES_FILE, reach: Reach::None, why: KEYS_WHY },
    Protected { name: "sessions", reach: Reach::None, why: SESSIONS_WHY },
    Protected { name: STATE_DIR, reach: Reach::None, why: STATE_WHY },
    Protected { name: BOARD_FILE, reach: Reach::ReadOnly, why: BOARD_WHY },
    Protected { name: RULES_FILE, reach: Reach::ReadOnly, why: RULES_WHY },
    Protected { name: RULES_BACKUP, reach: Reach::ReadOnly, why: RULES_WHY },
    Protected { name: CRON_FILE, reach: Reach::ReadOnly, why: CRON_WHY },
    Protected { name: CRON_BACKUP, reach: Reach::ReadOnly, why: CRON_WHY },
];

/// The protected entry `name` (a name in the workspace folder) matches, if any.
pub fn protected(name: &[u8]) -> Option<&'static Protected> {
    PROTECTED.iter().find(|p| name.eq_ignore_ascii_case(p.name.as_bytes()))
}

/// Why a sealed store is not used.
#[derive(Debug)]
pub enum SealError {
    Io(io::Error),
    /// The file is there but Chela did not write it as it is now.
    Untrusted {
        path: PathBuf,
        why: &'static str,
    },
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealError::Io(e) => e.fmt(f),
            SealError::Untrusted { path, why } => {
                let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
                write!(
                    f,
                    "{} was changed outside Chela ({why}), so nothing in it is trusted. If you changed it \
                     yourself, check it and run `chela state trust {name}`; otherwise move it away",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for SealError {}

impl From<io::Error> for SealError {
    fn from(e: io::Error) -> Self {
        SealError::Io(e)
    }
}

/// The seal key and the stores adopted when it was made.
struct Keyring {
    key: hmac::Key,
    adopted: Vec<(String, [u8; 32])>,
}

impl Keyring {
    fn mac(&self, name: &str, bytes: &[u8]) -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(hmac::sign(&self.key, &sealed_bytes(name, bytes)).as_ref());
        out
    }

    /// Whether `mac` is the MAC of `bytes` for `name`, compared in constant time.
    fn verify(&self, name: &str, bytes: &[u8], mac: &[u8; 32]) -> bool {
        hmac::verify(&self.key, &sealed_bytes(name, bytes), mac).is_ok()
    }
}

/// What a MAC covers: the store's name too, so one store's content is no good under another's.
fn sealed_bytes(name: &str, bytes: &[u8]) -> Vec<u8> {
    let mut all = Vec::with_capacity(name.len() + 1 + bytes.len());
    all.extend_from_slice(name.as_bytes());
    all.push(0);
    all.extend_from_slice(bytes);
    all
}

const KEY_HEADER: &str = "chela-seal-key v1";
const MAX_KEY_BYTES: u64 = 4096;
const MAX_ADOPTED_BYTES: u64 = 4 << 20;

/// Reads the key of the folder `dir`, making it (and recording the stores already there as
/// adopted) when there is none.
fn keyring(dir: &Path) -> io::Result<Keyring> {
    let path = dir.join(KEY_FILE);
    for _ in 0..2 {
        if let Some(text) = read_bounded(&path, MAX_KEY_BYTES)? {
            return parse_key(&text).ok_or_else(|| {
                io::Error::other(format!(
                    "{} is not a seal key, so the sealed stores cannot be checked. Restore it from a backup, \
                     or move it away (a new key is made) and then check each store in state/ and accept it \
                     with `chela state trust FILE`",
                    path.display()
                ))
            });
        }
        let mut secret = [0u8; 32];
        rustix::rand::getrandom(&mut secret, rustix::rand::GetRandomFlags::empty()).map_err(io::Error::from)?;
        let ring = Keyring { key: hmac::Key::new(hmac::HMAC_SHA256, &secret), adopted: Vec::new() };
        let mut text = format!("{KEY_HEADER}\nkey {}\n", hex_of(&secret));
        for name in SEALED {
            match read_bounded(&dir.join(name), MAX_ADOPTED_BYTES) {
                Ok(Some(old)) if split(&old).is_none() => {
                    text.push_str(&format!("adopted {name} {}\n", hex_of(&ring.mac(name, old.as_bytes()))));
                    chela_log::warn!(
                        "{}: written before Chela sealed its authority files; trusted as it is now",
                        dir.join(name).display()
                    );
                }
                _ => {}
            }
        }
        create_private_dir(dir)?;
        match write_atomic_at(&open_dir(dir)?, KEY_FILE.as_ref(), text.as_bytes(), Replace::No) {
            Ok(()) => return Ok(parse_key(&text).expect("the key just written parses")),
            // Another process made it first: use that one.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!("{} keeps changing", path.display())))
}

fn parse_key(text: &str) -> Option<Keyring> {
    let mut lines = text.lines();
    if lines.next()? != KEY_HEADER {
        return None;
    }
    let secret = unhex::<32>(lines.next()?.strip_prefix("key ")?)?;
    let mut adopted = Vec::new();
    for line in lines {
        let mut words = line.split(' ');
        let (Some("adopted"), Some(name), Some(mac), None) = (words.next(), words.next(), words.next(), words.next())
        else {
            return None;
        };
        adopted.push((name.to_owned(), unhex::<32>(mac)?));
    }
    Some(Keyring { key: hmac::Key::new(hmac::HMAC_SHA256, &secret), adopted })
}

const SEAL_MEMBER: &str = "\"seal\": \"";

/// A sealed text's parts: everything up to the seal's value (what the MAC covers), the MAC, and
/// the JSON without the seal member.
fn split(text: &str) -> Option<(&str, [u8; 32], String)> {
    let t = text.trim_end().strip_suffix('}')?.trim_end().strip_suffix('"')?;
    let covered = t.get(..t.len().checked_sub(64)?)?;
    let mac = unhex::<32>(&t[covered.len()..])?;
    let before = covered.strip_suffix(SEAL_MEMBER)?.trim_end();
    let before = before.strip_suffix(',').unwrap_or(before);
    Some((covered, mac, format!("{before}\n}}")))
}

/// Makes the seal key of the folder `dir` if there is none yet (at every start, so a store
/// planted later is never adopted).
pub fn prepare(dir: &Path) -> io::Result<()> {
    keyring(dir).map(|_| ())
}

/// `json`, one serialized store (a JSON object) for the file at `path`, with its seal: a last
/// member `"seal"` whose value is the MAC of every byte before it. The result is still JSON.
pub fn seal(path: &Path, json: &[u8]) -> io::Result<Vec<u8>> {
    let (dir, name) = dir_and_name(path)?;
    let ring = keyring(dir)?;
    let text = std::str::from_utf8(json).map_err(io::Error::other)?.trim_end();
    let inner = text
        .strip_suffix('}')
        .filter(|_| text.starts_with('{'))
        .ok_or_else(|| io::Error::other("only a JSON object can be sealed"))?
        .trim_end();
    let mut out = String::with_capacity(text.len() + 96);
    out.push_str(inner);
    if inner != "{" {
        out.push(',');
    }
    out.push_str("\n  ");
    out.push_str(SEAL_MEMBER);
    let mac = ring.mac(name, out.as_bytes());
    out.push_str(&hex_of(&mac));
    out.push_str("\"\n}\n");
    Ok(out.into_bytes())
}

/// The store at `path` if Chela wrote it as it is (sealed, or adopted when the key was made),
/// without its seal; `None` when there is no file. Reads at most `limit` bytes.
pub fn read_sealed(path: &Path, limit: u64) -> Result<Option<String>, SealError> {
    let Some(text) = read_bounded(path, limit)? else { return Ok(None) };
    let (dir, name) = dir_and_name(path)?;
    let ring = keyring(dir)?;
    let untrusted = |why| SealError::Untrusted { path: path.to_owned(), why };
    match split(&text) {
        Some((covered, mac, json)) => {
            if ring.verify(name, covered.as_bytes(), &mac) {
                Ok(Some(json))
            } else {
                Err(untrusted("its seal does not match its content"))
            }
        }
        None => {
            let mac = ring.mac(name, text.as_bytes());
            if ring.adopted.iter().any(|(n, m)| n == name && *m == mac) {
                Ok(Some(text))
            } else {
                Err(untrusted("it has no seal"))
            }
        }
    }
}

/// The owner's `chela state trust NAME`: seals the store `name` in `dir` as it is now, after the
/// owner checked it; what it says about the store.
pub fn trust(dir: &Path, name: &str, limit: u64) -> io::Result<String> {
    let Some(&name) = SEALED.iter().find(|n| **n == name) else {
        return Err(io::Error::other(format!("`{name}` is not a sealed store; they are: {}", SEALED.join(", "))));
    };
    let path = dir.join(name);
    crate::lock::with_file_lock(&path, || {
        let Some(text) = read_bounded(&path, limit)? else {
            return Err(io::Error::other(format!("{} does not exist", path.display())));
        };
        let json = split(&text).map_or_else(|| text.clone(), |(_, _, json)| json);
        serde_json::from_str::<serde_json::Value>(&json)
            .map_err(|e| io::Error::other(format!("{} is not JSON ({e}); fix it first", path.display())))?;
        let sealed = seal(&path, json.as_bytes())?;
        write_atomic_at(&open_dir(dir)?, name.as_ref(), &sealed, Replace::Yes)?;
        Ok(format!("{} is trusted as it is now.", path.display()))
    })
}

/// Each sealed store of `dir` that is there, and whether it is trusted (`Err` says why not).
pub fn check(dir: &Path, limit: u64) -> Vec<(&'static str, Result<(), String>)> {
    SEALED
        .iter()
        .filter(|n| dir.join(n).exists())
        .map(|n| (*n, read_sealed(&dir.join(n), limit).map(|_| ()).map_err(|e| e.to_string())))
        .collect()
}

fn dir_and_name(path: &Path) -> io::Result<(&Path, &str)> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| io::Error::other("a store needs a name"))?;
    Ok((dir, name))
}

/// Lower-case hex of `bytes` (seals, device tokens, login links).
pub fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests;
