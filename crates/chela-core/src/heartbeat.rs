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
mod tests {
    use super::*;
    use crate::zone::DateTime;
    use alloc::string::ToString;

    #[test]
    fn actionable_lines() {
        let text = "# Heartbeat\n\n## Today\n- [x] water the plants\n  - [X] done too\n- [ ] call mum\nCheck the oven\n* [x] star box done\n+ [ ] plus box\n   \n### notes\n-[x]tight\n";
        assert_eq!(actionable_items(text), ["- [ ] call mum", "Check the oven", "+ [ ] plus box"]);
        assert!(actionable_items("# only\n\n- [x] done\n").is_empty());
        assert!(actionable_items("").is_empty());
    }

    #[test]
    fn comments_are_no_items_and_the_default_file_has_none() {
        assert!(actionable_items(HEARTBEAT_DEFAULT).is_empty(), "a fresh file asks for nothing");
        let text =
            "<!-- one line -->\n- [ ] a\n<!--\n- [ ] hidden\n-->\n- [ ] b\n<!-- open\nstill hidden\nend -->\nc\n";
        assert_eq!(actionable_items(text), ["- [ ] a", "- [ ] b", "c"]);
        // An unclosed comment hides the rest, as it does in any Markdown viewer.
        assert_eq!(actionable_items("x\n<!--\ny\n"), ["x"]);
        assert_eq!(
            actionable_items(&alloc::format!("{HEARTBEAT_DEFAULT}- [ ] water the plants\n")),
            ["- [ ] water the plants"]
        );
    }

    #[test]
    fn actionable_items_are_bounded() {
        let many = "do it\n".repeat(10_000);
        assert_eq!(actionable_items(&many).len(), MAX_ITEMS);
        let long = "é".repeat(2000);
        assert_eq!(actionable_items(&long)[0].chars().count(), MAX_ITEM_LEN);
    }

    fn at(zone: &Zone, h: u8, m: u8) -> i64 {
        match zone.resolve(DateTime::new(2026, 7, 1, h, m, 0).unwrap().to_seconds()) {
            crate::zone::LocalResult::Unique(t) => t,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn window_in_the_users_zone() {
        let berlin = Zone::from_posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        let day = ActiveHours::parse("08:00-22:00").unwrap();
        assert!(!day.contains(at(&berlin, 7, 59), &berlin));
        assert!(day.contains(at(&berlin, 8, 0), &berlin));
        assert!(day.contains(at(&berlin, 21, 59), &berlin));
        assert!(!day.contains(at(&berlin, 22, 0), &berlin));
        // 08:00 in Berlin summer is 06:00 UTC: outside the same window read in UTC.
        assert!(!day.contains(at(&berlin, 8, 0), &Zone::utc()));
    }

    #[test]
    fn window_across_midnight_and_all_day() {
        let z = Zone::utc();
        let night = ActiveHours::parse("22:00-06:30").unwrap();
        assert!(night.contains(at(&z, 23, 0), &z));
        assert!(night.contains(at(&z, 0, 0), &z));
        assert!(night.contains(at(&z, 6, 29), &z));
        assert!(!night.contains(at(&z, 6, 30), &z));
        assert!(!night.contains(at(&z, 12, 0), &z));
        let all = ActiveHours::parse("00:00-24:00").unwrap();
        assert_eq!(all, ActiveHours::ALWAYS);
        assert!(all.contains(at(&z, 13, 0), &z));
    }

    #[test]
    fn bad_windows_name_the_setting() {
        for bad in [
            "",
            "8-22",
            "08:00",
            "08:00-25:00",
            "24:00-08:00",
            "08:60-09:00",
            "aa:bb-cc:dd",
            "08:00-22:00-23:00",
            "123:00-01:00",
        ] {
            let err = ActiveHours::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with("heartbeat.active_hours:"), "{bad:?}: {err}");
        }
        assert_eq!(ActiveHours::parse(" 9:30 - 17:00 ").unwrap(), ActiveHours { start: 570, end: 1020 });
    }
}
