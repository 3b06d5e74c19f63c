//! The core's [`Storage`] contract over a [`FlashStore`]: each appended line is one record
//! (a session line, or a kept entry for the names in [`Limits::kept`](super::Limits::kept)),
//! and `replace` is one [`Kind::Replace`] record, so it is atomic. A file's lines and a
//! replacement must each fit in one sector ([`Error::RecordTooBig`] otherwise).

use core::ops::ControlFlow;

use super::Flash;
use super::store::{Error, FlashStore, Kind, Order};
use crate::storage::{Line, ReadEnd, Storage};

impl<F: Flash> FlashStore<F> {
    fn line_kind(&self, name: &str) -> Kind {
        if self.limits().kept.contains(&name) { Kind::Entry } else { Kind::Line }
    }
}

impl<F: Flash> Storage for FlashStore<F> {
    type Error = Error<F::Error>;

    /// Each line becomes one record; a cut leaves a prefix of the lines. Lines (and the room
    /// for kept ones) are checked before anything is written, so a refused append writes
    /// nothing.
    fn append(&mut self, name: &str, lines: &str) -> Result<(), Self::Error> {
        let Some(body) = lines.strip_suffix('\n') else {
            return Err(Error::NotWholeLines);
        };
        let max = self.max_payload(name.len());
        if let Some(long) = body.split('\n').find(|l| l.len() > max) {
            return Err(Error::RecordTooBig { len: long.len(), max });
        }
        let kind = self.line_kind(name);
        if kind == Kind::Entry {
            let sizes = body.split('\n').filter(|l| !l.is_empty()).map(|l| self.record_size(name, l.len()));
            self.check_kept(sizes.sum())?;
        }
        for line in body.split('\n').filter(|l| !l.is_empty()) {
            match kind {
                Kind::Entry => self.append_entry(name, line.as_bytes())?,
                _ => self.append_line(name, line.as_bytes())?,
            }
        }
        Ok(())
    }

    fn replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), Self::Error> {
        FlashStore::replace(self, name, bytes)
    }

    fn read_newest_first(
        &self,
        name: &str,
        visit: &mut dyn FnMut(Line<'_>) -> ControlFlow<()>,
    ) -> Result<ReadEnd, Self::Error> {
        let mut end = ReadEnd::default();
        let mut newest = true;
        let mut size = 0u64;
        self.read(name, Order::NewestFirst, &mut |r| {
            end.read += r.payload.len() as u64;
            let step = if r.kind == Kind::Replace {
                // A replacement is a whole file: its last line is torn unless something was
                // appended after it (an append starts with the missing newline).
                let mut flow = ControlFlow::Continue(());
                let ends_clean = r.payload.last().is_none_or(|&b| b == b'\n');
                size += r.payload.len() as u64 + u64::from(!ends_clean && !newest);
                let body = r.payload.strip_suffix(b"\n").unwrap_or(r.payload);
                for (i, l) in body.rsplit(|&b| b == b'\n').enumerate() {
                    if l.is_empty() {
                        continue;
                    }
                    let terminated = i > 0 || ends_clean || !newest;
                    if flow.is_continue() && visit(Line { bytes: l, terminated }).is_break() {
                        flow = ControlFlow::Break(());
                    }
                }
                flow
            } else {
                size += r.payload.len() as u64 + 1;
                visit(Line { bytes: r.payload, terminated: true })
            };
            newest = false;
            if step.is_break() {
                end.stopped = true;
            }
            step
        })?;
        // The size counts what was read; when the reader stopped early, add the rest from the
        // index without reading it.
        end.size = if end.stopped { self.content_size(name)? } else { size };
        Ok(end)
    }
}
