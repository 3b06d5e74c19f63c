//! How a query is searched: the engine's staged query (`super::super::engine::query`), with
//! what bounds its cost on millions of documents:
//!
//! - documents holding every query word are looked for first; only when none does is any word
//!   enough (the "wide" search);
//! - a word that matches nothing is left out (it would empty the first search and widen the
//!   second for nothing), or replaced by the known words one edit away from it
//!   ([`super::super::spelling`]); a CJK pair that matches nothing by its two characters;
//! - when a search matches more than [`MAX_SCORED`] documents, only the newest [`MAX_SCORED`]
//!   of them are scored.

#[cfg(test)]
pub use super::super::engine::query::MAX_SCORED;
#[cfg(test)]
use super::*;

#[cfg(test)]
#[path = "index_query_tests.rs"]
mod tests;
