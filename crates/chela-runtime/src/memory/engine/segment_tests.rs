use proptest::prelude::*;

use super::*;

fn sample() -> Vec<u8> {
    let mut b = Builder::new(2);
    let docs = [
        (3, ["User's sister Ana lives in Lisbon", "family"]),
        (4, ["Prefers oat milk in coffee", "food"]),
        (7, ["用户 喜 欢 喜欢", ""]),
        (9, ["Lives lives LIVING", "family trips"]),
    ];
    for (doc, cols) in docs {
        b.add(&Doc { doc, columns: &cols, stored: format!("record {doc}").as_bytes() }).unwrap();
        b.add_key(b.len() - 1, &format!("m{doc}"));
        for w in cols.iter().flat_map(|c| c.split(' ')) {
            b.add_word(&w.to_lowercase());
        }
    }
    b.finish()
}

#[test]
fn a_segment_reads_back_what_was_written() {
    let seg = Segment::from_bytes(sample()).unwrap();
    assert_eq!((seg.len(), seg.columns()), (4, 2));
    assert_eq!(seg.doc_numbers(0, 4).unwrap(), [3, 4, 7, 9]);
    assert_eq!(seg.lengths(0, 4).unwrap(), [8, 6, 4, 5]);
    assert_eq!(seg.stored(0).unwrap(), b"record 3");
    assert_eq!(seg.stored(3).unwrap(), b"record 9");
    assert!(seg.stored(4).is_err());
    assert_eq!(seg.ordinal(7).unwrap(), Some(2));
    assert_eq!(seg.ordinal(8).unwrap(), None);
    let live = seg.find("live").unwrap().unwrap();
    assert_eq!(live.df, 2);
    assert_eq!(
        seg.postings(&live).unwrap(),
        [Posting { ord: 0, tf: [1, 0] }, Posting { ord: 3, tf: [3, 0] }],
        "lives, living and LIVES stem to live"
    );
    let family = seg.find("famili").unwrap().unwrap();
    assert_eq!(seg.postings(&family).unwrap(), [Posting { ord: 0, tf: [0, 1] }, Posting { ord: 3, tf: [0, 1] }]);
    assert_eq!(seg.postings(&seg.find("喜欢").unwrap().unwrap()).unwrap(), [Posting { ord: 2, tf: [1, 0] }]);
    assert_eq!(seg.find("lisbonx").unwrap(), None);
    let terms = seg.terms().unwrap();
    assert!(terms.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
    assert!(seg.words().unwrap().contains(&"lisbon".to_owned()));
    assert_eq!((seg.find_key("m7").unwrap(), seg.find_key("m8").unwrap()), (Some(2), None));
    assert_eq!(seg.keys().unwrap().len(), 4);
}

#[test]
fn documents_must_come_in_order_with_their_columns() {
    let mut b = Builder::new(1);
    b.add(&Doc { doc: 5, columns: &["a"], stored: b"" }).unwrap();
    assert!(b.add(&Doc { doc: 5, columns: &["b"], stored: b"" }).is_err());
    assert!(b.add(&Doc { doc: 6, columns: &["b", "c"], stored: b"" }).is_err());
    b.add(&Doc { doc: 6, columns: &["b"], stored: b"" }).unwrap();
    b.add(&Doc { doc: 7, columns: &["c"], stored: b"" }).unwrap();
    let seg = Segment::from_bytes(b.finish()).unwrap();
    assert_eq!(seg.base, Some(5), "numbers without a gap are counted, not read");
    assert_eq!(
        (seg.doc_numbers(0, 3).unwrap(), seg.ordinal(7).unwrap(), seg.ordinal(8).unwrap()),
        (vec![5, 6, 7], Some(2), None)
    );
    assert!(seg.doc_numbers(2, 4).is_err());
    let seg = Segment::from_bytes(Builder::new(1).finish()).unwrap();
    assert!(seg.is_empty());
    assert_eq!(seg.find("a").unwrap(), None);
}

/// Every read a search makes, all of it: an error is fine, a panic is not.
fn read_everything(seg: &Segment) -> io::Result<()> {
    seg.doc_numbers(0, seg.len())?;
    seg.lengths(0, seg.len())?;
    for ord in 0..seg.len().min(64) {
        seg.stored(ord)?;
    }
    for (term, t) in seg.terms()? {
        seg.postings(&t)?;
        seg.find(&term)?;
    }
    seg.words()?;
    for (key, _) in seg.keys()? {
        seg.find_key(&key)?;
    }
    Ok(())
}

#[test]
fn every_flipped_bit_is_an_error_where_it_is_read() {
    let good = sample();
    read_everything(&Segment::from_bytes(good.clone()).unwrap()).unwrap();
    for i in 0..good.len() {
        for bit in [0, 3, 7] {
            let mut bad = good.clone();
            bad[i] ^= 1 << bit;
            let r = Segment::from_bytes(bad).and_then(|s| read_everything(&s));
            let e = r.expect_err(&format!("byte {i} bit {bit} went unnoticed"));
            assert!(super::super::codec::is_damaged(&e), "{e}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(seg) = Segment::from_bytes(bytes) {
            let _ = read_everything(&seg);
        }
    }

    /// A valid footer over damaged data: the structure checks, not only the sums, hold.
    #[test]
    fn damaged_data_under_valid_sums_never_panics(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let good = sample();
        let data_len = {
            let seg = Segment::from_bytes(good.clone()).unwrap();
            seg.data_len as usize
        };
        let mut data = good[..data_len].to_vec();
        for (at, v) in flips {
            let i = at.index(data.len());
            data[i] ^= v;
        }
        let _ = read_everything_of(&reseal(&good, &data));
    }

    #[test]
    fn segments_round_trip(docs in proptest::collection::vec(("[a-z ]{0,40}", "[a-z ]{0,10}"), 0..20)) {
        let mut b = Builder::new(2);
        for (i, (c, t)) in docs.iter().enumerate() {
            b.add(&Doc { doc: i as u64 * 2, columns: &[c, t], stored: c.as_bytes() }).unwrap();
        }
        let seg = Segment::from_bytes(b.finish()).unwrap();
        prop_assert_eq!(seg.len() as usize, docs.len());
        for (i, (c, t)) in docs.iter().enumerate() {
            prop_assert_eq!(seg.stored(i as u32).unwrap(), c.as_bytes());
            let n = super::super::tokens::terms(c).len() + super::super::tokens::terms(t).len();
            prop_assert_eq!(seg.lengths(i as u32, i as u32 + 1).unwrap()[0] as usize, n);
            for term in super::super::tokens::terms(c) {
                let found = seg.find(&term).unwrap().unwrap();
                prop_assert!(seg.postings(&found).unwrap().iter().any(|p| p.ord == i as u32 && p.tf[0] > 0));
            }
        }
    }
}

/// `good`'s footer and layout over `data`, with the page sums made to match it.
fn reseal(good: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut sums = Vec::new();
    for page in data.chunks(PAGE) {
        put_u64(&mut sums, checksum(page));
    }
    let footer_at = good.len() - FOOTER as usize;
    let mut footer = good[footer_at..good.len() - 8].to_vec();
    let n = footer.len();
    footer[n - 8..].copy_from_slice(&checksum(&sums).to_le_bytes());
    out.extend_from_slice(&sums);
    out.extend_from_slice(&footer);
    let sum = checksum(&footer);
    put_u64(&mut out, sum);
    out
}

fn read_everything_of(bytes: &[u8]) -> io::Result<()> {
    read_everything(&Segment::from_bytes(bytes.to_vec())?)
}
