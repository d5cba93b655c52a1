//! The read-write lock and the semaphore under the faults that cost the mutex its lease
//! (docs/DESIGN.md §5 items 5 and 7): the holder cut from Redis, and the node restarting
//! empty. The real-fault table runs the same rows against containers; these are their
//! simulator cells.

use std::time::Duration;

use super::shape::{
    Expect, Scenario, family, holder_cut, long_holds, node_crash_restart, single_node_cells,
};
use crate::checker::Verdict;
use crate::scenario::run::RunSpec;
use crate::workload::{LockKind, Strategy};

/// The read-write lock's mix: 60 % of acquisitions read, as in the other `rwlock-*` rows.
const RWLOCK: LockKind = LockKind::ReadWrite { read_percent: 60 };

/// Two permits for four clients, as in the other `semaphore-*` rows.
const SEMAPHORE: LockKind = LockKind::Semaphore { permits: 2 };

/// The scenarios of this group, in table order.
pub(super) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "rwlock-partition",
        design_item: 7,
        summary: "Read-write lock, 4 clients reading 60% of the time, holds of 1-2 TTL: whoever holds at 2 s is cut from Redis for 3 s. Its renewals fail and its lost signal fires before its read or write hold ends server-side, so no conflicting hold overlaps its belief.",
        build: |s, seed| partition(s, seed, RWLOCK),
        expect: single_node_cells(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "semaphore-partition",
        design_item: 7,
        summary: "Semaphore with 2 permits, 4 clients, holds of 1-2 TTL: a holder is cut from Redis for 3 s at 2 s. Its lost signal fires before its permit leaves the permits set, so never more than two believed holders.",
        build: |s, seed| partition(s, seed, SEMAPHORE),
        expect: single_node_cells(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "rwlock-crash-restart",
        design_item: 5,
        summary: "Read-write lock, holds of 0.5-1.5 TTL: the node restarts empty 100 ms after crashing at 2 s, mid-hold. The readers set and the write hash are gone while their holders still trust them until the watchdog finds them missing, and a conflicting hold may be granted meanwhile (exclusion broken, excused by the crash). Tokens come from server time, so fencing holds.",
        build: |s, seed| crash_restart(s, seed, RWLOCK),
        expect: single_node_cells(Expect::AtWorst(Verdict::ExclusionBroken)),
    },
    Scenario {
        name: "semaphore-crash-restart",
        design_item: 5,
        summary: "Semaphore with 2 permits, holds of 0.5-1.5 TTL: the node restarts empty 100 ms after crashing at 2 s. The permits set is gone while its holders still trust their permits, so up to two more may be granted before their watchdogs notice (exclusion broken, excused by the crash).",
        build: |s, seed| crash_restart(s, seed, SEMAPHORE),
        expect: single_node_cells(Expect::AtWorst(Verdict::ExclusionBroken)),
    },
];

/// Holds of the partition scenarios: 1-2 TTL, so the holder cut off at 2 s usually still
/// holds when its lease runs out and learns of the loss from its lost signal (with the
/// mutex's 0.5-1.5 TTL most cut-off holds end first, released locally).
const PARTITION_HOLDS: (Duration, Duration) =
    (Duration::from_millis(1_000), Duration::from_millis(2_000));

/// 4 clients of `kind` holding 1-2 TTL; whoever holds at 2 s is cut off for 3 s.
fn partition(strategy: Strategy, seed: u64, kind: LockKind) -> RunSpec {
    let mut spec = family(strategy, seed, kind);
    spec.workload.hold = PARTITION_HOLDS;
    spec.faults = vec![holder_cut()];
    spec
}

/// 4 clients of `kind` with long holds; the node crashes at 2 s and restarts empty 100 ms
/// later (crash-restart-no-persistence's fault).
fn crash_restart(strategy: Strategy, seed: u64, kind: LockKind) -> RunSpec {
    let mut spec = long_holds(family(strategy, seed, kind));
    spec.faults = vec![node_crash_restart()];
    spec
}
