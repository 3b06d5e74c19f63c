//! The workspace folder and the two ways Chela writes a file without ever tearing it.
//!
//! Every file write in Chela goes through [`write_atomic`] (temp file, fsync, rename, fsync of
//! the folder: readers see the old or the new file, never a mix) or [`append_durable`] (one
//! write of whole lines, then fsync; readers skip a torn last line).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Where Chela keeps its files.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
}

/// The config file inside the workspace.
pub const CONFIG_FILE: &str = "chela.toml";
/// Runtime overrides written by `chela config set`.
pub const OVERRIDES_FILE: &str = "overrides.toml";

impl Workspace {
    /// `--workspace DIR`, else `CHELA_HOME`, else `~/.chela`.
    pub fn locate(flag: Option<PathBuf>) -> Result<Workspace> {
        let root = match flag {
            Some(p) => p,
            None => match std::env::var_os("CHELA_HOME").filter(|v| !v.is_empty()) {
                Some(p) => PathBuf::from(p),
                None => {
                    let home = std::env::var_os("HOME")
                        .filter(|v| !v.is_empty())
                        .context("HOME is not set: pass --workspace DIR or set CHELA_HOME")?;
                    PathBuf::from(home).join(".chela")
                }
            },
        };
        Ok(Workspace { root })
    }

    /// Creates the folder (private to the user) and its subfolders if missing.
    pub fn ensure(&self) -> Result<()> {
        for dir in [self.root.clone(), self.sessions_dir(), self.root.join("memory")] {
            if !dir.is_dir() {
                create_private_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            }
            sweep_stale_temps(&dir);
        }
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn config_path(&self) -> PathBuf {
        self.root.join(CONFIG_FILE)
    }

    pub fn overrides_path(&self) -> PathBuf {
        self.root.join(OVERRIDES_FILE)
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// `sessions/<channel>_<chat_id>.jsonl`, with anything but `[A-Za-z0-9_-.]` in the id
    /// replaced so an id can never name a path outside the folder.
    pub fn session_path(&self, channel: &str, chat_id: &str) -> PathBuf {
        let clean = |s: &str| -> String {
            s.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' }).collect()
        };
        let mut name = format!("{}_{}", clean(channel), clean(chat_id));
        if name.starts_with('.') {
            name.insert(0, '_');
        }
        self.sessions_dir().join(format!("{name}.jsonl"))
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Replaces `path` with `bytes` atomically: readers see the old file or the new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = temp_path(path)?;
    let result = (|| {
        let mut f = private_options().write(true).create(true).truncate(true).open(&tmp)?;
        if let Ok(meta) = fs::metadata(path) {
            // Keep the permissions of the file being replaced (a 0600 config stays 0600).
            let _ = f.set_permissions(meta.permissions());
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A temp file beside `path`, unique per writer (process and call), so two writers never share
/// one: `.NAME.PID.SEQ.tmp`. [`sweep_stale_temps`] removes those whose process is gone.
pub fn temp_path(path: &Path) -> io::Result<PathBuf> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(dir.join(format!(".{}.{}.{seq}.tmp", name.to_string_lossy(), std::process::id())))
}

/// Removes temp files left in `dir` by writers that were killed mid-write. A temp file of a
/// live process (another Chela writing right now) is left alone.
pub fn sweep_stale_temps(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else { continue };
        let mut parts = stem.rsplitn(3, '.');
        let (_seq, pid) = (parts.next(), parts.next().and_then(|p| p.parse::<u32>().ok()));
        if let Some(pid) = pid
            && pid != std::process::id()
            && !Path::new("/proc").join(pid.to_string()).exists()
        {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Appends `text` (whole lines) with one write and fsyncs it. If the file ends in a torn line
/// (no final newline), a newline is written first so the new lines stay whole.
pub fn append_durable(path: &Path, text: &str) -> io::Result<()> {
    let mut f = private_options().create(true).read(true).append(true).open(path)?;
    let len = f.metadata()?.len();
    let mut buf = String::with_capacity(text.len() + 1);
    if len > 0 {
        let mut last = [0u8; 1];
        f.seek(SeekFrom::Start(len - 1))?;
        f.read_exact(&mut last)?;
        if last[0] != b'\n' {
            buf.push('\n');
        }
    }
    buf.push_str(text);
    f.write_all(buf.as_bytes())?;
    f.sync_data()?;
    if len == 0 {
        // A new file's name must survive a crash too.
        sync_dir(path.parent().unwrap_or(Path::new(".")))?;
    }
    Ok(())
}

/// New files are readable by their owner only: they hold conversations and keys.
fn private_options() -> OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = OpenOptions::new();
    o.mode(0o600);
    o
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Moves a session file into `sessions/archive/`, stamped with the time; two archives in the
/// same second get `-1`, `-2`… so one never replaces another. Returns the archive's path.
pub fn archive_session(path: &Path) -> io::Result<Option<PathBuf>> {
    if !path.exists() {
        return Ok(None);
    }
    let target = archive_target(path)?;
    fs::rename(path, &target)?;
    Ok(Some(target))
}

/// A free name for `path` in the `archive` folder beside it.
pub fn archive_target(path: &Path) -> io::Result<PathBuf> {
    let dir = path.with_file_name("archive");
    create_private_dir(&dir)?;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut target = dir.join(format!("{stem}.{stamp}.jsonl"));
    let mut n = 1;
    while target.exists() {
        target = dir.join(format!("{stem}.{stamp}-{n}.jsonl"));
        n += 1;
    }
    Ok(target)
}

/// Reads at most the last `max` bytes of a file, starting at a line boundary, and the file's
/// whole length. `Ok(None)` when it does not exist.
pub fn read_tail_lines(path: &Path, max: u64) -> io::Result<Option<(String, u64)>> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let start = len.saturating_sub(max);
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::with_capacity((len - start) as usize);
    f.take(max).read_to_end(&mut bytes)?;
    let mut text = into_text(bytes);
    if start > 0 {
        // The first line is cut; it starts somewhere in the middle of a message.
        let cut = text.find('\n').map_or(text.len(), |i| i + 1);
        text.drain(..cut);
    }
    Ok(Some((text, len)))
}

/// Bytes as text: valid UTF-8 (the usual case) is taken without a copy; invalid bytes become
/// U+FFFD. Copying every memory file once more was the largest cost of building a prompt.
fn into_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Reads a text file of at most `limit` bytes; `Ok(None)` when it does not exist.
pub fn read_bounded(path: &Path, limit: u64) -> io::Result<Option<String>> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    if len > limit {
        return Err(io::Error::other(format!("{} is {len} bytes, over the {limit}-byte limit", path.display())));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.take(limit).read_to_end(&mut bytes)?;
    Ok(Some(into_text(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.toml");
        write_atomic(&p, b"one").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().filter_map(|e| e.ok()).collect();
        assert_eq!(leftovers.len(), 1, "no temp file is left behind");
    }

    #[test]
    fn stale_temps_of_dead_writers_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir.path().join(".a.toml.999999999.0.tmp");
        let mine = temp_path(&dir.path().join("b.toml")).unwrap();
        let other = dir.path().join(".notes.md");
        for p in [&dead, &mine, &other] {
            fs::write(p, "x").unwrap();
        }
        sweep_stale_temps(dir.path());
        assert!(!dead.exists());
        assert!(mine.exists() && other.exists());
    }

    #[test]
    fn append_repairs_a_torn_line_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        append_durable(&p, "{\"a\":1}\n").unwrap();
        fs::write(&p, "{\"a\":1}\n{\"torn").unwrap();
        append_durable(&p, "{\"b\":2}\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "{\"a\":1}\n{\"torn\n{\"b\":2}\n");
    }

    #[test]
    fn session_names_cannot_escape() {
        let ws = Workspace { root: PathBuf::from("/w") };
        assert_eq!(ws.session_path("cli", "local"), PathBuf::from("/w/sessions/cli_local.jsonl"));
        assert_eq!(ws.session_path("tg", "../../etc/passwd"), PathBuf::from("/w/sessions/tg_.._.._etc_passwd.jsonl"));
        assert_eq!(ws.session_path("", ""), PathBuf::from("/w/sessions/_.jsonl"));
    }

    #[test]
    fn tails_start_on_a_line_and_archives_do_not_collide() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        fs::write(&p, "first line\nsecond\nthird\n").unwrap();
        assert_eq!(read_tail_lines(&p, 100).unwrap(), Some(("first line\nsecond\nthird\n".to_owned(), 24)));
        assert_eq!(read_tail_lines(&p, 10).unwrap(), Some(("third\n".to_owned(), 24)));
        assert_eq!(read_tail_lines(&dir.path().join("none"), 10).unwrap(), None);
        let a = archive_session(&p).unwrap().unwrap();
        fs::write(&p, "again").unwrap();
        let b = archive_session(&p).unwrap().unwrap();
        assert_ne!(a, b);
        assert!(a.exists() && b.exists() && !p.exists());
        assert_eq!(archive_session(&p).unwrap(), None);
    }

    #[test]
    fn bounded_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        assert_eq!(read_bounded(&p, 10).unwrap(), None);
        fs::write(&p, "hello").unwrap();
        assert_eq!(read_bounded(&p, 10).unwrap().as_deref(), Some("hello"));
        assert!(read_bounded(&p, 3).is_err());
    }
}
