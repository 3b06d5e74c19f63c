//! The stemmer on known word/stem pairs: the examples of Porter's paper for each step, and
//! words a memory holds. Each pair is what FTS5's `porter` gives: checked against SQLite while
//! it was in the tree (`fts5_tests`, removed with rusqlite; see its history for the
//! differential tests of the tokenizer and of BM25).

use super::porter::stem;

pub const PAIRS: &[(&str, &str)] = &[
    // Step 1a.
    ("caresses", "caress"),
    ("ponies", "poni"),
    ("ties", "ti"),
    ("caress", "caress"),
    ("cats", "cat"),
    // Step 1b.
    ("feed", "feed"),
    ("agreed", "agre"),
    ("plastered", "plaster"),
    ("bled", "bled"),
    ("motoring", "motor"),
    ("sing", "sing"),
    ("conflated", "conflat"),
    ("troubled", "troubl"),
    ("sized", "size"),
    ("hopping", "hop"),
    ("tanned", "tan"),
    ("falling", "fall"),
    ("hissing", "hiss"),
    ("fizzed", "fizz"),
    ("failing", "fail"),
    ("filing", "file"),
    // Step 1c.
    ("happy", "happi"),
    ("sky", "sky"),
    // Step 2.
    ("relational", "relat"),
    ("conditional", "condit"),
    ("rational", "ration"),
    ("valenci", "valenc"),
    ("hesitanci", "hesit"),
    ("digitizer", "digit"),
    ("conformabli", "conform"),
    ("radicalli", "radic"),
    ("differentli", "differ"),
    ("vileli", "vile"),
    ("analogousli", "analog"),
    ("vietnamization", "vietnam"),
    ("predication", "predic"),
    ("operator", "oper"),
    ("feudalism", "feudal"),
    ("decisiveness", "decis"),
    ("hopefulness", "hope"),
    ("callousness", "callous"),
    ("formaliti", "formal"),
    ("sensitiviti", "sensit"),
    ("sensibiliti", "sensibl"),
    // Step 3.
    ("triplicate", "triplic"),
    ("formative", "form"),
    ("formalize", "formal"),
    ("electriciti", "electr"),
    ("electrical", "electr"),
    ("hopeful", "hope"),
    ("goodness", "good"),
    // Step 4.
    ("revival", "reviv"),
    ("allowance", "allow"),
    ("inference", "infer"),
    ("airliner", "airlin"),
    ("gyroscopic", "gyroscop"),
    ("adjustable", "adjust"),
    ("defensible", "defens"),
    ("irritant", "irrit"),
    ("replacement", "replac"),
    ("adjustment", "adjust"),
    ("dependent", "depend"),
    ("adoption", "adopt"),
    ("homologou", "homolog"),
    ("communism", "commun"),
    ("activate", "activ"),
    ("angulariti", "angular"),
    ("homologous", "homolog"),
    ("effective", "effect"),
    ("bowdlerize", "bowdler"),
    // Step 5.
    ("probate", "probat"),
    ("rate", "rate"),
    ("cease", "ceas"),
    ("controll", "control"),
    ("roll", "roll"),
    // Words of a memory.
    ("lives", "live"),
    ("live", "live"),
    ("living", "live"),
    ("running", "run"),
    ("runs", "run"),
    ("families", "famili"),
    ("family", "famili"),
    ("coffee", "coffe"),
    ("generalizations", "gener"),
    ("oscillators", "oscil"),
    ("dentist", "dentist"),
    ("receive", "receiv"),
    ("recipe", "recip"),
    ("walnut", "walnut"),
    ("sapling", "sapl"),
    ("plumber", "plumber"),
    ("kiwis", "kiwi"),
    // Passed through: too short, too long, not Latin.
    ("is", "is"),
    ("as", "as"),
    ("用户", "用户"),
    ("42nd", "42nd"),
];

#[test]
fn stems_of_the_word_list() {
    for (word, want) in PAIRS {
        assert_eq!(stem(word), *want, "{word}");
    }
}

#[test]
fn odd_tokens_do_not_panic_and_stay_utf8() {
    // U+0800 ends with two equal bytes: the double-consonant rule would cut it in half.
    for t in ["\u{800}\u{800}ing", "eing", "aing", "yed", "ies", "sss", "yyy", "ed", "e\u{301}ing", "ьing"] {
        let s = stem(t);
        assert!(!s.is_empty(), "{t}");
    }
    assert_eq!(stem("\u{800}\u{800}ing"), "\u{800}\u{800}ing");
    let long = format!("{}ing", "a".repeat(62));
    assert_eq!(stem(&long), long, "over 64 bytes: not stemmed");
    assert_eq!(stem(&long[1..]), "a".repeat(61), "64 bytes: stemmed");
}
