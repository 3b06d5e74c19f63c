//! How a query becomes FTS5 searches, and what bounds their cost on millions of rows.
//!
//! BM25 must score every match before it can rank them, and a contentless FTS5 table reads
//! each match's length from its `docsize` table: the time of a search grows with its matches.
//! Three things keep that bounded:
//!
//! - entries holding every query word are looked for first; only when none does is any word
//!   enough (the "wide" search);
//! - a word that matches nothing is left out (it would empty the first search and widen the
//!   second for nothing), or replaced by the known words one edit away from it
//!   ([`super::super::spelling`]); a CJK pair that matches nothing by its two characters;
//! - when a search matches more than [`MAX_SCORED`] rows, only the newest [`MAX_SCORED`] of
//!   them are scored: one more lookup finds where they start (a walk of row ids, no lengths
//!   read), and the ranking query takes them by row id.

use super::super::spelling;
use super::super::terms::{is_cjk, match_all};
use super::*;

/// Matches scored by BM25 at most, the newest ones. A few thousand matches are ranked in
/// milliseconds; a word found in a quarter of a million entries took 180 ms.
/// (Five in the unit tests, which check the bound.)
pub const MAX_SCORED: i64 = if cfg!(test) { 5 } else { 20_000 };

/// The FTS5 tables searched.
#[derive(Clone, Copy)]
pub enum Table {
    Entries,
    Chunks,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Entries => "entries_fts",
            Table::Chunks => "chunks_fts",
        }
    }
}

fn quoted(w: &str) -> String {
    match_any(std::slice::from_ref(&w.to_owned())).unwrap_or_default()
}

/// Every group: a row must hold one word of each.
pub fn match_every(groups: &[Vec<String>]) -> String {
    if groups.iter().all(|g| g.len() == 1) {
        let words: Vec<String> = groups.iter().flatten().cloned().collect();
        return match_all(&words).unwrap_or_default();
    }
    let each: Vec<String> =
        groups.iter().filter_map(|g| match_any(g).map(|m| if g.len() == 1 { m } else { format!("({m})") })).collect();
    each.join(" AND ")
}

/// Any word of any group.
pub fn match_some(groups: &[Vec<String>]) -> String {
    let words: Vec<String> = groups.iter().flatten().cloned().collect();
    match_any(&words).unwrap_or_default()
}

impl Index {
    /// Runs `find` (a match expression, and the row id the matches to rank start after) with
    /// the rows holding every word of `query` and, when none does, with those holding any.
    pub(super) fn staged<T>(
        &mut self,
        table: Table,
        query: &str,
        find: impl Fn(&mut Index, &str, i64) -> io::Result<Vec<T>>,
    ) -> io::Result<Vec<T>> {
        let words = query_words(query);
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let groups = self.retrying(|ix| ix.groups(table, &words))?;
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        let every = match_every(&groups);
        let after = self.retrying(|ix| ix.scored_after(table, &every))?;
        let found = find(self, &every, after)?;
        if !found.is_empty() || groups.len() == 1 {
            return Ok(found);
        }
        let some = match_some(&groups);
        let after = self.retrying(|ix| ix.scored_after(table, &some))?;
        find(self, &some, after)
    }

    /// The query's words as groups of alternatives, each matching something in `table`: a
    /// word as it is when it matches, else its spelling alternatives that match, else (a CJK
    /// pair) its characters that match; words with none are left out.
    fn groups(&self, table: Table, words: &[String]) -> Result<Vec<Vec<String>>, rusqlite::Error> {
        let mut out = Vec::new();
        for w in words {
            if self.matches(table, w)? {
                out.push(vec![w.clone()]);
                continue;
            }
            let chars: Vec<char> = w.chars().collect();
            let candidates = if chars.len() == 2 && chars.iter().all(|c| is_cjk(*c)) {
                chars.iter().map(|c| c.to_string()).collect()
            } else {
                spelling::alternatives(&self.db, w)?
            };
            let mut known = Vec::new();
            for c in candidates {
                if self.matches(table, &c)? {
                    known.push(c);
                }
            }
            if !known.is_empty() {
                out.push(known);
            }
        }
        Ok(out)
    }

    /// Whether `word` matches any row of `table`: one doclist lookup.
    fn matches(&self, table: Table, word: &str) -> Result<bool, rusqlite::Error> {
        let t = table.name();
        let mut st = self.db.prepare_cached(&format!("SELECT 1 FROM {t} WHERE {t} MATCH ?1 LIMIT 1"))?;
        st.exists([quoted(word)])
    }

    /// The row id after which the newest [`MAX_SCORED`] matches of `m` lie, or `i64::MIN`
    /// when there are no more than that. Counted forward first, up to the bound: most searches
    /// match fewer, and a backward walk of the row ids (the newest first) costs more per row.
    fn scored_after(&self, table: Table, m: &str) -> Result<i64, rusqlite::Error> {
        let t = table.name();
        let mut count =
            self.db.prepare_cached(&format!("SELECT count(*) FROM (SELECT 1 FROM {t} WHERE {t} MATCH ?1 LIMIT ?2)"))?;
        let n: i64 = count.query_row(params![m, MAX_SCORED + 1], |r| r.get(0))?;
        if n <= MAX_SCORED {
            return Ok(i64::MIN);
        }
        let mut st = self.db.prepare_cached(&format!(
            "SELECT rowid FROM {t} WHERE {t} MATCH ?1 ORDER BY rowid DESC LIMIT 1 OFFSET ?2"
        ))?;
        Ok(st.query_row(params![m, MAX_SCORED], |r| r.get(0)).optional()?.unwrap_or(i64::MIN))
    }
}

#[cfg(test)]
#[path = "index_query_tests.rs"]
mod tests;
