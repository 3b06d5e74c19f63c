//! Cuts a reply streamed by the LLM into sentences as it arrives, so each one goes to TTS at once.
//!
//! A sentence ends at `.` `!` `?` followed by white space, at `…` and at the CJK marks `。！？；`
//! (which need no space after them), and at a newline. A run of marks and closing quotes stays
//! with its sentence ("Really?!", "“好。”"). A `.` does not end a sentence inside a number
//! ("3.5"), a name ("example.com"), after a single letter ("J. Smith") or after a common
//! abbreviation ("Dr.", "e.g."). Text that goes on for [`Splitter::max_chars`] characters without
//! an end is cut at its last comma or space. Whether a cut happens never depends on how the text
//! was split into deltas: the decision waits until the character after a mark has arrived.

/// Abbreviations after which a `.` does not end a sentence (lowercase, without their last dot).
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "no", "fig", "approx", "inc", "ltd",
    "co", "mt", "u.s",
];

/// The default longest sentence, in characters.
pub const DEFAULT_MAX_CHARS: usize = 200;

fn is_mark(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？' | '；')
}

fn is_closer(c: char) -> bool {
    matches!(c, '"' | '\'' | ')' | ']' | '”' | '’' | '」' | '』' | '）' | '》')
}

fn is_soft_break(c: char) -> bool {
    matches!(c, ',' | '，' | '、' | ';' | ':' | '：') || c.is_whitespace()
}

/// The streaming splitter. Push deltas, collect sentences; `finish` flushes the rest.
#[derive(Debug, Clone)]
pub struct Splitter {
    buf: String,
    max_chars: usize,
}

impl Default for Splitter {
    fn default() -> Self {
        Splitter::new(DEFAULT_MAX_CHARS)
    }
}

impl Splitter {
    /// # Panics
    /// If `max_chars` is zero.
    pub fn new(max_chars: usize) -> Splitter {
        assert!(max_chars > 0, "a sentence holds at least one character");
        Splitter { buf: String::new(), max_chars }
    }

    pub fn max_chars(&self) -> usize {
        self.max_chars
    }

    /// Adds a delta; calls `out` with every sentence it completes.
    pub fn push(&mut self, delta: &str, out: &mut impl FnMut(String)) {
        self.buf.push_str(delta);
        self.drain(false, out);
    }

    /// The end of the reply: whatever is left is the last sentence.
    pub fn finish(&mut self, out: &mut impl FnMut(String)) {
        self.drain(true, out);
        self.emit(self.buf.len(), out);
    }

    fn drain(&mut self, last: bool, out: &mut impl FnMut(String)) {
        while let Some(end) = self.find_cut(last) {
            self.emit(end, out);
        }
    }

    /// Sends `buf[..end]` if it has anything to say (marks and spaces alone are dropped).
    fn emit(&mut self, end: usize, out: &mut impl FnMut(String)) {
        let sentence: String = self.buf.drain(..end).collect();
        let sentence = sentence.trim();
        if sentence.chars().any(char::is_alphanumeric) {
            out(sentence.to_owned());
        }
    }

    /// The byte length of the first sentence in `buf`, if it is complete.
    fn find_cut(&self, last: bool) -> Option<usize> {
        let chars: Vec<(usize, char)> = self.buf.char_indices().collect();
        let end_of = |k: usize| chars.get(k).map_or(self.buf.len(), |&(at, _)| at);
        for i in 0..chars.len().min(self.max_chars) {
            let c = chars[i].1;
            if c == '\n' {
                return Some(end_of(i + 1));
            }
            if !is_mark(c) {
                continue;
            }
            let mut j = i + 1;
            while j < chars.len() && (is_mark(chars[j].1) || is_closer(chars[j].1)) {
                j += 1;
            }
            if j == chars.len() {
                // The next character decides, unless there is none to come.
                return last.then_some(self.buf.len());
            }
            if chars[i..j].iter().any(|&(_, m)| matches!(m, '…' | '。' | '！' | '？' | '；')) {
                return Some(end_of(j));
            }
            if !chars[j].1.is_whitespace() {
                continue;
            }
            if c == '.' && j == i + 1 && self.abbreviation_before(&chars[..i]) {
                continue;
            }
            return Some(end_of(j));
        }
        if chars.len() <= self.max_chars {
            return None;
        }
        // Too long without an end: cut after the last soft break that leaves something behind.
        let soft = (1..self.max_chars).rev().find(|&k| is_soft_break(chars[k].1));
        Some(end_of(soft.map_or(self.max_chars, |k| k + 1)))
    }

    fn abbreviation_before(&self, before: &[(usize, char)]) -> bool {
        let word: String =
            before.iter().rev().map(|&(_, c)| c).take_while(|c| c.is_alphanumeric() || *c == '.').collect();
        let word: String = word.chars().rev().collect::<String>().to_lowercase();
        let letters = word.chars().filter(|c| c.is_alphabetic()).count();
        (letters == 1 && word.chars().all(char::is_alphabetic)) || ABBREVIATIONS.contains(&word.as_str())
    }
}

/// Splits a whole text (the tests' and the benchmark's helper).
pub fn split_all(text: &str, max_chars: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut s = Splitter::new(max_chars);
    s.push(text, &mut |x| out.push(x));
    s.finish(&mut |x| out.push(x));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn split(text: &str) -> Vec<String> {
        split_all(text, DEFAULT_MAX_CHARS)
    }

    #[test]
    fn sentence_ends() {
        assert_eq!(split("Hello there. How are you? Fine!"), ["Hello there.", "How are you?", "Fine!"]);
        assert_eq!(
            split("你好。今天天气很好！要出去吗？好；走"),
            ["你好。", "今天天气很好！", "要出去吗？", "好；", "走"]
        );
        assert_eq!(split("Wait… what?! \"Yes.\" Then"), ["Wait…", "what?!", "\"Yes.\"", "Then"]);
        assert_eq!(split("line one\nline two"), ["line one", "line two"]);
    }

    #[test]
    fn numbers_names_and_abbreviations_are_not_ends() {
        assert_eq!(split("It is 3.5 degrees. Good."), ["It is 3.5 degrees.", "Good."]);
        assert_eq!(split("See example.com now. Ok"), ["See example.com now.", "Ok"]);
        assert_eq!(split("Dr. Who met J. Smith, e.g. today. Bye"), ["Dr. Who met J. Smith, e.g. today.", "Bye"]);
        assert_eq!(split("Version 1.2.3 is out."), ["Version 1.2.3 is out."]);
    }

    #[test]
    fn a_mark_at_the_end_of_a_delta_waits_for_the_next() {
        let mut s = Splitter::default();
        let mut out = Vec::new();
        s.push("It costs 3.", &mut |x| out.push(x));
        assert!(out.is_empty(), "the next character may be a digit");
        s.push("5 euros. Ok", &mut |x| out.push(x));
        assert_eq!(out, ["It costs 3.5 euros."]);
        s.push("。", &mut |x| out.push(x));
        s.push("好", &mut |x| out.push(x));
        assert_eq!(out, ["It costs 3.5 euros.", "Ok。"]);
    }

    #[test]
    fn long_text_is_cut_at_a_comma_or_space() {
        let text = "word, ".repeat(60);
        let parts = split_all(&text, 50);
        assert!(parts.len() >= 7);
        assert!(parts.iter().all(|p| p.chars().count() <= 50 && p.ends_with(',')), "{parts:?}");
        let no_breaks = "x".repeat(120);
        assert_eq!(split_all(&no_breaks, 50), ["x".repeat(50), "x".repeat(50), "x".repeat(20)]);
    }

    #[test]
    fn marks_alone_are_not_sentences() {
        assert_eq!(split("... !! \n\n 。"), Vec::<String>::new());
    }

    fn alnum(s: &str) -> String {
        s.chars().filter(|c| c.is_alphanumeric()).collect()
    }

    fn text_strategy() -> impl Strategy<Value = String> {
        let pieces = prop_oneof![
            Just("Hello".to_string()),
            Just(" ".to_string()),
            Just(".".to_string()),
            Just("3.5".to_string()),
            Just("!".to_string()),
            Just("?".to_string()),
            Just("…".to_string()),
            Just("你好".to_string()),
            Just("。".to_string()),
            Just("，".to_string()),
            Just(", ".to_string()),
            Just("\n".to_string()),
            Just("Dr.".to_string()),
            Just("\"".to_string()),
            "[a-z]{1,12}",
        ];
        proptest::collection::vec(pieces, 0..80).prop_map(|v| v.concat())
    }

    proptest! {
        /// However the text is cut into deltas, the sentences are the same.
        #[test]
        fn deltas_do_not_matter(text in text_strategy(), cuts in proptest::collection::vec(1usize..9, 1..40), max in 5usize..60) {
            let whole = split_all(&text, max);
            let chars: Vec<char> = text.chars().collect();
            let mut s = Splitter::new(max);
            let mut got = Vec::new();
            let mut at = 0;
            for c in cuts.iter().cycle() {
                if at >= chars.len() { break; }
                let end = (at + c).min(chars.len());
                let delta: String = chars[at..end].iter().collect();
                s.push(&delta, &mut |x| got.push(x));
                at = end;
            }
            s.finish(&mut |x| got.push(x));
            prop_assert_eq!(whole, got);
        }

        /// Nothing said is lost or reordered, and no sentence is longer than the limit (its
        /// closing marks aside).
        #[test]
        fn nothing_lost_and_bounded(text in text_strategy(), max in 5usize..60) {
            let parts = split_all(&text, max);
            prop_assert_eq!(alnum(&parts.concat()), alnum(&text));
            for p in &parts {
                let body = p.trim_end_matches(|c| is_mark(c) || is_closer(c));
                prop_assert!(body.chars().count() <= max, "{:?} over {}", p, max);
                prop_assert!(!p.is_empty() && p.trim() == p);
            }
        }
    }
}
