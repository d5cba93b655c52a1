//! The swarm's draw of the lock operations beside plain `lock()`: `try_*` attempts,
//! cancelled acquires and `WAIT` for replicas, each in a small share of runs. (Re-entry
//! is not drawn yet: under random faults it shows findings still to be triaged.)
//!
//! Invariant: the draws come after every other draw of a swarm spec, so adding them
//! changed no earlier choice, and each option is drawn only where the library supports it
//! (`WAIT` on the single-node mutex of a replicated deployment).

use std::time::Duration;

use crate::rng::SimRng;
use crate::run::RunSpec;
use crate::workload::{Cancel, LockKind, Strategy, WaitReplicas};

/// Share of runs whose clients make some acquires with `try_*`.
const TRY_CHANCE: f64 = 0.1;

/// Share of runs whose clients cancel some acquires mid-flight.
const CANCEL_CHANCE: f64 = 0.1;

/// Longest a cancelled acquire runs before it is dropped, ms: from before its first
/// reply to well into a wait for a held lock (the swarm's leases are 1 s).
const CANCEL_WITHIN_MS: u64 = 600;

/// Share of replicated single-node mutex runs that `WAIT` for a replica after each grant.
const WAIT_CHANCE: f64 = 0.4;

/// Longest `WAIT` blocks, ms (the replication lag the swarm draws runs up to 500 ms).
const WAIT_TIMEOUT_MS: u64 = 200;

/// Draws the operation options of `spec`'s workload.
pub fn draw(rng: &mut SimRng, spec: &mut RunSpec) {
    let work = &mut spec.workload;
    if rng.chance(TRY_CHANCE) {
        work.try_percent = rng.between(10, 100) as u8;
    }
    if rng.chance(CANCEL_CHANCE) {
        work.cancel = Some(Cancel {
            percent: rng.between(10, 50) as u8,
            within: Duration::from_millis(rng.between(1, CANCEL_WITHIN_MS)),
        });
    }
    let single_mutex = work.kind == LockKind::Mutex && work.strategy != Strategy::RedLock;
    if single_mutex && !spec.deployment.groups.is_empty() && rng.chance(WAIT_CHANCE) {
        work.wait_replicas = Some(WaitReplicas {
            replicas: 1,
            timeout: Duration::from_millis(rng.between(1, WAIT_TIMEOUT_MS)),
        });
    }
}
