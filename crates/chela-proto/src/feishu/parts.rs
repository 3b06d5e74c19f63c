//! Multi-part data frames put back together.
//!
//! The service splits a large event over several data frames that share a `message_id`, each
//! with `sum` (how many parts) and `seq` (this part's index, from 0). The official SDKs keep the
//! parts for a few seconds and join them once every index has arrived. So does
//! [`Reassembler`], with bounds: parts per message, bytes held across all messages, messages held
//! at once (the oldest is dropped for a new one), and an age after which an unfinished message
//! is forgotten. Time is passed in as milliseconds.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// How much unfinished input a [`Reassembler`] may hold.
#[derive(Clone, Copy, Debug)]
pub struct PartLimits {
    /// Most parts one message may announce (`sum`).
    pub max_parts: usize,
    /// Bytes held across every unfinished message; also the largest joined message.
    pub max_bytes: usize,
    /// Unfinished messages held at once.
    pub max_messages: usize,
    /// Milliseconds an unfinished message is kept after its first part.
    pub ttl_ms: u64,
}

impl PartLimits {
    /// The host's bounds: the SDK's 5 s, a megabyte, a handful of messages in flight.
    pub const HOST: PartLimits = PartLimits { max_parts: 64, max_bytes: 1 << 20, max_messages: 16, ttl_ms: 5_000 };
}

/// Why a part was refused; the message it belonged to is dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartError {
    /// `sum` is over [`PartLimits::max_parts`] (or 0).
    BadSum { sum: u64, limit: usize },
    /// `seq` is not below `sum`, or `sum` changed between parts of one message.
    BadSeq { seq: u64, sum: u64 },
    /// The message would be larger than [`PartLimits::max_bytes`].
    TooLarge { limit: usize },
}

impl fmt::Display for PartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartError::BadSum { sum, limit } => {
                write!(f, "an event announced {sum} parts; between 1 and {limit} are accepted")
            }
            PartError::BadSeq { seq, sum } => write!(f, "an event part has index {seq} of {sum}"),
            PartError::TooLarge { limit } => write!(f, "an event split in parts is larger than {limit} bytes"),
        }
    }
}

impl core::error::Error for PartError {}

struct Partial {
    id: String,
    parts: Vec<Option<Vec<u8>>>,
    bytes: usize,
    first_ms: u64,
}

/// Unfinished multi-part messages. Feed every data frame's part with [`Reassembler::handle_part`].
pub struct Reassembler {
    limits: PartLimits,
    pending: Vec<Partial>,
}

impl fmt::Debug for Reassembler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reassembler").field("pending", &self.pending.len()).field("bytes", &self.held()).finish()
    }
}

impl Reassembler {
    pub fn new(limits: PartLimits) -> Reassembler {
        Reassembler { limits, pending: Vec::new() }
    }

    /// Bytes held in unfinished messages.
    pub fn held(&self) -> usize {
        self.pending.iter().map(|p| p.bytes).sum()
    }

    /// Unfinished messages held.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Takes part `seq` of `sum` of message `id`. Returns the joined payload once every part is
    /// in (at once for `sum` ≤ 1), `Ok(None)` while parts are missing. A part that arrives twice
    /// replaces the first copy.
    pub fn handle_part(
        &mut self,
        id: &str,
        sum: u64,
        seq: u64,
        payload: &[u8],
        now_ms: u64,
    ) -> Result<Option<Vec<u8>>, PartError> {
        let limits = self.limits;
        self.pending.retain(|p| now_ms.saturating_sub(p.first_ms) < limits.ttl_ms);
        if payload.len() > limits.max_bytes {
            self.forget(id);
            return Err(PartError::TooLarge { limit: limits.max_bytes });
        }
        if sum <= 1 && seq == 0 {
            return Ok(Some(payload.to_vec()));
        }
        if sum == 0 || sum > limits.max_parts as u64 {
            self.forget(id);
            return Err(PartError::BadSum { sum, limit: limits.max_parts });
        }
        if seq >= sum {
            self.forget(id);
            return Err(PartError::BadSeq { seq, sum });
        }
        let index = match self.pending.iter().position(|p| p.id == id) {
            Some(i) if self.pending[i].parts.len() as u64 != sum => {
                self.pending.remove(i);
                return Err(PartError::BadSeq { seq, sum });
            }
            Some(i) => i,
            None => {
                if self.pending.len() == limits.max_messages {
                    // The oldest is the likeliest to be abandoned.
                    self.pending.remove(0);
                }
                let parts = (0..sum).map(|_| None).collect();
                self.pending.push(Partial { id: id.into(), parts, bytes: 0, first_ms: now_ms });
                self.pending.len() - 1
            }
        };
        let old = self.pending[index].parts[seq as usize].as_ref().map_or(0, Vec::len);
        let message_bytes = self.pending[index].bytes - old + payload.len();
        if message_bytes > limits.max_bytes {
            self.pending.remove(index);
            return Err(PartError::TooLarge { limit: limits.max_bytes });
        }
        // Room for this part across all messages: drop the oldest others first.
        // This message alone fits (checked above), so the loop ends before it is the only one.
        let mut index = index;
        while self.held() - old + payload.len() > limits.max_bytes {
            let victim = usize::from(index == 0);
            self.pending.remove(victim);
            if victim < index {
                index -= 1;
            }
        }
        let entry = &mut self.pending[index];
        entry.parts[seq as usize] = Some(payload.to_vec());
        entry.bytes = message_bytes;
        if entry.parts.iter().any(Option::is_none) {
            return Ok(None);
        }
        let done = self.pending.remove(index);
        let mut joined = Vec::with_capacity(done.bytes);
        for part in done.parts.into_iter().flatten() {
            joined.extend_from_slice(&part);
        }
        Ok(Some(joined))
    }

    fn forget(&mut self, id: &str) {
        self.pending.retain(|p| p.id != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    const SMALL: PartLimits = PartLimits { max_parts: 4, max_bytes: 16, max_messages: 2, ttl_ms: 100 };

    #[test]
    fn parts_in_any_order_are_joined_in_index_order() {
        let mut r = Reassembler::new(SMALL);
        assert_eq!(r.handle_part("m", 3, 2, b"c", 0), Ok(None));
        assert_eq!(r.handle_part("m", 3, 0, b"a", 1), Ok(None));
        assert_eq!(r.handle_part("m", 3, 1, b"b", 2), Ok(Some(b"abc".to_vec())));
        assert_eq!(r.pending(), 0);
        assert_eq!(r.handle_part("single", 1, 0, b"x", 3), Ok(Some(b"x".to_vec())));
    }

    #[test]
    fn unfinished_messages_expire_and_their_bytes_go() {
        let mut r = Reassembler::new(SMALL);
        assert_eq!(r.handle_part("m", 2, 0, b"aaaa", 0), Ok(None));
        assert_eq!(r.held(), 4);
        // After the TTL the first part is gone, so the second alone does not finish it.
        assert_eq!(r.handle_part("m", 2, 1, b"b", 100), Ok(None));
        assert_eq!(r.held(), 1);
    }

    #[test]
    fn endless_messages_keep_the_bounds() {
        let mut r = Reassembler::new(SMALL);
        for i in 0..1000u64 {
            let id = alloc::format!("m{i}");
            assert_eq!(r.handle_part(&id, 4, i % 3, b"12345", 0), Ok(None));
            assert!(r.pending() <= SMALL.max_messages && r.held() <= SMALL.max_bytes);
        }
    }

    #[test]
    fn bad_sums_indices_and_sizes_are_refused() {
        let mut r = Reassembler::new(SMALL);
        assert_eq!(r.handle_part("m", 5, 0, b"", 0), Err(PartError::BadSum { sum: 5, limit: 4 }));
        assert_eq!(r.handle_part("m", 2, 2, b"", 0), Err(PartError::BadSeq { seq: 2, sum: 2 }));
        assert_eq!(r.handle_part("m", 2, 0, b"a", 0), Ok(None));
        assert_eq!(r.handle_part("m", 3, 1, b"b", 0), Err(PartError::BadSeq { seq: 1, sum: 3 }));
        assert_eq!(r.pending(), 0);
        assert_eq!(r.handle_part("m", 2, 0, &[0; 10], 0), Ok(None));
        assert_eq!(r.handle_part("m", 2, 1, &[0; 10], 0), Err(PartError::TooLarge { limit: 16 }));
        assert_eq!(r.handle_part("one", 1, 0, &[0; 17], 0), Err(PartError::TooLarge { limit: 16 }));
    }

    proptest! {
        #[test]
        fn any_split_of_a_payload_comes_back_whole(
            payload in proptest::collection::vec(any::<u8>(), 0..64),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 1..8),
            order in any::<u64>(),
        ) {
            let mut bounds: Vec<usize> = cuts.iter().map(|c| c.index(payload.len() + 1)).collect();
            bounds.push(0);
            bounds.push(payload.len());
            bounds.sort_unstable();
            let parts: Vec<&[u8]> = bounds.windows(2).map(|w| &payload[w[0]..w[1]]).collect();
            let sum = parts.len() as u64;
            let mut seqs: Vec<u64> = (0..sum).collect();
            seqs.rotate_left((order % sum) as usize);
            let mut r = Reassembler::new(PartLimits::HOST);
            let mut out = None;
            for (n, seq) in seqs.iter().enumerate() {
                let got = r.handle_part("id", sum, *seq, parts[*seq as usize], 0).unwrap();
                prop_assert_eq!(got.is_some(), n + 1 == seqs.len());
                out = out.or(got);
            }
            prop_assert_eq!(out, Some(payload));
            prop_assert_eq!(r.pending(), 0);
        }

        #[test]
        fn arbitrary_parts_stay_within_bounds(
            parts in proptest::collection::vec((0u8..6, 0u64..6, 0u64..6, 0usize..12, 0u64..50), 0..200)
        ) {
            let mut r = Reassembler::new(SMALL);
            for (id, sum, seq, len, now) in parts {
                let _ = r.handle_part(&alloc::format!("{id}"), sum, seq, &vec![1; len], now);
                prop_assert!(r.pending() <= SMALL.max_messages);
                prop_assert!(r.held() <= SMALL.max_bytes);
            }
        }
    }
}
