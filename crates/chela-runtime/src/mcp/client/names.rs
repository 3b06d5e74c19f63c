//! Tool names: MCP allows 1–128 characters of `[A-Za-z0-9_.-]` (and servers send other
//! characters anyway); the providers accept `^[a-zA-Z0-9_-]{1,64}$`. Each MCP tool gets the id
//! `mcp_<server>_<name>` with other characters mapped to `_`, shortened with a stable hash of
//! the original name when it is too long or when two names would map to the same id. The
//! caller keeps the reverse map (id → MCP name) from [`Names::insert`].

use std::collections::HashMap;

/// Longest id the providers accept.
pub const MAX_ID: usize = 64;

/// FNV-1a, 64 bits: stable across builds and platforms (std's hasher is not), so an id the
/// model saw in an earlier turn still names the same tool after a restart.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Whether `id` fits the providers' rule.
#[cfg(test)]
pub fn valid(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_ID && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The id for MCP tool `name` of server `server`, before collisions are considered.
pub fn map(server: &str, name: &str) -> String {
    map_in(&format!("mcp_{server}"), name)
}

/// The id for tool `name` in a group whose ids start with `prefix` (`mcp_time`,
/// `device_aabbccddeeff`), before collisions are considered.
pub fn map_in(prefix: &str, name: &str) -> String {
    let clean: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let id = format!("{prefix}_{clean}");
    if id.len() <= MAX_ID && !clean.is_empty() { id } else { hashed(&id, name) }
}

/// `id` cut to leave room for `_` and 8 hex digits of the hash of `original`.
fn hashed(id: &str, original: &str) -> String {
    let keep = MAX_ID - 9;
    // `id` is ASCII (mapped above), so any byte index is a char boundary.
    let head = &id[..id.len().min(keep)];
    format!("{head}_{:08x}", fnv1a(original) & 0xffff_ffff)
}

/// The ids of one server's tools and the way back to their MCP names.
#[derive(Clone, Debug, Default)]
pub struct Names {
    back: HashMap<String, String>,
}

impl Names {
    /// Adds MCP tool `name` and returns its id. A second name that maps to an id already
    /// taken gets the hashed form; the same name twice gets the same id.
    pub fn insert(&mut self, server: &str, name: &str) -> String {
        self.insert_in(&format!("mcp_{server}"), name)
    }

    /// [`Names::insert`] for a group whose ids start with `prefix` (see [`map_in`]).
    pub fn insert_in(&mut self, prefix: &str, name: &str) -> String {
        let mut id = map_in(prefix, name);
        if self.back.get(&id).is_some_and(|n| n != name) {
            id = hashed(&id, name);
        }
        // A hash collision on top of a mapping collision: extremely unlikely, but an id must
        // never name two tools, so add a counter.
        let mut n = 2u32;
        let base = id.clone();
        while self.back.get(&id).is_some_and(|other| other != name) {
            let suffix = format!("_{n}");
            id = format!("{}{suffix}", &base[..base.len().min(MAX_ID - suffix.len())]);
            n += 1;
        }
        self.back.insert(id.clone(), name.to_owned());
        id
    }

    /// Forgets every id not in `ids`, so a peer whose tools keep changing does not grow the map;
    /// the tools kept keep their ids.
    pub fn keep_only(&mut self, ids: &std::collections::HashSet<&str>) {
        self.back.retain(|id, _| ids.contains(id.as_str()));
    }

    /// How many ids are known (for tests).
    #[cfg(test)]
    pub fn known(&self) -> usize {
        self.back.len()
    }

    /// The MCP name behind `id`.
    #[cfg(test)]
    pub fn original(&self, id: &str) -> Option<&str> {
        self.back.get(id).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn plain_names_read_as_they_are() {
        assert_eq!(map("time", "get_current_time"), "mcp_time_get_current_time");
        assert_eq!(map("dev", "self.audio_speaker.set_volume"), "mcp_dev_self_audio_speaker_set_volume");
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let long = "a".repeat(100);
        let id = map("s", &long);
        assert_eq!(id.len(), MAX_ID);
        assert!(valid(&id));
        // Fixed value: the hash must not change between builds.
        assert_eq!(&id[MAX_ID - 9..], format!("_{:08x}", fnv1a(&long) & 0xffff_ffff));
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn colliding_names_get_distinct_ids_and_map_back() {
        let mut n = Names::default();
        let a = n.insert("s", "a.b");
        let b = n.insert("s", "a_b");
        assert_ne!(a, b);
        assert_eq!(n.original(&a), Some("a.b"));
        assert_eq!(n.original(&b), Some("a_b"));
        assert_eq!(n.insert("s", "a.b"), a, "the same name keeps its id");
    }

    proptest! {
        #[test]
        fn every_id_is_valid_and_maps_back(names in proptest::collection::vec("[a-zA-Z0-9_.\\-é ]{0,140}", 1..20)) {
            let mut n = Names::default();
            let mut ids = HashMap::new();
            for name in &names {
                let id = n.insert("srv", name);
                prop_assert!(valid(&id), "{id}");
                prop_assert_eq!(n.original(&id), Some(name.as_str()));
                if let Some(prev) = ids.insert(id.clone(), name.clone()) {
                    prop_assert_eq!(&prev, name, "one id for two names");
                }
            }
        }
    }
}
