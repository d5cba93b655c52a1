//! Key hygiene: what a run leaves on its nodes. Every key a lock script creates gets a
//! TTL (docs/DESIGN.md §7), and no key lives longer than the protocol ever lets one: the
//! longest lease or queue entry a client asks for, plus a waiting writer's intent, plus
//! the fence margin (a fence key outlives its epoch by that much).
//!
//! Why it exists: a key left without an expiry strands its lock name for good, or leaks
//! memory for a fence or queue key, and no belief or answer shows it; nor does a TTL set
//! in the wrong unit, for a run's length.
//!
//! Every family's keys are judged alike: the read-write lock's (`:rw`, `:rw:readers`,
//! `:rw:owners`, `:rw:intents`, `:rw:fence`) and the semaphore's (`:sem`, `:sem:queue`,
//! `:sem:waiters`, `:sem:size`) share the prefix, and the lifetime already counts a
//! writer's intent and the longest permit lease or entry.
//!
//! Invariant: a key's time to live is read on its node's clock at the end of the run. A
//! key written on another node (a replica, a promoted one) or before a step back carries an
//! expiry from a clock that read further, so the bound grows by how far the furthest
//! reading of any node's clock is ahead of this node's at the end. A key with no expiry at
//! all is a problem whatever the clocks did.

use crate::world::calls;
use crate::world::history::KeyAtEnd;

use super::issuers::Nodes;
use super::problems::{Judge, ProblemKind, Reach};

/// The prefix of every key the lock scripts write, before its `:` (`lock/src/keys.rs`).
const PREFIX: &str = leasehold::KEY_PREFIX;

/// Nanoseconds per millisecond.
const NS_PER_MS: u64 = 1_000_000;

/// Keys the nodes held at `end` with no expiry, or living past [`Nodes::key_lifetime`]
/// (see the module's invariant).
pub(super) fn keys_left(nodes: &Nodes, end: u64, judge: &mut Judge<'_>) {
    let furthest = nodes
        .clocks
        .iter()
        .map(|c| c.peak_nanos(end))
        .max()
        .unwrap_or(0);
    let lifetime_ms = u64::try_from(nodes.key_lifetime.as_millis()).unwrap_or(u64::MAX);
    let ours = |k: &&KeyAtEnd| {
        k.key
            .strip_prefix(PREFIX)
            .is_some_and(|rest| rest.starts_with(':'))
    };
    for key in nodes.keys_at_end.iter().filter(ours) {
        let behind_ms = nodes.clocks.get(key.node).map_or(0, |c| {
            furthest
                .saturating_sub(c.local_nanos(end))
                .div_ceil(NS_PER_MS)
        });
        let bound_ms = lifetime_ms.saturating_add(behind_ms);
        let why = match key.ttl_ms {
            None => "has no expiry (every key a script creates gets a TTL)".to_owned(),
            Some(ttl) if u64::try_from(ttl).is_ok_and(|ttl| ttl > bound_ms) => format!(
                "lives {ttl} ms more, past the longest a key may: {lifetime_ms} ms (the longest lease or entry, a writer's intent and the fence margin){}",
                if behind_ms > 0 {
                    format!(
                        ", plus the {behind_ms} ms its node's clock is behind the furthest reading of a node's clock"
                    )
                } else {
                    String::new()
                }
            ),
            Some(_) => continue,
        };
        judge.add_explained(
            ProblemKind::KeyLeftBehind,
            calls::lock_name(&key.key),
            end,
            (&[], Reach::Windows),
            (
                format!(
                    "n{} still holds {} at the run's end: it {why}",
                    key.node, key.key
                ),
                None,
            ),
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::checker::Verdict;
    use crate::engine::clock::{ClockChange, ClockModel};

    const END: u64 = 10_000 * NS_PER_MS;
    const LIFETIME: Duration = Duration::from_secs(2);

    fn left(keys: &[(&str, Option<i64>)], clocks: Vec<ClockModel>) -> Vec<String> {
        let nodes = Nodes {
            clocks,
            keys_at_end: keys
                .iter()
                .map(|&(key, ttl_ms)| KeyAtEnd {
                    node: 0,
                    key: key.to_owned(),
                    ttl_ms,
                })
                .collect(),
            key_lifetime: LIFETIME,
            ..Nodes::default()
        };
        let mut judge = Judge::new(&[]);
        keys_left(&nodes, END, &mut judge);
        let (problems, _) = judge.finish();
        assert!(
            problems
                .iter()
                .all(|p| p.kind.verdict() == Verdict::Starvation)
        );
        problems.into_iter().map(|p| p.detail).collect()
    }

    fn clock() -> ClockModel {
        ClockModel::new(Duration::ZERO, false)
    }

    #[test]
    fn keys_with_expiries_inside_the_lifetime_are_clean() {
        let keys = [
            ("leasehold:{l}", Some(900)),
            ("leasehold:{l}:fence", Some(2_000)),
        ];
        assert_eq!(left(&keys, vec![clock()]), Vec::<String>::new());
        // Keys of other programs are not the lock's to judge.
        assert_eq!(
            left(&[("app:cache", None)], vec![clock()]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_key_without_expiry_or_past_the_lifetime_is_left_behind() {
        let found = left(
            &[
                ("leasehold:{l}:queue", None),
                ("leasehold:{l}:fence", Some(2_001)),
            ],
            vec![clock()],
        );
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("no expiry"), "{found:?}");
        assert!(found[1].contains("past the longest"), "{found:?}");
    }

    #[test]
    fn the_read_write_locks_and_the_semaphores_keys_are_judged_too() {
        // Every key of the README's "keys a lock leaves" table shares the prefix.
        let keys = [
            "leasehold:{l}:rw",
            "leasehold:{l}:rw:readers",
            "leasehold:{l}:rw:owners",
            "leasehold:{l}:rw:intents",
            "leasehold:{l}:rw:fence",
            "leasehold:{l}:sem",
            "leasehold:{l}:sem:queue",
            "leasehold:{l}:sem:waiters",
            "leasehold:{l}:sem:size",
        ];
        let live: Vec<_> = keys.iter().map(|&k| (k, Some(1_500))).collect();
        assert_eq!(left(&live, vec![clock()]), Vec::<String>::new());
        for key in keys {
            assert_eq!(left(&[(key, None)], vec![clock()]).len(), 1, "{key}");
        }
    }

    #[test]
    fn a_step_back_of_the_nodes_clock_stretches_the_bound_by_its_size() {
        let mut stepped = clock();
        // At 9.8 s it reads 9.3 s, and 9.5 s at the end: 300 ms behind its peak.
        stepped.apply(
            9_800 * NS_PER_MS,
            ClockChange::Jump(-500 * NS_PER_MS as i64),
        );
        let keys = [("leasehold:{l}:fence", Some(2_250))];
        assert_eq!(left(&keys, vec![stepped]), Vec::<String>::new());
        assert_eq!(left(&keys, vec![clock()]).len(), 1);
    }
}
