//! Memory eviction under `maxmemory` with a `volatile-*` policy: which keys a full node
//! deletes.
//!
//! Why it exists: every lock key carries a TTL, so a node whose memory is full under any
//! `volatile-*` policy picks lock keys as victims, a live lease's among them, and grants
//! the lock again to the next caller. Only `noeviction` is safe (README, "The keys a lock
//! leaves").
//!
//! Invariant: only live keys with a TTL are candidates (a `volatile-*` policy never touches
//! a key without one, nor one already expired), and the choice is a pure function of the
//! keyspace, the node's clock and the picks given, so a run replays.

use serde::{Deserialize, Serialize};

use super::keyspace::Keyspace;

/// A `maxmemory-policy` that evicts only keys with a TTL (the `volatile-*` family).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EvictionPolicy {
    /// `volatile-ttl`: the key nearest its expiry first (a live lease's key before its
    /// fence key, whose TTL is longer by the fence margin).
    VolatileTtl,
    /// `volatile-random`, and what `volatile-lru`/`volatile-lfu` amount to for a lock (how
    /// recently a key was used says nothing of whether it is held): any key with a TTL.
    VolatileRandom,
}

/// Up to `count` live keys with a TTL in `ks` at `now_ms` (the node's clock) that `policy`
/// evicts, in eviction order; `pick(n)` chooses one of `n` candidates for
/// [`EvictionPolicy::VolatileRandom`].
pub fn victims(
    ks: &Keyspace,
    policy: EvictionPolicy,
    count: u32,
    now_ms: i64,
    mut pick: impl FnMut(usize) -> usize,
) -> Vec<Vec<u8>> {
    let mut candidates: Vec<(i64, &Vec<u8>)> = ks
        .iter()
        .filter_map(|(key, entry)| entry.expires_at.map(|at| (at, key)))
        .filter(|(at, _)| now_ms <= *at)
        .collect();
    // Ties go by key, as the keyspace orders them.
    candidates.sort();
    let mut chosen = Vec::new();
    while chosen.len() < count as usize && !candidates.is_empty() {
        let index = match policy {
            EvictionPolicy::VolatileTtl => 0,
            EvictionPolicy::VolatileRandom => pick(candidates.len()).min(candidates.len() - 1),
        };
        chosen.push(candidates.remove(index).1.clone());
    }
    chosen
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::model::keyspace::{Data, Entry};

    fn keyspace() -> Keyspace {
        let mut ks = Keyspace::new();
        let mut put = |key: &str, expires_at: Option<i64>| {
            let data = Data::Str(b"x".to_vec());
            ks.insert(key.as_bytes().to_vec(), Entry { data, expires_at });
        };
        put("leasehold:{a}", Some(2_000));
        put("leasehold:{a}:fence", Some(62_000));
        put("leasehold:{b}", Some(500));
        put("persistent", None);
        ks
    }

    #[test]
    fn volatile_ttl_evicts_the_live_key_nearest_its_expiry_first() {
        let order = victims(&keyspace(), EvictionPolicy::VolatileTtl, 5, 1_000, |_| 0);
        // `{b}` expired at 500: not a candidate; `persistent` has no TTL.
        assert_eq!(
            order,
            vec![b"leasehold:{a}".to_vec(), b"leasehold:{a}:fence".to_vec()]
        );
    }

    #[test]
    fn volatile_random_picks_among_keys_with_a_ttl_only() {
        let got = victims(&keyspace(), EvictionPolicy::VolatileRandom, 1, 0, |n| n - 1);
        assert_eq!(got, vec![b"leasehold:{a}:fence".to_vec()]);
        let all = victims(&keyspace(), EvictionPolicy::VolatileRandom, 9, 0, |_| 0);
        assert_eq!(all.len(), 3);
        assert!(!all.contains(&b"persistent".to_vec()));
    }
}
