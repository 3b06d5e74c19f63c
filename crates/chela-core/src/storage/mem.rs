//! An in-memory [`Storage`] that models what a crash does to a real disk.
//!
//! Two layers, as in an operating system: the *volatile* state (the page cache: what reads
//! see) and the *durable* state (what survives power loss). Writes go to the volatile state;
//! `fsync` copies a file's bytes to the durable state; a rename changes only the volatile
//! names until the folder is synced. [`MemStorage::crash`] throws the volatile state away and
//! keeps the durable one, plus, for a file that was only appended to, a prefix of the unsynced
//! bytes (the page cache may have written part of them back): that is a torn last line.
//!
//! A fault plan ([`MemStorage::crash_at`]) stops the world at the n-th primitive operation
//! (write, fsync, rename, folder sync); a write hit by it lands only in part. Every call
//! afterwards fails with [`MemError::Crashed`] until [`crash`](MemStorage::crash) is called.
//!
//! Unlike SIGKILL, which keeps the page cache, this loses everything not synced, so it
//! catches a missing fsync (see [`MemStorage::without_fsync`]).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::ops::ControlFlow;

use super::{Blocks, Line, ReadEnd, Storage, lines_newest_first};

/// Why a [`MemStorage`] call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemError {
    /// The fault plan crashed the storage; call [`MemStorage::crash`] to recover.
    Crashed,
    /// `append` was given something that is not whole lines.
    NotWholeLines,
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemError::Crashed => "the storage crashed (fault plan)",
            MemError::NotWholeLines => "append takes whole lines ending in a newline",
        })
    }
}

/// See the module docs.
#[derive(Clone, Debug)]
pub struct MemStorage {
    volatile: BTreeMap<String, Vec<u8>>,
    durable: BTreeMap<String, Vec<u8>>,
    /// Renames done in the volatile state whose folder was not synced yet.
    renames: Vec<(String, String)>,
    ops: u64,
    crash_at: Option<u64>,
    crashed: bool,
    fsync: bool,
    blocks: Blocks,
}

impl Default for MemStorage {
    fn default() -> MemStorage {
        MemStorage::new()
    }
}

impl MemStorage {
    /// An empty storage that reads in small blocks, so tests cross block edges often.
    pub fn new() -> MemStorage {
        MemStorage {
            volatile: BTreeMap::new(),
            durable: BTreeMap::new(),
            renames: Vec::new(),
            ops: 0,
            crash_at: None,
            crashed: false,
            fsync: true,
            blocks: Blocks { block: 64, max_line: 1 << 20 },
        }
    }

    /// A broken implementation whose `fsync` does nothing: for checking that a crash test
    /// notices a missing fsync.
    pub fn without_fsync() -> MemStorage {
        MemStorage { fsync: false, ..MemStorage::new() }
    }

    /// Primitive operations done so far.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// Crashes when the primitive operation numbered `op` (counting from 0, see [`ops`](Self::ops))
    /// is attempted.
    pub fn crash_at(&mut self, op: u64) {
        self.crash_at = Some(op);
    }

    /// Whether the fault plan has crashed the storage.
    pub fn has_crashed(&self) -> bool {
        self.crashed
    }

    /// Power loss and restart: keeps the durable state, plus up to `keep_unsynced` bytes of
    /// what was appended to a file after its last sync. Clears the fault plan.
    pub fn crash(&mut self, keep_unsynced: usize) {
        let mut after = self.durable.clone();
        for (name, bytes) in &self.volatile {
            let synced = self.durable.get(name).map_or(&[][..], Vec::as_slice);
            if !is_temp(name) && bytes.len() > synced.len() && bytes.starts_with(synced) {
                let keep = (bytes.len() - synced.len()).min(keep_unsynced);
                if keep == 0 {
                    continue;
                }
                after.insert(name.clone(), bytes[..synced.len() + keep].to_vec());
            }
        }
        after.retain(|name, _| !is_temp(name));
        self.volatile = after.clone();
        self.durable = after;
        self.renames.clear();
        self.crash_at = None;
        self.crashed = false;
    }

    /// The bytes a reader sees in `name`.
    pub fn contents(&self, name: &str) -> Option<&[u8]> {
        self.volatile.get(name).map(Vec::as_slice)
    }

    /// Counts one primitive operation; `Err` when the fault plan says this one crashes.
    fn step(&mut self) -> Result<(), MemError> {
        if self.crashed {
            return Err(MemError::Crashed);
        }
        let n = self.ops;
        self.ops += 1;
        if self.crash_at == Some(n) {
            self.crashed = true;
            return Err(MemError::Crashed);
        }
        Ok(())
    }

    /// `write(2)` at the end of `name`, creating it. A crash mid-write lands the first half.
    fn write_end(&mut self, name: &str, bytes: &[u8]) -> Result<(), MemError> {
        let step = self.step();
        let file = self.volatile.entry(name.to_string()).or_default();
        match step {
            Ok(()) => file.extend_from_slice(bytes),
            Err(e) => {
                file.extend_from_slice(&bytes[..bytes.len() / 2]);
                return Err(e);
            }
        }
        Ok(())
    }

    fn sync_file(&mut self, name: &str) -> Result<(), MemError> {
        self.step()?;
        // A new file's name is made durable with it: the host syncs the folder of a new file.
        if self.fsync
            && let Some(bytes) = self.volatile.get(name)
        {
            self.durable.insert(name.to_string(), bytes.clone());
        }
        Ok(())
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), MemError> {
        self.step()?;
        if let Some(bytes) = self.volatile.remove(from) {
            self.volatile.insert(to.to_string(), bytes);
            self.renames.push((from.to_string(), to.to_string()));
        }
        Ok(())
    }

    fn sync_folder(&mut self) -> Result<(), MemError> {
        self.step()?;
        if !self.fsync {
            return Ok(());
        }
        for (from, to) in core::mem::take(&mut self.renames) {
            // The name now points at whatever of the temp file's bytes were durable.
            let bytes = self.durable.remove(&from).unwrap_or_default();
            self.durable.insert(to, bytes);
        }
        Ok(())
    }
}

fn is_temp(name: &str) -> bool {
    name.starts_with(".tmp:")
}

impl Storage for MemStorage {
    type Error = MemError;

    fn append(&mut self, name: &str, lines: &str) -> Result<(), MemError> {
        if self.crashed {
            return Err(MemError::Crashed);
        }
        if !lines.ends_with('\n') {
            return Err(MemError::NotWholeLines);
        }
        let torn = self.volatile.get(name).and_then(|f| f.last()).is_some_and(|&b| b != b'\n');
        let mut bytes = Vec::with_capacity(lines.len() + 1);
        if torn {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(lines.as_bytes());
        self.write_end(name, &bytes)?;
        self.sync_file(name)
    }

    fn replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), MemError> {
        if self.crashed {
            return Err(MemError::Crashed);
        }
        let tmp = format!(".tmp:{name}");
        self.volatile.remove(&tmp);
        self.write_end(&tmp, bytes)?;
        self.sync_file(&tmp)?;
        self.rename(&tmp, name)?;
        self.sync_folder()
    }

    fn read_newest_first(
        &self,
        name: &str,
        visit: &mut dyn FnMut(Line<'_>) -> ControlFlow<()>,
    ) -> Result<ReadEnd, MemError> {
        if self.crashed {
            return Err(MemError::Crashed);
        }
        let Some(file) = self.volatile.get(name) else {
            return Ok(ReadEnd::default());
        };
        let mut buf = Vec::new();
        lines_newest_first(
            file.len() as u64,
            self.blocks,
            &mut buf,
            |off, out| {
                let off = usize::try_from(off).map_err(|_| MemError::Crashed)?;
                out.copy_from_slice(&file[off..off + out.len()]);
                Ok(())
            },
            visit,
        )
    }
}

#[cfg(test)]
mod tests;
