//! The two ways Chela writes a file without ever tearing it, and the bounded reads that go
//! with them: the floor under the workspace, the authority rule's seals and every store.
//!
//! Every file write in Chela goes through [`write_atomic`] (temp file, fsync, rename, fsync of
//! the folder: readers see the old or the new file, never a mix) or [`append_durable`] (one
//! write of whole lines, then fsync; a failed append is cut back, and readers skip a torn last
//! line). [`write_atomic_at`] is the same on a folder handle, for the file tools' sandbox.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, OFlags};

/// Creates `dir` and its missing parents, private to the user (0700).
#[cfg(unix)]
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Replaces `path` with `bytes` atomically: readers see the old file or the new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let dir = open_dir(dir)?;
    write_atomic_at(&dir, name, bytes, Replace::Yes)
}

/// Whether [`write_atomic_at`] may replace a file that already has the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replace {
    Yes,
    /// Fail with `AlreadyExists` instead; decided by the kernel at the rename, so a file that
    /// appears meanwhile is never replaced.
    No,
}

/// [`write_atomic`] for `name` in the folder `dir` (a handle, so nothing between the caller's
/// checks and the rename can redirect the write through a swapped folder or symlink).
///
/// The temp file is created with `O_EXCL | O_NOFOLLOW` under an unpredictable name: a symlink or
/// file planted at a guessed temp name makes the create fail instead of sending the content
/// (API keys included) through it. Keeps the permissions of the file being replaced.
pub fn write_atomic_at(dir: &OwnedFd, name: &OsStr, bytes: &[u8], replace: Replace) -> io::Result<()> {
    let (tmp, f) = create_temp(dir, name)?;
    let result = (|| {
        let mut f = File::from(f);
        if let Ok(st) = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            && rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::RegularFile
        {
            // Keep the permissions of the file being replaced (a 0600 config stays 0600).
            rfs::fchmod(&f, rfs::Mode::from_raw_mode(st.st_mode & 0o7777))?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        match replace {
            Replace::Yes => rfs::renameat(dir, &tmp, dir, name)?,
            Replace::No => rfs::renameat_with(dir, &tmp, dir, name, rfs::RenameFlags::NOREPLACE)?,
        }
        rfs::fsync(dir)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = rfs::unlinkat(dir, &tmp, AtFlags::empty());
    }
    result
}

/// Creates a new temp file for `name` in `dir`: exclusively, never through a symlink, 0600.
fn create_temp(dir: &OwnedFd, name: &OsStr) -> io::Result<(OsString, OwnedFd)> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut tries = 0;
    loop {
        let tmp = temp_name(name)?;
        match rfs::openat(dir, &tmp, flags, rfs::Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((tmp, fd)),
            // 64 random bits make a clash all but impossible; a few retries cover a planted name.
            Err(rustix::io::Errno::EXIST) if tries < 4 => tries += 1,
            Err(e) => return Err(e.into()),
        }
    }
}

/// `.NAME.PID.RANDOM.tmp`: the process id lets [`sweep_stale_temps`] tell a live writer's temp
/// file from a dead one's; the 64 random bits make the name impossible to guess in advance.
fn temp_name(name: &OsStr) -> io::Result<OsString> {
    let mut random = [0u8; 8];
    rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty())?;
    // Long names are cut so the temp name stays under the 255-byte limit of a name.
    let bytes = name.as_bytes();
    let short = OsStr::from_bytes(&bytes[..bytes.len().min(200)]);
    let mut out = OsString::from(".");
    out.push(short);
    out.push(format!(".{}.{:016x}.tmp", std::process::id(), u64::from_le_bytes(random)));
    Ok(out)
}

/// A temp file name beside `path` in the format [`sweep_stale_temps`] recognises, unique and
/// unpredictable. Whoever creates it must do so exclusively ([`write_atomic`] does).
pub fn temp_path(path: &Path) -> io::Result<PathBuf> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    Ok(dir.join(temp_name(name)?))
}

/// Deepest folder level and most entries [`sweep_stale_temps`] visits, so a huge or deeply
/// nested workspace cannot make every start slow.
const SWEEP_MAX_DEPTH: usize = 16;
const SWEEP_MAX_ENTRIES: usize = 20_000;

/// Removes temp files left by writers that were killed mid-write, in `dir` and every folder
/// beneath it (Chela's tools write anywhere in the workspace). A temp file of a live process
/// (another Chela writing right now) is left alone. Symlinks are never followed: folders are
/// opened beneath their parent's handle with `O_NOFOLLOW`.
pub fn sweep_stale_temps(dir: &Path) {
    let Ok(fd) = open_dir(dir) else { return };
    let mut budget = SWEEP_MAX_ENTRIES;
    sweep_dir(fd, 0, &mut budget);
}

fn sweep_dir(fd: OwnedFd, depth: usize, budget: &mut usize) {
    let Ok(mut entries) = rfs::Dir::read_from(&fd) else { return };
    let mut subdirs = Vec::new();
    while let Some(Ok(e)) = entries.read() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name).to_owned();
        let kind = match e.file_type() {
            // Some file systems do not say in the listing; ask the entry itself.
            rfs::FileType::Unknown => rfs::statat(&fd, &name, AtFlags::SYMLINK_NOFOLLOW)
                .map_or(rfs::FileType::Unknown, |st| rfs::FileType::from_raw_mode(st.st_mode)),
            kind => kind,
        };
        match kind {
            rfs::FileType::Directory if depth < SWEEP_MAX_DEPTH => subdirs.push(name),
            rfs::FileType::RegularFile if is_stale_temp(&name) => {
                let _ = rfs::unlinkat(&fd, &name, AtFlags::empty());
            }
            _ => {}
        }
    }
    drop(entries);
    for name in subdirs {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if let Ok(sub) = rfs::openat(&fd, &name, flags, rfs::Mode::empty()) {
            sweep_dir(sub, depth + 1, budget);
        }
    }
}

/// Whether `name` is a `.NAME.PID.X.tmp` temp file whose process is gone.
fn is_stale_temp(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else { return false };
    let Some(stem) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else { return false };
    let mut parts = stem.rsplitn(3, '.');
    let (_seq, pid) = (parts.next(), parts.next().and_then(|p| p.parse::<u32>().ok()));
    pid.is_some_and(|pid| pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists())
}

/// Opens a folder as a handle for the `*at` calls (and its fsync).
pub fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    Ok(rfs::open(dir, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, rfs::Mode::empty())?)
}

/// Appends `bytes` to `f` (opened for appending) whole or not at all, then fsyncs. On any
/// error (a full disk, a file size limit) the file is cut back to its previous length, so a
/// failed append leaves no partial piece behind.
pub fn append_whole(f: &mut File, bytes: &[u8]) -> io::Result<()> {
    let before = f.metadata()?.len();
    let result = f.write_all(bytes).and_then(|()| f.sync_data());
    if result.is_err() {
        // Best effort: if even this fails the original error is still the one to report.
        let _ = f.set_len(before).and_then(|()| f.sync_data());
    }
    result
}

/// Appends `text` (whole lines) with one write and fsyncs it. If the file ends in a torn line
/// (no final newline), a newline is written first so the new lines stay whole. A failed append
/// is cut back ([`append_whole`]).
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
    append_whole(&mut f, buf.as_bytes())?;
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
    let stamp = crate::clock::Clock::system().unix_secs_u64();
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

/// Reads a text file of at most `limit` bytes; `Ok(None)` when it does not exist. Anything but
/// a regular file (a FIFO, a device) is an error.
pub fn read_bounded(path: &Path, limit: u64) -> io::Result<Option<String>> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever (a
    // `cron.json` made with mkfifo hung `chela doctor` and the daemon's start). Reads of a
    // regular file do not change with it.
    let f = match OpenOptions::new().read(true).custom_flags(OFlags::NONBLOCK.bits() as i32).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!("{} is not a regular file", path.display())));
    }
    let len = meta.len();
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
    fn temp_names_cannot_be_guessed_and_are_still_swept() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (temp_path(&dir.path().join("n.md")).unwrap(), temp_path(&dir.path().join("n.md")).unwrap());
        assert_ne!(a, b);
        let name = a.file_name().unwrap().to_str().unwrap().to_owned();
        let random = name.rsplit('.').nth(1).unwrap();
        assert_eq!(random.len(), 16, "{name}");
        // The same shape, from a process that is gone, is swept.
        let dead = dir.path().join(format!(".n.md.999999999.{random}.tmp"));
        fs::write(&dead, "x").unwrap();
        sweep_stale_temps(dir.path());
        assert!(!dead.exists());
    }

    #[test]
    fn atomic_write_without_replace_leaves_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), "old").unwrap();
        let fd = open_dir(dir.path()).unwrap();
        let e = write_atomic_at(&fd, OsStr::new("f"), b"new", Replace::No).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(dir.path().join("f")).unwrap(), "old");
        write_atomic_at(&fd, OsStr::new("g"), b"new", Replace::No).unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2, "no temp file is left behind");
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
        // A FIFO with no writer is refused at once rather than waited on.
        let fifo = dir.path().join("fifo");
        rfs::mknodat(rfs::CWD, &fifo, rfs::FileType::Fifo, rfs::Mode::from_raw_mode(0o600), 0).unwrap();
        let e = read_bounded(&fifo, 10).unwrap_err();
        assert!(e.to_string().contains("is not a regular file"), "{e}");
    }
}
