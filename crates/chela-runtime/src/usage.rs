//! The usage log: one line per turn in `state/usage.jsonl` (tokens in, cached in, cache write,
//! out, the model and the conversation), and the sums `chela usage`, `/usage`, `chela status`
//! and the gateway's `/api/usage` show.
//!
//! Each line is an fsync'd append; the reader skips a torn or foreign line. The log is
//! bounded: past [`ROTATE_BYTES`] it becomes `usage.1.jsonl` (replacing the one before), so at
//! most two files' worth is kept and read. It sits in `state/`, which the model's tools can
//! neither read nor write: the record of what was spent is not the model's to change.

use std::io;
use std::path::PathBuf;

use chela_core::usage::{self, Price, Record, Totals};
use chela_infra::sort::sort_by;

use crate::config::Config;
use crate::workspace::{Workspace, append_durable, read_tail_lines};

/// The log is rotated when it grows past this: some 40,000 turns.
pub const ROTATE_BYTES: u64 = 8 * 1024 * 1024;

pub fn log_path(ws: &Workspace) -> PathBuf {
    ws.root().join("state").join("usage.jsonl")
}

fn rotated_path(ws: &Workspace) -> PathBuf {
    ws.root().join("state").join("usage.1.jsonl")
}

/// Appends `record` (fsync'd), rotating a full log first.
pub fn append(ws: &Workspace, record: &Record) -> io::Result<()> {
    let path = log_path(ws);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::lock::with_file_lock(&path, || {
        if std::fs::metadata(&path).is_ok_and(|m| m.len() >= ROTATE_BYTES) {
            std::fs::rename(&path, rotated_path(ws))?;
        }
        append_durable(&path, &record.to_line())
    })
}

/// Every record kept (the rotated file's, then the live one's), oldest first, and how many
/// lines were skipped. Each file is read up to its bound, from its end.
pub fn read(ws: &Workspace) -> io::Result<(Vec<Record>, usize)> {
    let mut records = Vec::new();
    let mut skipped = 0;
    for path in [rotated_path(ws), log_path(ws)] {
        let Some((text, _)) = read_tail_lines(&path, ROTATE_BYTES + 64 * 1024)? else { continue };
        let (r, s) = usage::parse(&text);
        records.extend(r);
        skipped += s;
    }
    Ok((records, skipped))
}

/// The person's `[llm.prices]`, as the price table takes them.
pub fn price_overrides(cfg: &Config) -> Vec<(String, Price)> {
    cfg.settings()
        .llm
        .prices
        .iter()
        .filter_map(|(model, p)| {
            let (input, output) = (p.input?, p.output?);
            let price = Price {
                input,
                output,
                cache_read: p.cache_read.unwrap_or(input),
                cache_write: p.cache_write.unwrap_or(input),
            };
            Some((model.clone(), price))
        })
        .collect()
}

/// Which records to sum.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// `channel:chat` or a chat id.
    pub session: Option<String>,
    /// Unix seconds: records from then on.
    pub since: Option<u64>,
}

impl Filter {
    pub fn admits(&self, r: &Record) -> bool {
        self.session.as_deref().is_none_or(|s| r.in_session(s)) && self.since.is_none_or(|t| r.ts >= t)
    }
}

/// The sums of the records `filter` admits, all together and per model (by name).
pub fn totals(records: &[Record], filter: &Filter, prices: &[(String, Price)]) -> (Totals, Vec<(String, Totals)>) {
    let mut all = Totals::default();
    let mut by_model: Vec<(String, Totals)> = Vec::new();
    for r in records.iter().filter(|r| filter.admits(r)) {
        all.add(r, prices);
        let i = match by_model.iter().position(|(m, _)| *m == r.model) {
            Some(i) => i,
            None => {
                by_model.push((r.model.clone(), Totals::default()));
                by_model.len() - 1
            }
        };
        by_model[i].1.add(r, prices);
    }
    sort_by(&mut by_model, |a, b| a.0.cmp(&b.0));
    (all, by_model)
}

/// What the records `filter` admits add up to, from the workspace's log: one line for a
/// person per model and in all, or JSON (for `--json` and the gateway's `/api/usage`).
pub struct Report {
    pub all: Totals,
    pub by_model: Vec<(String, Totals)>,
    /// Lines of the log that did not parse.
    pub skipped: usize,
}

impl Report {
    pub fn gather(ws: &Workspace, cfg: &Config, filter: &Filter) -> io::Result<Report> {
        let (records, skipped) = read(ws)?;
        let (all, by_model) = totals(&records, filter, &price_overrides(cfg));
        Ok(Report { all, by_model, skipped })
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        if self.by_model.len() > 1 {
            for (model, t) in &self.by_model {
                s.push_str(&format!("{model}: {}\n", describe(t)));
            }
        }
        s.push_str(&format!("In all: {}\n", describe(&self.all)));
        if self.skipped > 0 {
            s.push_str(&format!("({} unreadable line(s) of the usage log were skipped)\n", self.skipped));
        }
        s
    }

    pub fn json(&self) -> serde_json::Value {
        // Inserted, not collected: collecting into a map compiles a sort for this one call.
        let mut models = serde_json::Map::new();
        models.extend(self.by_model.iter().map(|(m, t)| (m.clone(), totals_json(t))));
        serde_json::json!({"total": totals_json(&self.all), "models": models, "skipped_lines": self.skipped})
    }
}

/// One sum as `chela usage --json` and `GET /api/usage` give it.
pub fn totals_json(t: &Totals) -> serde_json::Value {
    serde_json::json!({
        "turns": t.turns,
        "input_tokens": t.usage.input_tokens,
        "cache_read_tokens": t.usage.cache_read_tokens,
        "cache_write_tokens": t.usage.cache_write_tokens,
        "output_tokens": t.usage.output_tokens,
        "cached_percent": t.cached_percent(),
        "estimated_cost_usd": (t.turns > t.unpriced).then_some(t.cost),
        "unpriced_turns": t.unpriced,
    })
}

/// The sums per conversation (`channel:chat`) of the records `filter` admits, the most tokens
/// first: at most `max` of them, and the rest summed apart (`None` when there is no rest). Chat
/// ids come from outside, so the list is bounded however many chats the log holds.
pub fn totals_by_chat(
    records: &[Record],
    filter: &Filter,
    prices: &[(String, Price)],
    max: usize,
) -> (Vec<(String, Totals)>, Option<Totals>) {
    let mut by_chat: std::collections::HashMap<String, Totals> = std::collections::HashMap::new();
    for r in records.iter().filter(|r| filter.admits(r)) {
        by_chat.entry(r.session()).or_default().add(r, prices);
    }
    let tokens = |t: &Totals| t.usage.prompt_tokens() + t.usage.output_tokens;
    let mut list: Vec<(String, Totals)> = by_chat.into_iter().collect();
    sort_by(&mut list, |a, b| tokens(&b.1).cmp(&tokens(&a.1)).then_with(|| a.0.cmp(&b.0)));
    let rest = (list.len() > max).then(|| {
        let mut sum = Totals::default();
        for (_, t) in list.drain(max..) {
            sum.turns += t.turns;
            sum.usage.add(&t.usage);
            sum.cost += t.cost;
            sum.unpriced += t.unpriced;
        }
        sum
    });
    (list, rest)
}

/// Where the price of `model` comes from: `("settings", prefix)` for the person's
/// `[llm.prices]`, `("built-in", prefix)` for the built-in list prices, `None` when neither
/// knows it. The same longest-prefix choice as [`usage::price_for`].
pub fn price_source(model: &str, overrides: &[(String, Price)]) -> Option<(&'static str, String, Price)> {
    let longest = |table: &mut dyn Iterator<Item = (&str, Price)>| {
        table
            .filter(|(prefix, _)| model.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(prefix, p)| (prefix.to_owned(), p))
    };
    if let Some((prefix, p)) = longest(&mut overrides.iter().map(|(m, p)| (m.as_str(), *p))) {
        return Some(("settings", prefix, p));
    }
    longest(&mut usage::DEFAULT_PRICES.iter().map(|(m, p)| (*m, *p))).map(|(prefix, p)| ("built-in", prefix, p))
}

/// One line for a person: `12 turns: 48,210 tokens in (31,000 cached, 2,100 written), 3,405 out; about $0.0412`.
pub fn describe(t: &Totals) -> String {
    let n = |v: u64| group(v);
    let mut s = format!(
        "{} turn{}: {} tokens in ({} cached, {} written to the cache), {} out",
        t.turns,
        if t.turns == 1 { "" } else { "s" },
        n(t.usage.prompt_tokens()),
        n(t.usage.cache_read_tokens),
        n(t.usage.cache_write_tokens),
        n(t.usage.output_tokens)
    );
    if t.turns > t.unpriced {
        s.push_str(&format!("; about ${:.4}", t.cost));
    }
    if t.unpriced > 0 {
        s.push_str(&format!(" ({} turn(s) of models without a price in [llm.prices])", t.unpriced));
    }
    s
}

/// `1234567` as `1,234,567`.
fn group(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The start of the local day that holds `now` (Unix seconds), for "today's total".
pub fn today_start(tz: &chela_core::zone::Zone, now: i64) -> u64 {
    let local = tz.to_local(now);
    let midnight = local - local.rem_euclid(86_400);
    u64::try_from(midnight - i64::from(tz.offset_at(now))).unwrap_or(0)
}

/// The start of the local day `date` (`YYYY-MM-DD`), for `--since`.
pub fn day_start(tz: &chela_core::zone::Zone, date: &str) -> Result<u64, String> {
    let bad = || format!("{date:?} is not a date like 2026-11-30");
    let mut parts = date.trim().splitn(3, '-').map(|p| p.parse::<u32>().ok());
    let (Some(Some(y)), Some(Some(m)), Some(Some(d))) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let (y, m, d) = (
        i32::try_from(y).map_err(|_| bad())?,
        u8::try_from(m).map_err(|_| bad())?,
        u8::try_from(d).map_err(|_| bad())?,
    );
    chela_core::zone::DateTime::new(y, m, d, 0, 0, 0).ok_or_else(bad)?;
    let local = chela_core::zone::civil::days_from_civil(y, m, d) * 86_400;
    // The offset an instant near that midnight has: exact but on a day the clocks change.
    let utc = local - i64::from(tz.offset_at(local));
    Ok(u64::try_from(utc).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chela_proto::chat::Usage;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::locate(Some(dir.path().to_path_buf())).unwrap();
        ws.ensure().unwrap();
        (dir, ws)
    }

    fn record(ts: u64, chat: &str, model: &str, read: u64) -> Record {
        let u = Usage { input_tokens: 100, output_tokens: 10, cache_read_tokens: read, cache_write_tokens: 5 };
        Record::new(ts, "cli", chat, model, &u)
    }

    #[test]
    fn records_are_appended_read_back_filtered_and_a_torn_line_is_skipped() {
        let (_d, ws) = ws();
        append(&ws, &record(100, "a", "claude-haiku-4-5", 1000)).unwrap();
        // A crash in the middle of a line, then another turn.
        let mut text = std::fs::read_to_string(log_path(&ws)).unwrap();
        text.push_str("{\"ts\":150,\"chan");
        std::fs::write(log_path(&ws), &text).unwrap();
        append(&ws, &record(200, "b", "gpt-4o-mini", 0)).unwrap();
        let (records, skipped) = read(&ws).unwrap();
        assert_eq!(skipped, 1);
        assert_eq!(records.iter().map(|r| r.ts).collect::<Vec<_>>(), [100, 200]);
        let (all, by_model) = totals(&records, &Filter::default(), &[]);
        assert_eq!(all.turns, 2);
        assert_eq!(by_model.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(), ["claude-haiku-4-5", "gpt-4o-mini"]);
        let (a, _) = totals(&records, &Filter { session: Some("cli:a".into()), since: None }, &[]);
        assert_eq!((a.turns, a.usage.cache_read_tokens), (1, 1000));
        let (late, _) = totals(&records, &Filter { session: None, since: Some(150) }, &[]);
        assert_eq!(late.turns, 1);
        assert!(
            describe(&all)
                .starts_with("2 turns: 1,210 tokens in (1,000 cached, 10 written to the cache), 20 out; about $"),
            "{}",
            describe(&all)
        );
    }

    #[test]
    fn the_log_is_bounded_by_rotation() {
        let (_d, ws) = ws();
        // A full log, as if from many turns.
        let line = record(1, "a", "m", 0).to_line();
        let full = line.repeat(usize::try_from(ROTATE_BYTES).unwrap() / line.len() + 1);
        std::fs::write(log_path(&ws), &full).unwrap();
        append(&ws, &record(2, "a", "m", 0)).unwrap();
        assert_eq!(std::fs::read_to_string(log_path(&ws)).unwrap(), record(2, "a", "m", 0).to_line());
        assert_eq!(std::fs::metadata(rotated_path(&ws)).unwrap().len(), full.len() as u64);
        // Rotating again replaces the older file: two files at most.
        std::fs::write(log_path(&ws), &full).unwrap();
        append(&ws, &record(3, "a", "m", 0)).unwrap();
        let names: Vec<_> =
            std::fs::read_dir(ws.root().join("state")).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names.iter().filter(|n| n.to_string_lossy().starts_with("usage")).count(), 2, "{names:?}");
        let (records, _) = read(&ws).unwrap();
        assert_eq!(records.last().unwrap().ts, 3);
    }

    #[test]
    fn days_start_at_local_midnight() {
        let shanghai = chela_core::zone::Zone::fixed("Asia/Shanghai", 8 * 3600);
        // 2026-12-05 10:00 in Shanghai is 02:00 UTC; its day began at 16:00 UTC the day before.
        let now = 1_796_436_000; // 2026-12-05T02:00:00Z
        assert_eq!(today_start(&shanghai, now), 1_796_428_800 - 8 * 3600);
        assert_eq!(day_start(&shanghai, "2026-12-05").unwrap(), 1_796_428_800 - 8 * 3600);
        assert!(day_start(&shanghai, "2026-13-01").is_err() && day_start(&shanghai, "yesterday").is_err());
    }
}
