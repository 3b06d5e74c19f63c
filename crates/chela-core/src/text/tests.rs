use super::*;
use proptest::prelude::*;

#[test]
fn cuts_on_char_boundaries() {
    assert_eq!(prefix("héllo", 2), "h");
    assert_eq!(prefix("héllo", 3), "hé");
    assert_eq!(suffix("世界", 4), "界");
    assert_eq!(prefix("abc", 10), "abc");
}

#[test]
fn visible_truncation_says_so_and_stays_in_bound() {
    let s = "x".repeat(1000);
    let t = truncate_visibly(&s, 100);
    assert!(t.len() <= 100, "{}", t.len());
    assert!(t.contains("cut"), "{t}");
    assert_eq!(truncate_visibly("short", 100), "short");
}

proptest! {
    #[test]
    fn prefix_and_suffix_are_valid_and_bounded(s in any::<String>(), max in 0usize..64) {
        let p = prefix(&s, max);
        prop_assert!(p.len() <= max && s.starts_with(p));
        prop_assert!(s.len() - p.len() < 4 || p.len() + 4 > max);
        let q = suffix(&s, max);
        prop_assert!(q.len() <= max && s.ends_with(q));
        let v = truncate_visibly(&s, max + 60);
        prop_assert!(v.len() <= max + 60);
    }
}
