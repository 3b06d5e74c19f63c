//! Time zones from the system's tz database: the host's side of the zone maths in
//! `chela_core::zone`. The floor under every reader of a zone (the clock's formatting, the
//! settings' checks, the scheduler, `chela doctor`), so none of them reaches into another.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use chela_core::zone::{Zone, check_zone_name};

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

/// The zone called `name` from the system's zone database ([`load_zone`], which `chela doctor`
/// uses too, so both read and refuse a name alike).
pub fn named_zone(name: &str) -> Result<Zone> {
    if name == "UTC" || name == "Etc/UTC" {
        return Ok(Zone::utc());
    }
    if name.is_empty() {
        // `load_zone` reads an empty name as "the system's"; here it is no name at all.
        bail!("time zone \"\": empty name");
    }
    load_zone(name)
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
