//! The host's side of the zone maths in `chela_core::zone`: time zones from the system's tz
//! database. (`cron.json` is read by `crate::scheduler::read_file` only, for the daemon, the
//! CLI and `chela doctor` alike.)

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use chela_core::zone::{Zone, check_zone_name};
use jiff::tz::TimeZone;

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

/// Where zones are read from, unless `TZDIR` says otherwise (as for the C library and jiff).
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
