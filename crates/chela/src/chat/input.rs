//! Where the interactive chat's lines come from.
//!
//! A terminal gets a line editor of our own (arrows, Ctrl-A/E, words, kills, Ctrl-R search; see
//! [`edit`]) with a history kept in the workspace's `.chat_history`. Ctrl-C there clears a
//! typed line, as shells do; on an empty line it is reported, so the chat can say how to leave
//! (Ctrl-D). Anything else (a pipe, a file, a test) is read as plain lines, with the prompt on
//! stderr: stdout carries only the answers.
//!
//! Both read on a thread of their own, so a read that never finishes never holds up exit. The
//! editor is asked for one line at a time and puts the terminal in raw mode only for that line:
//! between lines the terminal is left alone, so a turn's streamed answer and Ctrl-C (which
//! cancels the turn) work as without it.
//!
//! The editor is three parts with no IO ([`keys`]: bytes to keys; [`edit`]: the line, history
//! and search; [`screen`]: the drawing) and a thin terminal layer ([`term`]).

mod edit;
mod keys;
mod screen;
mod term;

use std::io::Write;
use std::path::{Path, PathBuf};

use tokio::sync::mpsc;

use crate::workspace::{append_durable, read_tail_lines, write_atomic};

/// The history file, in the workspace.
pub const HISTORY_FILE: &str = ".chat_history";
/// Lines kept in the history (file and memory).
pub const MAX_HISTORY_LINES: usize = 500;
/// The most of the history file read at start; also bounds the file, which is trimmed to
/// [`MAX_HISTORY_LINES`] whenever it is found longer than that.
const MAX_HISTORY_BYTES: u64 = 256 * 1024;
/// The longest line read from a pipe: a pasted megabyte is cut rather than buffered without end.
const MAX_PLAIN_LINE: u64 = 256 * 1024;

/// What a request for a line gives back.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// Ctrl-C on an empty line of the editor.
    Interrupted,
    /// Ctrl-C on a line with text in the editor: the text is dropped.
    Cleared,
    /// Ctrl-D, or the end of the input: leave.
    End,
}

pub enum Input {
    /// A terminal: the line editor on its thread, asked with a prompt, answering with a line.
    /// `restore` puts the terminal back if the chat ends while a line is being read.
    Editor { ask: std::sync::mpsc::Sender<String>, answers: mpsc::Receiver<Line>, restore: term::Restore },
    /// Lines from a pipe or file, read ahead.
    Plain(mpsc::Receiver<String>),
}

impl Input {
    /// The line editor when stdin and stdout are a terminal; plain lines otherwise.
    pub fn open(workspace: &Path) -> Input {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            return editor(workspace.join(HISTORY_FILE));
        }
        Input::Plain(plain_lines())
    }

    /// Shows `prompt` and waits for the next line.
    pub async fn next(&mut self, prompt: &str) -> Line {
        match self {
            Input::Editor { ask, answers, .. } => {
                if ask.send(prompt.to_owned()).is_err() {
                    return Line::End;
                }
                answers.recv().await.unwrap_or(Line::End)
            }
            Input::Plain(lines) => {
                eprint!("{prompt}");
                let _ = std::io::stderr().flush();
                lines.recv().await.map_or(Line::End, Line::Text)
            }
        }
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        if let Input::Editor { restore, .. } = self {
            restore.restore();
        }
    }
}

fn editor(history_path: PathBuf) -> Input {
    let mut ed = edit::Editor::new(load_history(&history_path), MAX_HISTORY_LINES, MAX_PLAIN_LINE as usize);
    let restore = term::Restore::default();
    let mut terminal = term::Terminal::new(restore.clone());
    let (ask, asked) = std::sync::mpsc::channel::<String>();
    let (tx, answers) = mpsc::channel(1);
    std::thread::spawn(move || {
        while let Ok(prompt) = asked.recv() {
            let line = match terminal.read_line(&mut ed, &prompt) {
                Ok(Line::Text(line)) => {
                    if ed.remember(&line)
                        && let Err(e) = append_durable(&history_path, &format!("{line}\n"))
                    {
                        chela_log::warn!("cannot keep the line in {}: {e}", history_path.display());
                    }
                    Line::Text(line)
                }
                Ok(other) => other,
                Err(e) => {
                    chela_log::warn!("the terminal cannot be read: {e}");
                    Line::End
                }
            };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    Input::Editor { ask, answers, restore }
}

/// The history's last [`MAX_HISTORY_LINES`] lines, oldest first. A file that has grown past the
/// bound is rewritten with those lines only. A missing or unreadable file is an empty history.
pub fn load_history(path: &Path) -> Vec<String> {
    let (text, len) = match read_tail_lines(path, MAX_HISTORY_BYTES) {
        Ok(Some(found)) => found,
        Ok(None) => return Vec::new(),
        Err(e) => {
            chela_log::warn!("cannot read {}: {e}", path.display());
            return Vec::new();
        }
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let keep = &lines[lines.len().saturating_sub(MAX_HISTORY_LINES)..];
    if keep.len() < lines.len() || len > MAX_HISTORY_BYTES {
        let mut trimmed = keep.join("\n");
        trimmed.push('\n');
        if let Err(e) = write_atomic(path, trimmed.as_bytes()) {
            chela_log::warn!("cannot trim {}: {e}", path.display());
        }
    }
    keep.iter().map(|l| (*l).to_owned()).collect()
}

/// Lines from stdin, read on their own thread so a pending read never holds up exit.
fn plain_lines() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel(4);
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut line = String::new();
        loop {
            line.clear();
            match std::io::BufRead::read_line(&mut std::io::Read::take(stdin.lock(), MAX_PLAIN_LINE), &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.blocking_send(line.clone()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn history_is_loaded_and_trimmed_to_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(HISTORY_FILE);
        assert!(load_history(&path).is_empty(), "no file, no history");

        let text: String = (0..MAX_HISTORY_LINES + 20).map(|i| format!("line {i}\n\n")).collect();
        append_durable(&path, &text).unwrap();
        let h = load_history(&path);
        assert_eq!(h.len(), MAX_HISTORY_LINES);
        assert_eq!(h[0], "line 20");
        assert_eq!(h.last().unwrap(), &format!("line {}", MAX_HISTORY_LINES + 19));
        // The file itself now holds only what is kept, and stays private.
        let on_disk = std::fs::read_to_string(&path).unwrap();
        assert_eq!(on_disk.lines().count(), MAX_HISTORY_LINES);
        assert!(on_disk.starts_with("line 20\n"));
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(load_history(&path), h, "a file within bounds is read as it is");
    }
}
