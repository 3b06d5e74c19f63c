//! A query on the engine as `index_query` runs it on FTS5: the query's words (stop words
//! dropped, CJK runs as pairs: [`super::super::terms::query_words`]) become groups of terms;
//! a word that matches nothing is replaced by the known words one edit away that match
//! ([`super::super::spelling`]), a CJK pair that matches nothing by its two characters, and is
//! left out when nothing is left; documents holding every group are looked for first, then
//! (only when none does and there are several groups) documents holding any; only the newest
//! [`MAX_SCORED`] matches are scored.

use std::collections::{BTreeSet, HashSet};
use std::io;

use super::super::spelling::{MAX_ALTERNATIVES, MAX_CHARS, MIN_CHARS, variants};
use super::super::terms::{is_cjk, is_stop_word, query_words};
use super::manifest::Table;
use super::store::{Hit, Query, Store};
use super::tokens::terms;

/// Matches scored by BM25 at most, the newest ones (as `index_query::MAX_SCORED`; five in the
/// unit tests, which check the bound).
pub const MAX_SCORED: usize = if cfg!(test) { 5 } else { 20_000 };

/// The column weights: an entry's tags weigh twice its content; a chunk has one column.
pub fn weights(table: Table) -> &'static [f64] {
    match table {
        Table::Entries => &[1.0, 2.0],
        Table::Chunks => &[1.0],
    }
}

/// The term a query word is looked for as (its stem), or `None` for a word with no term.
fn term(word: &str) -> Option<String> {
    terms(word).into_iter().next()
}

/// The variants of `word` that could replace it, in the order they are tried: none for a
/// word too short, too long or not alphabetic; no stop words.
fn candidates(word: &str) -> Vec<String> {
    let n = word.chars().count();
    if !(MIN_CHARS..=MAX_CHARS).contains(&n) || !word.chars().all(|c| c.is_alphabetic() && !is_cjk(c)) {
        return Vec::new();
    }
    variants(word).into_iter().filter(|v| !is_stop_word(v)).collect()
}

/// The known words one edit away from `word` in `vocabulary`, at most [`MAX_ALTERNATIVES`],
/// without stop words; none for a word too short, too long or not alphabetic.
pub fn alternatives(vocabulary: &BTreeSet<String>, word: &str) -> Vec<String> {
    candidates(word).into_iter().filter(|v| vocabulary.contains(v)).take(MAX_ALTERNATIVES).collect()
}

/// The query's words as groups of alternative terms, each matching something in `table`.
pub fn groups(store: &Store, table: Table, words: &[String]) -> io::Result<Vec<Vec<String>>> {
    // Known words first; then one pass over the segments' vocabularies for the variants of
    // all unknown ones together.
    let mut known_term: Vec<Option<String>> = Vec::with_capacity(words.len());
    for w in words {
        let t = term(w);
        known_term.push(match t {
            Some(t) if store.contains(table, &t)? => Some(t),
            _ => None,
        });
    }
    let mut wanted: HashSet<String> = HashSet::new();
    for (w, k) in words.iter().zip(&known_term) {
        let chars = w.chars().count();
        if k.is_none() && !(chars == 2 && w.chars().all(is_cjk)) {
            wanted.extend(candidates(w));
        }
    }
    let vocabulary = store.known_words(&wanted)?;
    let mut out: Vec<Vec<String>> = Vec::new();
    for (w, k) in words.iter().zip(known_term) {
        if let Some(t) = k {
            out.push(vec![t]);
            continue;
        }
        if term(w).is_none() {
            continue;
        }
        let chars: Vec<char> = w.chars().collect();
        let replacements: Vec<String> = if chars.len() == 2 && chars.iter().all(|c| is_cjk(*c)) {
            chars.iter().map(|c| c.to_string()).collect()
        } else {
            candidates(w).into_iter().filter(|v| vocabulary.contains(v)).take(MAX_ALTERNATIVES).collect()
        };
        let mut known = Vec::new();
        for c in replacements {
            if let Some(t) = term(&c)
                && !known.contains(&t)
                && store.contains(table, &t)?
            {
                known.push(t);
            }
        }
        if !known.is_empty() {
            out.push(known);
        }
    }
    Ok(out)
}

/// The documents of `table` matching `query`, best first, at most `max`.
pub fn staged(store: &Store, table: Table, query: &str, max: usize) -> io::Result<Vec<Hit>> {
    let words = query_words(query);
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let groups = groups(store, table, &words)?;
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let q = Query { groups: &groups, every: true, weights: weights(table), max_scored: MAX_SCORED, max };
    let found = store.search(table, &q)?;
    if !found.is_empty() || groups.len() == 1 {
        return Ok(found);
    }
    store.search(table, &Query { every: false, ..q })
}
