//! The swarm's draw of the lock's own parameters: the family member (a read-write lock's read
//! share, a semaphore's permits), the lease TTL, RedLock's master count,
//! FairQueue's entry timeout, the fence margin, each node's persistence and the acquire
//! timeout, and the shrinker's way back to the plain ones.
//!
//! Why it exists: with every lease 1 s long on 5 masters, a 5 s entry timeout and a 60 s
//! fence margin, exploration never meets a lease shorter than a round trip, an even
//! quorum, a fence key that expires mid-run or a node that keeps its keys across a
//! restart. Users run all of these.
//!
//! Invariant: the TTL is drawn first, and the run's other times (its horizon, holds,
//! think times, fault times and lengths) are drawn in lease units through [`Scale`], so a
//! 20 ms lease meets its faults about as often, per lease, as a 1 s one. Network delays
//! and the library's own timeouts are not scaled: a lease of a few round trips is a
//! setting users choose, and the protocol must stay safe in it.

use std::time::Duration;

use serde::Serialize;

use crate::engine::rng::SimRng;
use crate::model::node::{Persistence, ServerClock};
use crate::scenario::kind_bound;
use crate::scenario::run::{Deployment, RunSpec};
use crate::workload::{LockKind, Strategy};
use crate::world::faults::Fault;

/// Shortest and longest lease drawn, ms (log-uniform between).
pub const TTL_RANGE_MS: (u64, u64) = (20, 30_000);

/// Fewest and most RedLock masters drawn (uniform, odd and even).
pub const MASTERS_RANGE: (u64, u64) = (3, 7);

/// Shortest and longest FairQueue entry timeout drawn, ms (log-uniform).
pub const ENTRY_TIMEOUT_RANGE_MS: (u64, u64) = (50, 10_000);

/// Shortest and longest fence margin drawn, ms (log-uniform): from far less than one
/// run's horizon, so fence keys expire mid-run, to the library's default.
pub const FENCE_MARGIN_RANGE_MS: (u64, u64) = (50, 60_000);

/// Percent of a read-write lock's acquisitions that read, fewest and most (uniform): from
/// a lock only ever written through the read-write scripts to one read nine times in ten,
/// where a writer must still get past a stream of readers.
pub const READ_PERCENT_RANGE: (u64, u64) = (0, 90);

/// Fewest and most semaphore permits (uniform): one (a mutex through the semaphore's
/// scripts) to five, as many as most runs' clients, so some runs never wait for a permit
/// and others queue for the last one.
pub const PERMITS_RANGE: (u64, u64) = (1, 5);

/// Share of runs whose TTL is drawn; the rest keep the scenarios' 1 s.
const TTL_CHANCE: f64 = 0.5;

/// Share of FairQueue runs whose entry timeout is drawn; the rest keep the default.
const ENTRY_TIMEOUT_CHANCE: f64 = 0.5;

/// Share of runs whose fence margin is drawn; the rest keep the default.
const FENCE_MARGIN_CHANCE: f64 = 0.5;

/// Share of runs whose nodes persist (AOF everysec or always, half each).
const PERSIST_CHANCE: f64 = 0.3;

/// The factor a run's times are drawn in: its TTL in seconds, kept between a tenth and
/// four, so a run of 20 ms leases still lasts a few virtual seconds and one of 30 s
/// leases at most a few minutes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale(f64);

impl Scale {
    /// The scale of a run whose leases are `ttl` long.
    pub fn of(ttl: Duration) -> Self {
        Self(ttl.as_secs_f64().clamp(0.1, 4.0))
    }

    /// `base_ms` (a time drawn for 1 s leases) at this scale, at least 1 ms.
    pub fn ms(self, base_ms: u64) -> u64 {
        ((base_ms as f64 * self.0).round() as u64).max(1)
    }

    /// `base` at this scale.
    pub fn of_duration(self, base: Duration) -> Duration {
        base.mul_f64(self.0)
    }
}

/// What a run drew, for reports: its parameters and the kinds of fault it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drawn {
    /// Lease TTL, ms.
    pub ttl_ms: u64,
    /// Independent masters (RedLock), 1 otherwise.
    pub masters: usize,
    /// FairQueue's entry timeout, ms, where drawn.
    pub entry_timeout_ms: Option<u64>,
    /// Fence margin, ms, where drawn.
    pub fence_margin_ms: Option<u64>,
    /// Persistence of the run's nodes.
    pub persistence: &'static str,
    /// How the run's servers read the clock in a script: `frozen` (Redis 7.2 and later,
    /// Valkey) or `moving` (Redis 7.0 and 7.1).
    pub server_clock: &'static str,
    /// Clients.
    pub clients: usize,
    /// The lock family member: `mutex`, `rwlock` or `semaphore`.
    pub kind: &'static str,
    /// The read-write lock's percent of reads, where it is one.
    pub read_percent: Option<u8>,
    /// The semaphore's permits, where it is one.
    pub permits: Option<u32>,
    /// How deep a holder re-enters (0: the run does not re-enter).
    pub reentry_depth: u8,
    /// The fault kinds of the run (a node clock step split by direction, message loss
    /// and replica clock offsets included), each once.
    pub faults: Vec<&'static str>,
    /// The public API paths the run drew beyond plain `lock()` ([`MIXED_PERMITS`],
    /// [`RESIZE`], [`UPGRADE`], [`DOWNGRADE`], [`REDLOCK_DEADLINES`], [`SCOPED`], [`TRY`]), each once.
    pub api: Vec<&'static str>,
}

/// The API draw of a semaphore run whose clients ask for different numbers of permits.
pub const MIXED_PERMITS: &str = "semaphore: mixed permit counts";

/// The API draw of a semaphore run whose holders resize it while holding.
pub const RESIZE: &str = "semaphore: resize while held";

/// The API draw of a read-write run whose readers ask to write as their owner.
pub const UPGRADE: &str = "rwlock: upgrade refused";

/// The API draw of a read-write run whose writers downgrade some of their holds.
pub const DOWNGRADE: &str = "rwlock: downgrade";

/// The API draw of a RedLock run waiting as the library does by default (no acquire
/// timeout, no retry cap), some of its acquires with a deadline (`lock_within`).
pub const REDLOCK_DEADLINES: &str = "RedLock: defaults and deadlines";

/// The API draw of a single-node mutex run some of whose acquires are scoped work.
pub const SCOPED: &str = "mutex: run() (finishes, outlives its lease, panics)";

/// The API draw of a run some of whose acquires are one attempt (`try_*`).
pub const TRY: &str = "try_* (a lost reply the probe found free, asked again)";

/// The server draw of a replicated run whose masters refuse writes short of replicas.
pub const MIN_REPLICAS: &str = "min-replicas-to-write (a master short of replicas refuses writes)";

/// The fault label of a node clock step back (forward steps keep `node-jump`).
pub const STEP_BACK: &str = "node-jump (back)";

/// The fault label of a crash failover promoted after a delay (others keep `failover`).
pub const LATE_PROMOTION: &str = "failover (late promotion)";

impl Drawn {
    /// What `spec` runs with.
    pub fn of(spec: &RunSpec) -> Self {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let mut faults: Vec<&'static str> = spec
            .faults
            .iter()
            .map(|f| match f.fault {
                Fault::NodeClockJump { by_ms, .. } if by_ms < 0 => STEP_BACK,
                Fault::Failover {
                    promote_after_ms: Some(_),
                    ..
                } => LATE_PROMOTION,
                _ => f.fault.kind(),
            })
            .collect();
        if spec.net.loss > 0.0 {
            faults.push("loss");
        }
        if spec.deployment.nodes.iter().any(|n| n.clock_offset_ms != 0) {
            faults.push("replica-offset");
        }
        faults.sort_unstable();
        faults.dedup();
        Self {
            ttl_ms: ms(spec.workload.ttl),
            masters: spec.deployment.targets.len(),
            entry_timeout_ms: spec.workload.entry_timeout.map(ms),
            fence_margin_ms: spec.workload.fence_margin.map(ms),
            persistence: match spec.deployment.nodes.first().map(|n| n.persistence) {
                Some(Persistence::AofEverySec) => "aof-everysec",
                Some(Persistence::AofAlways) => "aof-always",
                Some(Persistence::None) | None => "none",
            },
            server_clock: match spec.deployment.server_clock {
                ServerClock::Frozen => "frozen",
                ServerClock::Moving { .. } => "moving",
            },
            clients: spec.clients,
            kind: match spec.workload.kind {
                LockKind::Mutex => "mutex",
                LockKind::ReadWrite { .. } => "rwlock",
                LockKind::Semaphore { .. } => "semaphore",
            },
            read_percent: match spec.workload.kind {
                LockKind::ReadWrite { read_percent } => Some(read_percent),
                _ => None,
            },
            permits: match spec.workload.kind {
                LockKind::Semaphore { permits } => Some(permits),
                _ => None,
            },
            reentry_depth: if spec.workload.reentry.is_some() {
                spec.workload.reentry_depth
            } else {
                0
            },
            faults,
            api: {
                let sizes = spec.workload.sizes;
                [
                    sizes.filter(|s| s.spread > 1).map(|_| MIXED_PERMITS),
                    sizes.filter(|s| s.resize_percent > 0).map(|_| RESIZE),
                    (spec.workload.upgrade_percent > 0).then_some(UPGRADE),
                    (spec.workload.downgrade_percent > 0).then_some(DOWNGRADE),
                    spec.workload.deadlines.map(|_| REDLOCK_DEADLINES),
                    (spec.workload.run_percent > 0).then_some(SCOPED),
                    (spec.workload.try_percent > 0).then_some(TRY),
                    spec.deployment
                        .nodes
                        .iter()
                        .any(|n| n.min_replicas.is_some())
                        .then_some(MIN_REPLICAS),
                ]
                .into_iter()
                .flatten()
                .collect()
            },
        }
    }
}

/// Draws the member of the lock family a `strategy` run takes, so every member meets
/// faults: the read-write lock (FairQueue, its default, 3 runs in 10; Spin and PubSub 2 in
/// 10; not on RedLock) and the semaphore (not on RedLock, 2 in 10) beside the mutex.
pub fn draw_kind(rng: &mut SimRng, strategy: Strategy) -> LockKind {
    let read_write = |rng: &mut SimRng| LockKind::ReadWrite {
        read_percent: rng.between(READ_PERCENT_RANGE.0, READ_PERCENT_RANGE.1) as u8,
    };
    match (rng.below(10), strategy) {
        (5, Strategy::FairQueue)
        | (6 | 7, Strategy::Spin | Strategy::PubSub | Strategy::FairQueue) => read_write(rng),
        (8 | 9, Strategy::Spin | Strategy::PubSub | Strategy::FairQueue) => LockKind::Semaphore {
            permits: rng.between(PERMITS_RANGE.0, PERMITS_RANGE.1) as u32,
        },
        _ => LockKind::Mutex,
    }
}

/// Draws `spec`'s parameters (its strategy and lock kind already set) and returns the
/// scale its times are to be drawn in. Sets the TTL, the deployment's masters and
/// persistence, the entry timeout, the fence margin, the acquire timeout, and the
/// liveness bound they imply.
pub fn draw(rng: &mut SimRng, spec: &mut RunSpec) -> Scale {
    let strategy = spec.workload.strategy;
    if rng.chance(TTL_CHANCE) {
        spec.workload.ttl = Duration::from_millis(rng.log_between(TTL_RANGE_MS.0, TTL_RANGE_MS.1));
    }
    let ttl = spec.workload.ttl;
    spec.check.lease_ttl = ttl;
    if strategy == Strategy::RedLock {
        spec.deployment =
            Deployment::masters(rng.between(MASTERS_RANGE.0, MASTERS_RANGE.1) as usize);
    }
    if strategy == Strategy::FairQueue && rng.chance(ENTRY_TIMEOUT_CHANCE) {
        spec.workload.entry_timeout = Some(Duration::from_millis(
            rng.log_between(ENTRY_TIMEOUT_RANGE_MS.0, ENTRY_TIMEOUT_RANGE_MS.1),
        ));
    }
    if rng.chance(FENCE_MARGIN_CHANCE) {
        spec.workload.fence_margin = Some(Duration::from_millis(
            rng.log_between(FENCE_MARGIN_RANGE_MS.0, FENCE_MARGIN_RANGE_MS.1),
        ));
    }
    if rng.chance(PERSIST_CHANCE) {
        let persistence = if rng.chance(0.5) {
            Persistence::AofEverySec
        } else {
            Persistence::AofAlways
        };
        for node in &mut spec.deployment.nodes {
            node.persistence = persistence;
        }
    }
    // A waiter must be able to outlast a lease stranded by a dead holder.
    spec.workload.acquire_timeout = spec
        .workload
        .acquire_timeout
        .map(|timeout| timeout.max(ttl * 3));
    let scale = Scale::of(ttl);
    spec.workload.hold = (
        scale.of_duration(spec.workload.hold.0),
        scale.of_duration(spec.workload.hold.1),
    );
    spec.workload.think = (
        scale.of_duration(spec.workload.think.0),
        scale.of_duration(spec.workload.think.1),
    );
    spec.check.liveness_bound = bound(spec);
    scale
}

/// The liveness bound of `spec`'s plain run (before faults add to it): the scenarios'
/// bound for its TTL and lock kind, with its own entry timeout in place of the default.
pub fn bound(spec: &RunSpec) -> Duration {
    let work = &spec.workload;
    let plain = kind_bound(work.strategy, work.ttl, work.kind);
    match (work.strategy, work.entry_timeout) {
        (Strategy::FairQueue, Some(entry)) => {
            plain.saturating_sub(leasehold::DEFAULT_QUEUE_ENTRY_TIMEOUT) + entry
        }
        _ => plain,
    }
}

/// Simpler versions of `spec`'s parameters for the shrinker, each one step toward the
/// plain run: the default fence margin and entry timeout, no persistence, one shared
/// semaphore count never resized, and a TTL halfway (log scale) toward 1 s.
pub fn simpler(spec: &RunSpec) -> Vec<RunSpec> {
    let mut out = Vec::new();
    if spec.workload.sizes.is_some() {
        let mut candidate = spec.clone();
        candidate.workload.sizes = None;
        out.push(candidate);
    }
    if spec.workload.fence_margin.is_some() {
        let mut candidate = spec.clone();
        candidate.workload.fence_margin = None;
        out.push(candidate);
    }
    if spec.workload.entry_timeout.is_some() {
        let mut candidate = spec.clone();
        candidate.workload.entry_timeout = None;
        candidate.check.liveness_bound += bound(&candidate).saturating_sub(bound(spec));
        out.push(candidate);
    }
    if spec
        .deployment
        .nodes
        .iter()
        .any(|n| n.persistence != Persistence::None)
    {
        let mut candidate = spec.clone();
        for node in &mut candidate.deployment.nodes {
            node.persistence = Persistence::None;
        }
        out.push(candidate);
    }
    let ttl_ms = spec.workload.ttl.as_millis() as f64;
    if (ttl_ms - 1_000.0).abs() >= 1.0 {
        let halfway = Duration::from_millis((ttl_ms * 1_000.0).sqrt().round() as u64);
        let toward = if (halfway.as_millis() as f64 - 1_000.0).abs() < 10.0 {
            Duration::from_secs(1)
        } else {
            halfway
        };
        let mut candidate = spec.clone();
        candidate.workload.ttl = toward;
        candidate.check.lease_ttl = toward;
        if toward > spec.workload.ttl {
            candidate.check.liveness_bound += toward - spec.workload.ttl;
        }
        out.push(candidate);
    }
    out
}
