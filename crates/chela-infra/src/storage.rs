//! The core's storage contract (`chela_core::storage::Storage`) over files in one folder.
//!
//! Appends go through [`append_durable`] (one write of whole lines, then fsync), replacements
//! through [`write_atomic`] (temp file, fsync, rename, folder fsync). Reading newest first
//! reads fixed-size blocks from the end with `pread` and hands out lines until the reader has
//! enough, so loading the recent part of a long file costs what that part costs.

use std::fs::File;
use std::io;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use chela_core::storage::{Blocks, Line, ReadEnd, Storage, lines_newest_first};

use crate::workspace::{append_durable, write_atomic};

/// Bytes read per `pread`: a few lines of a session, a few dozen memory entries.
const BLOCK: usize = 32 * 1024;

/// Longest line handed out whole. A session line holds a model reply or a step's tool
/// results, each bounded by config (`max_tool_output` per result); past this a line is skipped
/// and counted rather than held, so a corrupt file cannot make a read grow without bound.
const MAX_LINE: usize = 8 * 1024 * 1024;

/// The files of one folder, named by file name.
#[derive(Clone, Debug)]
pub struct FileStorage {
    dir: PathBuf,
}

impl FileStorage {
    pub fn new(dir: impl Into<PathBuf>) -> FileStorage {
        FileStorage { dir: dir.into() }
    }

    /// The storage of `path`'s folder and `path`'s name in it.
    pub fn for_file(path: &Path) -> io::Result<(FileStorage, String)> {
        let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{} has no file name", path.display()))
        })?;
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Ok((FileStorage::new(dir), name.to_owned()))
    }

    /// The path of `name`: one plain component, so a name can never reach outside the folder.
    fn path(&self, name: &str) -> io::Result<PathBuf> {
        let plain = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0']);
        if !plain {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{name}` is not a plain file name; storage names are one path component"),
            ));
        }
        Ok(self.dir.join(name))
    }
}

impl Storage for FileStorage {
    type Error = io::Error;

    fn append(&mut self, name: &str, lines: &str) -> io::Result<()> {
        let path = self.path(name)?;
        if !lines.ends_with('\n') {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "append takes whole lines ending in a newline"));
        }
        append_durable(&path, lines)
    }

    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        write_atomic(&self.path(name)?, bytes)
    }

    fn read_newest_first(&self, name: &str, visit: &mut dyn FnMut(Line<'_>) -> ControlFlow<()>) -> io::Result<ReadEnd> {
        let file = match File::open(self.path(name)?) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ReadEnd::default()),
            Err(e) => return Err(e),
        };
        let size = file.metadata()?.len();
        let mut buf = Vec::new();
        lines_newest_first(
            size,
            Blocks { block: BLOCK, max_line: MAX_LINE },
            &mut buf,
            |offset, out| file.read_exact_at(out, offset),
            visit,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chela_core::storage::contract;

    #[test]
    fn files_pass_the_storage_contract() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = 0;
        contract::check_all(|| {
            // A fresh, empty folder per check.
            n += 1;
            let d = dir.path().join(n.to_string());
            std::fs::create_dir(&d).unwrap();
            FileStorage::new(d)
        });
    }

    #[test]
    fn names_cannot_leave_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStorage::new(dir.path().join("inner"));
        std::fs::create_dir(dir.path().join("inner")).unwrap();
        for bad in ["../escape", "a/b", "..", ".", ""] {
            let e = s.append(bad, "x\n").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}");
            assert!(e.to_string().contains("plain file name"), "{e}");
        }
        assert!(!dir.path().join("escape").exists());
        let (fs, name) = FileStorage::for_file(&dir.path().join("inner/s.jsonl")).unwrap();
        assert_eq!((fs.dir, name.as_str()), (dir.path().join("inner"), "s.jsonl"));
    }
}
