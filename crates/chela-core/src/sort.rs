//! One stable sort for cold code (re-exported as `chela_infra::sort` for the host's crates).
//!
//! `slice::sort_by` is generic over the element and the comparison, so each call site with its
//! own closure compiles its own copy of the standard library's stable sort (about 5 KB each at
//! opt-level "s"). [`sort_by`] sorts positions instead, through one comparison object, so the
//! sort itself is compiled once; what stays per call site is the comparison and a short loop
//! that moves the elements into place. Meant for the short lists of listings, reports and
//! configuration, not for hot loops: each comparison is an indirect call, and the positions
//! take one allocation.

use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Ordering;

/// Sorts `items` stably by `cmp`: the same order as `items.sort_by(cmp)`.
pub fn sort_by<T>(items: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    let mut dest = destinations(items.len(), &mut |a, b| cmp(&items[a], &items[b]));
    // `dest[i]` is where the element now at `i` belongs: send it there (the one that comes back
    // brings its own destination along) until position `i` holds its own element.
    for i in 0..items.len() {
        while dest[i] != i {
            let j = dest[i];
            items.swap(i, j);
            dest.swap(i, j);
        }
    }
}

/// Sorts `items` stably by the key `key` gives: the same order as `items.sort_by_key(key)`.
pub fn sort_by_key<T, K: Ord>(items: &mut [T], mut key: impl FnMut(&T) -> K) {
    sort_by(items, |a, b| key(a).cmp(&key(b)));
}

/// Where each of `len` elements goes in the stable order `cmp` gives (it compares positions).
/// Not generic and never inlined: the one instance of the standard sort.
#[inline(never)]
fn destinations(len: usize, cmp: &mut dyn FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    let mut dest = vec![0; len];
    for (to, &from) in order.iter().enumerate() {
        dest[from] = to;
    }
    dest
}

#[cfg(test)]
mod tests {
    use alloc::string::String;
    use proptest::prelude::*;

    use super::*;

    proptest! {
        // Keys from a small range, so most lists have equal keys whose order must be kept.
        #[test]
        fn same_order_as_the_standard_stable_sort(keys in proptest::collection::vec(0u8..8, 0..200)) {
            let items: Vec<(u8, usize)> = keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect();
            let mut expected = items.clone();
            expected.sort_by_key(|x| core::cmp::Reverse(x.0));
            let mut got = items.clone();
            sort_by(&mut got, |a, b| b.0.cmp(&a.0));
            prop_assert_eq!(&got, &expected);
            let mut expected = items.clone();
            expected.sort_by_key(|x| x.0);
            let mut got = items;
            sort_by_key(&mut got, |x| x.0);
            prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn moves_owned_elements() {
        let mut names: Vec<String> = ["c", "a", "b", "a"].map(String::from).into();
        sort_by(&mut names, Ord::cmp);
        assert_eq!(names, ["a", "a", "b", "c"]);
    }
}
