//! Ranking as FTS5's `bm25()` does, so the new index orders results as the SQLite one did.
//!
//! For a query of phrases q₁…qₙ (each query term is one, a term given twice counts twice) and
//! a document D:
//!
//! ```text
//! score(D) = -Σ idf(qᵢ) · f(qᵢ, D) · (k1 + 1) / (f(qᵢ, D) + k1 · (1 - b + b · |D| / avgdl))
//! idf(q)   = ln((N - n(q) + 0.5) / (n(q) + 0.5)), or 1e-6 where that is not above 0
//! ```
//!
//! where f is the term's count in D with each column's count multiplied by its weight (an
//! entry's tags weigh 2), |D| the document's length in terms over all columns, avgdl the mean
//! length, N the documents of the table and n(q) those holding q. Like FTS5's, the score is
//! negative: lower is better.

/// FTS5's constants.
pub const K1: f64 = 1.2;
pub const B: f64 = 0.75;

/// What the whole table holds: N and the sum of the lengths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub docs: u64,
    pub terms: u64,
}

impl Totals {
    pub fn avgdl(&self) -> f64 {
        if self.docs == 0 { 0.0 } else { self.terms as f64 / self.docs as f64 }
    }
}

/// The weight of a term found in `hits` of `docs` documents.
pub fn idf(docs: u64, hits: u64) -> f64 {
    let idf = ((docs as f64 - hits as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 { 1e-6 } else { idf }
}

/// The score of one document: `idfs[i]` and `freqs[i]` (the weighted count) of each phrase,
/// its length `len`, and the table's `avgdl`.
pub fn score(idfs: &[f64], freqs: &[f64], len: u32, avgdl: f64) -> f64 {
    let d = f64::from(len);
    let norm = if avgdl > 0.0 { K1 * (1.0 - B + B * d / avgdl) } else { K1 * (1.0 - B) };
    let s: f64 = idfs.iter().zip(freqs).map(|(idf, f)| idf * (f * (K1 + 1.0)) / (f + norm)).sum();
    -s
}

/// A column's counts weighed: `tf[c] * weights[c]` summed.
pub fn weighted(tf: &[u32], weights: &[f64]) -> f64 {
    tf.iter().zip(weights).map(|(t, w)| f64::from(*t) * w).sum()
}
