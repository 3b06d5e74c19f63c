//! Keywords and meaning together: the BM25 list and the nearest vectors merged by reciprocal
//! rank fusion, so a fact found by both comes first, and one only the vectors find (a reworded
//! or misspelled query) still comes back.

use std::collections::HashMap;
use std::hash::Hash;
use std::io;

use super::embed::{Kind, nearest};
use super::index::{EntryHit, Index, MAX_RESULTS, NoteHit, snippet};

/// The `k` of reciprocal rank fusion: a result's score is the sum over the lists of
/// 1 / (k + its rank), rank counted from 1. 60 is the value of the method's paper and of the
/// assistants that use it.
pub const RRF_K: f64 = 60.0;

/// The least cosine similarity for a vector's row to count: below it the row is no nearer the
/// query than unrelated text, and without a floor every search would return its nearest rows,
/// however far, where keywords rightly find nothing.
pub const MIN_SIMILARITY: f32 = 0.25;

/// How deep each list is read before fusing.
const DEPTH: usize = MAX_RESULTS;

/// The keys of `lists` (each best first, a key at most once per list) by fused score, best
/// first; ties keep the order in which the keys were first met (the keyword list first).
pub fn rrf<K: Clone + Eq + Hash>(lists: &[Vec<K>]) -> Vec<K> {
    let mut score: HashMap<K, (f64, usize)> = HashMap::new();
    let mut seen = 0;
    for list in lists {
        for (rank, key) in list.iter().enumerate() {
            let e = score.entry(key.clone()).or_insert_with(|| {
                seen += 1;
                (0.0, seen)
            });
            e.0 += 1.0 / (RRF_K + rank as f64 + 1.0);
        }
    }
    let mut out: Vec<(K, (f64, usize))> = score.into_iter().collect();
    chela_infra::sort::sort_by(&mut out, |a, b| b.1.0.total_cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    out.into_iter().map(|(k, _)| k).collect()
}

/// [`Index::recall`] fused with the entries nearest `q` (the query's vector from `model`).
pub fn recall(ix: &mut Index, query: &str, q: &[f32], model: &str, max: usize) -> io::Result<Vec<EntryHit>> {
    let max = max.clamp(1, MAX_RESULTS);
    let words = ix.recall(query, DEPTH)?;
    let near = match nearest(ix, Kind::Entry, model, q, DEPTH) {
        Ok(n) => n.into_iter().filter(|(_, s)| *s >= MIN_SIMILARITY),
        Err(e) => {
            chela_log::warn!("memory vectors unreadable, keywords alone: {e}");
            return Ok(words.into_iter().take(max).collect());
        }
    };
    let mut by_id: HashMap<String, EntryHit> = words.iter().map(|h| (h.id.clone(), h.clone())).collect();
    let mut near_ids = Vec::new();
    for (doc, _) in near {
        if let Some((hit, _)) = ix.entry(doc)? {
            near_ids.push(hit.id.clone());
            by_id.entry(hit.id.clone()).or_insert(hit);
        }
    }
    let word_ids = words.into_iter().map(|h| h.id).collect();
    Ok(rrf(&[word_ids, near_ids]).into_iter().filter_map(|id| by_id.remove(&id)).take(max).collect())
}

/// [`Index::search`] fused with the note chunks nearest `q`.
pub fn search(ix: &mut Index, query: &str, q: &[f32], model: &str, max: usize) -> io::Result<Vec<NoteHit>> {
    let max = max.clamp(1, MAX_RESULTS);
    let words = ix.search(query, DEPTH)?;
    let near = match nearest(ix, Kind::Chunk, model, q, DEPTH) {
        Ok(n) => n.into_iter().filter(|(_, s)| *s >= MIN_SIMILARITY),
        Err(e) => {
            chela_log::warn!("memory vectors unreadable, keywords alone: {e}");
            return Ok(words.into_iter().take(max).collect());
        }
    };
    let key = |h: &NoteHit| (h.path.clone(), h.first, h.last);
    let mut by_key: HashMap<(String, u32, u32), NoteHit> = words.iter().map(|h| (key(h), h.clone())).collect();
    let mut near_keys = Vec::new();
    for (doc, _) in near {
        if let Some((path, first, last, text)) = ix.chunk(doc)? {
            let hit = NoteHit { path, first, last, snippet: snippet(&text) };
            near_keys.push(key(&hit));
            by_key.entry(key(&hit)).or_insert(hit);
        }
    }
    let word_keys = words.iter().map(key).collect();
    Ok(rrf(&[word_keys, near_keys]).into_iter().filter_map(|k| by_key.remove(&k)).take(max).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_puts_what_both_lists_found_first_and_keeps_what_one_found() {
        let words = vec!["a", "b", "c"];
        let near = vec!["x", "c", "a"];
        // a: 1/61 + 1/63, c: 1/63 + 1/62, x: 1/61, b: 1/62.
        assert_eq!(rrf(&[words, near]), vec!["a", "c", "x", "b"]);
        assert_eq!(rrf::<&str>(&[vec![], vec!["z"]]), vec!["z"]);
        assert!(rrf::<&str>(&[vec![], vec![]]).is_empty());
    }

    #[test]
    fn rrf_ties_keep_the_keyword_order() {
        assert_eq!(rrf(&[vec!["a"], vec!["b"]]), vec!["a", "b"]);
        assert_eq!(rrf(&[vec!["b", "a"], vec!["a", "b"]]), vec!["b", "a"]);
    }
}
