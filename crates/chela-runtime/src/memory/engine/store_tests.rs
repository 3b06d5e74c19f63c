use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::memory::engine::codec::is_damaged;
use crate::memory::engine::tokens::terms;

const W: &[f64] = &[1.0, 2.0];

fn q(groups: &[Vec<String>], every: bool) -> Query<'_> {
    Query { groups, every, weights: W, max_scored: 1000, max: 50 }
}

fn g(words: &[&str]) -> Vec<Vec<String>> {
    words.iter().map(|w| terms(w)).collect()
}

/// Adds `facts` as the documents of source `path` (entries: content, no tags).
fn put(dir: &Path, path: &str, facts: &[&str]) {
    Store::write(dir, |w| {
        w.reset_source(path, "stamp", Table::Entries);
        for f in facts {
            w.add(path, "", &[f, ""], f.as_bytes())?;
        }
        Ok(())
    })
    .unwrap();
}

fn found(s: &Store, words: &[&str], every: bool) -> Vec<String> {
    let groups = g(words);
    s.search(Table::Entries, &q(&groups, every))
        .unwrap()
        .into_iter()
        .map(|h| String::from_utf8(s.stored(Table::Entries, h.doc).unwrap().unwrap()).unwrap())
        .collect()
}

#[test]
fn written_documents_are_found_replaced_and_dropped() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("ix");
    let s = Store::open(&dir).unwrap();
    assert_eq!(s.totals(Table::Entries), Totals::default(), "no index yet: empty");
    put(&dir, "a", &["Ana lives in Lisbon", "coffee with oat milk"]);
    put(&dir, "b", &["the kiwi is green", "Lisbon trip in May"]);
    let s = Store::open(&dir).unwrap();
    assert_eq!(found(&s, &["lisbon", "lives"], true), ["Ana lives in Lisbon"]);
    let mut any = found(&s, &["kiwi", "coffee"], false);
    any.sort();
    assert_eq!(any, ["coffee with oat milk", "the kiwi is green"]);
    assert_eq!(s.totals(Table::Entries).docs, 4);
    assert!(s.contains(Table::Entries, "kiwi").unwrap());
    assert!(found(&s, &["volcano"], false).is_empty());
    // Source a read again: its old documents are dead, its new ones live.
    put(&dir, "a", &["Ana moved to Porto"]);
    let s = Store::open(&dir).unwrap();
    assert_eq!(found(&s, &["lisbon"], false), ["Lisbon trip in May"]);
    assert_eq!(found(&s, &["ana"], false), ["Ana moved to Porto"]);
    assert!(!s.contains(Table::Entries, "coffe").unwrap());
    assert_eq!(s.totals(Table::Entries).docs, 3);
    Store::write(&dir, |w| {
        w.drop_source("b");
        Ok(())
    })
    .unwrap();
    let s = Store::open(&dir).unwrap();
    assert!(found(&s, &["kiwi"], false).is_empty());
    assert_eq!(s.totals(Table::Entries).docs, 1);
    // Segments with no live document are forgotten, and their files removed.
    let files = std::fs::read_dir(&dir).unwrap().filter(|e| e.as_ref().unwrap().file_name() != MANIFEST).count();
    assert_eq!(s.manifest().segments.len(), 1);
    assert_eq!(files, 2, "one segment and the lock's sidecar");
}

#[test]
fn a_write_that_fails_commits_nothing() {
    let d = tempfile::tempdir().unwrap();
    put(d.path(), "a", &["first fact"]);
    let e = Store::write(d.path(), |w| {
        w.reset_source("a", "new", Table::Entries);
        w.add("a", "", &["second fact", ""], b"x")?;
        Err::<(), _>(io::Error::other("the file went away"))
    });
    assert!(e.is_err());
    let s = Store::open(d.path()).unwrap();
    assert_eq!(found(&s, &["fact"], false), ["first fact"]);
    assert_eq!(s.manifest().source("a").unwrap().stamp, "stamp");
}

#[test]
fn many_writes_merge_with_the_same_answers() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    for i in 0..MAX_SEGMENTS {
        put(dir, &format!("s{i}"), &[&format!("fact {i} about tea"), &format!("other {i} about coffee")]);
    }
    // Source s0 read again: its first documents are dead in their segment.
    put(dir, "s0", &["fact zero about water"]);
    let before = Store::open(dir).unwrap();
    let groups = g(&["tea", "coffee"]);
    let want = before.search(Table::Entries, &q(&groups, false)).unwrap();
    put(dir, "last", &["a last fact about tea"]);
    let after = Store::open(dir).unwrap();
    assert!(after.manifest().segments.len() <= MAX_SEGMENTS, "merged: {:?}", after.manifest().segments);
    let got = after.search(Table::Entries, &q(&groups, false)).unwrap();
    assert_eq!(got.len(), want.len() + 1);
    let text = |s: &Store, h: &Hit| String::from_utf8(s.stored(Table::Entries, h.doc).unwrap().unwrap()).unwrap();
    let mut a: Vec<String> = want.iter().map(|h| text(&before, h)).collect();
    let mut b: Vec<String> = got.iter().map(|h| text(&after, h)).filter(|t| t != "a last fact about tea").collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert!(found(&after, &["zero"], false) == ["fact zero about water"]);
    assert!(found(&after, &["0"], false).is_empty(), "the dead \"fact 0\" was left out");
    assert!(after.words(Table::Entries).unwrap().is_empty(), "no words were added");
    let segs = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("seg-"))
        .count();
    assert_eq!(segs, after.manifest().segments.len(), "the merged-away files are removed");
}

#[test]
fn only_the_newest_matches_are_scored_and_ties_go_to_the_older() {
    let d = tempfile::tempdir().unwrap();
    put(d.path(), "a", &["tea tea tea", "tea and more words here", "tea", "tea"]);
    let s = Store::open(d.path()).unwrap();
    let groups = g(&["tea"]);
    let all = s.search(Table::Entries, &q(&groups, false)).unwrap();
    assert_eq!(all.len(), 4);
    let newest = s.search(Table::Entries, &Query { max_scored: 2, ..q(&groups, false) }).unwrap();
    let mut docs: Vec<u64> = newest.iter().map(|h| h.doc).collect();
    docs.sort_unstable();
    assert_eq!(docs, [all.iter().map(|h| h.doc).max().unwrap() - 1, all.iter().map(|h| h.doc).max().unwrap()]);
    assert_eq!(newest[0].score, newest[1].score);
    assert!(newest[0].doc < newest[1].doc, "equal scores: the older first");
}

#[test]
fn a_damaged_manifest_or_segment_is_an_error_that_says_so() {
    let d = tempfile::tempdir().unwrap();
    put(d.path(), "a", &["a fact"]);
    let seg = d.path().join(Store::open(d.path()).unwrap().manifest().segments[0].file_name());
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[3] ^= 0x10;
    std::fs::write(&seg, &bytes).unwrap();
    let e = Store::open(d.path()).and_then(|s| s.search(Table::Entries, &q(&g(&["fact"]), false))).unwrap_err();
    assert!(is_damaged(&e), "{e}");
    std::fs::write(d.path().join(MANIFEST), b"CHELAMAN and then nonsense").unwrap();
    assert!(is_damaged(&Store::open(d.path()).err().unwrap()));
}

/// Writers on four threads and readers on two at once: every reader sees whole states (each
/// source with all of its documents or none), and every write lands.
#[test]
fn writers_and_readers_at_once_see_whole_states() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let dir = &dir;
                s.spawn(move || {
                    for round in 0..6 {
                        let facts: Vec<String> = (0..5).map(|i| format!("thread{t} round{round} fact{i}")).collect();
                        let facts: Vec<&str> = facts.iter().map(String::as_str).collect();
                        put(dir, &format!("t{t}"), &facts);
                    }
                })
            })
            .collect();
        for _ in 0..2 {
            s.spawn(|| {
                let mut seen = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) || seen == 0 {
                    let st = Store::open(&dir).unwrap();
                    assert_eq!(st.totals(Table::Entries).docs % 5, 0, "a source half-written");
                    for h in st.search(Table::Entries, &q(&g(&["fact"]), false)).unwrap() {
                        assert!(st.stored(Table::Entries, h.doc).unwrap().is_some());
                    }
                    seen += 1;
                }
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let st = Store::open(&dir).unwrap();
    assert_eq!(st.totals(Table::Entries).docs, 20);
    for t in 0..4 {
        assert_eq!(found(&st, &[&format!("thread{t}"), "round5"], true).len(), 5, "thread {t}");
    }
}

const CHILD: &str = "CHELA_STORE_CHILD";

/// The child's half: a write that stops between its segment's rename and the manifest's,
/// says so, and waits there to be killed.
#[test]
fn a_kill_between_the_segment_and_the_manifest_loses_only_that_write() {
    if let Ok(dir) = std::env::var(CHILD) {
        let _ = Store::write(Path::new(&dir), |w| {
            w.reset_source("a", "new", Table::Entries);
            w.add("a", "", &["the replaced fact", ""], b"the replaced fact")?;
            *BEFORE_MANIFEST.lock().unwrap() = Some(|| {
                println!("segment written");
                // Waits for the parent's SIGKILL: stdin stays open and silent.
                let _ = std::io::stdin().lines().next();
            });
            Ok(())
        });
        return;
    }
    let d = tempfile::tempdir().unwrap();
    put(d.path(), "a", &["the first fact"]);
    let mut child = chela_testkit::child::started_until(
        module_path!(),
        "a_kill_between_the_segment_and_the_manifest_loses_only_that_write",
        CHILD,
        d.path(),
        "segment written",
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let segs = || {
        std::fs::read_dir(d.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("seg-"))
            .count()
    };
    assert_eq!(segs(), 2, "the killed write's segment is on disk, named by no manifest");
    let s = Store::open(d.path()).unwrap();
    assert_eq!(found(&s, &["fact"], false), ["the first fact"], "the old state, whole");
    put(d.path(), "b", &["another fact"]);
    assert_eq!(segs(), 2, "the next write removed the orphan");
    let s = Store::open(d.path()).unwrap();
    assert_eq!(found(&s, &["first"], false), ["the first fact"]);
    assert!(found(&s, &["replaced"], false).is_empty());
}

#[test]
fn one_document_is_found_by_key_and_taken_out_alone() {
    let d = tempfile::tempdir().unwrap();
    let facts = ["kiwi one", "kiwi two two", "kiwi three three three", "kiwi four"];
    Store::write(d.path(), |w| {
        w.reset_source("e", "s", Table::Entries);
        for (i, f) in facts.iter().enumerate() {
            w.add("e", &format!("m{}", i + 1), &[f, ""], f.as_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let s = Store::open(d.path()).unwrap();
    let m2 = s.find_key(Table::Entries, "m2").unwrap().unwrap();
    assert_eq!(s.stored(Table::Entries, m2).unwrap().unwrap(), b"kiwi two two");
    assert_eq!(s.find_key(Table::Entries, "m9").unwrap(), None);
    assert_eq!(s.totals(Table::Entries), Totals { docs: 4, terms: 2 + 3 + 4 + 2 });
    // Taken out of the middle of its run, in a later write that also adds one.
    Store::write(d.path(), |w| {
        w.remove("e", m2)?;
        let m5 = w.add("e", "m5", &["kiwi five", ""], b"kiwi five")?;
        w.remove("e", m5)?;
        w.add("e", "m6", &["kiwi six", ""], b"kiwi six")?;
        Ok(())
    })
    .unwrap();
    let s = Store::open(d.path()).unwrap();
    assert_eq!(s.totals(Table::Entries), Totals { docs: 4, terms: 2 + 4 + 2 + 2 }, "{:?}", s.manifest());
    assert_eq!(s.find_key(Table::Entries, "m2").unwrap(), None);
    assert_eq!(s.find_key(Table::Entries, "m5").unwrap(), None);
    let mut all = found(&s, &["kiwi"], false);
    all.sort();
    assert_eq!(all, ["kiwi four", "kiwi one", "kiwi six", "kiwi three three three"]);
    let live = s.live_docs(Table::Entries, None, 10);
    assert_eq!(live.len(), 4);
    assert_eq!(s.live_docs(Table::Entries, Some(live[1]), 10), live[2..]);
    assert_eq!(s.live_docs(Table::Entries, None, 2), live[..2]);
    assert!(live.iter().all(|d| s.stored(Table::Entries, *d).unwrap().is_some()));
}

fn vec_rec(doc: u64, model: &str, x: f32) -> Record {
    Record { kind: 0, doc, hash: doc as i64, model: model.into(), vec: vec![x, 1.0 - x] }
}

fn vectors_of(s: &Store) -> Vec<(u64, String, f32)> {
    let mut out = Vec::new();
    s.each_vector(|v| {
        let r = v.to_record();
        out.push((r.doc, r.model, r.vec[0]));
    })
    .unwrap();
    out
}

#[test]
fn vectors_append_survive_a_torn_tail_and_are_rewritten() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    Store::write(dir, |w| w.append_vectors(&[vec_rec(1, "a", 0.1), vec_rec(2, "a", 0.2)])).unwrap();
    let s = Store::open(dir).unwrap();
    assert_eq!(vectors_of(&s), [(1, "a".into(), 0.1), (2, "a".into(), 0.2)]);
    assert_eq!(vectors_of(&s).len(), 2, "a second scan of one open store reads from the start");
    // What a killed append leaves: bytes past the committed length. Readers never see them;
    // the next append cuts them off first.
    let file = dir.join(s.manifest().vectors.unwrap().file_name());
    let mut torn = Vec::new();
    vectors::encode(&vec_rec(9, "a", 0.9), &mut torn).unwrap();
    torn.truncate(torn.len() - 3);
    std::fs::OpenOptions::new().append(true).open(&file).unwrap().write_all(&torn).unwrap();
    assert_eq!(vectors_of(&Store::open(dir).unwrap()).len(), 2);
    Store::write(dir, |w| w.append_vectors(&[vec_rec(3, "b", 0.3), vec_rec(1, "a", 0.15)])).unwrap();
    let s = Store::open(dir).unwrap();
    assert_eq!(vectors_of(&s).len(), 4, "the torn bytes are gone, the new records read");
    // Rewritten for model a alone: the last record of each document kept, model b dropped.
    Store::write(dir, |w| w.rewrite_vectors(|v| v.model == "a")).unwrap();
    let s = Store::open(dir).unwrap();
    let mut got = vectors_of(&s);
    got.sort_by_key(|v| v.0);
    assert_eq!(got, [(1, "a".into(), 0.15), (2, "a".into(), 0.2)]);
    assert!(!file.exists(), "the old file is removed");
    assert_eq!(
        std::fs::metadata(dir.join(s.manifest().vectors.unwrap().file_name())).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A vectors file damaged inside its committed length is an error that says so.
    let now = dir.join(s.manifest().vectors.unwrap().file_name());
    let mut bytes = std::fs::read(&now).unwrap();
    bytes[6] ^= 1;
    std::fs::write(&now, bytes).unwrap();
    let e = Store::open(dir).and_then(|s| s.each_vector(|_| {})).unwrap_err();
    assert!(is_damaged(&e), "{e}");
}

#[test]
fn a_reset_starts_afresh_above_every_old_number() {
    let d = tempfile::tempdir().unwrap();
    put(d.path(), "a", &["a fact"]);
    put(d.path(), "b", &["b fact"]);
    let old: Vec<u64> = Store::open(d.path()).unwrap().manifest().segments.iter().map(|s| s.id).collect();
    std::fs::write(d.path().join(MANIFEST), b"damaged").unwrap();
    assert!(Store::open(d.path()).is_err());
    Store::reset(d.path()).unwrap();
    let s = Store::open(d.path()).unwrap();
    assert_eq!(s.totals(Table::Entries).docs, 0);
    assert!(s.manifest().next_segment > *old.iter().max().unwrap());
    let segs = std::fs::read_dir(d.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("seg-"))
        .count();
    assert_eq!(segs, 0, "the old segments are gone");
    put(d.path(), "a", &["a new fact"]);
    let s = Store::open(d.path()).unwrap();
    assert!(s.manifest().segments.iter().all(|r| !old.contains(&r.id)));
    assert_eq!(found(&s, &["fact"], false), ["a new fact"]);
}

#[test]
fn storing_one_entry_after_many_merges_the_small_segments_not_the_full_ones() {
    let d = tempfile::tempdir().unwrap();
    let n = 2 * SEGMENT_DOCS as usize + 100;
    let many: Vec<String> = (0..n).map(|i| format!("old fact {i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    put(d.path(), "big", &many);
    let first = Store::open(d.path()).unwrap();
    assert_eq!(first.manifest().segments.len(), 3, "a write past SEGMENT_DOCS starts another segment");
    assert_eq!(found(&first, &["old"], false).len(), 50, "found across the segments (at most 50 asked)");
    assert_eq!(first.totals(Table::Entries).docs, n as u64);
    let full: Vec<u64> = first.manifest().segments.iter().map(|r| r.id).take(2).collect();
    for i in 0..3 * MAX_SEGMENTS {
        put(d.path(), &format!("small{i}"), &[&format!("new fact {i}")]);
    }
    let s = Store::open(d.path()).unwrap();
    assert!(s.manifest().segments.len() <= 2 + MAX_SEGMENTS, "{:?}", s.manifest().segments);
    assert!(full.iter().all(|id| s.manifest().segments.iter().any(|r| r.id == *id)), "full segments never rewritten");
    assert_eq!(found(&s, &["new"], false).len(), 3 * MAX_SEGMENTS);
    assert_eq!(s.totals(Table::Entries).docs, (n + 3 * MAX_SEGMENTS) as u64);
    // All of the big source read again: its segments are dead and dropped.
    put(d.path(), "big", &["old fact again"]);
    let s = Store::open(d.path()).unwrap();
    assert!(full.iter().all(|id| s.manifest().segments.iter().all(|r| r.id != *id)), "{:?}", s.manifest().segments);
    assert_eq!(found(&s, &["old"], false), ["old fact again"]);
}

#[test]
fn a_segment_more_than_half_dead_is_rewritten_alone() {
    let d = tempfile::tempdir().unwrap();
    let facts: Vec<String> = (0..10).map(|i| format!("fact {i}")).collect();
    Store::write(d.path(), |w| {
        w.reset_source("e", "s", Table::Entries);
        for (i, f) in facts.iter().enumerate() {
            w.add("e", &format!("m{i}"), &[f, ""], f.as_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let before = Store::open(d.path()).unwrap();
    let old = before.manifest().segments[0].id;
    let docs: Vec<u64> = (0..6).map(|i| before.find_key(Table::Entries, &format!("m{i}")).unwrap().unwrap()).collect();
    Store::write(d.path(), |w| {
        for doc in &docs {
            w.remove("e", *doc)?;
        }
        Ok(())
    })
    .unwrap();
    let s = Store::open(d.path()).unwrap();
    assert_eq!(s.manifest().segments.len(), 1);
    assert_ne!(s.manifest().segments[0].id, old, "rewritten without its dead documents");
    let mut left = found(&s, &["fact"], false);
    left.sort();
    assert_eq!(left, ["fact 6", "fact 7", "fact 8", "fact 9"]);
    assert!(s.find_key(Table::Entries, "m7").unwrap().is_some(), "a key survives the rewrite");
}
