//! What became of each job's last run, kept in `state/jobs.json` so `chela cron list` (another
//! process) and a restarted daemon see it.
//!
//! Kept apart from `cron.json` on purpose: that file is the person's, and while it has bad
//! entries Chela must not rewrite it; an outcome is Chela's own note and is written after every
//! run. The file is written whole and atomically; a reader that finds it broken logs that and
//! starts from no outcomes (they are notes, not data anyone relies on).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::workspace::{read_bounded, write_atomic};

/// The file, under the workspace.
pub const FILE: &str = "state/jobs.json";
/// The longest message kept per outcome, in bytes (a long error is cut).
pub const MAX_MESSAGE: usize = 1024;
/// The largest file read: `scheduler.max_jobs` is at most 1000 jobs of about 1.2 KiB each.
const MAX_FILE: u64 = 2 * 1024 * 1024;

/// The last run of one job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// When the run ended (Unix seconds).
    pub at: i64,
    pub ok: bool,
    /// What it did, or why it could not.
    pub message: String,
    /// Run by hand (`scheduler_trigger_now`, `chela cron trigger`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub manual: bool,
}

impl Outcome {
    pub fn new(at: i64, ok: bool, message: &str, manual: bool) -> Outcome {
        let message = chela_core::text::prefix(message, MAX_MESSAGE).to_owned();
        Outcome { at, ok, message, manual }
    }

    /// One line for the listings, `at` being the end time as the reader's clock shows it:
    /// `ran at 2027-01-15 08:01:00 +01:00: answer sent to telegram/42`.
    pub fn line(&self, at: &str) -> String {
        let what = match (self.ok, self.manual) {
            (true, false) => "ran",
            (true, true) => "ran by hand",
            (false, _) => "not run",
        };
        format!("{what} at {at}: {}", self.message)
    }
}

#[derive(Deserialize)]
struct Stored {
    jobs: BTreeMap<String, Outcome>,
}

/// Reads the outcomes; a missing file is none, a broken one is none and a warning.
pub fn read(root: &Path) -> BTreeMap<String, Outcome> {
    let path = root.join(FILE);
    let text = match read_bounded(&path, MAX_FILE) {
        Ok(Some(text)) => text,
        Ok(None) => return BTreeMap::new(),
        Err(e) => {
            chela_log::warn!("cannot read {}: {e}; the jobs' last outcomes start afresh", path.display());
            return BTreeMap::new();
        }
    };
    match serde_json::from_str::<Stored>(&text) {
        Ok(s) => s.jobs,
        Err(e) => {
            chela_log::warn!("{} is not readable ({e}); the jobs' last outcomes start afresh", path.display());
            BTreeMap::new()
        }
    }
}

/// Writes the outcomes whole, atomically.
pub fn write(root: &Path, jobs: &BTreeMap<String, Outcome>) -> std::io::Result<()> {
    let path = root.join(FILE);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_string_pretty(&serde_json::json!({"version": 1, "jobs": jobs}))
        .map_err(std::io::Error::other)?;
    write_atomic(&path, text.as_bytes())
}
