//! The terms of a text, as SQLite's `unicode61 remove_diacritics 2` tokenizer followed by the
//! `porter` stemmer made them for the SQLite index: case folded, split at every character that
//! is not a letter, a digit or a private-use character, Latin diacritics removed ("Résumé" and
//! "resume" are one word), then stemmed ([`super::porter`]).
//!
//! Two differences from FTS5, both the same for a query as for a text, so nothing is missed:
//! "letter or digit" is Rust's `char::is_alphanumeric` (the current Unicode's Alphabetic and
//! Numeric properties, where FTS5 has its own older tables of the L* and N* categories), and a
//! term is cut at [`MAX_TERM_BYTES`] (FTS5 has no bound; no word is that long, and an index
//! term of megabytes would be the model's doing).

use super::porter;

/// Bytes of one term at most (cut at a character boundary before stemming).
pub const MAX_TERM_BYTES: usize = 128;

/// Lower-case Latin letters with diacritics and the letter they fold to: those whose canonical
/// decomposition is an ASCII letter and combining marks (U+00C0-U+024F, U+1E00-U+1EFF; made
/// with Python's `unicodedata`). Letters that do not decompose (ø, ł, đ) stay, as in FTS5.
/// Sorted by code point.
#[rustfmt::skip]
const FOLD: &[(u16, u8)] = &[
    (0x00E0, b'a'), (0x00E1, b'a'), (0x00E2, b'a'), (0x00E3, b'a'), (0x00E4, b'a'), (0x00E5, b'a'), (0x00E7, b'c'),
    (0x00E8, b'e'), (0x00E9, b'e'), (0x00EA, b'e'), (0x00EB, b'e'), (0x00EC, b'i'), (0x00ED, b'i'), (0x00EE, b'i'),
    (0x00EF, b'i'), (0x00F1, b'n'), (0x00F2, b'o'), (0x00F3, b'o'), (0x00F4, b'o'), (0x00F5, b'o'), (0x00F6, b'o'),
    (0x00F9, b'u'), (0x00FA, b'u'), (0x00FB, b'u'), (0x00FC, b'u'), (0x00FD, b'y'), (0x00FF, b'y'), (0x0101, b'a'),
    (0x0103, b'a'), (0x0105, b'a'), (0x0107, b'c'), (0x0109, b'c'), (0x010B, b'c'), (0x010D, b'c'), (0x010F, b'd'),
    (0x0113, b'e'), (0x0115, b'e'), (0x0117, b'e'), (0x0119, b'e'), (0x011B, b'e'), (0x011D, b'g'), (0x011F, b'g'),
    (0x0121, b'g'), (0x0123, b'g'), (0x0125, b'h'), (0x0129, b'i'), (0x012B, b'i'), (0x012D, b'i'), (0x012F, b'i'),
    (0x0135, b'j'), (0x0137, b'k'), (0x013A, b'l'), (0x013C, b'l'), (0x013E, b'l'), (0x0144, b'n'), (0x0146, b'n'),
    (0x0148, b'n'), (0x014D, b'o'), (0x014F, b'o'), (0x0151, b'o'), (0x0155, b'r'), (0x0157, b'r'), (0x0159, b'r'),
    (0x015B, b's'), (0x015D, b's'), (0x015F, b's'), (0x0161, b's'), (0x0163, b't'), (0x0165, b't'), (0x0169, b'u'),
    (0x016B, b'u'), (0x016D, b'u'), (0x016F, b'u'), (0x0171, b'u'), (0x0173, b'u'), (0x0175, b'w'), (0x0177, b'y'),
    (0x017A, b'z'), (0x017C, b'z'), (0x017E, b'z'), (0x01A1, b'o'), (0x01B0, b'u'), (0x01CE, b'a'), (0x01D0, b'i'),
    (0x01D2, b'o'), (0x01D4, b'u'), (0x01D6, b'u'), (0x01D8, b'u'), (0x01DA, b'u'), (0x01DC, b'u'), (0x01DF, b'a'),
    (0x01E1, b'a'), (0x01E7, b'g'), (0x01E9, b'k'), (0x01EB, b'o'), (0x01ED, b'o'), (0x01F0, b'j'), (0x01F5, b'g'),
    (0x01F9, b'n'), (0x01FB, b'a'), (0x0201, b'a'), (0x0203, b'a'), (0x0205, b'e'), (0x0207, b'e'), (0x0209, b'i'),
    (0x020B, b'i'), (0x020D, b'o'), (0x020F, b'o'), (0x0211, b'r'), (0x0213, b'r'), (0x0215, b'u'), (0x0217, b'u'),
    (0x0219, b's'), (0x021B, b't'), (0x021F, b'h'), (0x0227, b'a'), (0x0229, b'e'), (0x022B, b'o'), (0x022D, b'o'),
    (0x022F, b'o'), (0x0231, b'o'), (0x0233, b'y'), (0x1E01, b'a'), (0x1E03, b'b'), (0x1E05, b'b'), (0x1E07, b'b'),
    (0x1E09, b'c'), (0x1E0B, b'd'), (0x1E0D, b'd'), (0x1E0F, b'd'), (0x1E11, b'd'), (0x1E13, b'd'), (0x1E15, b'e'),
    (0x1E17, b'e'), (0x1E19, b'e'), (0x1E1B, b'e'), (0x1E1D, b'e'), (0x1E1F, b'f'), (0x1E21, b'g'), (0x1E23, b'h'),
    (0x1E25, b'h'), (0x1E27, b'h'), (0x1E29, b'h'), (0x1E2B, b'h'), (0x1E2D, b'i'), (0x1E2F, b'i'), (0x1E31, b'k'),
    (0x1E33, b'k'), (0x1E35, b'k'), (0x1E37, b'l'), (0x1E39, b'l'), (0x1E3B, b'l'), (0x1E3D, b'l'), (0x1E3F, b'm'),
    (0x1E41, b'm'), (0x1E43, b'm'), (0x1E45, b'n'), (0x1E47, b'n'), (0x1E49, b'n'), (0x1E4B, b'n'), (0x1E4D, b'o'),
    (0x1E4F, b'o'), (0x1E51, b'o'), (0x1E53, b'o'), (0x1E55, b'p'), (0x1E57, b'p'), (0x1E59, b'r'), (0x1E5B, b'r'),
    (0x1E5D, b'r'), (0x1E5F, b'r'), (0x1E61, b's'), (0x1E63, b's'), (0x1E65, b's'), (0x1E67, b's'), (0x1E69, b's'),
    (0x1E6B, b't'), (0x1E6D, b't'), (0x1E6F, b't'), (0x1E71, b't'), (0x1E73, b'u'), (0x1E75, b'u'), (0x1E77, b'u'),
    (0x1E79, b'u'), (0x1E7B, b'u'), (0x1E7D, b'v'), (0x1E7F, b'v'), (0x1E81, b'w'), (0x1E83, b'w'), (0x1E85, b'w'),
    (0x1E87, b'w'), (0x1E89, b'w'), (0x1E8B, b'x'), (0x1E8D, b'x'), (0x1E8F, b'y'), (0x1E91, b'z'), (0x1E93, b'z'),
    (0x1E95, b'z'), (0x1E96, b'h'), (0x1E97, b't'), (0x1E98, b'w'), (0x1E99, b'y'), (0x1EA1, b'a'), (0x1EA3, b'a'),
    (0x1EA5, b'a'), (0x1EA7, b'a'), (0x1EA9, b'a'), (0x1EAB, b'a'), (0x1EAD, b'a'), (0x1EAF, b'a'), (0x1EB1, b'a'),
    (0x1EB3, b'a'), (0x1EB5, b'a'), (0x1EB7, b'a'), (0x1EB9, b'e'), (0x1EBB, b'e'), (0x1EBD, b'e'), (0x1EBF, b'e'),
    (0x1EC1, b'e'), (0x1EC3, b'e'), (0x1EC5, b'e'), (0x1EC7, b'e'), (0x1EC9, b'i'), (0x1ECB, b'i'), (0x1ECD, b'o'),
    (0x1ECF, b'o'), (0x1ED1, b'o'), (0x1ED3, b'o'), (0x1ED5, b'o'), (0x1ED7, b'o'), (0x1ED9, b'o'), (0x1EDB, b'o'),
    (0x1EDD, b'o'), (0x1EDF, b'o'), (0x1EE1, b'o'), (0x1EE3, b'o'), (0x1EE5, b'u'), (0x1EE7, b'u'), (0x1EE9, b'u'),
    (0x1EEB, b'u'), (0x1EED, b'u'), (0x1EEF, b'u'), (0x1EF1, b'u'), (0x1EF3, b'y'), (0x1EF5, b'y'), (0x1EF7, b'y'),
    (0x1EF9, b'y'),];

/// Whether `c` is part of a word: a letter, a digit, or a private-use character (FTS5's
/// default categories L*, N* and Co).
fn is_token_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c as u32, 0xE000..=0xF8FF | 0xF0000..=0xFFFFD | 0x100000..=0x10FFFD)
}

/// A combining diacritic: inside a word it is dropped (decomposed text folds like composed
/// text); elsewhere it separates words, as in FTS5.
fn is_diacritic(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F)
}

/// `c` lower-cased (and already lower-case) without its diacritic.
fn fold_into(c: char, out: &mut String) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
        return;
    }
    for l in c.to_lowercase() {
        if is_diacritic(l) {
            continue;
        }
        let folded = u16::try_from(l as u32)
            .ok()
            .and_then(|cp| FOLD.binary_search_by_key(&cp, |(k, _)| *k).ok().map(|i| char::from(FOLD[i].1)));
        out.push(folded.unwrap_or(l));
    }
}

/// Calls `f` with each term of `text`, in order.
pub fn each_term(text: &str, mut f: impl FnMut(&str)) {
    let mut word = String::new();
    let mut emit = |word: &mut String| {
        if !word.is_empty() {
            let cut = (0..=word.len().min(MAX_TERM_BYTES)).rev().find(|&i| word.is_char_boundary(i)).unwrap_or(0);
            word.truncate(cut);
            f(&porter::stem(word));
            word.clear();
        }
    };
    for c in text.chars() {
        if is_token_char(c) {
            // A word past the bound is read to its end but not kept: the cut happens once.
            if word.len() <= MAX_TERM_BYTES + 4 {
                fold_into(c, &mut word);
            }
        } else if !is_diacritic(c) || word.is_empty() {
            // A separator ends the word; a diacritic inside a word is dropped, not a separator.
            emit(&mut word);
        }
    }
    emit(&mut word);
}

/// The terms of `text`, in order.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_term(text, |t| out.push(t.to_owned()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each text with the terms SQLite's FTS5 (`porter unicode61 remove_diacritics 2`) gave for
    /// it: checked against SQLite itself while it was in the tree (`fts5_tests` in this
    /// folder's history, with random words and Latin texts too).
    #[test]
    fn terms_are_fts5s() {
        let cases: &[(&str, &[&str])] = &[
            (
                "User's sister Ana lives in Lisbon; she's RUNNING to the café at 7:42",
                &[
                    "user", "s", "sister", "ana", "live", "in", "lisbon", "she", "s", "run", "to", "the", "cafe", "at",
                    "7", "42",
                ],
            ),
            (
                "Résumé naïve façade Ångström Øresund Łódź crème brûlée São Paulo Đorđe",
                &["resum", "naiv", "facad", "angstrom", "øresund", "łodz", "creme", "brule", "sao", "paulo", "đorđ"],
            ),
            (
                "cafe\u{301} e\u{301}t\u{e9} über-cool x2 42nd 3.14 iPhone15",
                &["cafe", "et", "uber", "cool", "x2", "42nd", "3", "14", "iphone15"],
            ),
            (" 用 户 喜 欢 用户 户喜 喜欢 tea 猫", &["用", "户", "喜", "欢", "用户", "户喜", "喜欢", "tea", "猫"]),
            (
                "hopping hoping tanned sized conflated troubled relational happiness generalization",
                &["hop", "hope", "tan", "size", "conflat", "troubl", "relat", "happi", "gener"],
            ),
            (
                "yyy ying eed feed agreed bled sing skies flies dying lying",
                &["yyi", "ying", "e", "feed", "agre", "bled", "sing", "ski", "fli", "dy", "ly"],
            ),
        ];
        for (text, want) in cases {
            assert_eq!(terms(text), *want, "{text}");
        }
    }

    #[test]
    fn terms_are_bounded() {
        let long = "é".repeat(1000);
        let t = terms(&long);
        assert_eq!(t.len(), 1);
        assert!(t[0].len() <= MAX_TERM_BYTES && t[0].chars().all(|c| c == 'e'), "folded and cut: {}", t[0].len());
        assert!(terms(" ?! \u{301} ").is_empty(), "a diacritic alone is no word");
    }
}
