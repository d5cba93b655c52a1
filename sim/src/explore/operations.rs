//! The swarm's draw of the lock operations beside plain `lock()`: `try_*` attempts,
//! cancelled acquires, re-entry (nested one to three deep, the innermost hold kept a while
//! in half those runs, or sibling holds of one owner), `WAIT` after each grant, and a
//! semaphore's sizes (permit counts mixed across clients, resizes while permits are
//! held), a read-write lock's upgrades and downgrades, RedLock's default waits with
//! deadlines, the mutex's scoped work (`run()`), each in a small share of runs.
//!
//! Invariant: each new draw comes after the older ones (those of `draw_last` after every
//! other draw of a swarm spec), so adding one changed no earlier choice; every lock kind and strategy
//! supports `try_*` and cancellation, while re-entry and `WAIT` are drawn only where the
//! library offers them (re-entry: the single-node mutex and the read-write lock; `WAIT`:
//! the single-node mutex on a deployment with replicas).

use std::time::Duration;

use crate::engine::rng::SimRng;
use crate::explore::params::Scale;
use crate::scenario::run::RunSpec;
use crate::workload::{
    Cancel, Deadlines, LockKind, Reentry, SemaphoreSizes, Strategy, WaitReplicas,
};

/// Share of runs whose clients make some acquires with `try_*`.
const TRY_CHANCE: f64 = 0.1;

/// Share of runs whose clients cancel some acquires mid-flight.
const CANCEL_CHANCE: f64 = 0.1;

/// Share of single-node mutex and read-write lock runs whose clients re-enter the locks
/// they take.
const REENTRY_CHANCE: f64 = 0.15;

/// Share of nested re-entry runs whose innermost hold is kept a while before its release.
const INNER_WORK_CHANCE: f64 = 0.5;

/// Longest an innermost hold is kept, ms, for 1 s leases (scaled by the run's TTL, as
/// `params::Scale` does): past the shortest inner lease drawn (a tenth of the outer one),
/// so an inner lease may run out while it is kept, and about as long as a short hold.
const INNER_WORK_MS: u64 = 500;

/// Most holds a nested re-entry takes, each inside the last: two levels already make an
/// inner hold's release leave another inner hold behind it, three a count that goes up
/// and down more than once.
const MAX_REENTRY_DEPTH: u64 = 3;

/// Share of single-node mutex runs on a deployment with replicas whose grants `WAIT`.
const WAIT_CHANCE: f64 = 0.5;

/// Longest a `WAIT` blocks, ms: from less than the replication lag of most runs to past
/// the longest (the swarm's lag is at most 500 ms).
const WAIT_TIMEOUT_MS: u64 = 600;

/// Longest a cancelled acquire runs before it is dropped, ms, for 1 s leases (scaled by
/// the run's TTL, as `params::Scale` does): from before its first reply to well into a
/// wait for a held lock.
const CANCEL_WITHIN_MS: u64 = 600;

/// Share of semaphore runs whose clients ask for different numbers of permits.
const MIXED_PERMITS_CHANCE: f64 = 0.4;

/// Share of semaphore runs whose holders resize the semaphore while holding a permit.
const RESIZE_CHANCE: f64 = 0.4;

/// Share of read-write re-entry runs whose readers try to upgrade.
const UPGRADE_CHANCE: f64 = 0.8;

/// Share of read-write runs whose writers downgrade some of their holds.
const DOWNGRADE_CHANCE: f64 = 0.2;

/// Share of read-write runs without re-entry whose readers try to upgrade (as their
/// process's one owner, with no other re-entry).
const UPGRADE_ALONE_CHANCE: f64 = 0.2;

/// Share of RedLock runs that wait as the library does by default, some acquires with a
/// deadline.
const DEADLINES_CHANCE: f64 = 0.3;

/// Longest deadline drawn, in leases.
const DEADLINE_LEASES: u64 = 3;

/// Share of single-node mutex runs some of whose acquires are scoped work.
const RUN_CHANCE: f64 = 0.15;

/// Most distinct permit counts the clients of a mixed run ask for.
const MAX_PERMITS_SPREAD: u64 = 3;

/// Draws the operation options of `spec`'s workload.
pub fn draw(rng: &mut SimRng, spec: &mut RunSpec) {
    let work = &mut spec.workload;
    if rng.chance(TRY_CHANCE) {
        work.try_percent = rng.between(10, 100) as u8;
    }
    if rng.chance(CANCEL_CHANCE) {
        work.cancel = Some(Cancel {
            percent: rng.between(10, 50) as u8,
            within: Scale::of(work.ttl)
                .of_duration(Duration::from_millis(rng.between(1, CANCEL_WITHIN_MS))),
        });
    }
    let single_mutex = work.kind == LockKind::Mutex && work.strategy != Strategy::RedLock;
    let rwlock = matches!(work.kind, LockKind::ReadWrite { .. });
    if (single_mutex || rwlock) && rng.chance(REENTRY_CHANCE) {
        // The inner or sibling hold's TTL, from a tenth of the outer one's to twice it:
        // shorter inner leases are where a script that let the last hold set the key's
        // TTL would show, longer ones where a hold would outlive its siblings. A
        // read-write lock's holds re-enter nested only (a sibling acquired beside a read
        // could be a write, which an owner holding only reads may not take).
        let ttl = work.ttl.mul_f64(rng.between(1, 20) as f64 / 10.0);
        work.reentry = Some(if rwlock || rng.chance(0.5) {
            Reentry::Nested {
                ttl,
                work: Duration::ZERO,
            }
        } else {
            Reentry::Sibling { ttl }
        });
    }
    let replicas = spec
        .deployment
        .nodes
        .iter()
        .filter(|n| n.replica_of.is_some())
        .count();
    if single_mutex && replicas > 0 && rng.chance(WAIT_CHANCE) {
        work.wait_replicas = Some(WaitReplicas {
            replicas: rng.between(1, replicas as u64) as u32,
            timeout: Duration::from_millis(rng.between(1, WAIT_TIMEOUT_MS)),
        });
    }
    // Drawn last, after the re-entry they shape, so no earlier draw moved.
    let work = &mut spec.workload;
    if let Some(Reentry::Nested { ttl, .. }) = work.reentry {
        work.reentry_depth = rng.between(1, MAX_REENTRY_DEPTH) as u8;
        let inner_work = if rng.chance(INNER_WORK_CHANCE) {
            Scale::of(work.ttl).of_duration(Duration::from_millis(rng.between(1, INNER_WORK_MS)))
        } else {
            Duration::ZERO
        };
        work.reentry = Some(Reentry::Nested {
            ttl,
            work: inner_work,
        });
    }
    // Drawn after the re-entry (and only in read-write re-entry runs), so no earlier draw
    // moved.
    if matches!(work.kind, LockKind::ReadWrite { .. })
        && matches!(work.reentry, Some(Reentry::Nested { .. }))
        && rng.chance(UPGRADE_CHANCE)
    {
        work.upgrade_percent = rng.between(10, 50) as u8;
    }
    // Drawn after everything above (and only in semaphore runs), so no earlier draw moved.
    if matches!(work.kind, LockKind::Semaphore { .. }) {
        let spread = if rng.chance(MIXED_PERMITS_CHANCE) {
            rng.between(2, MAX_PERMITS_SPREAD) as u32
        } else {
            1
        };
        let resize_percent = if rng.chance(RESIZE_CHANCE) {
            rng.between(10, 50) as u8
        } else {
            0
        };
        if spread > 1 || resize_percent > 0 {
            work.sizes = Some(SemaphoreSizes {
                spread,
                resize_percent,
            });
        }
    }
}

/// Draws the API paths added after every other draw of a swarm spec (so no earlier choice
/// moved): a read-write run's changes of access, a RedLock run's waits as the library
/// makes them by default, some with deadlines, and a mutex run's scoped work.
pub fn draw_last(rng: &mut SimRng, spec: &mut RunSpec) {
    access_changes(rng, spec);
    redlock_deadlines(rng, spec);
    scoped_work(rng, spec);
}

/// A single-node mutex run some of whose acquires are scoped work (`Mutex::run`).
fn scoped_work(rng: &mut SimRng, spec: &mut RunSpec) {
    let work = &mut spec.workload;
    if work.kind == LockKind::Mutex && work.strategy != Strategy::RedLock && rng.chance(RUN_CHANCE)
    {
        work.run_percent = rng.between(20, 80) as u8;
    }
}

/// A RedLock run waiting as the library does by default (no acquire timeout: until
/// acquired, however many attempts that takes), some acquires with a deadline of their
/// own (`lock_within`) from well inside one attempt to a few leases.
fn redlock_deadlines(rng: &mut SimRng, spec: &mut RunSpec) {
    let work = &mut spec.workload;
    if work.strategy != Strategy::RedLock || !rng.chance(DEADLINES_CHANCE) {
        return;
    }
    work.acquire_timeout = None;
    let longest_ms = rng.log_between(1, DEADLINE_LEASES * work.ttl.as_millis() as u64);
    work.deadlines = Some(Deadlines {
        percent: rng.between(20, 80) as u8,
        longest: Duration::from_millis(longest_ms),
    });
}

/// A read-write run's changes of access through the public API: downgrades of write
/// holds, and, in a run without re-entry, upgrade attempts alone (the upgrade of a
/// re-entry run is drawn with its re-entry, in [`draw`]).
fn access_changes(rng: &mut SimRng, spec: &mut RunSpec) {
    let work = &mut spec.workload;
    if !matches!(work.kind, LockKind::ReadWrite { .. }) {
        return;
    }
    if rng.chance(DOWNGRADE_CHANCE) {
        work.downgrade_percent = rng.between(10, 50) as u8;
    }
    if work.reentry.is_none() && rng.chance(UPGRADE_ALONE_CHANCE) {
        // A re-entry of depth 0: the holds share their process's owner, so a reader may
        // ask to write as that owner, and nothing else re-enters.
        work.reentry = Some(Reentry::Nested {
            ttl: work.ttl,
            work: Duration::ZERO,
        });
        work.reentry_depth = 0;
        work.upgrade_percent = rng.between(10, 50) as u8;
    }
}
