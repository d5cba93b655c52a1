//! How a safety worker uses its lock (client library, lock kind, lease, watchdog, hold and
//! think times, a planned pause, its seed) and where its Redis is: the plain description a
//! worker is built from, in process or sent to a worker process as JSON.
//!
//! A description with no behaviour, so both the lock kinds (`held`) and the lock loop
//! (`worker`) sit above it.

use std::time::Duration;

use leasehold_sim::workload::LockKind;
use serde::{Deserialize, Serialize};

use crate::safety::subject::Subject;

/// Where a worker's Redis lives.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RedisTarget {
    /// One node (possibly through a [`Link`](crate::safety::link::Link)).
    Single(String),
    /// A Sentinel-monitored master: Sentinel URLs and the service name.
    Sentinel(Vec<String>, String),
    /// Independent masters (RedLock), one URL each.
    Masters(Vec<String>),
}

/// How a worker uses its lock.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Behaviour {
    /// The client library and strategy.
    pub subject: Subject,
    /// The member of the lock family.
    pub kind: LockKind,
    /// Lease TTL.
    pub ttl: Duration,
    /// Whether the watchdog renews the lease.
    pub watchdog: bool,
    /// Hold time range (uniform).
    pub hold: (Duration, Duration),
    /// Pause between operations (uniform).
    pub think: (Duration, Duration),
    /// Deadline of each `lock()`.
    pub acquire_timeout: Duration,
    /// Holder-pause and holder-freeze: on the first hold that starts after `after` (the
    /// worker's run time), freeze for `pause` as the plan says.
    pub pause: Option<PausePlan>,
    /// Whether each mutex acquire `WAIT`s for a replica (`failover-lost-grant-wait`).
    pub wait_replicas: bool,
    /// FairQueue's queue entry timeout (`None`: the library's default).
    pub queue_entry: Option<Duration>,
    /// Seed of the worker's hold, think and read/write draws.
    pub seed: u64,
}

/// When and how long a worker's process "freezes" while holding.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct PausePlan {
    /// Run time from which the next hold is paused.
    pub after: Duration,
    /// Length of the freeze.
    pub pause: Duration,
    /// What freezes.
    pub how: Freeze,
}

/// What a planned pause freezes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Freeze {
    /// The worker's task sleeps through the pause without looking at `lost()`, then writes
    /// and releases (a GC pause; the worker's watchdog is off for the run, as a frozen
    /// process's would be starved).
    Task,
    /// The worker stops its own OS process (SIGSTOP) on its way to a write, and the injector
    /// continues it after the pause; it makes that write at once, then the hold goes on as
    /// it would have, every timer of the client having frozen with it. Only for a worker in
    /// its own process.
    Process,
}
