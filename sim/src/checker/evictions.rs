//! Evictions as causes: a key a full node evicted excuses only what befell its own lock.
//!
//! Why it exists: a node under `maxmemory` with a `volatile-*` policy deletes keys that
//! carry a TTL, and every lock key does, so the next caller is granted a lock that a live
//! holder still believes it has. That is the deployment's hazard, not a lock bug, but
//! only for the lock whose key went: an eviction elsewhere on the node explains nothing.
//!
//! Invariant: an eviction touches a problem only when one of the keys it evicted (the
//! world logs them when the fault lands) stores that lock's holds: the lock key, the
//! read-write lock's and the semaphore's hold keys. Its fence key does not (tokens come
//! from server time, not from it), nor do its queue keys, its `WAIT` marker or its size;
//! only a token that went backwards on the node that evicted its fence key, its clock
//! behind, is explained by that eviction (`issuers`).
//! The fair line is another matter: once any key of a lock went, its queue list and its
//! entries may disagree for as long as waiters keep refreshing them (a refresh puts back
//! no entry the hash still has), so its line is not judged after that (`fifo`).

use crate::world::faults::Fault;
use crate::world::history::FaultMark;

/// The rule that excuses a problem by the eviction of its lock's key.
pub const EVICTED: &str = "evicted";

/// What a lock's key ends with after `leasehold:{name}` when it stores holds.
const HOLD_KEYS: [&str; 5] = ["", ":rw", ":rw:readers", ":rw:owners", ":sem"];

/// The lock name in `lock`: a history's lock name as it is, or a key's hash tag.
fn name_of(lock: &str) -> &str {
    lock.split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map_or(lock, |(name, _)| name)
}

/// The keys of `lock` that hold its holds among those `mark` evicted (none for another
/// fault).
fn hold_keys<'a>(mark: &'a FaultMark, lock: &str) -> impl Iterator<Item = &'a String> {
    let evicted: &[String] = match &mark.fault {
        Fault::Evict { evicted, .. } => evicted,
        _ => &[],
    };
    let prefix = format!("leasehold:{{{}}}", name_of(lock));
    evicted.iter().filter(move |key| {
        key.strip_prefix(&prefix)
            .is_some_and(|rest| HOLD_KEYS.contains(&rest))
    })
}

/// The fence key of `lock` that `mark` evicted (the mutex's or the read-write lock's), and
/// when: a node without it issues tokens from its clock alone.
pub fn fence_key_taken<'a>(mark: &'a FaultMark, lock: &str) -> Option<(&'a str, u64)> {
    let Fault::Evict { evicted, .. } = &mark.fault else {
        return None;
    };
    let prefix = format!("leasehold:{{{}}}", name_of(lock));
    evicted
        .iter()
        .find(|key| {
            key.strip_prefix(&prefix)
                .is_some_and(|rest| rest == ":fence" || rest == ":rw:fence")
        })
        .map(|key| (key.as_str(), mark.from))
}

/// Whether `mark` evicted any key of `lock` (its queue's included).
pub fn took_key_of(mark: &FaultMark, lock: &str) -> bool {
    let Fault::Evict { evicted, .. } = &mark.fault else {
        return false;
    };
    let prefix = format!("leasehold:{{{}}}", name_of(lock));
    evicted.iter().any(|key| {
        key.strip_prefix(&prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
    })
}

/// Whether `mark` may have touched `lock`: any fault but an eviction, which must have
/// evicted a key holding that lock's holds.
pub fn concerns(mark: &FaultMark, lock: &str) -> bool {
    !matches!(mark.fault, Fault::Evict { .. }) || hold_keys(mark, lock).next().is_some()
}

/// The evidence of the evictions among `marks` that touched `lock`: each node, key and
/// time.
pub fn evidence(marks: &[&FaultMark], lock: &str) -> String {
    let mut said = Vec::new();
    for mark in marks {
        if let Fault::Evict { node, policy, .. } = mark.fault {
            for key in hold_keys(mark, lock) {
                let ms = mark.from / 1_000_000;
                let line = format!("n{node} evicted {key} at {ms} ms ({policy:?})");
                // A mark that touched two windows of the problem is said once.
                if !said.contains(&line) {
                    said.push(line);
                }
            }
        }
    }
    said.join("; ")
}

/// `marks` without the evictions.
pub fn others<'a>(marks: &[&'a FaultMark]) -> Vec<&'a FaultMark> {
    marks
        .iter()
        .copied()
        .filter(|m| !matches!(m.fault, Fault::Evict { .. }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::faults::EvictionPolicy;

    fn eviction(keys: &[&str]) -> FaultMark {
        FaultMark {
            fault: Fault::Evict {
                node: 0,
                policy: EvictionPolicy::VolatileTtl,
                keys: 1,
                evicted: keys.iter().map(|k| (*k).to_owned()).collect(),
            },
            proc: None,
            from: 1_500_000_000,
            until: 1_500_000_000,
        }
    }

    #[test]
    fn an_eviction_concerns_only_the_lock_whose_hold_key_went() {
        let mark = eviction(&["leasehold:{res0}"]);
        assert!(concerns(&mark, "res0"));
        assert!(concerns(&mark, "leasehold:{res0}"));
        assert!(!concerns(&mark, "res1"));
        assert!(!concerns(&eviction(&["leasehold:{res0}:fence"]), "res0"));
        assert!(!concerns(&eviction(&["leasehold:{res0}:queue"]), "res0"));
        assert!(concerns(
            &eviction(&["leasehold:{res0}:rw:readers"]),
            "res0"
        ));
    }

    #[test]
    fn the_evidence_names_node_key_and_time() {
        let mark = eviction(&["leasehold:{res1}", "leasehold:{res0}:sem"]);
        assert_eq!(
            evidence(&[&mark, &mark], "res0"),
            "n0 evicted leasehold:{res0}:sem at 1500 ms (VolatileTtl)"
        );
    }
}
