//! The swarm's draw of the lock operations beside plain `lock()`: `try_*` attempts and
//! cancelled acquires, each in a small share of runs. (Re-entry and `WAIT` are not drawn
//! yet: under random faults they show findings still to be triaged.)
//!
//! Invariant: the draws come after every other draw of a swarm spec, so adding them
//! changed no earlier choice, and every lock kind and strategy supports both options.

use std::time::Duration;

use crate::rng::SimRng;
use crate::run::RunSpec;
use crate::workload::Cancel;

/// Share of runs whose clients make some acquires with `try_*`.
const TRY_CHANCE: f64 = 0.1;

/// Share of runs whose clients cancel some acquires mid-flight.
const CANCEL_CHANCE: f64 = 0.1;

/// Longest a cancelled acquire runs before it is dropped, ms: from before its first
/// reply to well into a wait for a held lock (the swarm's leases are 1 s).
const CANCEL_WITHIN_MS: u64 = 600;

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
}
