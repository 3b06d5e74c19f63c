//! The heartbeat's rules: which lines of `HEARTBEAT.md` ask for action, and whether the
//! heartbeat may run at a given instant (active hours in the user's zone).
//!
//! The host reads the file, checks [`ActiveHours::contains`] with `now` and the zone, and
//! prompts the agent with [`actionable_items`] when there are any.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::zone::Zone;
use crate::zone::civil::SECS_PER_DAY;

/// The most items passed on, and the longest item (longer lines are cut at a char boundary).
pub const MAX_ITEMS: usize = 100;
pub const MAX_ITEM_LEN: usize = 500;

/// What a fresh workspace's `HEARTBEAT.md` holds: a heading and a comment saying how the file
/// is read, and no open item, so a heartbeat costs nothing until the person writes one.
pub const HEARTBEAT_DEFAULT: &str = "\
# Heartbeat

<!--
Every heartbeat.interval minutes (30 by default; 0 turns it off) Chela reads this file and asks
the model to act on its open items: every line below that is not blank, not a heading (#) and
not a ticked box (- [x]). Write one task per line, for example
  - [ ] tell me if it will rain tomorrow
The model ticks what it did (- [x]). heartbeat.active_hours limits when it runs, and
heartbeat.channel with heartbeat.chat_id say where its answer goes. Nothing inside this
comment is a task.
-->
";

/// The lines that ask for action: not blank, not a Markdown heading (`#`…), not a checked box
/// (`- [x]`, `* [X]`, `+ [x]`), not inside an HTML comment (`<!-- … -->`, where the file
/// explains itself). Trimmed, at most [`MAX_ITEMS`] of them.
pub fn actionable_items(text: &str) -> Vec<&str> {
    let mut in_comment = false;
    text.lines()
        .map(str::trim)
        .filter(|line| {
            if in_comment || line.starts_with("<!--") {
                // A comment ends on the line holding `-->` (after its opening, when on one line).
                let after_open = line.strip_prefix("<!--").unwrap_or(line);
                in_comment = !after_open.contains("-->");
                return false;
            }
            true
        })
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !is_checked(line))
        .map(|line| match line.char_indices().nth(MAX_ITEM_LEN) {
            Some((cut, _)) => &line[..cut],
            None => line,
        })
        .take(MAX_ITEMS)
        .collect()
}

/// What the agent is prompted with for `items` (from [`actionable_items`]), on the host and
/// the chip alike. `editable`: the agent can edit `HEARTBEAT.md` (the host's file tools); the
/// chip's model cannot, so it is not asked to tick items there.
pub fn prompt(items: &[&str], editable: bool) -> String {
    let mut prompt = String::from(if editable {
        "[Heartbeat] HEARTBEAT.md has these open items. Act on the ones you can now, and mark what is \
         done there as `- [x]`:\n"
    } else {
        "[Heartbeat] HEARTBEAT.md has these open items. Act on the ones you can now, and say which are \
         done (the person ticks them on the device):\n"
    });
    for item in items {
        prompt.push_str(item);
        prompt.push('\n');
    }
    prompt
}

fn is_checked(line: &str) -> bool {
    let Some(rest) = line.strip_prefix(['-', '*', '+']) else { return false };
    let rest = rest.trim_start();
    rest.starts_with("[x]") || rest.starts_with("[X]")
}

/// A daily window of wall-clock time, `"08:00-22:00"`; a window whose end is before its start
/// runs across midnight (`"22:00-06:00"`). The start is inside, the end outside; equal ends
/// mean all day.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveHours {
    /// Minutes after midnight.
    start: u32,
    end: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveHoursError(String);

impl fmt::Display for ActiveHoursError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "heartbeat.active_hours: {}", self.0)
    }
}

impl core::error::Error for ActiveHoursError {}

impl ActiveHours {
    pub const ALWAYS: ActiveHours = ActiveHours { start: 0, end: 0 };

    pub fn parse(text: &str) -> Result<ActiveHours, ActiveHoursError> {
        let fail = || {
            ActiveHoursError(format!(
                "{:?} is not a window like \"08:00-22:00\" (HH:MM-HH:MM, 24-hour clock; 24:00 allowed as an end)",
                text.chars().take(40).collect::<String>()
            ))
        };
        let (a, b) = text.trim().split_once('-').ok_or_else(fail)?;
        let clock = |s: &str| -> Option<u32> {
            let (h, m) = s.trim().split_once(':')?;
            if h.is_empty() || h.len() > 2 || m.len() != 2 {
                return None;
            }
            let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
            (m < 60 && (h < 24 || (h == 24 && m == 0))).then_some(h * 60 + m)
        };
        let (start, end) = (clock(a).ok_or_else(fail)?, clock(b).ok_or_else(fail)?);
        if start == 24 * 60 {
            return Err(fail());
        }
        Ok(ActiveHours { start, end: end % (24 * 60) })
    }

    /// Whether the wall clock in `zone` at the instant `now` is inside the window.
    pub fn contains(&self, now: i64, zone: &Zone) -> bool {
        let minute = (zone.to_local(now).rem_euclid(SECS_PER_DAY) / 60) as u32;
        match self.start.cmp(&self.end) {
            core::cmp::Ordering::Equal => true,
            core::cmp::Ordering::Less => self.start <= minute && minute < self.end,
            core::cmp::Ordering::Greater => minute >= self.start || minute < self.end,
        }
    }
}

#[cfg(test)]
mod tests;
