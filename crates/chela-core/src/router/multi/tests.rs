use super::*;
use alloc::string::String;

fn naive(pats: &[(Box<str>, u16)], hay: &str) -> Bits {
    let mut m = Bits::default();
    for (p, pos) in pats {
        if hay.contains(&**p) {
            set(&mut m, *pos);
        }
    }
    m
}

fn pats(list: &[&str]) -> Vec<(Box<str>, u16)> {
    list.iter().enumerate().map(|(i, p)| (Box::<str>::from(*p), i as u16)).collect()
}

#[test]
fn finds_overlapping_and_nested_patterns() {
    let p = pats(&["he", "she", "his", "hers", "", "é", "xyz"]);
    let m = Multi::new(p.clone());
    assert!(matches!(m, Multi::Dfa { .. }));
    for hay in ["ushers", "", "h", "this is héllo", "xxyz", "xy", "hishe"] {
        assert_eq!(m.matches(hay), naive(&p, hay), "{hay:?}");
    }
}

#[test]
fn too_many_states_fall_back_to_one_search_each_with_the_same_answers() {
    let long: Vec<String> = (0..40).map(|i| alloc::format!("{i:04}{}", "ab".repeat(500))).collect();
    let p: Vec<(Box<str>, u16)> =
        long.iter().enumerate().map(|(i, s)| (Box::<str>::from(s.as_str()), i as u16)).collect();
    let m = Multi::new(p.clone());
    assert!(matches!(m, Multi::Each(_)));
    let hay = alloc::format!("x{}y", long[7]);
    assert_eq!(m.matches(&hay), naive(&p, &hay));
    assert_eq!(m.matches(&hay)[0], 1 << 7);
}

#[test]
fn many_byte_classes_agree_with_the_plain_search() {
    // 127 distinct bytes, each its own class: the automaton agrees with the search.
    let all: String = (1u8..=127).map(char::from).collect();
    let p = pats(&[&all, "ab", "\u{7f}"]);
    let m = Multi::new(p.clone());
    for hay in [all.as_str(), "zab", "\u{7f}\u{7f}"] {
        assert_eq!(m.matches(hay), naive(&p, hay), "{hay:?}");
    }
}
