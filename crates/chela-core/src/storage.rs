//! The storage contract: what the core needs from wherever files live.
//!
//! Three operations, enough for session records and memory entries: append whole lines,
//! replace a file atomically, and read a file's lines newest first. The host implements them
//! over files (`crates/chela-infra/src/storage.rs`), the chip will over flash, and tests use the
//! in-memory model in [`mem`], which can drop unsynced writes and crash at any operation.
//!
//! The one hard part, reading lines backwards in fixed-size blocks, lives here once
//! ([`lines_newest_first`]) so every implementation shares it: an implementation supplies
//! "read these bytes at this offset" and gets the lines.

use alloc::vec::Vec;
use core::fmt;
use core::ops::ControlFlow;

#[cfg(any(test, feature = "testing"))]
pub mod contract;
#[cfg(any(test, feature = "testing"))]
pub mod mem;

/// One line handed to a reader, without its `\n` (a `\r` before it is left in place).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line<'a> {
    pub bytes: &'a [u8],
    /// False only for the file's last line when the file does not end with `\n`: a write cut
    /// short by a crash, or a hand edit without a final newline. The reader decides which.
    pub terminated: bool,
}

/// What a [`Storage::read_newest_first`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadEnd {
    /// The file's whole length in bytes; 0 when it does not exist.
    pub size: u64,
    /// Bytes actually read from the medium.
    pub read: u64,
    /// Lines skipped because they were longer than the implementation's line bound.
    pub overlong: usize,
    /// The visitor asked to stop before the start of the file was reached.
    pub stopped: bool,
}

/// Where the core's records live. Names are short keys such as `cli_local.jsonl` (one path
/// component, no `/`); an implementation may reject other names.
///
/// What every implementation MUST guarantee:
/// - [`append`](Storage::append) takes whole lines (non-empty, ending in `\n`) and is
///   **durable when it returns `Ok`**: a crash afterwards cannot lose them. A crash during
///   the call may leave any prefix of them; so a file may end in a torn line. If the file
///   ends without `\n` when `append` starts, a `\n` is written first, so new lines never join
///   a torn one (the torn line stays, and readers skip it).
/// - [`replace`](Storage::replace) is **atomic and durable**: after a crash the file holds the
///   old bytes or the new ones, never a mix, never nothing (unless it did not exist before).
/// - [`read_newest_first`](Storage::read_newest_first) hands the file's lines from the last to
///   the first, each whole, and stops as soon as the visitor returns `Break`: it never reads
///   much more than the lines it handed out (one block). It sees every completed `append` and
///   `replace`. A missing file reads as empty (`size` 0).
pub trait Storage {
    type Error: fmt::Debug + fmt::Display;

    /// Appends `lines` (whole lines) durably. See the trait docs.
    fn append(&mut self, name: &str, lines: &str) -> Result<(), Self::Error>;

    /// Replaces the file `name` with `bytes`, atomically and durably.
    fn replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), Self::Error>;

    /// Hands the lines of `name` to `visit`, newest first, until it returns `Break`.
    fn read_newest_first(
        &self,
        name: &str,
        visit: &mut dyn FnMut(Line<'_>) -> ControlFlow<()>,
    ) -> Result<ReadEnd, Self::Error>;
}

/// How [`lines_newest_first`] reads: blocks of `block` bytes; lines up to `max_line` bytes are
/// always handed whole, longer ones may be skipped (counted in [`ReadEnd::overlong`]). The
/// buffer never holds more than `max_line + block` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    pub block: usize,
    pub max_line: usize,
}

/// Reads a file of `size` bytes backwards, `bounds.block` bytes at a time through `read_at`
/// (fill the buffer with the bytes at this offset), and hands its lines to `visit` newest
/// first. Empty lines are not handed out. `buf` is reused between calls.
pub fn lines_newest_first<E>(
    size: u64,
    bounds: Blocks,
    buf: &mut Vec<u8>,
    mut read_at: impl FnMut(u64, &mut [u8]) -> Result<(), E>,
    visit: &mut dyn FnMut(Line<'_>) -> ControlFlow<()>,
) -> Result<ReadEnd, E> {
    let block = bounds.block.max(1);
    let max_line = bounds.max_line.max(block);
    let mut end = ReadEnd { size, ..ReadEnd::default() };
    // `buf[..have]` holds the file's bytes `[pos, pos + have)`: the start of the file is still
    // unread, so they are the tail of a line whose beginning is further left.
    let mut pos = size;
    let mut have = 0usize;
    // The line being read is over `max_line`: drop bytes until its beginning is found.
    let mut skipping = false;
    // The next segment is the one after the file's last `\n`.
    let mut at_end = true;
    let mut hand = |bytes: &[u8], at_end: &mut bool| -> ControlFlow<()> {
        let terminated = !core::mem::replace(at_end, false);
        if bytes.is_empty() {
            return ControlFlow::Continue(());
        }
        visit(Line { bytes, terminated })
    };
    while pos > 0 {
        let n = usize::try_from(pos.min(block as u64)).unwrap_or(block);
        if buf.len() < have + n {
            buf.resize(have + n, 0);
        }
        buf.copy_within(..have, n);
        pos -= n as u64;
        read_at(pos, &mut buf[..n])?;
        end.read += n as u64;
        // Lines end at every `\n` among the new bytes; the one right of it is complete.
        let mut right = have + n;
        let mut scan = n;
        while let Some(nl) = buf[..scan].iter().rposition(|&b| b == b'\n') {
            if skipping {
                skipping = false;
            } else if hand(&buf[nl + 1..right], &mut at_end).is_break() {
                end.stopped = true;
                return Ok(end);
            }
            right = nl;
            scan = nl;
        }
        if !skipping && right > max_line {
            // Too long to hold: skip it rather than grow without bound.
            skipping = true;
            at_end = false;
            end.overlong += 1;
        }
        have = if skipping { 0 } else { right };
    }
    if !skipping && hand(&buf[..have], &mut at_end).is_break() {
        end.stopped = true;
    }
    Ok(end)
}

#[cfg(test)]
mod tests;
