//! Many `contains` tests of one field at once: an Aho–Corasick automaton over the patterns of
//! one field among one event type's rules, run once per event instead of one substring search
//! per rule.
//!
//! The automaton is a dense table over byte classes (each byte that occurs in a pattern is a
//! class of its own, every other byte is class 0), so an event's string costs one table read
//! per byte, whatever the number of patterns. Its size is bounded by [`MAX_CELLS`]; patterns
//! that would need more are tested one by one with the plain search instead (same answers).

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::rule::contains;

/// One bit per position in a rule list.
pub(crate) type Bits = [u64; super::MAX_RULES / 64];

/// The most table cells (states times byte classes) one automaton may have: 64 KiB of `u16`s.
pub(crate) const MAX_CELLS: usize = 32 * 1024;

const NO_OUT: u16 = u16::MAX;

/// The patterns of one field, each with the list position of the rule it belongs to.
#[derive(Debug)]
pub(crate) enum Multi {
    /// The automaton: `trans[state * stride + class]` is the next state.
    Dfa { class: Box<[u8; 256]>, stride: usize, trans: Box<[u16]>, out: Box<[u16]>, outs: Box<[Bits]> },
    /// Too large for [`MAX_CELLS`]: each pattern searched on its own.
    Each(Box<[(Box<str>, u16)]>),
}

pub(crate) fn set(bits: &mut Bits, pos: u16) {
    bits[usize::from(pos) / 64] |= 1 << (pos % 64);
}

impl Multi {
    /// Builds the matcher for `patterns` (pattern, position).
    pub(crate) fn new(patterns: Vec<(Box<str>, u16)>) -> Multi {
        match dfa(&patterns) {
            Some(m) => m,
            None => Multi::Each(patterns.into_boxed_slice()),
        }
    }

    /// The positions whose pattern occurs in `hay`.
    pub(crate) fn matches(&self, hay: &str) -> Bits {
        match self {
            Multi::Dfa { class, stride, trans, out, outs } => {
                let mut m = outs.first().copied().unwrap_or_default();
                let mut st = 0usize;
                for &b in hay.as_bytes() {
                    st = usize::from(trans[st * stride + usize::from(class[usize::from(b)])]);
                    let o = out[st];
                    if o != NO_OUT {
                        let o = &outs[usize::from(o)];
                        for (w, x) in m.iter_mut().zip(o) {
                            *w |= x;
                        }
                    }
                }
                m
            }
            Multi::Each(list) => {
                let mut m = Bits::default();
                for (p, pos) in list.iter() {
                    if contains(hay, p) {
                        set(&mut m, *pos);
                    }
                }
                m
            }
        }
    }
}

/// The automaton, or `None` when it would exceed [`MAX_CELLS`]. `outs[0]` is the root's output
/// (the empty patterns), which every string matches.
fn dfa(patterns: &[(Box<str>, u16)]) -> Option<Multi> {
    const NONE: u16 = u16::MAX;
    let mut class = Box::new([0u8; 256]);
    let mut classes = 1usize;
    for (p, _) in patterns {
        for &b in p.as_bytes() {
            if class[usize::from(b)] == 0 {
                // At most 256 distinct bytes; class 0 is "no pattern has it", so 255 fit.
                if classes > 255 {
                    return None;
                }
                class[usize::from(b)] = classes as u8;
                classes += 1;
            }
        }
    }
    let stride = classes;
    let mut trans: Vec<u16> = alloc::vec![NONE; stride];
    let mut own: Vec<Bits> = alloc::vec![Bits::default()];
    for (p, pos) in patterns {
        let mut st = 0usize;
        for &b in p.as_bytes() {
            let cell = st * stride + usize::from(class[usize::from(b)]);
            if trans[cell] == NONE {
                let next = own.len();
                if (next + 1) * stride > MAX_CELLS || next >= usize::from(NONE) {
                    return None;
                }
                trans[cell] = next as u16;
                trans.extend(core::iter::repeat_n(NONE, stride));
                own.push(Bits::default());
            }
            st = usize::from(trans[cell]);
        }
        set(&mut own[st], *pos);
    }
    // Breadth first: fail links, outputs merged along them, missing moves filled in.
    let states = own.len();
    let mut fail = alloc::vec![0u16; states];
    let mut queue: Vec<u16> = Vec::with_capacity(states);
    for cell in trans.iter_mut().take(stride) {
        match *cell {
            NONE => *cell = 0,
            v => {
                let root = own[0];
                for (w, x) in own[usize::from(v)].iter_mut().zip(&root) {
                    *w |= x;
                }
                queue.push(v);
            }
        }
    }
    let mut head = 0;
    while head < queue.len() {
        let u = usize::from(queue[head]);
        head += 1;
        for c in 0..stride {
            let v = trans[u * stride + c];
            let via_fail = trans[usize::from(fail[u]) * stride + c];
            if v == NONE {
                trans[u * stride + c] = via_fail;
            } else {
                let v = usize::from(v);
                fail[v] = via_fail;
                let f = own[usize::from(via_fail)];
                for (w, x) in own[v].iter_mut().zip(&f) {
                    *w |= x;
                }
                queue.push(v as u16);
            }
        }
    }
    // The root's output is in every state's (merged along the fail links); outs[0] is it.
    let mut outs: Vec<Bits> = alloc::vec![own[0]];
    let mut out = alloc::vec![NO_OUT; states];
    for (s, bits) in own.iter().enumerate() {
        if s != 0 && bits != &own[0] {
            out[s] = outs.len() as u16;
            outs.push(*bits);
        }
    }
    Some(Multi::Dfa {
        class,
        stride,
        trans: trans.into_boxed_slice(),
        out: out.into_boxed_slice(),
        outs: outs.into_boxed_slice(),
    })
}

#[cfg(test)]
mod tests;
