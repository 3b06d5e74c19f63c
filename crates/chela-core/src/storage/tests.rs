use super::*;
use alloc::string::String;
use alloc::vec;
use proptest::prelude::*;

fn collect(text: &[u8], block: usize, max_line: usize, stop_after: usize) -> (Vec<(Vec<u8>, bool)>, ReadEnd) {
    let mut got = Vec::new();
    let mut buf = Vec::new();
    let end = lines_newest_first::<()>(
        text.len() as u64,
        Blocks { block, max_line },
        &mut buf,
        |off, out| {
            let off = usize::try_from(off).unwrap();
            out.copy_from_slice(&text[off..off + out.len()]);
            Ok(())
        },
        &mut |l| {
            got.push((l.bytes.to_vec(), l.terminated));
            if got.len() >= stop_after { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        },
    )
    .unwrap();
    (got, end)
}

fn expected(text: &[u8]) -> Vec<(Vec<u8>, bool)> {
    let ends_clean = text.last() == Some(&b'\n');
    let parts: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    let last = parts.len() - 1;
    let mut out: Vec<(Vec<u8>, bool)> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(i, p)| (p.to_vec(), i != last || ends_clean))
        .collect();
    out.reverse();
    out
}

#[test]
fn lines_come_newest_first_across_blocks() {
    let text = b"first\nsecond line\n\nthird\n";
    let (got, end) = collect(text, 4, 64, usize::MAX);
    assert_eq!(got, expected(text));
    assert_eq!(got[0], (b"third".to_vec(), true));
    assert_eq!(end, ReadEnd { size: 25, read: 25, overlong: 0, stopped: false });
    let (got, _) = collect(b"a\ntorn", 3, 64, usize::MAX);
    assert_eq!(got, vec![(b"torn".to_vec(), false), (b"a".to_vec(), true)]);
}

#[test]
fn reading_stops_after_what_was_asked() {
    let mut text = String::new();
    for i in 0..1000 {
        text.push_str(&alloc::format!("line {i:04} {}\n", "x".repeat(80)));
    }
    let (got, end) = collect(text.as_bytes(), 512, 4096, 3);
    assert_eq!(got.len(), 3);
    assert!(got[2].0.starts_with(b"line 0997"));
    assert!(end.stopped);
    assert_eq!(end.read, 512, "three 91-byte lines fit in the last block");
}

#[test]
fn overlong_lines_are_skipped_and_counted() {
    let text = alloc::format!("short\n{}\nafter\n{}", "y".repeat(100), "z".repeat(50));
    let (got, end) = collect(text.as_bytes(), 8, 40, usize::MAX);
    assert_eq!(got, vec![(b"after".to_vec(), true), (b"short".to_vec(), true)]);
    assert_eq!(end.overlong, 2);
}

proptest! {
    #[test]
    fn any_text_any_block_gives_every_line(
        text in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'a'), Just(b'b'), any::<u8>()], 0..300),
        block in 1usize..40,
        stop in 1usize..20,
    ) {
        let all = expected(&text);
        let (got, end) = collect(&text, block, 1000, usize::MAX);
        prop_assert_eq!(&got, &all);
        prop_assert_eq!(end.read, text.len() as u64);
        let (got, end) = collect(&text, block, 1000, stop);
        prop_assert_eq!(got.as_slice(), &all[..stop.min(all.len())]);
        prop_assert_eq!(end.stopped, stop <= all.len());
    }
}
