//! The host's side of the automation maths in `chela_core::schedule` and `chela_core::zone`:
//! reading `cron.json` from the workspace and time zones from the system's tz database.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use chela_core::schedule::file::{self, CronFile};
use chela_core::zone::{Zone, check_zone_name};
use jiff::tz::TimeZone;

use crate::workspace::{Workspace, read_bounded};

/// The jobs file in the workspace.
pub const CRON_FILE: &str = "cron.json";
/// Where zones are read from, unless `TZDIR` says otherwise (as for the C library and jiff).
const ZONEINFO: &str = "/usr/share/zoneinfo";
/// The largest zone file read (the database's largest is under 4 KiB).
const MAX_ZONE_FILE: u64 = 64 * 1024;

pub fn cron_path(ws: &Workspace) -> PathBuf {
    ws.root().join(CRON_FILE)
}

/// Reads `cron.json`: `Ok(None)` when there is none; bad entries are in the answer, a file that
/// cannot be read as a job list is an error saying where.
pub fn load_cron(ws: &Workspace) -> Result<Option<CronFile>> {
    let path = cron_path(ws);
    let Some(text) =
        read_bounded(&path, file::MAX_FILE_LEN as u64).with_context(|| format!("cannot read {}", path.display()))?
    else {
        return Ok(None);
    };
    file::load(&text).map(Some).map_err(|e| anyhow::anyhow!("{e}"))
}

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

/// The zone named `name` (an IANA name), or the system's when `name` is empty.
pub fn load_zone(name: &str) -> Result<Zone> {
    if name.is_empty() {
        let system = TimeZone::system();
        return match system.iana_name() {
            Some(iana) if check_zone_name(iana).is_ok() => load_zone(iana),
            // No name (a copied /etc/localtime): its bytes are the zone.
            _ => read_zone_file("localtime", Path::new("/etc/localtime")).or_else(|_| Ok(Zone::utc())),
        };
    }
    check_zone_name(name)?;
    read_zone_file(name, &zoneinfo_dir().join(name))
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
    }
}
