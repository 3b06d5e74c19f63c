//! `chela backup [FILE]` and `chela restore FILE [--force]`.
//!
//! A backup is every regular file and folder of the workspace in one tar archive, read while
//! holding the lock of every file that has one (the `.NAME.lock` sidecars of [`crate::lock`]),
//! taken in path order, so no store is read half-way through a change. Session logs are only
//! ever appended whole lines to; a line still being written is left out. Symlinks and other
//! special files are skipped (and named). The archive holds the secrets, so it is written
//! private (0600), atomically.
//!
//! A restore checks the whole archive first (see [`ustar`]) and writes nothing if any entry is
//! refused; files keep their modes (never more than `rwx` for anyone), folders are made
//! private, and nothing is written through a symlink.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::presence::daemon_running;
use crate::fsio::{create_private_dir, write_atomic};
use crate::workspace::Workspace;

mod ustar;

/// The most a backup or a restore moves: the archive is built in memory.
const MAX_ARCHIVE: u64 = 1 << 30;

pub async fn backup(ws: &Workspace, file: Option<PathBuf>) -> Result<ExitCode> {
    let root = ws.root();
    if !root.is_dir() {
        bail!("there is no workspace at {} to back up", root.display());
    }
    let file = file.unwrap_or_else(|| PathBuf::from(default_name(crate::clock::Clock::system().unix_secs())));
    let target = std::path::absolute(&file).unwrap_or_else(|_| file.clone());
    let mut paths = Vec::new();
    let mut skipped = Vec::new();
    walk(root, root, &mut paths, &mut skipped)?;
    // Every file with a lock, locked together, in path order so two backups cannot deadlock.
    let mut held = Vec::new();
    for (rel, is_dir) in &paths {
        let path = root.join(rel);
        if !is_dir && crate::lock::lock_path(&path).exists() {
            let lock = crate::lock::hold(&path, crate::lock::LOCK_WAIT).await.map_err(|e| match e {
                crate::lock::LockWait::TimedOut => {
                    anyhow::anyhow!("{} stayed locked for {} s; try again", rel, crate::lock::LOCK_WAIT.as_secs())
                }
                crate::lock::LockWait::Io(e) => e.into(),
            })?;
            held.push(lock);
        }
    }
    let mut out = Vec::new();
    let mut files = 0usize;
    let canonical_target = target.canonicalize().ok();
    for (rel, is_dir) in &paths {
        let path = root.join(rel);
        let meta = std::fs::symlink_metadata(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let mode = meta.permissions().mode() & 0o777;
        let entry = if *is_dir {
            ustar::Entry { path: rel.clone(), mode, kind: ustar::Kind::Dir, data: Vec::new() }
        } else {
            // The archive itself, when written inside the workspace, is not part of it.
            if canonical_target.as_deref().is_some_and(|t| path.canonicalize().ok().as_deref() == Some(t)) {
                continue;
            }
            let mut data = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            if rel.ends_with(".jsonl")
                && let Some(end) = data.iter().rposition(|b| *b == b'\n')
            {
                data.truncate(end + 1);
            }
            files += 1;
            ustar::Entry { path: rel.clone(), mode, kind: ustar::Kind::File, data }
        };
        ustar::write_entry(&mut out, &entry)?;
        if out.len() as u64 > MAX_ARCHIVE {
            bail!("the workspace is over {MAX_ARCHIVE} bytes; `chela backup` does not hold that much");
        }
    }
    drop(held);
    ustar::finish(&mut out);
    // A new file is created 0600 by write_atomic; an old one is made private too.
    write_atomic(&target, &out).with_context(|| format!("cannot write {}", target.display()))?;
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", target.display()))?;
    for s in &skipped {
        eprintln!("note: {s} is not a plain file or folder and is not in the backup");
    }
    outln!("Wrote {} ({files} files, {} bytes).", target.display(), out.len());
    eprintln!(
        "It holds the API keys, tokens and the pairing and device stores (chela.toml, overrides.toml, state/), \
         with their file modes: keep it as private as the workspace. Restore with `chela restore {}`.",
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Every folder and regular file under `dir`, relative to `root`, sorted; lock sidecars are
/// left out (they hold nothing), other special files are reported in `skipped`.
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, bool)>, skipped: &mut Vec<String>) -> Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("cannot list {}", dir.display()))?;
    chela_infra::sort::sort_by_key(&mut names, std::fs::DirEntry::file_name);
    for e in names {
        let path = e.path();
        let rel = path.strip_prefix(root).unwrap_or(&path);
        let Some(rel_text) = rel.to_str().map(str::to_owned) else {
            skipped.push(rel.display().to_string());
            continue;
        };
        let name = e.file_name();
        let name = name.to_string_lossy();
        let kind = e.file_type().with_context(|| format!("cannot read {}", path.display()))?;
        if kind.is_dir() {
            out.push((rel_text, true));
            walk(root, &path, out, skipped)?;
        } else if kind.is_file() {
            if name.starts_with('.') && name.ends_with(".lock") {
                continue;
            }
            out.push((rel_text, false));
        } else {
            skipped.push(rel_text);
        }
    }
    Ok(())
}

pub fn restore(ws: &Workspace, file: &Path, force: bool) -> Result<ExitCode> {
    let root = ws.root();
    if daemon_running(ws) {
        bail!("`chela run` serves {}: stop it first (`chela service` or Ctrl-C), then restore", root.display());
    }
    let bytes = read_archive(file).with_context(|| format!("cannot read {}", file.display()))?;
    let entries =
        ustar::read(&bytes, MAX_ARCHIVE).map_err(|e| anyhow::anyhow!("{} is refused: {e}", file.display()))?;
    let occupied = std::fs::read_dir(root).map(|mut d| d.next().is_some()).unwrap_or(false);
    if occupied && !force {
        bail!(
            "{} already holds files; restoring would mix two workspaces. Restore into an empty or new folder \
             (`--workspace DIR`), or add --force to let the archive's files replace those of the same name",
            root.display()
        );
    }
    create_private_dir(root).with_context(|| format!("cannot create {}", root.display()))?;
    let mut files = 0usize;
    for e in &entries {
        let dest = root.join(&e.path);
        refuse_links(root, &e.path)?;
        match e.kind {
            ustar::Kind::Dir => {
                create_private_dir(&dest).with_context(|| format!("cannot create {}", dest.display()))?;
            }
            ustar::Kind::File => {
                if let Some(parent) = dest.parent() {
                    create_private_dir(parent).with_context(|| format!("cannot create {}", parent.display()))?;
                }
                write_atomic(&dest, &e.data).with_context(|| format!("cannot write {}", dest.display()))?;
                std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(e.mode & 0o777))
                    .with_context(|| format!("cannot set the mode of {}", dest.display()))?;
                files += 1;
            }
        }
    }
    outln!("Restored {files} files from {} into {}.", file.display(), root.display());
    Ok(ExitCode::SUCCESS)
}

/// The archive's bytes: a regular file of at most [`MAX_ARCHIVE`] bytes.
fn read_archive(file: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(file)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        bail!("it is not a regular file");
    }
    if meta.len() > MAX_ARCHIVE {
        bail!("it is {} bytes, over the {MAX_ARCHIVE}-byte limit", meta.len());
    }
    let mut bytes = Vec::new();
    f.take(MAX_ARCHIVE).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Refuses to write `rel` when any existing part of it under `root` is a symlink: a link
/// planted in the workspace must not carry the restore elsewhere.
fn refuse_links(root: &Path, rel: &str) -> Result<()> {
    let mut at = root.to_path_buf();
    for part in rel.split('/') {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                bail!(
                    "{} is a symbolic link; nothing was written through it (remove it and restore again)",
                    at.display()
                )
            }
            _ => {}
        }
    }
    Ok(())
}

/// `chela-backup-YYYYMMDD-HHMMSS.tar` for the UTC time `unix`.
fn default_name(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("chela-backup-{year:04}{month:02}{day:02}-{:02}{:02}{:02}.tar", secs / 3600, secs % 3600 / 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backup takes the lock of each locked file: while another writer holds one, it waits
    /// (and gives up after the lock wait, writing nothing) instead of reading a half-made change.
    #[tokio::test(start_paused = true)]
    async fn a_backup_waits_for_every_locked_file() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
        ws.ensure().unwrap();
        std::fs::write(ws.overrides_path(), "[llm]\nmodel = \"m\"\n").unwrap();
        let held = crate::lock::hold(&ws.overrides_path(), crate::lock::LOCK_WAIT).await.unwrap();
        let out = dir.path().join("b.tar");
        let e = backup(&ws, Some(out.clone())).await.unwrap_err();
        assert!(format!("{e:#}").contains("overrides.toml stayed locked"), "{e:#}");
        assert!(!out.exists());
        drop(held);
        backup(&ws, Some(out.clone())).await.unwrap();
        let entries = ustar::read(&std::fs::read(&out).unwrap(), MAX_ARCHIVE).unwrap();
        let names: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert!(names.contains(&"overrides.toml") && !names.iter().any(|n| n.ends_with(".lock")), "{names:?}");
    }

    #[test]
    fn default_names_carry_the_utc_date_and_time() {
        assert_eq!(default_name(0), "chela-backup-19700101-000000.tar");
        assert_eq!(default_name(1_796_472_063), "chela-backup-20261205-120103.tar");
        assert_eq!(default_name(951_868_799), "chela-backup-20000229-235959.tar");
    }
}
