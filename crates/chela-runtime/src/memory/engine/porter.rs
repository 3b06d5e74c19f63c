//! The Porter stemmer, as SQLite's FTS5 `porter` tokenizer applies it, so the new index folds
//! English endings exactly as the SQLite one did ("lives" and "live" meet at "live", "running"
//! and "runs" at "run").
//!
//! It works on the bytes of one token already lower-cased and stripped of diacritics. Tokens
//! under 3 or over [`MAX_TOKEN`] bytes pass through unchanged. Bytes outside `a`-`z` are
//! consonants that match no suffix, so a CJK character or a digit run is left as it is, as in
//! FTS5. Two details follow FTS5 rather than Porter's paper: a `y` counts as a vowel in the
//! "has a vowel" test whenever it is not the first letter, and within each step only the first
//! suffix that ends the word is tried (its condition failing ends the step).

/// Tokens longer than this (bytes) are not stemmed.
pub const MAX_TOKEN: usize = 64;

fn is_vowel(c: u8, y_is_vowel: bool) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u') || (y_is_vowel && c == b'y')
}

/// Skips one vowel run then one consonant: the index after that consonant, or 0 when the stem
/// has no vowel-consonant pair (`m` is 0 from here).
fn gobble_vc(stem: &[u8], prev_consonant: bool) -> usize {
    let mut cons = prev_consonant;
    let mut i = 0;
    while i < stem.len() {
        cons = !is_vowel(stem[i], cons);
        if !cons {
            break;
        }
        i += 1;
    }
    i += 1;
    while i < stem.len() {
        cons = !is_vowel(stem[i], cons);
        if cons {
            return i + 1;
        }
        i += 1;
    }
    0
}

/// m > 0.
fn m_gt0(stem: &[u8]) -> bool {
    gobble_vc(stem, false) != 0
}

/// m > 1.
fn m_gt1(stem: &[u8]) -> bool {
    let n = gobble_vc(stem, false);
    n != 0 && gobble_vc(&stem[n..], true) != 0
}

/// m = 1.
fn m_eq1(stem: &[u8]) -> bool {
    let n = gobble_vc(stem, false);
    n != 0 && gobble_vc(&stem[n..], true) == 0
}

/// *o: ends consonant-vowel-consonant, the last not w, x or y.
fn o_star(stem: &[u8]) -> bool {
    match stem.last() {
        None | Some(b'w' | b'x' | b'y') => false,
        Some(_) => {
            let mut mask = 0u32;
            let mut cons = false;
            for &c in stem {
                cons = !is_vowel(c, cons);
                mask = (mask << 1) | u32::from(cons);
            }
            mask & 7 == 5
        }
    }
}

/// m > 1 and the stem ends in s or t.
fn m_gt1_s_or_t(stem: &[u8]) -> bool {
    matches!(stem.last(), Some(b's' | b't')) && m_gt1(stem)
}

/// *v*: the stem holds a vowel.
fn has_vowel(stem: &[u8]) -> bool {
    stem.iter().enumerate().any(|(i, &c)| is_vowel(c, i > 0))
}

type Cond = fn(&[u8]) -> bool;

/// A step's rules, in FTS5's order: suffix, condition on what precedes it, replacement.
type Rules = &'static [(&'static [u8], Cond, &'static [u8])];

fn always(_: &[u8]) -> bool {
    true
}

const STEP1B2: Rules = &[(b"at", always, b"ate"), (b"bl", always, b"ble"), (b"iz", always, b"ize")];

const STEP2: Rules = &[
    (b"ational", m_gt0, b"ate"),
    (b"tional", m_gt0, b"tion"),
    (b"enci", m_gt0, b"ence"),
    (b"anci", m_gt0, b"ance"),
    (b"izer", m_gt0, b"ize"),
    (b"logi", m_gt0, b"log"),
    (b"bli", m_gt0, b"ble"),
    (b"alli", m_gt0, b"al"),
    (b"entli", m_gt0, b"ent"),
    (b"eli", m_gt0, b"e"),
    (b"ousli", m_gt0, b"ous"),
    (b"ization", m_gt0, b"ize"),
    (b"ation", m_gt0, b"ate"),
    (b"ator", m_gt0, b"ate"),
    (b"alism", m_gt0, b"al"),
    (b"iveness", m_gt0, b"ive"),
    (b"fulness", m_gt0, b"ful"),
    (b"ousness", m_gt0, b"ous"),
    (b"aliti", m_gt0, b"al"),
    (b"iviti", m_gt0, b"ive"),
    (b"biliti", m_gt0, b"ble"),
];

const STEP3: Rules = &[
    (b"ical", m_gt0, b"ic"),
    (b"ness", m_gt0, b""),
    (b"icate", m_gt0, b"ic"),
    (b"iciti", m_gt0, b"ic"),
    (b"ful", m_gt0, b""),
    (b"ative", m_gt0, b""),
    (b"alize", m_gt0, b"al"),
];

const STEP4: Rules = &[
    (b"al", m_gt1, b""),
    (b"ance", m_gt1, b""),
    (b"ence", m_gt1, b""),
    (b"er", m_gt1, b""),
    (b"ic", m_gt1, b""),
    (b"able", m_gt1, b""),
    (b"ible", m_gt1, b""),
    (b"ant", m_gt1, b""),
    (b"ement", m_gt1, b""),
    (b"ment", m_gt1, b""),
    (b"ent", m_gt1, b""),
    (b"ion", m_gt1_s_or_t, b""),
    (b"ou", m_gt1, b""),
    (b"ism", m_gt1, b""),
    (b"ate", m_gt1, b""),
    (b"iti", m_gt1, b""),
    (b"ous", m_gt1, b""),
    (b"ive", m_gt1, b""),
    (b"ize", m_gt1, b""),
];

/// Applies the first rule whose suffix ends `w` with at least one byte before it; whether a
/// rule's suffix matched and its condition held.
fn apply(w: &mut Vec<u8>, rules: Rules) -> bool {
    // FTS5 dispatches on the second-to-last byte, so a word of one byte matches no rule.
    if w.len() < 2 {
        return false;
    }
    for (suffix, cond, to) in rules {
        if w.len() > suffix.len() && w.ends_with(suffix) {
            let stem = w.len() - suffix.len();
            if cond(&w[..stem]) {
                w.truncate(stem);
                w.extend_from_slice(to);
                return true;
            }
            return false;
        }
    }
    false
}

/// Step 1b: -eed, -ed, -ing. True when -ed or -ing was removed (then step 1b's tidy-up runs).
fn step1b(w: &mut Vec<u8>) -> bool {
    if w.len() < 2 {
        return false;
    }
    if w.len() > 3 && w.ends_with(b"eed") {
        if m_gt0(&w[..w.len() - 3]) {
            w.truncate(w.len() - 1);
        }
        return false;
    }
    for suffix in [&b"ed"[..], b"ing"] {
        if w.len() > suffix.len() && w.ends_with(suffix) {
            let stem = w.len() - suffix.len();
            if has_vowel(&w[..stem]) {
                w.truncate(stem);
                return true;
            }
            return false;
        }
    }
    false
}

fn step1a(w: &mut Vec<u8>) {
    let n = w.len();
    if w[n - 1] != b's' {
        return;
    }
    if w[n - 2] == b'e' {
        if (n > 4 && w[n - 4] == b's' && w[n - 3] == b's') || (n > 3 && w[n - 3] == b'i') {
            w.truncate(n - 2);
        } else {
            w.truncate(n - 1);
        }
    } else if w[n - 2] != b's' {
        w.truncate(n - 1);
    }
}

/// The stem of `token` (lower-cased, as the tokenizer gives it).
pub fn stem(token: &str) -> String {
    if token.len() < 3 || token.len() > MAX_TOKEN {
        return token.to_owned();
    }
    let mut w = token.as_bytes().to_vec();
    step1a(&mut w);
    if step1b(&mut w) && !apply(&mut w, STEP1B2) {
        let n = w.len();
        let c = w[n - 1];
        if n >= 2 && !is_vowel(c, false) && !matches!(c, b'l' | b's' | b'z') && c == w[n - 2] {
            w.truncate(n - 1);
        } else if m_eq1(&w) && o_star(&w) {
            w.push(b'e');
        }
    }
    // Step 1c.
    let n = w.len();
    if w[n - 1] == b'y' && has_vowel(&w[..n - 1]) {
        w[n - 1] = b'i';
    }
    apply(&mut w, STEP2);
    apply(&mut w, STEP3);
    apply(&mut w, STEP4);
    // Step 5a.
    let n = w.len();
    if w[n - 1] == b'e' && (m_gt1(&w[..n - 1]) || (m_eq1(&w[..n - 1]) && !o_star(&w[..n - 1]))) {
        w.truncate(n - 1);
    }
    // Step 5b.
    let n = w.len();
    if n > 1 && w[n - 1] == b'l' && w[n - 2] == b'l' && m_gt1(&w[..n - 1]) {
        w.truncate(n - 1);
    }
    // Every suffix is ASCII and removed whole, so the rest stays UTF-8, with one exception:
    // step 1b's double-consonant rule drops a last byte equal to the one before it, which can
    // be the end of a multi-byte character (U+0800 is E0 A0 A0). FTS5 keeps those bytes as
    // they are; here such a token is left unstemmed, the same for a query as for a text.
    String::from_utf8(w).unwrap_or_else(|_| token.to_owned())
}
