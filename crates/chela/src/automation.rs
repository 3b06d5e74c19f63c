//! The host's side of the zone maths in `chela_core::zone`: time zones from the system's tz
//! database. (`cron.json` is read by `crate::scheduler::read_file` only, for the daemon, the
//! CLI and `chela doctor` alike.)

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use chela_core::cap::Caller;
use chela_core::router::MadeBy;
use chela_core::zone::{Zone, check_zone_name};

/// What a tolerant reader of `cron.json` or `rules.json` found wrong: one type for both stores.
#[derive(Clone, Debug)]
pub struct Problems<B> {
    /// Entries left out, with their line.
    pub bad: Vec<B>,
    /// The file could not be used at all (a symlink, too large, not UTF-8, not a list): nothing
    /// from it runs.
    pub whole: Option<String>,
}

impl<B> Default for Problems<B> {
    fn default() -> Self {
        Problems { bad: Vec::new(), whole: None }
    }
}

/// A bad entry as the log and `chela doctor` show it, naming its file and line.
pub trait BadLine {
    fn bad_line(&self) -> String;
}

impl BadLine for chela_core::router::Problem {
    fn bad_line(&self) -> String {
        // The core's text already starts with `rules.json line N`.
        self.to_string()
    }
}

impl BadLine for chela_core::schedule::file::BadEntry {
    fn bad_line(&self) -> String {
        format!("{} {self}", crate::scheduler::FILE)
    }
}

impl<B: BadLine> Problems<B> {
    pub fn is_empty(&self) -> bool {
        self.bad.is_empty() && self.whole.is_none()
    }

    /// One line per problem, for the log and `chela doctor`.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self.whole.iter().cloned().collect();
        out.extend(self.bad.iter().map(BadLine::bad_line));
        out
    }
}

/// Who makes a rule or job through a tool: `Ok(None)` for the owner (`chela cap call`, the
/// owner's own rules, jobs and scripts), `Ok(Some(..))` for the model, with the conversation
/// the call was made in and the hidden groups that conversation could call then. Anything
/// called from a conversation is the model's, whoever the caller says it is. The model
/// without a conversation (an MCP client of `chela mcp serve`) cannot make one: there is no
/// chat to hold it to.
pub fn made_by(ctx: &crate::tools::ToolCtx) -> Result<Option<MadeBy>, String> {
    let Some((channel, chat_id)) = &ctx.conversation else {
        if ctx.caller == Caller::Model {
            return Err("rules and jobs made by the assistant belong to a conversation, and this call has none; \
                 the owner adds them with `chela cron add` or by editing rules.json"
                .to_owned());
        }
        return Ok(None);
    };
    let groups = ctx.session.as_ref().map_or_else(Vec::new, |s| {
        chela_core::skills::unlocked_groups(
            &ctx.toolbox.registry(),
            &s.named_groups(),
            &ctx.cfg.list(chela_core::config::CAPS_HIDDEN),
        )
    });
    let m = MadeBy::new(channel, chat_id, groups);
    m.check().map_err(|e| format!("this conversation cannot own a rule or job: {e}"))?;
    Ok(Some(m))
}

/// The context and scope a model-made rule or job calls its tools in: its conversation, and
/// the hidden groups it recorded, less any the person hid since.
pub(crate) fn model_ctx(ctx: &mut crate::tools::ToolCtx, m: &MadeBy) -> Vec<String> {
    ctx.conversation = Some((m.channel.clone(), m.chat_id.clone()));
    ctx.session = Some(std::sync::Arc::new(crate::skills::SessionRef::new(&m.channel, &m.chat_id, m.groups.clone())));
    chela_core::skills::unlocked_groups(
        &ctx.toolbox.registry(),
        &m.groups,
        &ctx.cfg.list(chela_core::config::CAPS_HIDDEN),
    )
}

/// The log line for a model-made rule or job that would have acted but waits for the owner.
pub fn waiting_line(kind: &str, id: &str, approve: &str) -> String {
    format!(
        "{kind} {id} was made by the assistant and acts on another chat than the one it was made in: it waits \
         for the owner's approval and did nothing (approve it with `{approve} {id}`, or remove it)"
    )
}

/// Where zones are read from, unless `TZDIR` says otherwise (as for the C library).
const ZONEINFO: &str = "/usr/share/zoneinfo";
/// The largest zone file read (the database's largest is under 4 KiB).
const MAX_ZONE_FILE: u64 = 64 * 1024;

fn zoneinfo_dir() -> PathBuf {
    std::env::var_os("TZDIR").filter(|d| !d.is_empty()).map_or_else(|| PathBuf::from(ZONEINFO), PathBuf::from)
}

/// The zone in the TZif file at `path`, called `name`; its size bounded.
pub(crate) fn read_zone_file(name: &str, path: &Path) -> Result<Zone> {
    let bytes = match std::fs::File::open(path) {
        Ok(f) => {
            use std::io::Read;
            let mut bytes = Vec::new();
            f.take(MAX_ZONE_FILE + 1)
                .read_to_end(&mut bytes)
                .with_context(|| format!("cannot read {}", path.display()))?;
            bytes
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "time zone {name:?} is not in {} (check the name, like `Europe/Berlin`, or install the tz database: Debian `tzdata`)",
                zoneinfo_dir().display()
            )
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    Zone::from_tzif(name, &bytes).with_context(|| format!("time zone {name:?} ({})", path.display()))
}

/// The zone named `name` (an IANA name, in any case, as the tz database's lookup allows), or the
/// system's when `name` is empty (see [`system_zone`]).
pub fn load_zone(name: &str) -> Result<Zone> {
    if name.is_empty() {
        return system_zone();
    }
    check_zone_name(name)?;
    let dir = zoneinfo_dir();
    let path = dir.join(name);
    if !path.exists()
        && let Some(real) = find_ignoring_case(&dir, name)
    {
        return read_zone_file(&real, &dir.join(&real));
    }
    read_zone_file(name, &path)
}

/// The system's zone: `TZ` (an IANA name, a zone file's absolute path, or a POSIX rule such as
/// `CET-1CEST,M3.5.0,M10.5.0/3`), else `/etc/localtime` (named after the zone its link points
/// to, `local` when it is a copy), else UTC. A `TZ` that is none of these is an error.
pub fn system_zone() -> Result<Zone> {
    if let Ok(tz) = std::env::var("TZ")
        && !tz.is_empty()
    {
        let tz = tz.strip_prefix(':').unwrap_or(&tz);
        if tz.starts_with('/') {
            return read_zone_file(tz, Path::new(tz));
        }
        if tz == "UTC" {
            return Ok(Zone::utc());
        }
        return load_zone(tz).or_else(|_| Zone::from_posix(tz).map_err(|e| anyhow::anyhow!("TZ={tz:?}: {e}")));
    }
    let local = Path::new("/etc/localtime");
    if !local.exists() {
        return Ok(Zone::utc());
    }
    let name = std::fs::read_link(local)
        .ok()
        .and_then(|t| t.to_str().and_then(|t| t.rsplit_once("zoneinfo/").map(|(_, n)| n.to_owned())))
        .filter(|n| check_zone_name(n).is_ok())
        .unwrap_or_else(|| "local".to_owned());
    read_zone_file(&name, local)
}

/// The database's spelling of `name` when it differs only in case (`europe/berlin`): each part
/// looked up in its folder, at most [`MAX_DIR_ENTRIES`] entries read per folder.
fn find_ignoring_case(dir: &Path, name: &str) -> Option<String> {
    const MAX_DIR_ENTRIES: usize = 4096;
    let mut at = dir.to_path_buf();
    let mut real = Vec::new();
    for part in name.split('/') {
        let found = std::fs::read_dir(&at)
            .ok()?
            .take(MAX_DIR_ENTRIES)
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .find(|n| n.eq_ignore_ascii_case(part))?;
        at.push(&found);
        real.push(found);
    }
    Some(real.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_load_by_name_and_bad_names_are_refused() {
        let berlin = load_zone("Europe/Berlin").unwrap();
        assert_eq!(berlin.offset_at(1_782_000_000), 7200, "summer 2026");
        let err = format!("{:#}", load_zone("Europe/Berlinn").unwrap_err());
        assert!(err.contains("is not in") && err.contains("tzdata"), "{err}");
        let err = format!("{:#}", load_zone("../../etc/passwd").unwrap_err());
        assert!(err.contains("bad time zone name"), "{err}");
        // A file that is not a zone.
        let err = format!("{:#}", load_zone("leapseconds").unwrap_err());
        assert!(err.contains("TZif"), "{err}");
        load_zone("").unwrap();
        // The database's lookup ignores case; the zone gets its real name.
        let berlin2 = load_zone("europe/BERLIN").unwrap();
        assert_eq!((berlin2.name(), berlin2.offset_at(1_782_000_000)), ("Europe/Berlin", 7200));
    }
}
