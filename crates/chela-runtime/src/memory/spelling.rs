//! Misspelled query words: a word that matches nothing in the index is replaced by the known
//! words one edit away from it ("recieve" → "receive", "kiwii" → "kiwi").
//!
//! The index keeps every word it has seen, as written and lower-cased (not stemmed: a typo is a
//! slip of the surface form), with each segment (`engine::segment`'s `WORDS`). Rather than
//! compare a bad word with every known one, its few hundred variants one edit away (a letter
//! dropped, added, changed, or two swapped) are looked up in that set
//! (`engine::query::alternatives`). All variants found are kept, as alternatives ORed together; the other query words then
//! pick among them through BM25.
//!
//! The vocabulary only grows until the next rebuild: a word whose entries were forgotten may
//! still be offered, and then simply matches nothing.

use std::collections::HashSet;

/// Words shorter than this are not corrected nor kept: one edit away from a two-letter word is
/// half the dictionary.
pub const MIN_CHARS: usize = 3;

/// Longer runs of letters are not words a person types, and are not kept.
pub const MAX_CHARS: usize = 24;

/// Alternatives offered for one misspelled word, at most.
pub const MAX_ALTERNATIVES: usize = 8;

/// The words of `text` worth keeping and correcting to: lower-cased runs of letters, outside
/// the CJK scripts (whose words are their characters), of [`MIN_CHARS`] to [`MAX_CHARS`].
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphabetic() || super::terms::is_cjk(c)).filter_map(|w| {
        let n = w.chars().count();
        (MIN_CHARS..=MAX_CHARS).contains(&n).then(|| w.to_lowercase())
    })
}

/// Every string one edit away from `word`: a letter deleted, two neighbours swapped, a letter
/// replaced or inserted. Letters tried: a to z and the word's own (so "café" can gain its é).
pub fn variants(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    let mut letters: Vec<char> = ('a'..='z').collect();
    for c in &chars {
        if !letters.contains(c) {
            letters.push(*c);
        }
    }
    let n = chars.len();
    let mut out: Vec<String> = Vec::with_capacity(n * (2 * letters.len() + 2) + letters.len());
    let join = |v: &[char]| v.iter().collect::<String>();
    for i in 0..n {
        let mut v = chars.clone();
        v.remove(i);
        out.push(join(&v));
    }
    for i in 0..n.saturating_sub(1) {
        let mut v = chars.clone();
        v.swap(i, i + 1);
        out.push(join(&v));
    }
    for (i, &was) in chars.iter().enumerate() {
        for &l in &letters {
            if l != was {
                let mut v = chars.clone();
                v[i] = l;
                out.push(join(&v));
            }
        }
    }
    for i in 0..=n {
        for &l in &letters {
            let mut v = chars.clone();
            v.insert(i, l);
            out.push(join(&v));
        }
    }
    let mut seen = HashSet::new();
    out.retain(|v| v != word && seen.insert(v.clone()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_one_edit_away_and_unique() {
        let v = variants("kiwii");
        for want in ["kiwi", "kiiwi", "kiwie", "ikwii", "kiwiis"] {
            assert!(v.contains(&want.to_owned()), "{want}");
        }
        assert!(!v.contains(&"kiwii".to_owned()));
        assert!(!v.contains(&"kw".to_owned()), "two edits away");
        assert_eq!(v.len(), v.iter().collect::<HashSet<_>>().len());
        assert!(variants("café").contains(&"cafée".to_owned()), "the word's own letters are tried");
    }

    #[test]
    fn words_kept_are_lower_cased_letter_runs_of_bounded_length() {
        let w: Vec<String> = words("Recieve the KIWI, at 7:42 x2 ab 用户喜欢 résumé").collect();
        assert_eq!(w, ["recieve", "the", "kiwi", "résumé"]);
        assert_eq!(words(&"a".repeat(25)).count(), 0);
    }

    #[test]
    fn alternatives_are_known_words_one_edit_away_without_common_words() {
        let vocabulary: std::collections::BTreeSet<String> =
            words("I receive a green kiwi where the kiwis grow, recipe").collect();
        let alternatives = |w: &str| crate::memory::engine::query::alternatives(&vocabulary, w);
        assert_eq!(alternatives("recieve"), ["receive"]);
        let mut k = alternatives("kiwii");
        k.sort();
        assert_eq!(k, ["kiwi", "kiwis"]);
        assert!(alternatives("wher").is_empty(), "\"where\" is a stop word");
        assert!(alternatives("zzqxv").is_empty());
        assert!(alternatives("ki").is_empty(), "too short to correct");
        assert!(alternatives("绿差").is_empty(), "CJK is corrected by its characters");
    }
}
