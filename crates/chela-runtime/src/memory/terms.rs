//! The words the index sees: what is indexed for a text, and what a query looks for.
//!
//! The tokenizer (`engine::tokens`, as SQLite's `unicode61`) splits at spaces and punctuation and the `porter` stemmer
//! folds English endings, which serves English and most Latin-script languages. Chinese and
//! Japanese are written without spaces, so `unicode61` would see a whole sentence as one word
//! and a query could match only that exact sentence. Before indexing, each run of CJK
//! characters is therefore spelled out as its single characters and its overlapping pairs,
//! each a word of its own; a query's CJK run is looked for by its pairs (by the character
//! when it is a single one). A pair query then matches a note that holds those two characters
//! next to each other, whatever surrounds them.

/// The most words one query looks for: the model is untrusted and a query of thousands of
/// words would make every search scan the whole index.
pub const MAX_QUERY_WORDS: usize = 32;

/// Bytes of one query word beyond which it is cut: no real word is longer.
const MAX_WORD_BYTES: usize = 64;

/// English words too common to tell facts apart. A query word found in nearly every entry
/// ("the", "is") adds almost nothing to BM25's order but makes the search score every entry:
/// with 100,000 entries that was most of a recall's time. Left out of queries, unless a query
/// has nothing else.
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it",
    "its", "me", "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "there", "they", "this",
    "to", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you",
    "your",
];

/// Whether `w` (lower-cased) is one of the [`STOP_WORDS`].
pub fn is_stop_word(w: &str) -> bool {
    STOP_WORDS.contains(&w)
}

/// Whether `c` belongs to a script written without spaces between words.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x2FA1F) // CJK Extensions B-F and the supplement
}

/// The text to index for `text`: the text itself with each CJK run replaced by its
/// characters and pairs, separated by spaces.
pub fn for_index(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut run: Vec<char> = Vec::new();
    for c in text.chars() {
        if is_cjk(c) {
            run.push(c);
            continue;
        }
        flush_run(&mut run, &mut out);
        out.push(c);
    }
    flush_run(&mut run, &mut out);
    out
}

fn flush_run(run: &mut Vec<char>, out: &mut String) {
    if run.is_empty() {
        return;
    }
    out.push(' ');
    for c in run.iter() {
        out.push(*c);
        out.push(' ');
    }
    for pair in run.windows(2) {
        out.push(pair[0]);
        out.push(pair[1]);
        out.push(' ');
    }
    run.clear();
}

/// The words a query looks for, lower-cased and without repeats, at most [`MAX_QUERY_WORDS`]:
/// runs of letters and digits, and for CJK runs their pairs; without [`STOP_WORDS`] unless the
/// query has no other.
pub fn query_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let push = |w: String, words: &mut Vec<String>| {
        if !w.is_empty() && !words.contains(&w) && words.len() < MAX_QUERY_WORDS {
            words.push(w);
        }
    };
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    for c in query.chars().chain(core::iter::once(' ')) {
        if is_cjk(c) {
            push(std::mem::take(&mut word), &mut words);
            run.push(c);
            continue;
        }
        if !run.is_empty() {
            if run.len() == 1 {
                push(run[0].to_string(), &mut words);
            }
            for pair in run.windows(2) {
                push(pair.iter().collect(), &mut words);
            }
            run.clear();
        }
        if c.is_alphanumeric() {
            if word.len() < MAX_WORD_BYTES {
                word.extend(c.to_lowercase());
            }
        } else {
            push(std::mem::take(&mut word), &mut words);
        }
    }
    let content: Vec<String> = words.iter().filter(|w| !STOP_WORDS.contains(&w.as_str())).cloned().collect();
    if content.is_empty() { words } else { content }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_runs_are_indexed_as_characters_and_pairs() {
        assert_eq!(for_index("用户喜欢绿茶."), " 用 户 喜 欢 绿 茶 用户 户喜 喜欢 欢绿 绿茶 .");
        assert_eq!(for_index("tea 猫 ok"), "tea  猫  ok");
        assert_eq!(for_index("plain words"), "plain words");
    }

    #[test]
    fn query_words_split_latin_words_and_cjk_pairs() {
        assert_eq!(query_words("Where does Ana LIVE? ana"), ["ana", "live"]);
        assert_eq!(query_words("who is it"), ["who", "is", "it"], "nothing but common words: kept");
        assert_eq!(query_words("喜欢绿茶 tea"), ["喜欢", "欢绿", "绿茶", "tea"]);
        assert_eq!(query_words("猫"), ["猫"]);
        assert_eq!(query_words("iPhone手机"), ["iphone", "手机"]);
        assert!(query_words(" ?! ").is_empty());
    }

    #[test]
    fn queries_are_bounded() {
        let many: String = (0..500).map(|i| format!("w{i} ")).collect();
        assert_eq!(query_words(&many).len(), MAX_QUERY_WORDS);
        assert_eq!(query_words(&"x".repeat(10_000))[0].len(), MAX_WORD_BYTES);
    }
}
