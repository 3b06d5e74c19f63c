use chela_core::memory::Entries;

use super::*;
use crate::memory::{entries_path, write_atomic};

fn ws() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().to_path_buf())).unwrap();
    ws.ensure().unwrap();
    (dir, ws)
}

fn write_entries(ws: &Workspace, facts: &[&str]) -> Entries {
    let mut e = Entries::default();
    for (i, fact) in facts.iter().enumerate() {
        e.store_within(fact, &[], "", i as u64, usize::MAX).unwrap();
    }
    write_atomic(&entries_path(ws), e.to_jsonl().as_bytes()).unwrap();
    e
}

fn recall(ws: &Workspace, q: &str, max: usize) -> Vec<String> {
    let mut ix = Index::open(ws).unwrap();
    ix.refresh().unwrap();
    ix.recall(q, max).unwrap().into_iter().map(|h| h.id).collect()
}

const FACTS: &[&str] = &[
    "Sign for the parcel to receive it at the door",
    "The needle is a green kiwi",
    "Green tea every morning",
    "用户喜欢喝绿茶",
    "The recipe for the cake is in the blue folder",
];

#[test]
fn a_misspelled_word_finds_the_words_one_edit_away() {
    let (_d, ws) = ws();
    write_entries(&ws, FACTS);
    assert_eq!(recall(&ws, "recieve", 5), ["m1"], "two letters swapped");
    assert_eq!(recall(&ws, "kiwii", 5), ["m2"], "a letter too many");
    assert_eq!(recall(&ws, "neddle kiwii", 5), ["m2"]);
    assert_eq!(recall(&ws, "what is the reciepe", 5), ["m5"]);
    assert_eq!(recall(&ws, "绿差", 5), ["m4"], "a CJK pair unknown: its characters");
    assert!(recall(&ws, "zzqxv", 5).is_empty(), "nothing near: nothing found");
    // A word that matches is searched as it is, not widened to its neighbours.
    assert_eq!(recall(&ws, "green", 5).len(), 2);
    assert!(!recall(&ws, "tea", 5).contains(&"m5".to_owned()));
}

#[test]
fn a_word_that_matches_nothing_does_not_widen_the_search() {
    let (_d, ws) = ws();
    write_entries(&ws, FACTS);
    // Without "zzqxv" every other word is in m2: it alone is found, not every "green" entry.
    assert_eq!(recall(&ws, "green zzqxv kiwi", 5), ["m2"]);
    // No entry holds both words: any of them will do, best first.
    assert_eq!(recall(&ws, "kiwi parcel", 5).len(), 2);
    assert!(recall(&ws, "  ?!", 5).is_empty());
    assert!(recall(&ws, "\" OR NOT * NEAR(a b) content:x", 5).is_empty(), "operators are words");
}

#[test]
fn misspelled_words_are_corrected_in_notes_and_entries_stored_by_the_tools() {
    let (_d, ws) = ws();
    let mut e = write_entries(&ws, &["first fact"]);
    std::fs::write(ws.root().join("memory/2024-07-14.md"), "- 18:00 Planted the walnut sapling\n").unwrap();
    let mut ix = Index::open(&ws).unwrap();
    ix.refresh().unwrap();
    let hits = ix.search("walnutt saplng", 5).unwrap();
    assert_eq!(hits.iter().map(|h| h.path.as_str()).collect::<Vec<_>>(), ["memory/2024-07-14.md"]);
    let before = stamp(&std::fs::metadata(entries_path(&ws)).unwrap());
    e.store("The plumber is Marek", &[], "", 9).unwrap();
    write_atomic(&entries_path(&ws), e.to_jsonl().as_bytes()).unwrap();
    let after = stamp(&std::fs::metadata(entries_path(&ws)).unwrap());
    assert!(ix.entries_changed(Some(&before), &after, &[e.get("m2").unwrap()], &[]).unwrap());
    assert_eq!(ix.recall("plumbr", 5).unwrap()[0].id, "m2");
    // The words are the index's: a rebuild forgets the ones no file holds any more.
    e.forget("m2").unwrap();
    write_atomic(&entries_path(&ws), e.to_jsonl().as_bytes()).unwrap();
    Index::rebuild(&ws).unwrap();
    let ix = Index::open(&ws).unwrap();
    assert!(ix.store.words(Table::Entries).unwrap().contains("fact"));
    assert!(!ix.store.words(Table::Entries).unwrap().contains("plumber"));
}

#[test]
fn only_the_newest_matches_up_to_the_bound_are_scored() {
    let (_d2, small) = ws();
    let (_d, ws) = ws();
    // The oldest entry says "tea" three times in three words: BM25's best, but it is older
    // than the MAX_SCORED newest "tea" entries, so it is not scored.
    let mut facts = vec!["tea tea tea".to_owned()];
    facts.extend((0..8).map(|i| format!("a long sentence number {i} that mentions tea once among many words")));
    facts.push("coffee at noon".to_owned());
    let facts: Vec<&str> = facts.iter().map(String::as_str).collect();
    write_entries(&ws, &facts);
    let bound = MAX_SCORED;
    let mut found = recall(&ws, "tea", 20);
    found.sort_by_key(|id| id[1..].parse::<u32>().unwrap());
    let newest_tea: Vec<String> = (10 - bound..10).map(|i| format!("m{i}")).collect();
    assert_eq!(found, newest_tea);
    // The wide search (no entry has both words) is bounded the same way.
    let wide = recall(&ws, "tea coffee", 20);
    assert_eq!(wide.len(), bound);
    assert!(wide.contains(&"m10".to_owned()) && !wide.contains(&"m1".to_owned()), "{wide:?}");
    // Under the bound, every match is scored and the best comes first.
    write_entries(&small, &facts[..4]);
    assert_eq!(recall(&small, "tea", 20)[0], "m1");
}
