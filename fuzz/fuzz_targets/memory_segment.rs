//! The memory index's files (`chela_runtime::memory::engine`): a segment built from the input's
//! documents reads back what was written (records, keys, lengths, and every term of a document
//! finds it in its column); the input's own bytes as a segment, a manifest or a vectors file are
//! refused or read without a panic, every read bounded by the bytes given.
#![no_main]

use chela_runtime::memory::engine::manifest::Manifest;
use chela_runtime::memory::engine::segment::{Builder, Doc, Segment};
use chela_runtime::memory::engine::tokens::terms;
use chela_runtime::memory::engine::vectors;
use libfuzzer_sys::fuzz_target;

/// Every read a search makes; errors are fine (the bytes are arbitrary), panics are not.
fn read_all(seg: &Segment) {
    let _ = seg.doc_numbers(0, seg.len());
    let _ = seg.lengths(0, seg.len());
    for ord in 0..seg.len().min(64) {
        let _ = seg.stored(ord);
    }
    if let Ok(terms) = seg.terms() {
        for (term, t) in terms.iter().take(256) {
            let _ = seg.postings(t);
            let _ = seg.find(term);
        }
    }
    let _ = seg.words();
    let _ = seg.keys();
}

fuzz_target!(|data: &[u8]| {
    if let Ok(seg) = Segment::from_bytes(data.to_vec()) {
        read_all(&seg);
    }
    let _ = Manifest::decode(data);
    let _ = vectors::scan(data, data.len() as u64, |v| {
        assert_eq!(v.values.len() % 4, 0);
    });

    // Documents from the input: one a line, `content<TAB>tags`.
    let text = String::from_utf8_lossy(data);
    let docs: Vec<(&str, &str)> = text.lines().take(64).map(|l| l.split_once('\t').unwrap_or((l, ""))).collect();
    let mut b = Builder::new(2);
    for (i, (content, tags)) in docs.iter().enumerate() {
        b.add(&Doc { doc: 10 + 3 * i as u64, columns: &[content, tags], stored: content.as_bytes() })
            .expect("documents in order");
        b.add_key(i as u32, &format!("m{i}"));
    }
    let seg = Segment::from_bytes(b.finish()).expect("a segment just built reads");
    assert_eq!(seg.len() as usize, docs.len());
    for (i, (content, tags)) in docs.iter().enumerate() {
        let ord = i as u32;
        assert_eq!(seg.stored(ord).expect("a record"), content.as_bytes());
        assert_eq!(seg.ordinal(10 + 3 * i as u64).expect("an ordinal"), Some(ord));
        assert_eq!(seg.find_key(&format!("m{i}")).expect("a key"), Some(ord));
        let n = terms(content).len() + terms(tags).len();
        assert_eq!(seg.lengths(ord, ord + 1).expect("a length")[0] as usize, n);
        for (col, text) in [content, tags].iter().enumerate() {
            for term in terms(text) {
                let found = seg.find(&term).expect("a lookup").expect("an indexed term is found");
                let list = seg.postings(&found).expect("postings");
                assert!(list.iter().any(|p| p.ord == ord && p.tf[col] > 0), "{term:?} misses document {i}");
            }
        }
    }
    read_all(&seg);
});
