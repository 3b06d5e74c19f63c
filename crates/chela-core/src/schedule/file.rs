//! `cron.json`: a tolerant reader and a writer.
//!
//! The file is `{"version": 1, "jobs": [ {job}, {job}, … ]}`, one job per line as written by
//! [`to_json`]. A hand edit that breaks one entry costs that entry only: [`load`] returns the
//! good jobs and, for each bad entry, its line and a message naming the field. Only a file that
//! is not JSON at all, or not that shape, is refused whole, with its line and column.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use chela_proto::json::read::{Kind, Reader};

use super::json::{self, Refused};
use super::{Job, Schedule};

/// The largest `cron.json` read.
pub const MAX_FILE_LEN: usize = 1024 * 1024;
/// The most jobs kept; entries beyond are reported as bad.
pub const MAX_JOBS: usize = 1000;
/// The file format version written and understood.
pub const VERSION: u32 = 1;

/// A job from the file, compiled, with the line its entry starts on.
#[derive(Clone, Debug)]
pub struct LoadedJob {
    pub job: Job,
    pub schedule: Schedule,
    pub line: usize,
}

/// An entry that was left out, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadEntry {
    /// Position in the `jobs` array, from 0.
    pub index: usize,
    /// Line (from 1) where the entry starts.
    pub line: usize,
    /// The entry's `id`, when it could be read.
    pub id: Option<String>,
    pub message: String,
}

impl fmt::Display for BadEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: job {}", self.line, self.index + 1)?;
        if let Some(id) = &self.id {
            write!(f, " ({id:?})")?;
        }
        write!(f, ": {}", self.message)
    }
}

#[derive(Clone, Debug, Default)]
pub struct CronFile {
    pub jobs: Vec<LoadedJob>,
    pub bad: Vec<BadEntry>,
}

/// A file that could not be read at all.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileError {
    TooLarge {
        len: usize,
    },
    /// Not JSON, or not `{"version": 1, "jobs": [...]}`.
    Malformed {
        line: usize,
        column: usize,
        message: String,
    },
    Version {
        found: u32,
    },
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::TooLarge { len } => write!(f, "cron.json is {len} bytes; the limit is {MAX_FILE_LEN}"),
            FileError::Malformed { line, column, message } => {
                write!(
                    f,
                    "cron.json line {line} column {column}: {message} (expected {{\"version\": 1, \"jobs\": [...]}})"
                )
            }
            FileError::Version { found } => {
                write!(f, "cron.json has version {found}; this Chela reads version {VERSION}")
            }
        }
    }
}

impl core::error::Error for FileError {}

/// The file's outline: its `version`, and where each entry of `jobs` starts and ends.
struct RawFile {
    version: Option<u32>,
    jobs: Vec<(usize, usize)>,
}

/// Reads the outline (any other key is ignored, as the derived reader did); each entry is only
/// checked to be JSON here, and read on its own later.
fn outline(r: &mut Reader<'_>) -> json::Result<RawFile> {
    let (mut version, mut jobs) = (None, None);
    r.begin_object()?;
    while let Some(key) = r.next_key()? {
        match key.as_ref() {
            "version" if version.is_some() => return Err(dup(r, "version")),
            "version" => version = Some(json::opt_u32(r)?),
            "jobs" if jobs.is_some() => return Err(dup(r, "jobs")),
            "jobs" => {
                if r.peek()? != Kind::Array {
                    return Err(json::invalid_type(r, "a sequence"));
                }
                r.begin_array()?;
                let mut entries = Vec::new();
                while r.next_item()? {
                    // An entry nested past the reader's limit costs that entry only.
                    let text = r.raw_deep()?;
                    entries.push((r.offset() - text.len(), r.offset()));
                }
                jobs = Some(entries);
            }
            _ => r.skip()?,
        }
    }
    match jobs {
        Some(jobs) => Ok(RawFile { version: version.flatten(), jobs }),
        None => Err(Refused { message: String::from("missing field `jobs`"), offset: r.offset() }),
    }
}

fn dup(r: &Reader<'_>, field: &str) -> Refused {
    Refused { message: format!("duplicate field `{field}`"), offset: r.offset() }
}

/// The entry's `id`, when it has a string one (for the report of a bad entry).
fn id_of(entry: &str) -> Option<String> {
    let mut r = Reader::new(entry.as_bytes());
    r.begin_object().ok()?;
    let mut id = None;
    while let Some(key) = r.next_key().ok()? {
        if key == "id" && id.is_none() {
            id = Some(r.string_opt().ok()?);
        } else {
            r.skip().ok()?;
        }
    }
    id.flatten()
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Reads `cron.json`. See the module docs.
pub fn load(text: &str) -> Result<CronFile, FileError> {
    if text.len() > MAX_FILE_LEN {
        return Err(FileError::TooLarge { len: text.len() });
    }
    // The derived reader also took a struct from an array; say plainly that an object is wanted.
    if let Some((i, c)) = text.char_indices().find(|(_, c)| !c.is_whitespace())
        && c != '{'
    {
        let line = line_of(text, i);
        let column = i - text[..i].rfind('\n').map_or(0, |n| n + 1) + 1;
        return Err(FileError::Malformed {
            line,
            column,
            message: String::from("the top level must be a JSON object"),
        });
    }
    let raw = json::parse(text, outline).map_err(|e| {
        let at = e.offset.min(text.len());
        let column = at - text[..at].rfind('\n').map_or(0, |n| n + 1);
        FileError::Malformed { line: line_of(text, at), column, message: e.message }
    })?;
    if let Some(found) = raw.version.filter(|&v| v != VERSION) {
        return Err(FileError::Version { found });
    }
    let mut out = CronFile::default();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (index, &(start, end)) in raw.jobs.iter().enumerate() {
        let entry = &text[start..end];
        let line = line_of(text, start);
        let id = id_of(entry);
        let mut bad = |message: String| out.bad.push(BadEntry { index, line, id: id.clone(), message });
        if index >= MAX_JOBS {
            bad(format!("more than {MAX_JOBS} jobs; this one is ignored"));
            continue;
        }
        // The derived reader took a struct from an array too, with a confusing message.
        if !entry.starts_with('{') {
            bad(String::from("a job must be a JSON object ({\"id\": …, \"trigger\": …, \"action\": …})"));
            continue;
        }
        let job: Job = match json::parse(entry, json::job) {
            Ok(job) => job,
            Err(e) => {
                let within = line_of(entry, e.offset);
                let at = if within > 1 { format!(" (line {})", line + within - 1) } else { String::new() };
                bad(format!("{}{at}", e.message));
                continue;
            }
        };
        let schedule = match job.validate() {
            Ok(s) => s,
            Err(e) => {
                bad(format!("{e}"));
                continue;
            }
        };
        if let Some(first) = seen.get(&job.id) {
            bad(format!("id {:?} is already used by the job on line {first}", job.id));
            continue;
        }
        seen.insert(job.id.clone(), line);
        out.jobs.push(LoadedJob { job, schedule, line });
    }
    Ok(out)
}

/// The file text for `jobs`: one job per line, so that [`load`]'s line numbers point at jobs.
pub fn to_json(jobs: &[Job]) -> String {
    let mut out = format!("{{\"version\": {VERSION}, \"jobs\": [\n");
    for (i, job) in jobs.iter().enumerate() {
        out.push_str("  ");
        json::write_job(&mut out, job);
        out.push_str(if i + 1 < jobs.len() { ",\n" } else { "\n" });
    }
    out.push_str("]}\n");
    out
}
