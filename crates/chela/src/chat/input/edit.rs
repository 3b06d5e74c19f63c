//! The line editor's state and what each key does to it, with no IO.
//!
//! Calling order: [`Editor::start`] begins a line; [`Editor::handle`] takes each key and says
//! what the terminal must do ([`Step`]), until a [`Step::Done`]; [`Editor::view`] is what to draw
//! at any time (after `Done`, the line as it was sent, with the cursor at its end). A sent line
//! is offered to [`Editor::remember`], which keeps it unless it is blank or repeats the last one.
//!
//! The cursor is a byte offset on a character boundary. It moves over a character together
//! with the combining marks after it, so it never lands inside what shows as one cell.

use super::Line;
use super::keys::Key;
use super::screen::{View, width};

/// The longest reverse-search query kept.
const MAX_QUERY: usize = 1024;

/// What the terminal does after a key.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Redraw (possibly nothing changed).
    Edited,
    /// Redraw and ring the bell: the line is at its length bound.
    Bell,
    /// Clear the screen, then redraw.
    ClearScreen,
    /// Leave raw mode and stop the process (Ctrl-Z), then redraw when it goes on.
    Suspend,
    /// The line is over.
    Done(Line),
}

/// A reverse incremental search (Ctrl-R) in progress.
#[derive(Debug)]
struct Search {
    query: String,
    /// The history entry matched, and where in it.
    found: Option<(usize, usize)>,
    failed: bool,
    /// The line, cursor and history place before the search, for Ctrl-G.
    before: (String, usize, usize),
}

/// One line being edited, and the history it can recall. See the module's doc for the calling order.
#[derive(Debug)]
pub struct Editor {
    line: String,
    cursor: usize,
    history: Vec<String>,
    max_history: usize,
    /// The history entry on show; `history.len()` for the new line.
    place: usize,
    /// The new line as it was when Up left it: Down past the newest entry brings it back.
    draft: String,
    search: Option<Search>,
    /// What the last kill (Ctrl-K, Ctrl-U, Ctrl-W, Alt-D, Alt-Backspace) took, for Ctrl-Y.
    killed: String,
    max_line: usize,
    /// The search's prompt, kept up to date for [`Editor::view`].
    label: String,
}

impl Editor {
    /// An editor with `history` (oldest first; at most `max_history` are kept) and lines of at
    /// most `max_line` bytes.
    pub fn new(mut history: Vec<String>, max_history: usize, max_line: usize) -> Editor {
        history.drain(..history.len().saturating_sub(max_history));
        Editor {
            line: String::new(),
            cursor: 0,
            place: history.len(),
            history,
            max_history,
            draft: String::new(),
            search: None,
            killed: String::new(),
            max_line,
            label: String::new(),
        }
    }

    /// Begins a new, empty line.
    pub fn start(&mut self) {
        self.line.clear();
        self.cursor = 0;
        self.place = self.history.len();
        self.draft.clear();
        self.search = None;
        self.label.clear();
    }

    /// Keeps a sent line in the history unless it is blank or the same as the last one; true if kept.
    pub fn remember(&mut self, line: &str) -> bool {
        if line.trim().is_empty() || self.history.last().is_some_and(|last| last == line) {
            return false;
        }
        self.history.push(line.to_owned());
        if self.history.len() > self.max_history {
            self.history.remove(0);
        }
        self.place = self.history.len();
        true
    }

    /// What to draw after `prompt`.
    pub fn view<'a>(&'a self, prompt: &'a str) -> View<'a> {
        match &self.search {
            Some(s) => {
                let (text, cursor) = match s.found {
                    Some((i, at)) => (self.history[i].as_str(), at),
                    None => (s.before.0.as_str(), s.before.1),
                };
                View { prompt: "", label: &self.label, text, cursor }
            }
            None => View { prompt, label: "", text: &self.line, cursor: self.cursor },
        }
    }

    /// Applies `key`.
    pub fn handle(&mut self, key: Key) -> Step {
        if self.search.is_some() {
            match self.search_key(key) {
                Ok(step) => {
                    self.update_label();
                    return step;
                }
                // The search is over and the key goes on to the line.
                Err(key) => return self.edit(key),
            }
        }
        self.edit(key)
    }

    fn edit(&mut self, key: Key) -> Step {
        match key {
            Key::Text(t) => return self.insert(&t),
            Key::Enter => {
                self.cursor = self.line.len();
                return Step::Done(Line::Text(self.line.clone()));
            }
            Key::Interrupt => {
                self.cursor = self.line.len();
                return Step::Done(if self.line.is_empty() { Line::Interrupted } else { Line::Cleared });
            }
            Key::Eof if self.line.is_empty() => return Step::Done(Line::End),
            Key::Eof | Key::Delete => {
                let end = self.next(self.cursor);
                self.line.replace_range(self.cursor..end, "");
            }
            Key::Backspace => {
                let start = self.prev(self.cursor);
                self.line.replace_range(start..self.cursor, "");
                self.cursor = start;
            }
            Key::Left => self.cursor = self.prev(self.cursor),
            Key::Right => self.cursor = self.next(self.cursor),
            Key::WordLeft => self.cursor = self.word_start(self.cursor, char::is_alphanumeric),
            Key::WordRight => self.cursor = self.word_end(self.cursor),
            Key::Home => self.cursor = 0,
            Key::End => self.cursor = self.line.len(),
            Key::Up => self.recall(self.place.checked_sub(1)),
            Key::Down => self.recall(Some(self.place + 1).filter(|&p| p <= self.history.len())),
            Key::KillToEnd => self.kill(self.cursor, self.line.len()),
            Key::KillToStart => self.kill(0, self.cursor),
            Key::KillBlankWord => self.kill(self.word_start(self.cursor, |c| !c.is_whitespace()), self.cursor),
            Key::KillWordBack => self.kill(self.word_start(self.cursor, char::is_alphanumeric), self.cursor),
            Key::KillWordForward => self.kill(self.cursor, self.word_end(self.cursor)),
            Key::Yank => return self.insert(&self.killed.clone()),
            Key::Transpose => self.transpose(),
            Key::ClearScreen => return Step::ClearScreen,
            Key::Suspend => return Step::Suspend,
            Key::Search => {
                self.search = Some(Search {
                    query: String::new(),
                    found: None,
                    failed: false,
                    before: (self.line.clone(), self.cursor, self.place),
                });
                self.update_label();
            }
            Key::Abort | Key::Escape => {}
        }
        Step::Edited
    }

    /// A key during the search: `Ok` if the search took it, `Err(key)` if the search ended
    /// (its line taken as the one to edit) and the key is for the line.
    fn search_key(&mut self, key: Key) -> Result<Step, Key> {
        let Some(s) = self.search.as_mut() else { return Err(key) };
        match key {
            Key::Text(t) => {
                let room = MAX_QUERY.saturating_sub(s.query.len());
                s.query.push_str(&t[..floor_boundary(&t, room)]);
                let from = s.found.map_or(self.history.len(), |(i, _)| i + 1);
                self.find(from);
            }
            Key::Search => {
                let from = s.found.map_or(self.history.len(), |(i, _)| i);
                self.find(from);
            }
            Key::Backspace => {
                s.query.pop();
                self.find(self.history.len());
            }
            Key::Abort | Key::Escape => {
                if let Some(s) = self.search.take() {
                    (self.line, self.cursor, self.place) = s.before;
                }
            }
            Key::Interrupt => {
                if let Some(s) = self.search.take() {
                    let empty = s.before.0.is_empty() && s.query.is_empty();
                    (self.line, self.cursor, self.place) = s.before;
                    self.cursor = self.line.len();
                    return Ok(Step::Done(if empty { Line::Interrupted } else { Line::Cleared }));
                }
            }
            key => {
                if let Some(s) = self.search.take() {
                    match s.found {
                        Some((i, at)) => {
                            self.line.clone_from(&self.history[i]);
                            self.cursor = at;
                            self.place = i;
                        }
                        None => (self.line, self.cursor, self.place) = s.before,
                    }
                }
                return Err(key);
            }
        }
        Ok(Step::Edited)
    }

    /// The newest history entry before `before` that holds the query. With none, the search
    /// fails and keeps showing what it had found.
    fn find(&mut self, before: usize) {
        let Some(s) = self.search.as_mut() else { return };
        let hit = self.history[..before.min(self.history.len())]
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, entry)| entry.find(&s.query).map(|at| (i, at)));
        s.failed = hit.is_none();
        if hit.is_some() {
            s.found = hit;
        }
    }

    fn update_label(&mut self) {
        self.label.clear();
        if let Some(s) = &self.search {
            let failed = if s.failed { "failed " } else { "" };
            self.label = format!("({failed}reverse-i-search)`{}': ", s.query);
        }
    }

    /// Shows history entry `place` (`history.len()`: the new line, as it was left).
    fn recall(&mut self, place: Option<usize>) {
        let Some(place) = place else { return };
        if self.place == self.history.len() {
            self.draft = std::mem::take(&mut self.line);
        }
        self.line =
            if place == self.history.len() { std::mem::take(&mut self.draft) } else { self.history[place].clone() };
        self.place = place;
        self.cursor = self.line.len();
    }

    fn insert(&mut self, text: &str) -> Step {
        let room = self.max_line.saturating_sub(self.line.len());
        let fits = floor_boundary(text, room);
        self.line.insert_str(self.cursor, &text[..fits]);
        self.cursor += fits;
        if fits < text.len() { Step::Bell } else { Step::Edited }
    }

    fn kill(&mut self, start: usize, end: usize) {
        if start < end {
            self.killed = self.line[start..end].to_owned();
            self.line.replace_range(start..end, "");
            self.cursor = start;
        }
    }

    /// Swaps the characters before and at the cursor (the last two at the end of the line).
    fn transpose(&mut self) {
        let at_end = self.cursor == self.line.len();
        let b = if at_end { self.prev(self.cursor) } else { self.cursor };
        let a = self.prev(b);
        if a == b || b == self.line.len() {
            return;
        }
        let end = self.next(b);
        let swapped = format!("{}{}", &self.line[b..end], &self.line[a..b]);
        self.line.replace_range(a..end, &swapped);
        self.cursor = end;
    }

    /// The place one character (with its combining marks) before `at`.
    fn prev(&self, mut at: usize) -> usize {
        let chars = self.line[..at].char_indices().rev();
        for (i, c) in chars {
            at = i;
            if width(c) > 0 || c == '\n' {
                break;
            }
        }
        at
    }

    /// The place one character (with its combining marks) after `at`.
    fn next(&self, at: usize) -> usize {
        let mut chars = self.line[at..].char_indices();
        if chars.next().is_none() {
            return at;
        }
        for (i, c) in chars {
            if width(c) > 0 || c == '\n' {
                return at + i;
            }
        }
        self.line.len()
    }

    /// The start of the word before `at`: back over what is not a word, then over the word.
    fn word_start(&self, at: usize, in_word: fn(char) -> bool) -> usize {
        let before = &self.line[..at];
        let end = before.trim_end_matches(|c| !in_word(c)).len();
        before[..end].trim_end_matches(in_word).len()
    }

    /// The end of the word after `at`: over what is not a word, then over the word.
    fn word_end(&self, at: usize) -> usize {
        let after = &self.line[at..];
        let start = after.len() - after.trim_start_matches(|c: char| !c.is_alphanumeric()).len();
        let rest = &after[start..];
        at + start + (rest.len() - rest.trim_start_matches(char::is_alphanumeric).len())
    }
}

/// The longest prefix of `s` at most `max` bytes long that ends on a character boundary.
fn floor_boundary(s: &str, max: usize) -> usize {
    if max >= s.len() {
        return s.len();
    }
    (0..=max).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0)
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
