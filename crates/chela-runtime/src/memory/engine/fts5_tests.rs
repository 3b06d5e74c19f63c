//! The engine against SQLite's FTS5, while both are in the tree: the terms of a text and the
//! BM25 scores must come out the same. (rusqlite is a dev-dependency for these alone; the word list in
//! `porter_tests.rs` stays.)

use proptest::prelude::*;
use rusqlite::Connection;

use super::bm25::{Totals, idf, score, weighted};
use super::segment::{Builder, Doc, Segment};
use super::tokens::terms;

/// FTS5's terms for `text`, in order.
fn fts5_terms(db: &Connection, text: &str) -> Vec<String> {
    db.execute("DELETE FROM t", []).unwrap();
    db.execute("INSERT INTO t(rowid, x) VALUES (1, ?1)", [text]).unwrap();
    let mut st = db.prepare_cached("SELECT term, offset FROM v ORDER BY offset").unwrap();
    st.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
}

fn fts5() -> Connection {
    let db = Connection::open_in_memory().unwrap();
    db.execute_batch(
        "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2');
         CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');",
    )
    .unwrap();
    db
}

#[test]
fn terms_match_fts5_on_a_mixed_text() {
    let db = fts5();
    for text in [
        "User's sister Ana lives in Lisbon; she's RUNNING to the café at 7:42",
        "Résumé naïve façade Ångström Øresund Łódź crème brûlée São Paulo Đorđe",
        "cafe\u{301} e\u{301}t\u{e9} über-cool x2 42nd 3.14 iPhone15",
        " 用 户 喜 欢 用户 户喜 喜欢 tea 猫",
        "hopping hoping tanned sized conflated troubled relational happiness generalization",
        "yyy ying eed feed agreed bled sing skies flies dying lying",
    ] {
        assert_eq!(terms(text), fts5_terms(&db, text), "{text}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random English-like words: the stemmer is FTS5's, byte for byte.
    #[test]
    fn stems_match_fts5(words in proptest::collection::vec("[a-z]{1,14}", 1..12)) {
        let db = fts5();
        let text = words.join(" ");
        prop_assert_eq!(terms(&text), fts5_terms(&db, &text));
    }

    /// Latin text with accents, capitals and punctuation.
    #[test]
    fn latin_text_matches_fts5(text in "[a-zA-Z0-9 .,'éèêëàâäçñöüÉÀÇ-]{0,60}") {
        let db = fts5();
        prop_assert_eq!(terms(&text), fts5_terms(&db, &text));
    }
}

/// The engine's BM25 for `phrases` over the documents of `seg`, by ordinal.
fn engine_scores(seg: &Segment, phrases: &[&str], weights: &[f64]) -> Vec<(u32, f64)> {
    let n = seg.len();
    let lengths = seg.lengths(0, n).unwrap();
    let totals = Totals { docs: u64::from(n), terms: lengths.iter().map(|l| u64::from(*l)).sum() };
    let lists: Vec<Vec<_>> =
        phrases.iter().map(|p| seg.find(p).unwrap().map(|t| seg.postings(&t).unwrap()).unwrap_or_default()).collect();
    let idfs: Vec<f64> = lists.iter().map(|l| idf(totals.docs, l.len() as u64)).collect();
    let mut out = Vec::new();
    for ord in 0..n {
        let freqs: Vec<f64> =
            lists.iter().map(|l| l.iter().find(|p| p.ord == ord).map_or(0.0, |p| weighted(&p.tf, weights))).collect();
        if freqs.iter().any(|f| *f > 0.0) {
            out.push((ord, score(&idfs, &freqs, lengths[ord as usize], totals.avgdl())));
        }
    }
    out
}

#[test]
fn bm25_scores_match_fts5_with_weighted_columns() {
    let docs: &[(&str, &str)] = &[
        ("Ana lives in Lisbon with her sister", "family"),
        ("Prefers oat milk in coffee, coffee every morning", "food coffee"),
        ("Coffee beans from the market", ""),
        ("The family dog is called Rex", "family pets"),
        ("Lisbon trip planned for May", "travel family"),
        ("Tea, not coffee, after noon", "food"),
    ];
    let db = Connection::open_in_memory().unwrap();
    db.execute_batch(
        "CREATE VIRTUAL TABLE e USING fts5(content, tags, content='', contentless_delete=1,
         tokenize='porter unicode61 remove_diacritics 2');",
    )
    .unwrap();
    let mut b = Builder::new(2);
    for (i, (c, t)) in docs.iter().enumerate() {
        db.execute("INSERT INTO e(rowid, content, tags) VALUES (?1, ?2, ?3)", rusqlite::params![i as i64, c, t])
            .unwrap();
        b.add(&Doc { doc: i as u64, columns: &[c, t], stored: b"" }).unwrap();
    }
    let seg = Segment::from_bytes(b.finish()).unwrap();
    for (m, phrases) in [
        ("\"coffee\"", &["coffe"][..]),
        ("\"family\"", &["famili"]),
        ("\"lisbon\" OR \"family\"", &["lisbon", "famili"]),
        ("\"coffee\" OR \"food\" OR \"coffee\"", &["coffe", "food", "coffe"]),
    ] {
        let mut st = db.prepare("SELECT rowid, bm25(e, 1.0, 2.0) FROM e WHERE e MATCH ?1 ORDER BY rowid").unwrap();
        let want: Vec<(u32, f64)> =
            st.query_map([m], |r| Ok((r.get::<_, i64>(0)? as u32, r.get(1)?))).unwrap().map(Result::unwrap).collect();
        let got = engine_scores(&seg, phrases, &[1.0, 2.0]);
        assert_eq!(got.len(), want.len(), "{m}: {got:?} vs {want:?}");
        for ((go, gs), (wo, ws)) in got.iter().zip(&want) {
            assert_eq!(go, wo, "{m}");
            assert!((gs - ws).abs() < 1e-9, "{m}: doc {go}: {gs} vs {ws}");
        }
    }
}

#[test]
fn the_word_list_is_fts5s() {
    let db = fts5();
    for (word, want) in super::porter_tests::PAIRS {
        assert_eq!(fts5_terms(&db, word), [*want], "{word}");
    }
}
