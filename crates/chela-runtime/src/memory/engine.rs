//! The memory index's own engine, in Rust, in place of SQLite's FTS5 (issue 31: SQLite's C was
//! the largest single part of the binary). [`super::index`] runs on it.
//!
//! The pieces, from the bottom: [`tokens`] and [`porter`] make a text's terms as FTS5's
//! `unicode61 remove_diacritics 2` and `porter` did; [`codec`] reads and writes the bytes with
//! every length checked; [`segment`] is one immutable file of documents, terms and postings;
//! [`bm25`] ranks as FTS5's `bm25()` does; [`manifest`] names the files in force and the live
//! documents; [`store`] writes and searches them; [`query`] is the staged query; [`vectors`]
//! keeps the embeddings.

pub mod bm25;
pub mod codec;
pub mod manifest;
pub mod porter;
pub mod query;
pub mod segment;
pub mod store;
pub mod tokens;
pub mod vectors;

/// What the index does to a text before the tokenizer (CJK runs spelled out as characters and
/// pairs) and the surface words it keeps for spelling, for the engine's bench.
pub use super::spelling::words as spelling_words;
pub use super::terms::for_index;

#[cfg(test)]
mod porter_tests;
