//! Keyword recall over memory entries: one pass over the entries per query, integer scores.
//!
//! Cost: O(N·L·T) for N entries of L tokens and T query terms (T is bounded by
//! [`MAX_QUERY_TERMS`]). Each entry is tokenised once, into a reused buffer, and only its match
//! masks are kept; document frequencies are counted for the query's terms alone during that same
//! pass, and a bounded heap keeps the best `max`.
//!
//! Scores are fixed-point integers, not floats: the ESP32-C3 has no FPU, and ranking needs
//! only comparisons, so an integer base-2 logarithm ranks exactly as the natural one would (the
//! two differ by a constant factor).

use alloc::collections::BinaryHeap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::cmp::Reverse;

use super::Entry;

/// Distinct query terms considered; later ones are ignored. Bounds the per-entry work and lets a
/// term's matches in one entry fit in the bits of a `u32`.
pub const MAX_QUERY_TERMS: usize = 32;

/// A recall score: the sum, over the query terms an entry matches, of the term's rarity (see
/// [`rarity`]) times 4 for a tag, 2 for a whole word, 1 for a word the term only starts. Only
/// comparisons between scores of one query mean anything.
pub type Score = u64;

/// Fractional bits of the fixed-point logarithms.
const FRAC_BITS: u32 = 16;

/// The least rarity: a term found in every entry still counts a little, so such a query still
/// finds entries (newest first). 0.1 nat, as the float ranking had, is 0.144 bit: 9457 / 2^16.
const MIN_RARITY: u64 = 9_457;

/// Entries matching `query`'s keywords, best first, at most `max`. Ties go to the newer entry
/// (`updated`), then to the one earlier in `entries`.
///
/// Scoring: each query term found in an entry adds its [`rarity`] (terms in few entries count
/// more, as in BM25's IDF); a term that is a tag counts double; a term of three or more
/// characters that only starts a word ("coffee" in "coffees") counts half. Chinese, Japanese and
/// Korean text has no spaces, so it is matched by character pairs (see [`tokens`]).
pub fn recall<'e>(entries: &'e [Entry], query: &str, max: usize) -> Vec<(Score, &'e Entry)> {
    let terms = query_terms(query);
    if terms.is_empty() || max == 0 {
        return Vec::new();
    }
    // Terms short enough that a prefix match would be noise ("a" starts half the words).
    let prefix_ok =
        terms.iter().enumerate().fold(0u32, |m, (k, t)| if t.chars().count() >= 3 { m | 1 << k } else { m });

    let by_first = TermIndex::new(&terms, prefix_ok);
    let mut df = [0u32; MAX_QUERY_TERMS];
    let mut hits: Vec<Hit> = Vec::new();
    let mut buf = String::new();
    for (index, e) in entries.iter().enumerate() {
        let mut hit = Hit { index, tag: 0, word: 0, prefix: 0 };
        for_each_token(&e.content, &mut buf, |tok| {
            let (word, prefix) = by_first.matches(&terms, tok.as_bytes());
            hit.word |= word;
            hit.prefix |= prefix;
        });
        for tag in &e.tags {
            for_each_token(tag, &mut buf, |tok| {
                for (k, t) in terms.iter().enumerate() {
                    if tok == t {
                        hit.tag |= 1 << k;
                    }
                }
            });
        }
        // Document frequency counts exact matches (word or tag), not prefixes.
        let exact = hit.word | hit.tag;
        for (k, n) in df.iter_mut().enumerate().take(terms.len()) {
            *n += exact >> k & 1;
        }
        if exact | hit.prefix != 0 {
            hits.push(hit);
        }
    }

    let n = entries.len() as u64;
    let weights: Vec<u64> = df[..terms.len()].iter().map(|&d| rarity(n, u64::from(d))).collect();
    // A min-heap of the best `max` so far: the worst kept is on top, ready to be dropped.
    let mut best: BinaryHeap<Reverse<(Score, u64, Reverse<usize>)>> =
        BinaryHeap::with_capacity(max.min(hits.len()) + 1);
    for hit in &hits {
        let score: Score = weights
            .iter()
            .enumerate()
            .map(|(k, &w)| {
                let bit = 1 << k;
                if hit.tag & bit != 0 {
                    4 * w
                } else if hit.word & bit != 0 {
                    2 * w
                } else if hit.prefix & bit != 0 {
                    w
                } else {
                    0
                }
            })
            .sum();
        let key = (score, entries[hit.index].updated, Reverse(hit.index));
        if best.len() < max {
            best.push(Reverse(key));
        } else if best.peek().is_some_and(|Reverse(worst)| key > *worst) {
            // Full: the newcomer replaces the worst kept, without a push and a pop.
            if let Some(mut worst) = best.peek_mut() {
                *worst = Reverse(key);
            }
        }
    }
    // Ascending `Reverse` order is descending key order: best first.
    best.into_sorted_vec().into_iter().map(|Reverse((score, _, Reverse(i)))| (score, &entries[i])).collect()
}

/// The query's terms by first byte, so a token is compared only with the terms it could be:
/// most tokens share no first byte with any term and cost one table lookup.
struct TermIndex {
    /// Terms (bits) starting with each byte.
    first: [u32; 256],
    /// Terms that count when they only start a word.
    prefix_ok: u32,
}

impl TermIndex {
    fn new(terms: &[String], prefix_ok: u32) -> TermIndex {
        let mut first = [0u32; 256];
        for (k, t) in terms.iter().enumerate() {
            if let Some(&b) = t.as_bytes().first() {
                first[usize::from(b)] |= 1 << k;
            }
        }
        TermIndex { first, prefix_ok }
    }

    /// The terms `tok` equals, and those it only starts with (where that counts).
    fn matches(&self, terms: &[String], tok: &[u8]) -> (u32, u32) {
        let Some(&b) = tok.first() else { return (0, 0) };
        let mut candidates = self.first[usize::from(b)];
        let (mut word, mut prefix) = (0u32, 0u32);
        while candidates != 0 {
            let k = candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            let t = terms[k].as_bytes();
            if tok == t {
                word |= 1 << k;
            } else if self.prefix_ok & (1 << k) != 0 && tok.starts_with(t) {
                prefix |= 1 << k;
            }
        }
        (word, prefix)
    }
}

/// Which query terms (one bit each) an entry matched, and how.
struct Hit {
    index: usize,
    tag: u32,
    word: u32,
    prefix: u32,
}

/// How much a term found in `df` of `n` entries counts: log2((n + 1) / (df + 0.5)) in fixed point
/// (16 fractional bits), at least [`MIN_RARITY`].
pub fn rarity(n: u64, df: u64) -> u64 {
    // (n + 1) / (df + 0.5) = (2n + 2) / (2df + 1), both whole numbers.
    let num = log2_fixed(n.saturating_mul(2).saturating_add(2));
    let den = log2_fixed(df.saturating_mul(2).saturating_add(1));
    num.saturating_sub(den).max(MIN_RARITY)
}

/// log2(x) for x >= 1 with [`FRAC_BITS`] fractional bits, rounded down (within one unit):
/// the integer part from the leading zeros, each fractional bit by squaring the mantissa.
fn log2_fixed(x: u64) -> u64 {
    if x == 0 {
        return 0;
    }
    let int = 63 - x.leading_zeros();
    // The mantissa x / 2^int in [1, 2), as a 32.32 fixed-point number.
    let mut m: u64 = if int >= 32 { x >> (int - 32) } else { x << (32 - int) };
    let mut frac = 0u64;
    for _ in 0..FRAC_BITS {
        // m² stays below 4 · 2^32, so the product fits in a u128 and the result in a u64.
        m = ((u128::from(m) * u128::from(m)) >> 32) as u64;
        frac <<= 1;
        if m >= 2 << 32 {
            m >>= 1;
            frac |= 1;
        }
    }
    u64::from(int) << FRAC_BITS | frac
}

/// The query's distinct tokens, in order, at most [`MAX_QUERY_TERMS`].
fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    let mut buf = String::new();
    for_each_token(query, &mut buf, |tok| {
        if terms.len() < MAX_QUERY_TERMS && !terms.iter().any(|t| t == tok) {
            terms.push(tok.to_string());
        }
    });
    terms
}

/// Bytes that continue a word as they are: `a`–`z` and `0`–`9`. A table makes the test one load
/// in the loop every byte of every entry goes through.
static LOWER_ALNUM: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).is_ascii_lowercase() || (b as u8).is_ascii_digit();
        b += 1;
    }
    t
};

fn is_lower_alnum(b: u8) -> bool {
    LOWER_ALNUM[usize::from(b)]
}

/// Where the run of `a`–`z`/`0`–`9` bytes starting at `i` ends. Eight bytes at a time: a byte
/// loop's exit depends on each word's length, which the CPU cannot predict, and that mispredict
/// was a large part of a recall's time; most words end within the first eight bytes.
fn lower_alnum_run_end(bytes: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let stop = !lower_alnum_bytes(u64::from_le_bytes(word)) & HIGH_BITS;
        if stop != 0 {
            // Little-endian: the lowest set bit is the first byte that is not part of the word.
            return i + (stop.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && is_lower_alnum(bytes[i]) {
        i += 1;
    }
    i
}

const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
const ONES: u64 = 0x0101_0101_0101_0101;

/// The high bit of each byte of `x` set where that byte is `a`–`z` or `0`–`9`. Each range test
/// adds a constant to the low seven bits of every byte at once; the sums stay below 0x100, so no
/// carry crosses into the next byte, and bytes of 0x80 and up are masked out at the end.
fn lower_alnum_bytes(x: u64) -> u64 {
    let low = x & !HIGH_BITS;
    let at_least = |b: u8| low.wrapping_add(ONES * u64::from(0x80 - b)) & HIGH_BITS;
    let above = |b: u8| low.wrapping_add(ONES * u64::from(0x7F - b)) & HIGH_BITS;
    let letters = at_least(b'a') & !above(b'z');
    let digits = at_least(b'0') & !above(b'9');
    (letters | digits) & !x & HIGH_BITS
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// Lowercased words; runs of CJK characters become overlapping character pairs (a single
/// character stays itself).
pub fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(s, &mut String::new(), |t| out.push(t.to_string()));
    out
}

/// Calls `f` with each of [`tokens`]`(s)` in order. A word already in lowercase ASCII (most
/// of them) is passed as a slice of `s`; others are lowercased into `buf`, so scanning many
/// entries allocates nothing once `buf` has grown to the longest such word.
fn for_each_token(s: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    let bytes = s.as_bytes();
    // The current word: where it began in `s`, and whether it is being lowercased into `buf`.
    let mut word: Option<usize> = None;
    let mut lowered = false;
    // The previous character of the current CJK run, and whether the run has only that one.
    let mut prev_cjk: Option<char> = None;
    let mut lone_cjk = false;
    macro_rules! end_word {
        ($at:expr) => {
            if let Some(start) = word.take() {
                if lowered {
                    f(buf);
                    buf.clear();
                    lowered = false;
                } else {
                    f(&s[start..$at]);
                }
            }
        };
    }
    macro_rules! end_cjk {
        () => {
            if let (Some(c), true) = (prev_cjk.take(), lone_cjk) {
                f(c.encode_utf8(&mut [0u8; 4]));
            }
            lone_cjk = false;
        };
    }
    buf.clear();
    let mut i = 0;
    while i < bytes.len() {
        // Most text is ASCII: a byte test is much cheaper than decoding and classifying a char.
        let b = bytes[i];
        if word.is_none() && is_lower_alnum(b) {
            // The common case, in a tight loop: a word in lowercase ASCII, passed as a slice.
            if prev_cjk.is_some() {
                end_cjk!();
            }
            let start = i;
            i = lower_alnum_run_end(bytes, i);
            match bytes.get(i) {
                None => f(&s[start..]),
                Some(b) if b.is_ascii() && !b.is_ascii_alphanumeric() => {
                    f(&s[start..i]);
                    i += 1;
                }
                // An uppercase or non-ASCII character follows: the word goes on the slow way.
                Some(_) => word = Some(start),
            }
            continue;
        }
        if b.is_ascii() {
            if prev_cjk.is_some() {
                end_cjk!();
            }
            if b.is_ascii_alphanumeric() {
                if word.is_none() {
                    word = Some(i);
                }
                if b.is_ascii_uppercase() && !lowered {
                    buf.push_str(&s[word.unwrap_or(i)..i]);
                    lowered = true;
                }
                if lowered {
                    buf.push(char::from(b.to_ascii_lowercase()));
                }
            } else {
                end_word!(i);
            }
            i += 1;
            continue;
        }
        let Some(c) = s[i..].chars().next() else { break };
        let at = i;
        i += c.len_utf8();
        if is_cjk(c) {
            end_word!(at);
            if let Some(p) = prev_cjk {
                let mut pair = [0u8; 8];
                let a = p.encode_utf8(&mut pair).len();
                let b = c.encode_utf8(&mut pair[a..]).len();
                if let Ok(s) = core::str::from_utf8(&pair[..a + b]) {
                    f(s);
                }
                lone_cjk = false;
            } else {
                lone_cjk = true;
            }
            prev_cjk = Some(c);
        } else {
            end_cjk!();
            if c.is_alphanumeric() {
                if !lowered {
                    buf.push_str(&s[word.unwrap_or(at)..at]);
                    lowered = true;
                }
                word.get_or_insert(at);
                buf.extend(c.to_lowercase());
            } else {
                end_word!(at);
            }
        }
    }
    // The same as `end_cjk!` and `end_word!`, without state updates nobody reads.
    if let (Some(c), true) = (prev_cjk, lone_cjk) {
        f(c.encode_utf8(&mut [0u8; 4]));
    }
    if let Some(start) = word {
        if lowered {
            f(buf);
            buf.clear();
        } else {
            f(&s[start..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec;

    /// The tokenizer as first written: obviously right, allocating freely.
    fn reference_tokens(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut word = String::new();
        let mut cjk: Vec<char> = Vec::new();
        let flush_cjk = |cjk: &mut Vec<char>, out: &mut Vec<String>| {
            match cjk.len() {
                0 => {}
                1 => out.push(cjk[0].to_string()),
                _ => out.extend(cjk.windows(2).map(|w| w.iter().collect::<String>())),
            }
            cjk.clear();
        };
        for c in s.chars() {
            if is_cjk(c) {
                if !word.is_empty() {
                    out.push(core::mem::take(&mut word));
                }
                cjk.push(c);
            } else if c.is_alphanumeric() {
                flush_cjk(&mut cjk, &mut out);
                word.extend(c.to_lowercase());
            } else {
                flush_cjk(&mut cjk, &mut out);
                if !word.is_empty() {
                    out.push(core::mem::take(&mut word));
                }
            }
        }
        flush_cjk(&mut cjk, &mut out);
        if !word.is_empty() {
            out.push(word);
        }
        out
    }

    /// The ranking as specified, the slow way: for every entry and term, count the entries that
    /// hold the term by scanning them all (O(N²·T)), then sort everything.
    fn reference_recall<'e>(entries: &'e [Entry], query: &str, max: usize) -> Vec<(Score, &'e Entry)> {
        let mut terms: Vec<String> = Vec::new();
        for t in reference_tokens(query) {
            if !terms.contains(&t) {
                terms.push(t);
            }
        }
        terms.truncate(MAX_QUERY_TERMS);
        let docs: Vec<(Vec<String>, Vec<String>)> = entries
            .iter()
            .map(|e| (reference_tokens(&e.content), e.tags.iter().flat_map(|t| reference_tokens(t)).collect()))
            .collect();
        let n = entries.len() as u64;
        let mut scored = Vec::new();
        for (e, (words, tags)) in entries.iter().zip(&docs) {
            let mut score = 0;
            for t in &terms {
                let df = docs.iter().filter(|(w, g)| w.contains(t) || g.contains(t)).count() as u64;
                let r = rarity(n, df);
                if tags.contains(t) {
                    score += 4 * r;
                } else if words.contains(t) {
                    score += 2 * r;
                } else if t.chars().count() >= 3 && words.iter().any(|w| w.starts_with(t.as_str())) {
                    score += r;
                }
            }
            if score > 0 {
                scored.push((score, e));
            }
        }
        // A stable sort: equal scores and times keep the entries' order.
        crate::sort::sort_by(&mut scored, |a, b| b.0.cmp(&a.0).then_with(|| b.1.updated.cmp(&a.1.updated)));
        scored.truncate(max);
        scored
    }

    #[test]
    fn log2_is_exact_on_powers_and_close_elsewhere() {
        assert_eq!(log2_fixed(1), 0);
        assert_eq!(log2_fixed(8), 3 << 16);
        assert_eq!(log2_fixed(1 << 40), 40 << 16);
        // log2(10) = 3.321928…, log2(3) = 1.584963…, log2(1001) = 9.967226…; 2^16 units.
        for (x, want) in [(10u64, 217_705u64), (3, 103_872), (1001, 653_212)] {
            let got = log2_fixed(x);
            assert!(got.abs_diff(want) <= 2, "log2({x}) = {got}, want {want}");
        }
        let mut last = 0;
        for x in 1..5000u64 {
            let l = log2_fixed(x);
            assert!(l >= last, "log2 must not decrease: {x}");
            last = l;
        }
    }

    #[test]
    fn the_eight_byte_word_test_agrees_with_the_byte_table() {
        for b in 0..=255u8 {
            for at in 0..8 {
                let mut chunk = [b'-'; 8];
                chunk[at] = b;
                let mask = lower_alnum_bytes(u64::from_le_bytes(chunk));
                assert_eq!(mask >> (8 * at + 7) & 1 == 1, is_lower_alnum(b), "byte {b:#x} at {at}");
            }
        }
        assert_eq!(lower_alnum_run_end(b"appointments tomorrow", 0), 12);
        assert_eq!(lower_alnum_run_end(b"abcdefgh", 0), 8);
        assert_eq!(lower_alnum_run_end(b"x abcdefghijklmnopq", 2), 19);
    }

    #[test]
    fn rarity_falls_with_frequency_and_has_a_floor() {
        let n = 1000;
        assert!(rarity(n, 1) > rarity(n, 10));
        assert!(rarity(n, 10) > rarity(n, 500));
        assert_eq!(rarity(n, n), MIN_RARITY, "a term in every entry still counts a little");
        assert_eq!(rarity(0, 0), 1 << 16, "one empty store: log2(2 / 1)");
    }

    #[test]
    fn query_terms_are_distinct_and_bounded() {
        assert_eq!(query_terms("Tea tea TEA coffee"), ["tea", "coffee"]);
        let many: String = (0..100).map(|i| format!("w{i} ")).collect();
        let terms = query_terms(&many);
        assert_eq!(terms.len(), MAX_QUERY_TERMS);
        assert_eq!(terms[MAX_QUERY_TERMS - 1], format!("w{}", MAX_QUERY_TERMS - 1));
    }

    #[test]
    fn max_bounds_the_answer_and_ties_go_to_the_newer_then_the_earlier() {
        let e = |id: &str, updated| Entry {
            id: id.into(),
            content: "green tea".into(),
            tags: vec![],
            source: String::new(),
            created: 0,
            updated,
        };
        let list = vec![e("a", 1), e("b", 2), e("c", 2), e("d", 0)];
        let ids = |r: Vec<(Score, &Entry)>| r.iter().map(|(_, e)| e.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(recall(&list, "tea", 10)), ["b", "c", "a", "d"]);
        assert_eq!(ids(recall(&list, "tea", 2)), ["b", "c"]);
        assert!(recall(&list, "tea", 0).is_empty());
    }

    const WORDS: [&str; 12] =
        ["tea", "teas", "Tea", "coffee", "cat", "user", "a", "猫", "绿茶", "喝绿茶", "x-y", "Éclair"];

    fn text(picks: &[usize]) -> String {
        picks.iter().map(|&i| WORDS[i % WORDS.len()]).collect::<Vec<_>>().join(" ")
    }

    proptest::proptest! {
        #[test]
        fn tokens_match_the_reference(
            s in "\\PC{0,60}",
            ascii in "[a-zA-Z0-9 ,.\\-_@\\[`{\\x7f]{0,80}",
            picks in proptest::collection::vec(0usize..12, 0..8),
        ) {
            proptest::prop_assert_eq!(tokens(&s), reference_tokens(&s));
            proptest::prop_assert_eq!(tokens(&ascii), reference_tokens(&ascii));
            let t = text(&picks);
            proptest::prop_assert_eq!(tokens(&t), reference_tokens(&t));
        }

        #[test]
        fn ranking_matches_the_reference(
            docs in proptest::collection::vec(
                (proptest::collection::vec(0usize..12, 0..6), proptest::collection::vec(0usize..12, 0..3), 0u64..4),
                0..14,
            ),
            query in proptest::collection::vec(0usize..12, 0..4),
            max in 0usize..8,
        ) {
            let entries: Vec<Entry> = docs
                .iter()
                .enumerate()
                .map(|(i, (words, tags, updated))| Entry {
                    id: format!("m{i}"),
                    content: text(words),
                    tags: tags.iter().map(|&t| WORDS[t].to_string()).collect(),
                    source: String::new(),
                    created: 0,
                    updated: *updated,
                })
                .collect();
            let q = text(&query);
            let got: Vec<(Score, &str)> = recall(&entries, &q, max).into_iter().map(|(s, e)| (s, e.id.as_str())).collect();
            let want: Vec<(Score, &str)> =
                reference_recall(&entries, &q, max).into_iter().map(|(s, e)| (s, e.id.as_str())).collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
