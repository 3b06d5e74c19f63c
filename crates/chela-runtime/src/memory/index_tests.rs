use std::os::unix::fs::PermissionsExt;

use chela_core::memory::Entries;

use super::*;
use crate::memory::engine::store::Store;
use crate::memory::{entries_path, write_atomic};

fn ws() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().to_path_buf())).unwrap();
    ws.ensure().unwrap();
    (dir, ws)
}

fn write_entries(ws: &Workspace, facts: &[(&str, &[&str])]) -> Entries {
    let mut e = Entries::default();
    for (i, (fact, tags)) in facts.iter().enumerate() {
        let tags: Vec<String> = tags.iter().map(|t| (*t).to_owned()).collect();
        e.store_within(fact, &tags, "", i as u64, usize::MAX).unwrap();
    }
    write_atomic(&entries_path(ws), e.to_jsonl().as_bytes()).unwrap();
    e
}

fn recall(ws: &Workspace, q: &str) -> Vec<String> {
    let mut ix = Index::open(ws).unwrap();
    ix.refresh().unwrap();
    ix.recall(q, 5).unwrap().into_iter().map(|h| h.id).collect()
}

#[test]
fn recall_stems_english_weighs_tags_and_finds_chinese() {
    let (_d, ws) = ws();
    write_entries(
        &ws,
        &[
            ("User's sister Ana lives in Lisbon", &["family"]),
            ("Prefers oat milk in coffee", &["food"]),
            ("用户喜欢喝绿茶", &[]),
            ("用户的猫叫小米", &["pets"]),
            ("Went running in the park", &[]),
        ],
    );
    assert_eq!(recall(&ws, "where does Ana live?"), ["m1"], "live finds lives");
    assert_eq!(recall(&ws, "runs"), ["m5"], "runs finds running");
    assert_eq!(recall(&ws, "绿茶"), ["m3"]);
    assert_eq!(recall(&ws, "他喜欢什么茶"), ["m3"], "a pair of the query is enough");
    assert_eq!(recall(&ws, "猫"), ["m4"]);
    assert_eq!(recall(&ws, "family"), ["m1"], "tags are searched");
    assert!(recall(&ws, "volcano").is_empty());
    assert!(recall(&ws, "  ?!").is_empty());
    // Operators and quotes are words, never FTS5 syntax.
    assert!(recall(&ws, "\" OR NOT * NEAR(a b) content:x").is_empty());
}

#[test]
fn the_index_is_private_and_under_state() {
    let (_d, ws) = ws();
    write_entries(&ws, &[("a fact", &[])]);
    recall(&ws, "fact");
    let path = index_path(&ws);
    assert!(path.starts_with(ws.root().join("state")));
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
    let files: Vec<_> = std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(files.len() >= 2, "{files:?}");
    for f in files {
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600, "{}", f.display());
    }
}

#[test]
fn edits_by_hand_are_seen_by_the_next_search() {
    let (_d, ws) = ws();
    write_entries(&ws, &[("The wifi password is on the fridge", &[])]);
    assert_eq!(recall(&ws, "wifi"), ["m1"]);
    // Rewritten by hand (same size, even): the stamp differs, the file is read again.
    write_entries(&ws, &[("The wifi password is in the drawer", &[])]);
    let mut ix = Index::open(&ws).unwrap();
    ix.refresh().unwrap();
    assert_eq!(ix.recall("drawer", 5).unwrap()[0].content, "The wifi password is in the drawer");
    assert!(ix.recall("fridge", 5).unwrap().is_empty());

    std::fs::write(ws.root().join("MEMORY.md"), "# Memory\n\nThe spare key is under the blue pot.\n").unwrap();
    std::fs::write(ws.root().join("memory/2024-03-02.md"), "# 2024-03-02\n\n- 09:10 Met Ruth\n  about the garden\n")
        .unwrap();
    ix.refresh().unwrap();
    let hits = ix.search("garden key", 5).unwrap();
    let found: Vec<(&str, u32, u32)> = hits.iter().map(|h| (h.path.as_str(), h.first, h.last)).collect();
    assert!(found.contains(&("memory/2024-03-02.md", 3, 4)), "{hits:?}");
    assert!(found.contains(&("MEMORY.md", 3, 3)), "{hits:?}");
    std::fs::remove_file(ws.root().join("memory/2024-03-02.md")).unwrap();
    std::fs::remove_file(entries_path(&ws)).unwrap();
    let done = ix.refresh().unwrap();
    assert_eq!(done.files, 2, "{done:?}");
    assert!(ix.search("garden", 5).unwrap().is_empty());
    assert!(ix.recall("drawer", 5).unwrap().is_empty());
    assert_eq!(ix.counts().unwrap().0, 0);
}

#[test]
fn a_damaged_or_foreign_index_is_rebuilt_never_trusted() {
    use crate::memory::engine::codec::checksum;
    use crate::memory::engine::store::MANIFEST;
    let (_d, ws) = ws();
    write_entries(&ws, &[("Dentist on Friday", &[]), ("Bike is in the shed", &[])]);
    assert_eq!(recall(&ws, "bike"), ["m2"]);
    let dir = index_path(&ws);
    // Garbage where the manifest was.
    std::fs::write(dir.join(MANIFEST), b"not an index at all, just bytes that someone wrote here").unwrap();
    assert_eq!(recall(&ws, "bike"), ["m2"]);
    // Another version, sealed with a valid checksum.
    let mut m = std::fs::read(dir.join(MANIFEST)).unwrap();
    m[8..12].copy_from_slice(&999u32.to_le_bytes());
    let n = m.len() - 8;
    let sum = checksum(&m[..n]);
    m[n..].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(dir.join(MANIFEST), &m).unwrap();
    assert_eq!(recall(&ws, "dentist"), ["m1"]);
    // A segment damaged where a search reads it: found by its page's checksum, built again.
    let seg = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("seg-"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[10] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();
    let mut ix = Index::open(&ws).unwrap();
    ix.refresh().unwrap();
    assert_eq!(ix.recall("dentist", 5).unwrap()[0].line, "[m1] Dentist on Friday");
    // Documents that disagree with the file they claim to be from: the stamp no longer
    // matches, so the file is read again.
    Store::write(&dir, |w| {
        w.set_stamp(ENTRIES_SOURCE, "old");
        Ok(())
    })
    .unwrap();
    std::fs::write(entries_path(&ws), Entries::default().to_jsonl()).unwrap();
    let mut ix = Index::open(&ws).unwrap();
    ix.refresh().unwrap();
    assert!(ix.recall("dentist", 5).unwrap().is_empty());
    assert_eq!(ix.counts().unwrap().0, 0);
}

#[test]
fn entries_changed_applies_only_to_the_file_the_index_holds() {
    let (_d, ws) = ws();
    let mut e = write_entries(&ws, &[("first fact", &[])]);
    let stamp_now = || stamp(&std::fs::metadata(entries_path(&ws)).unwrap());
    let mut ix = Index::open(&ws).unwrap();
    ix.refresh().unwrap();
    let before = stamp_now();
    e.store("second fact kiwi", &[], "", 9).unwrap();
    write_atomic(&entries_path(&ws), e.to_jsonl().as_bytes()).unwrap();
    let after = stamp_now();
    // A change reported against another version of the file is not applied...
    assert!(!ix.entries_changed(Some("other"), &after, &[e.get("m2").unwrap()], &[]).unwrap());
    assert!(ix.recall("kiwi", 5).unwrap().is_empty(), "the index still holds the old file");
    // ...and against the version it holds, it is, and no read is needed.
    assert!(ix.entries_changed(Some(&before), &after, &[e.get("m2").unwrap()], &[]).unwrap());
    assert_eq!(ix.recall("kiwi", 5).unwrap()[0].id, "m2");
    assert_eq!(ix.refresh().unwrap().files, 0);
    e.forget("m2").unwrap();
    write_atomic(&entries_path(&ws), e.to_jsonl().as_bytes()).unwrap();
    assert!(ix.entries_changed(Some(&after), &stamp_now(), &[], &["m2"]).unwrap());
    assert!(ix.recall("kiwi", 5).unwrap().is_empty());
    assert_eq!(ix.refresh().unwrap().files, 0);
}

#[test]
fn over_long_lines_and_links_are_not_read() {
    let (_d, ws) = ws();
    let e = write_entries(&ws, &[("a fact about kiwis", &[])]);
    let huge = format!("{{\"id\":\"m9\",\"content\":\"{} kiwi\",\"created\":1,\"updated\":1}}\n", "x".repeat(200_000));
    std::fs::write(entries_path(&ws), format!("{huge}{}", e.to_jsonl())).unwrap();
    assert_eq!(recall(&ws, "kiwi"), ["m1"]);
    // A note that is a link to a file elsewhere is not followed.
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(outside.path(), "secret outside kiwi").unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.root().join("memory/2024-01-01.md")).unwrap();
    let mut ix = Index::open(&ws).unwrap();
    ix.refresh().unwrap();
    assert!(ix.search("secret", 5).unwrap().is_empty());
}

#[test]
fn only_the_newest_notes_up_to_the_bound_are_indexed() {
    let (_d, ws) = ws();
    for day in 1..=MAX_NOTES + 2 {
        std::fs::write(ws.root().join(format!("memory/2024-01-{day:02}.md")), format!("- pebble day{day}\n")).unwrap();
    }
    let mut ix = Index::open(&ws).unwrap();
    ix.refresh().unwrap();
    let mut found: Vec<String> = ix.search("pebble", 50).unwrap().into_iter().map(|h| h.path).collect();
    found.sort();
    let newest: Vec<String> = (3..=MAX_NOTES + 2).map(|d| format!("memory/2024-01-{d:02}.md")).collect();
    assert_eq!(found, newest);
}

#[test]
fn notes_are_cut_into_items_and_paragraphs() {
    let text = "# 2024-03-02\n\n- 09:10 Met Ruth\n  about the garden\n- 10:00 Tea\nplain\n\npara one\npara two\n";
    let c = chunks(text);
    let spans: Vec<(u32, u32)> = c.iter().map(|(a, b, _)| (*a, *b)).collect();
    assert_eq!(spans, [(1, 1), (3, 4), (5, 6), (8, 9)]);
    let long: String = (0..50).map(|i| format!("line {i}\n")).collect();
    assert!(chunks(&long).iter().all(|(a, b, _)| ((b - a) as usize) < CHUNK_LINES));
    assert_eq!(snippet(&"é".repeat(400)).len(), SNIPPET_BYTES + "…".len());
}

/// A reindex racing writers: twenty stores on their own threads while another thread rebuilds
/// and refreshes the index over and over; afterwards every fact is found by its own word.
#[test]
fn reindex_racing_parallel_stores_loses_nothing() {
    let fx = crate::testing::Fixture::new(&[]);
    let ws = fx.ws.clone();
    std::thread::scope(|s| {
        let ws2 = ws.clone();
        let indexer = s.spawn(move || {
            for i in 0..10 {
                if i % 3 == 0 {
                    Index::rebuild(&ws2).unwrap();
                } else {
                    Index::open(&ws2).unwrap().refresh().unwrap();
                }
            }
        });
        let stores: Vec<_> = (0..20)
            .map(|i| {
                let fx = &fx;
                s.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
                    let fact = serde_json::json!({"content": format!("parallel fact item{i}x")});
                    rt.block_on(fx.call(crate::tools::memory::MemoryStore, fact)).unwrap()
                })
            })
            .collect();
        for h in stores {
            assert!(h.join().unwrap().starts_with("stored as m"));
        }
        indexer.join().unwrap();
    });
    let mut ix = Index::open(&ws).unwrap();
    ix.refresh().unwrap();
    for i in 0..20 {
        let hits = ix.recall(&format!("item{i}x"), 5).unwrap();
        assert_eq!(hits.len(), 1, "item{i}x: {hits:?}");
        assert_eq!(hits[0].content, format!("parallel fact item{i}x"));
    }
    assert_eq!(ix.counts().unwrap().0, 20);
}

const CHILD: &str = "CHELA_INDEX_CHILD";

/// The child's half of the SIGKILL test: rebuilds the index of the workspace at `$CHELA_INDEX_CHILD`
/// again and again, saying "built" after the first, until it is killed.
#[test]
fn sigkill_during_reindex_leaves_a_usable_index_or_a_rebuild_real_time() {
    if let Ok(root) = std::env::var(CHILD) {
        let ws = Workspace::locate(Some(root.into())).unwrap();
        for i in 0..1000 {
            Index::rebuild(&ws).unwrap();
            if i == 0 {
                println!("built");
            }
        }
        return;
    }
    let (_d, ws) = ws();
    let facts: Vec<String> = (0..10_000).map(|i| format!("filler fact number {i} about things")).collect();
    let mut list: Vec<(&str, &[&str])> = facts.iter().map(|f| (f.as_str(), &[][..])).collect();
    list.push(("the needle is a kiwi", &[]));
    write_entries(&ws, &list);
    std::fs::write(ws.root().join("memory/2025-05-05.md"), "- 10:00 planted the kiwi\n").unwrap();
    for round in 0..3 {
        // Wait for the event itself: the first build is done, the second under way.
        let mut child = chela_testkit::child::started_until(
            module_path!(),
            "sigkill_during_reindex_leaves_a_usable_index_or_a_rebuild_real_time",
            CHILD,
            ws.root(),
            "built",
        );
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let mut ix = Index::open(&ws).unwrap();
        ix.refresh().unwrap();
        let hits = ix.recall("needle kiwi", 5).unwrap();
        assert_eq!(hits[0].content, "the needle is a kiwi", "round {round}");
        assert_eq!(ix.counts().unwrap().0, 10_001, "round {round}");
        assert_eq!(ix.search("kiwi", 5).unwrap().len(), 1, "round {round}");
    }
}
