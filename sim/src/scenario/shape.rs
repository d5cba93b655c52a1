//! The vocabulary and common shapes of the named scenarios: what a scenario is, what it
//! expects per strategy, and the run every scenario starts from (3 clients on one lock,
//! 1 s leases, 12 virtual seconds) with the fault helpers several of them share.
//!
//! Invariant: an expectation is either a verdict argued from the algorithm (and checked by
//! a test over several seeds) or explicitly `Pending` with the reason, never a guess
//! filled in to make a table look complete.

use std::time::Duration;

use serde::Serialize;

use crate::checker::{CheckConfig, Verdict};
use crate::scenario::run::{Deployment, REDLOCK_MASTERS, RunSpec};
use crate::workload::{LockKind, Strategy, Workload};
use crate::world::faults::{Fault, ProcSel, ScheduledFault};
use crate::world::net::NetConfig;

/// What a scenario should produce for one strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Expect {
    /// The worst verdict over the scenario's seeds is exactly this (the scenario is built
    /// to provoke it; where it is a race, the summary says so).
    Exactly(Verdict),
    /// The worst verdict over the seeds is at most this (whether the fault bites depends
    /// on timing; what is promised is the bound).
    AtWorst(Verdict),
    /// Not runnable yet, with the reason.
    Pending(&'static str),
}

/// A named scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// CLI and table name.
    pub name: &'static str,
    /// docs/DESIGN.md §5 item it covers; 0 for the lock's own invariants (re-entry), which
    /// the catalogue of faults does not list.
    pub design_item: u8,
    /// What it does and why the expectation holds.
    pub summary: &'static str,
    pub(super) build: fn(Strategy, u64) -> RunSpec,
    /// Expectation per strategy, in [`Strategy::ALL`] order.
    pub(super) expect: [Expect; 4],
}

impl Scenario {
    /// The expectation for `strategy`.
    pub fn expect(&self, strategy: Strategy) -> Expect {
        let index = Strategy::ALL
            .iter()
            .position(|s| *s == strategy)
            .unwrap_or(0);
        self.expect[index]
    }

    /// The run for `strategy` and `seed`.
    pub fn spec(&self, strategy: Strategy, seed: u64) -> RunSpec {
        (self.build)(strategy, seed)
    }
}

/// Seeds each scenario cell runs by default.
pub const DEFAULT_SEEDS: u64 = 8;

/// Lease TTL of the scenarios: short so a run of a few virtual seconds sees many expiries.
pub(super) const TTL: Duration = Duration::from_secs(1);

/// Longest a waiter may see the lock free: a lease TTL (orphaned lock) plus, for the fair
/// queue, one dead waiter's entry timeout, plus a second of retry and scheduling slack.
/// RedLock waiters retry after a random pause of up to the retry delay instead.
pub fn liveness_bound(strategy: Strategy, ttl: Duration) -> Duration {
    let extra = match strategy {
        Strategy::FairQueue => leasehold::DEFAULT_QUEUE_ENTRY_TIMEOUT,
        Strategy::RedLock => leasehold::DEFAULT_RETRY_DELAY,
        Strategy::Spin | Strategy::PubSub => Duration::ZERO,
    };
    ttl + extra + Duration::from_secs(1)
}

/// `spec` with its clients taking `kind`, and the liveness bound that kind needs: a
/// waiting writer of a read-write lock keeps new readers out for its intent timeout, so a
/// writer that dies waiting holds them off that much longer.
pub fn with_kind(mut spec: RunSpec, kind: LockKind) -> RunSpec {
    spec.workload.kind = kind;
    spec.check.liveness_bound = kind_bound(spec.workload.strategy, spec.workload.ttl, kind);
    spec
}

/// [`liveness_bound`] for clients taking `kind`: a waiting writer of a read-write lock
/// keeps new readers out for its intent timeout on top.
pub fn kind_bound(strategy: Strategy, ttl: Duration, kind: LockKind) -> Duration {
    liveness_bound(strategy, ttl)
        + match kind {
            LockKind::ReadWrite { .. } => leasehold::DEFAULT_WRITER_INTENT_TIMEOUT,
            LockKind::Mutex | LockKind::Semaphore { .. } => Duration::ZERO,
        }
}

/// The common shape: 3 clients contending for one lock on one node (RedLock: on
/// [`REDLOCK_MASTERS`] masters) for 12 virtual seconds.
pub fn base(strategy: Strategy, seed: u64) -> RunSpec {
    RunSpec {
        seed,
        clients: 3,
        workload: Workload {
            ttl: TTL,
            ..Workload::contended(strategy)
        },
        deployment: Deployment::for_strategy(strategy),
        net: NetConfig::default(),
        faults: Vec::new(),
        horizon: Duration::from_secs(12),
        check: CheckConfig {
            liveness_bound: liveness_bound(strategy, TTL),
            lease_ttl: TTL,
            shared_owner: false,
            fair_entry_timeout: None,
            writer_intent: None,
            permit_wake: None,
            unfenced: false,
        },
        trace: false,
        design_file: None,
    }
}

pub(super) fn at(at_ms: u64, fault: Fault) -> ScheduledFault {
    ScheduledFault { at_ms, fault }
}

/// Holds longer than the TTL, so the watchdog (or its failure) matters.
pub(super) fn long_holds(mut spec: RunSpec) -> RunSpec {
    spec.workload.hold = (Duration::from_millis(500), Duration::from_millis(1_500));
    spec
}

/// RedLock only: the last two masters are down (and come back empty) for the
/// `BARE_QUORUM_WINDOW` before `until_ms`, so whoever holds the lock at `until_ms` holds it
/// on exactly masters 0, 1 and 2 — Kleppmann's setting, where the first client reaches only
/// A, B and C. On its own this is safe (the returning masters are 2 votes, not a quorum);
/// a scenario's fault on master 0 at `until_ms` then decides whether a second quorum
/// {0, 3, 4} forms. Single-node strategies are left alone.
pub(super) fn bare_quorum(mut spec: RunSpec, until_ms: u64) -> RunSpec {
    if spec.workload.strategy == Strategy::RedLock {
        let from = until_ms.saturating_sub(BARE_QUORUM_WINDOW_MS);
        for node in REDLOCK_MASTERS - 2..REDLOCK_MASTERS {
            spec.faults.push(at(
                from,
                Fault::NodeCrash {
                    node,
                    restart_after_ms: Some(until_ms - from),
                },
            ));
        }
        spec.faults.sort_by_key(|f| f.at_ms);
    }
    spec
}

/// Longer than the longest hold of [`long_holds`], so the holder at the end of the window
/// was granted inside it (or lost masters 3 and 4 when they crashed).
const BARE_QUORUM_WINDOW_MS: u64 = 1_500;

/// The same expectation for every strategy.
pub(super) const fn all(expect: Expect) -> [Expect; 4] {
    [expect; 4]
}

/// The read-write lock's and the semaphore's cells: `expect` for the single-node
/// strategies; RedLock is a mutex.
pub(super) const fn single_node_cells(expect: Expect) -> [Expect; 4] {
    [
        expect,
        expect,
        expect,
        Expect::Pending("RedLock is a mutex"),
    ]
}

/// Whoever holds the lock at 2 s stops for 3 s (a stop-the-world pause past the TTL).
pub(super) fn holder_pause() -> ScheduledFault {
    at(
        2_000,
        Fault::Pause {
            who: ProcSel::Holder,
            ms: 3_000,
        },
    )
}

/// Whoever holds the lock at 2 s is cut from Redis for 3 s (longer than the TTL).
pub(super) fn holder_cut() -> ScheduledFault {
    at(
        2_000,
        Fault::Isolate {
            who: ProcSel::Holder,
            ms: 3_000,
        },
    )
}

/// Node n0 crashes at 2 s, mid-hold, and restarts 100 ms later (empty unless it persists).
pub(super) fn node_crash_restart() -> ScheduledFault {
    at(
        2_000,
        Fault::NodeCrash {
            node: 0,
            restart_after_ms: Some(100),
        },
    )
}

/// 4 clients of `kind` (a read-write lock or a semaphore) in the common shape.
pub(super) fn family(strategy: Strategy, seed: u64, kind: LockKind) -> RunSpec {
    let mut spec = with_kind(base(strategy, seed), kind);
    spec.clients = 4;
    spec
}

/// One expectation for the single-node strategies, another for RedLock.
pub(super) const fn single_and_redlock(single: Expect, redlock: Expect) -> [Expect; 4] {
    [single, single, single, redlock]
}

impl Expect {
    /// Whether `worst` (the worst verdict over the seeds) meets the expectation.
    pub fn met_by(self, worst: Verdict) -> bool {
        match self {
            Self::Exactly(v) => worst == v,
            Self::AtWorst(v) => worst <= v,
            Self::Pending(_) => true,
        }
    }
}

impl std::fmt::Display for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exactly(v) => write!(f, "= {v}"),
            Self::AtWorst(v) => write!(f, "<= {v}"),
            Self::Pending(why) => write!(f, "pending ({why})"),
        }
    }
}
