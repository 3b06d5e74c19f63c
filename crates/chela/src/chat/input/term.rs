//! The line editor's terminal side: raw mode, reading keys, writing the drawing.
//!
//! Raw mode (and bracketed paste) is on only while a line is read: [`Terminal::read_line`]
//! leaves the terminal as it found it on every return, and [`Restore`] does the same from
//! outside if the chat ends while a line is being read (the reading thread is then still
//! blocked in `read`).

use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustix::termios::{self, OptionalActions, Termios};

use super::Line;
use super::edit::{Editor, Step};
use super::keys::{Decoder, Key};
use super::screen::{Drawn, Size, draw};

/// How long the input may pause inside an escape sequence before a lone Esc is taken as the key:
/// readline's default `keyseq-timeout`, long enough for a sequence cut across packets (ssh) and
/// for Esc-then-b typed as Alt-B. Only leaving a search needs a lone Esc, and Ctrl-G does it at once.
const ESC_WAIT: Duration = Duration::from_millis(500);
/// One read of the terminal: a paste arrives in pieces of this size.
const READ_SIZE: usize = 4096;

/// The terminal's mode from before raw mode, while raw mode is on.
#[derive(Clone, Default)]
pub struct Restore(Arc<Mutex<Option<Termios>>>);

impl Restore {
    /// Puts the terminal back as it was, if raw mode is on; bracketed paste is turned off.
    pub fn restore(&self) {
        if let Some(original) = self.0.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let mut out = io::stdout().lock();
            let _ = out.write_all(b"\x1b[?2004l");
            let _ = out.flush();
            let _ = termios::tcsetattr(io::stdin(), OptionalActions::Drain, &original);
        }
    }

    /// Raw mode on, until the guard is dropped.
    fn raw(&self) -> io::Result<RawGuard> {
        let stdin = io::stdin();
        let original = termios::tcgetattr(&stdin)?;
        let mut raw = original.clone();
        // No echo, no line buffering, no signals from keys (Ctrl-C, Ctrl-Z are read as keys),
        // no output processing (the drawing ends its rows with `\r\n` itself).
        raw.make_raw();
        termios::tcsetattr(&stdin, OptionalActions::Drain, &raw)?;
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(original);
        let mut out = io::stdout().lock();
        out.write_all(b"\x1b[?2004h")?;
        out.flush()?;
        Ok(RawGuard(self.clone()))
    }
}

struct RawGuard(Restore);

impl Drop for RawGuard {
    fn drop(&mut self) {
        self.0.restore();
    }
}

/// The terminal of a line editor: keys read ahead of the line that needs them stay for it.
pub struct Terminal {
    decoder: Decoder,
    /// Keys decoded and not yet handled: what came after an Enter is the next line's.
    keys: VecDeque<Key>,
    drawn: Drawn,
    restore: Restore,
}

impl Terminal {
    pub fn new(restore: Restore) -> Terminal {
        Terminal { decoder: Decoder::default(), keys: VecDeque::new(), drawn: Drawn::default(), restore }
    }

    /// Reads one line with `ed` after `prompt`, in raw mode.
    pub fn read_line(&mut self, ed: &mut Editor, prompt: &str) -> io::Result<Line> {
        let mut raw = Some(self.restore.raw()?);
        ed.start();
        self.decoder.end_paste();
        self.drawn = Drawn::default();
        let mut out = Vec::new();
        let mut buf = vec![0u8; READ_SIZE];
        let mut decoded = Vec::new();
        // Drawn once per batch of keys (a paste is one redraw, not one per character).
        let mut changed = true;
        loop {
            while let Some(key) = self.keys.pop_front() {
                changed = true;
                match ed.handle(key) {
                    Step::Edited => {}
                    Step::Bell => out.push(b'\x07'),
                    Step::ClearScreen => {
                        out.extend_from_slice(b"\x1b[H\x1b[2J");
                        self.drawn.cleared();
                    }
                    Step::Suspend => {
                        self.show(ed, prompt, &mut out, false)?;
                        drop(raw.take());
                        // Stopped here until `fg`; then the line is drawn again where the shell left the
                        // cursor. If the signal cannot be sent, editing just goes on.
                        let _ = rustix::process::kill_current_process_group(rustix::process::Signal::TSTP);
                        raw = Some(self.restore.raw()?);
                        self.drawn = Drawn::default();
                    }
                    Step::Done(line) => {
                        // The line as sent stays on screen, whole; what follows starts below it.
                        self.show(ed, prompt, &mut out, true)?;
                        if line != Line::End {
                            write_all(b"\r\n")?;
                        }
                        return Ok(line);
                    }
                }
            }
            if changed {
                self.show(ed, prompt, &mut out, false)?;
                changed = false;
            }
            let stdin = io::stdin();
            if self.decoder.pending() && !readable_within(&stdin, ESC_WAIT)? {
                self.decoder.flush(&mut decoded);
            } else {
                match rustix::io::read(&stdin, &mut buf[..]) {
                    // The terminal hung up.
                    Ok(0) => return Ok(Line::End),
                    Ok(n) => self.decoder.feed(&buf[..n], &mut decoded),
                    Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            self.keys.extend(decoded.drain(..));
        }
    }

    /// Writes `out` and the drawing of the editor's view after it.
    fn show(&mut self, ed: &Editor, prompt: &str, out: &mut Vec<u8>, whole: bool) -> io::Result<()> {
        draw(out, &ed.view(prompt), size(), &mut self.drawn, whole);
        write_all(out)?;
        out.clear();
        Ok(())
    }
}

fn write_all(bytes: &[u8]) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(bytes)?;
    stdout.flush()
}

/// The terminal's size; 80 by 24 if it does not say.
fn size() -> Size {
    let ws = termios::tcgetwinsize(io::stdout()).ok();
    let or = |n: Option<u16>, default: usize| n.filter(|&n| n > 0).map_or(default, usize::from);
    Size { cols: or(ws.map(|w| w.ws_col), 80), rows: or(ws.map(|w| w.ws_row), 24) }
}

/// Whether `fd` has bytes to read before `wait` is over.
fn readable_within(fd: &impl AsFd, wait: Duration) -> io::Result<bool> {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let timeout = Timespec::try_from(wait).unwrap_or(Timespec { tv_sec: 0, tv_nsec: 500_000_000 });
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    match rustix::event::poll(&mut fds, Some(&timeout)) {
        Ok(n) => Ok(n > 0),
        // A signal: taken as a pause (a lone Esc is then the key a moment early).
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
