//! The named fault scenarios of docs/DESIGN.md §5, each with the verdict expected per
//! strategy.
//!
//! Invariant: an expectation is either a verdict argued from the algorithm (and checked by
//! a test over several seeds) or explicitly `Pending` with the reason — never a guess
//! filled in to make a table look complete. RedLock runs on [`REDLOCK_MASTERS`] masters;
//! the scenarios whose point is "a second quorum" first give the holder a bare quorum
//! (see `bare_quorum`), as in Kleppmann's example.

use std::time::Duration;

use serde::Serialize;

use crate::checker::{CheckConfig, Verdict};
use crate::faults::{Fault, ProcSel, ScheduledFault, Split};
use crate::model::{NodeId, Persistence};
use crate::net::NetConfig;
use crate::run::{Deployment, REDLOCK_MASTERS, RunSpec};
use crate::workload::{Cancel, LockKind, Reentry, Strategy, WaitReplicas, Workload};

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
    build: fn(Strategy, u64) -> RunSpec,
    /// Expectation per strategy, in [`Strategy::ALL`] order.
    expect: [Expect; 4],
    /// Fault kinds whose combination in a random (swarm) run reproduces this scenario's
    /// failure; empty when the scenario is not a known limitation.
    pub swarm_signature: &'static [&'static str],
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

    /// Whether this scenario documents `verdict` as a known limitation of `strategy`: its
    /// expectation for the strategy admits `verdict`, which is a failure (starvation or
    /// violation), and it names the fault kinds that reproduce it.
    pub fn known_limitation(&self, strategy: Strategy, verdict: Verdict) -> bool {
        verdict >= Verdict::Starvation
            && !self.swarm_signature.is_empty()
            && match self.expect(strategy) {
                Expect::Exactly(v) | Expect::AtWorst(v) => verdict <= v,
                Expect::Pending(_) => false,
            }
    }
}

/// Seeds each scenario cell runs by default.
pub const DEFAULT_SEEDS: u64 = 8;

/// Lease TTL of the scenarios: short so a run of a few virtual seconds sees many expiries.
const TTL: Duration = Duration::from_secs(1);

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
    spec.check.liveness_bound = liveness_bound(spec.workload.strategy, spec.workload.ttl)
        + match kind {
            LockKind::ReadWrite { .. } => leasehold::DEFAULT_WRITER_INTENT_TIMEOUT,
            LockKind::Mutex | LockKind::Semaphore { .. } => Duration::ZERO,
        };
    spec
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
        },
        trace: false,
    }
}

fn at(at_ms: u64, fault: Fault) -> ScheduledFault {
    ScheduledFault { at_ms, fault }
}

/// Holds longer than the TTL, so the watchdog (or its failure) matters.
fn long_holds(mut spec: RunSpec) -> RunSpec {
    spec.workload.hold = (Duration::from_millis(500), Duration::from_millis(1_500));
    spec
}

/// RedLock only: the last two masters are down (and come back empty) for the
/// `BARE_QUORUM_WINDOW` before `until_ms`, so whoever holds the lock at `until_ms` holds it
/// on exactly masters 0, 1 and 2 — Kleppmann's setting, where the first client reaches only
/// A, B and C. On its own this is safe (the returning masters are 2 votes, not a quorum);
/// a scenario's fault on master 0 at `until_ms` then decides whether a second quorum
/// {0, 3, 4} forms. Single-node strategies are left alone.
fn bare_quorum(mut spec: RunSpec, until_ms: u64) -> RunSpec {
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
const fn all(expect: Expect) -> [Expect; 4] {
    [expect; 4]
}

/// The read-write lock's cells: `expect` for Spin and PubSub; the library refuses
/// FairQueue for it, and RedLock is a mutex.
const fn rwlock_cells(expect: Expect) -> [Expect; 4] {
    [
        expect,
        expect,
        Expect::Pending("the read-write lock supports Spin and PubSub, not FairQueue"),
        Expect::Pending("RedLock is a mutex"),
    ]
}

/// The semaphore's cells: `expect` for the single-node strategies; RedLock is a mutex.
const fn semaphore_cells(expect: Expect) -> [Expect; 4] {
    [
        expect,
        expect,
        expect,
        Expect::Pending("RedLock is a mutex"),
    ]
}

/// Client 0 is 150 ms farther from its server each way for the whole run, and cut off for
/// 1 s at every even second from 2 s on.
fn far_client_cut_off(mut spec: RunSpec) -> RunSpec {
    spec.faults.push(at(
        0,
        Fault::Slow {
            who: ProcSel::Id(0),
            extra_ms: 150,
            ms: 12_000,
        },
    ));
    for second in (2..12).step_by(2) {
        spec.faults.push(at(
            second * 1_000,
            Fault::Isolate {
                who: ProcSel::Id(0),
                ms: 1_000,
            },
        ));
    }
    spec
}

/// Whoever holds the lock at 2 s stops for 3 s (a stop-the-world pause past the TTL).
fn holder_pause() -> ScheduledFault {
    at(
        2_000,
        Fault::Pause {
            who: ProcSel::Holder,
            ms: 3_000,
        },
    )
}

/// 4 clients of `kind` (a read-write lock or a semaphore) in the common shape.
fn family(strategy: Strategy, seed: u64, kind: LockKind) -> RunSpec {
    let mut spec = with_kind(base(strategy, seed), kind);
    spec.clients = 4;
    spec
}

/// One expectation for the single-node strategies, another for RedLock.
const fn single_and_redlock(single: Expect, redlock: Expect) -> [Expect; 4] {
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

/// Fence margin of `fence-expiry-mid-stream`: short enough that fence keys expire between
/// holds in every run.
const FENCE_MARGIN: Duration = Duration::from_millis(200);

/// Message loss of `reentry-pending-handoff`: enough lost hand-off messages in a run that
/// a sibling's refresh often comes before the head's claim.
const HANDOFF_LOSS: f64 = 0.05;

/// How long after it starts `acquire-cancel` drops an acquire at most: past a round trip
/// and well into a wait for a held lock (1 s leases).
const CANCEL_WITHIN: Duration = Duration::from_millis(600);

/// The catalogue.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "holder-pause",
        design_item: 1,
        summary: "The holder stops for 3 s (GC) mid-hold; its lease expires, another client acquires while the paused holder still believes it holds (exclusion broken, excused by the pause that touched that hold); the holder wakes and writes with its old token, which the fenced resource rejects.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.faults = vec![holder_pause()];
            spec
        },
        expect: all(Expect::Exactly(Verdict::ExclusionBroken)),
        swarm_signature: &[],
    },
    Scenario {
        name: "network-delay",
        design_item: 2,
        summary: "Everything the holder sends or receives is delayed by 1.5 s for 4 s: renewals time out, its write lands after another client was granted the lock and is rejected by fencing.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.faults = vec![at(
                2_000,
                Fault::Slow {
                    who: ProcSel::Holder,
                    extra_ms: 1_500,
                    ms: 4_000,
                },
            )];
            spec
        },
        expect: all(Expect::Exactly(Verdict::SafeWithFencing)),
        swarm_signature: &[],
    },
    Scenario {
        name: "slow-link-lease",
        design_item: 2,
        summary: "Client 0's link is 150 ms slower each way for the whole run and nobody renews (watchdog off, holds past the TTL): its grants reach the server 150 ms after it sent them, and their replies 150 ms later still. A lease counted from the request's send ends before the server's key does, so the lost signal fires in time; one counted from the reply's arrival would outlive the key by up to 300 ms, which the server-truth oracle sees with or without a second client in the gap. Writes delayed past the lost signal are fenced.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.watchdog = false;
            spec.workload.hold = (Duration::from_millis(1_100), Duration::from_millis(1_400));
            spec.faults = vec![at(
                0,
                Fault::Slow {
                    who: ProcSel::Id(0),
                    extra_ms: 150,
                    ms: 12_000,
                },
            )];
            spec
        },
        expect: all(Expect::AtWorst(Verdict::SafeWithFencing)),
        swarm_signature: &[],
    },
    Scenario {
        name: "slow-link-partition",
        design_item: 7,
        summary: "Client 0's link is 150 ms slower each way for the whole run, and it is cut off for 1 s every 2 s; holds are long and the watchdog renews. When a cut stops the renewals, the last successful renewal's validity (counted from its send) must end before the server's key does: one counted from the reply would outlive it by up to 300 ms.",
        build: |s, seed| far_client_cut_off(long_holds(base(s, seed))),
        expect: all(Expect::AtWorst(Verdict::SafeWithFencing)),
        swarm_signature: &[],
    },
    Scenario {
        name: "slow-link-extend",
        design_item: 2,
        summary: "As slow-link-partition, but every holder keeps its lease with extend() every half TTL (no watchdog) and holds for 1.5-2.5 TTLs: each extension's validity must count from its own send, so when the far client is cut off its belief still ends before the server's key does.",
        build: |s, seed| {
            let mut spec = far_client_cut_off(base(s, seed));
            spec.workload.watchdog = false;
            spec.workload.extend = true;
            spec.workload.hold = (Duration::from_millis(1_500), Duration::from_millis(2_500));
            spec
        },
        expect: all(Expect::AtWorst(Verdict::SafeWithFencing)),
        swarm_signature: &[],
    },
    Scenario {
        name: "node-clock-jump",
        design_item: 3,
        summary: "The Redis node's clock jumps 5 s forward: the lease expires early by server time while the holder still trusts it (exclusion broken, excused by the jump on the granting node); fencing tokens (server µs) jump too and stay monotonic. RedLock (Kleppmann): the holder has the bare quorum {n0, n1, n2}; n0's key expires early and another client gets {n0, n3, n4}, so two hold the lock; n0's tokens now run 5 s ahead. At 4 s n0 goes down for 3 s: the next quorum lacks n0 and gets a lower maximum token, so fencing breaks too whenever that grant goes to another client (a race: not every seed).",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.faults = vec![at(
                2_000,
                Fault::NodeClockJump {
                    node: 0,
                    by_ms: 5_000,
                },
            )];
            if s == Strategy::RedLock {
                // Without this outage a quorum lacking n0 needs an acquire to race the
                // release of a quorum holding n0, which few seeds show.
                spec.faults.push(at(
                    4_000,
                    Fault::NodeCrash {
                        node: 0,
                        restart_after_ms: Some(3_000),
                    },
                ));
            }
            bare_quorum(spec, 2_000)
        },
        // RedLock: the per-master tokens are strictly increasing, but their maximum over a
        // quorum is only as monotonic as the masters' clocks agree (RedLockGuard docs).
        expect: single_and_redlock(
            Expect::AtWorst(Verdict::ExclusionBroken),
            Expect::Exactly(Verdict::Violation),
        ),
        swarm_signature: &["node-jump"],
    },
    Scenario {
        name: "client-clock-drift",
        design_item: 4,
        summary: "All clients' clocks run 30% slow and the watchdog is off with holds past the TTL: the local validity deadline falls after the server-side expiry, so holds overlap (exclusion broken, excused by the drift of the holder's clock beyond the margin); nobody writes after its lost signal, stale writes are fenced.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.watchdog = false;
            spec.workload.hold = (Duration::from_millis(1_200), Duration::from_millis(1_500));
            spec.faults = (0..spec.clients)
                .map(|proc| {
                    at(
                        0,
                        Fault::ClientClockDrift {
                            proc,
                            ppm: -300_000,
                        },
                    )
                })
                .collect();
            spec
        },
        expect: all(Expect::AtWorst(Verdict::ExclusionBroken)),
        swarm_signature: &[],
    },
    Scenario {
        name: "client-clock-drift-within-margin",
        design_item: 4,
        summary: "All clients' clocks run 0.9% slow (within the 1% drift margin the library promises to tolerate) and nobody renews (watchdog off, holds past the TTL): the local validity deadline must still fall before the server-side expiry, so the lost signal fires in time and no belief outlives its key.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.watchdog = false;
            spec.workload.hold = (Duration::from_millis(1_100), Duration::from_millis(1_400));
            spec.faults = (0..spec.clients)
                .map(|proc| at(0, Fault::ClientClockDrift { proc, ppm: -9_000 }))
                .collect();
            spec
        },
        expect: all(Expect::AtWorst(Verdict::SafeWithFencing)),
        swarm_signature: &[],
    },
    Scenario {
        name: "client-clock-drift-watchdog",
        design_item: 4,
        summary: "Control for client-clock-drift: same 30% slow clocks with the watchdog on; renewals every TTL/3 of local time still land well before expiry.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.faults = (0..spec.clients)
                .map(|proc| {
                    at(
                        0,
                        Fault::ClientClockDrift {
                            proc,
                            ppm: -300_000,
                        },
                    )
                })
                .collect();
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "crash-restart-no-persistence",
        design_item: 5,
        summary: "The only node restarts empty 300 ms after crashing, mid-hold: the holder still trusts a lease the node no longer has (exclusion broken, excused by the crash) until the watchdog finds the hold gone, and another client may acquire meanwhile. Tokens come from server time, so they still grow. RedLock: the holder has the bare quorum {n0, n1, n2}; n0 comes back empty and another client gets {n0, n3, n4} when it wins the race against the holder's next renewal (which finds no quorum and fires lost) — two holders; n0's fresh tokens come from its correct clock, so fencing holds.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.faults = vec![at(
                2_000,
                Fault::NodeCrash {
                    node: 0,
                    restart_after_ms: Some(300),
                },
            )];
            bare_quorum(spec, 2_000)
        },
        // RedLock: the second quorum is the point (docs/DESIGN.md §5.5); it wins the race on
        // some seeds of the default set, which is what the test holds it to.
        expect: single_and_redlock(
            Expect::AtWorst(Verdict::ExclusionBroken),
            Expect::Exactly(Verdict::ExclusionBroken),
        ),
        swarm_signature: &[],
    },
    Scenario {
        name: "crash-restart-delayed",
        design_item: 5,
        summary: "The node restarts empty only after 2 TTLs: every holder's lost signal fires during the outage, before any new grant. RedLock: the bare-quorum holder cannot renew on a quorum while n0 is down, so its validity runs out before n0 returns.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.faults = vec![at(
                2_000,
                Fault::NodeCrash {
                    node: 0,
                    restart_after_ms: Some(2_000),
                },
            )];
            bare_quorum(spec, 2_000)
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "failover-async-replication",
        design_item: 6,
        summary: "Master + replica with up to 200 ms replication lag; the master dies and the replica is promoted without the latest grant: two holders (exclusion broken, excused by the failover). Tokens are server µs, so the new master's tokens are still higher and fencing holds. RedLock: master n0 is the replicated one and the holder has the bare quorum {n0, n1, n2}; the promoted replica lacks a grant younger than the lag, so a second quorum {n0', n3, n4} can form.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.deployment = Deployment::replicated_for(s, 1);
            spec.net.repl_lag = Duration::from_millis(200);
            spec.faults = vec![at(
                3_000,
                Fault::Failover {
                    group: 0,
                    restart_after_ms: Some(2_000),
                    split: None,
                },
            )];
            bare_quorum(spec, 3_000)
        },
        expect: all(Expect::AtWorst(Verdict::ExclusionBroken)),
        swarm_signature: &[],
    },
    Scenario {
        name: "failover-replica-clock-behind",
        design_item: 6,
        summary: "As failover-async-replication (3 s lag), but the replica's clock is 10 s behind: the promoted master issues max(last replicated token + 1, its µs), below the token of the grant it never received (fencing breaks), and replicated absolute expiries outlive their TTL by the skew (a lock released on the old master lingers; waiters starve). RedLock (n0 replicated, bare quorum): the second quorum {n0', n3, n4} forms, but its maximum token comes from n3/n4's correct clocks, which masks n0's regression, and a quorum without the lingering n0' key is there, so nobody starves.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.deployment = Deployment::replicated_for(s, 1);
            if let Some(replica) = spec.deployment.first_replica() {
                spec.deployment.nodes[replica].clock_offset_ms = -10_000;
            }
            // Replication a few seconds behind: whoever holds at failover time was granted
            // after the replica's last applied batch on every seed.
            spec.net.repl_lag = Duration::from_millis(3_000);
            spec.faults = vec![at(
                3_000,
                Fault::Failover {
                    group: 0,
                    restart_after_ms: Some(2_000),
                    split: None,
                },
            )];
            bare_quorum(spec, 3_000)
        },
        // Both failures stem from the replica's clock: replicated absolute expiries
        // stretch every surviving lease (a released-but-unreplicated lock lingers for TTL +
        // skew, so waiters starve), and grants issued meanwhile use max(last replicated
        // token + 1, skewed µs), below the lost grant's token. Pollers (Spin, PubSub)
        // reach the regression on some seed of the default set; FairQueue waiters mostly
        // sit behind the ghost lock (starvation), but random fault mixes show FairQueue
        // reaching the same regression, hence the bound rather than an exact verdict.
        expect: [
            Expect::Exactly(Verdict::Violation),
            Expect::Exactly(Verdict::Violation),
            Expect::AtWorst(Verdict::Violation),
            Expect::AtWorst(Verdict::ExclusionBroken),
        ],
        swarm_signature: &["node-jump", "failover"],
    },
    Scenario {
        name: "partition",
        design_item: 7,
        summary: "The holder is cut from Redis for 3 s: renewals fail and its lost signal fires before the lease ends server-side, so no other grant overlaps (margin reported).",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.faults = vec![at(
                2_000,
                Fault::Isolate {
                    who: ProcSel::Holder,
                    ms: 3_000,
                },
            )];
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "dead-waiter",
        design_item: 8,
        summary: "Two waiters crash for good while queued; the line must move on within the entry timeout (FairQueue) or immediately (others).",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.clients = 4;
            spec.faults = vec![
                at(
                    2_000,
                    Fault::Crash {
                        who: ProcSel::Waiter,
                        restart_after_ms: None,
                    },
                ),
                at(
                    2_500,
                    Fault::Crash {
                        who: ProcSel::Waiter,
                        restart_after_ms: None,
                    },
                ),
            ];
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "holder-crash",
        design_item: 8,
        summary: "The holder crashes (restarting 1 s later): its lock is orphaned until the TTL, then the others proceed.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.faults = vec![at(
                2_000,
                Fault::Crash {
                    who: ProcSel::Holder,
                    restart_after_ms: Some(1_000),
                },
            )];
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "ambiguous-acquire",
        design_item: 9,
        summary: "2% of messages are lost (requests and replies alike): acquires and releases time out after possibly running; the client must resolve them, never leak nor double-believe a hold.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.net.loss = 0.02;
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "script-flush",
        design_item: 10,
        summary: "SCRIPT FLUSH every second: EVALSHA answers NOSCRIPT and the client falls back to EVAL transparently.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.faults = (1..10)
                .map(|i| at(i * 1_000, Fault::ScriptFlush { node: 0 }))
                .collect();
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "try-lock-lossy",
        design_item: 9,
        summary: "Every acquire is one attempt (`try_lock`, RedLock's `try_lock`) that fails at once when the lock is taken, and 2% of messages are lost: an attempt whose reply is lost must be resolved like a waiting acquire's, never leak nor double-believe a hold.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.try_percent = 100;
            spec.net.loss = 0.02;
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "acquire-cancel",
        design_item: 9,
        summary: "Half the acquires are dropped mid-flight, up to 600 ms after they start (before the first reply, while queued or waiting, or after the grant was sent), and 2% of messages are lost: whatever a dropped acquire was granted or queued for must be given up, so nobody believes a hold nobody was granted and the line does not stall past the liveness bound.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.cancel = Some(Cancel {
                percent: 50,
                within: CANCEL_WITHIN,
            });
            spec.net.loss = 0.02;
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "failover-wait-replicas",
        design_item: 6,
        summary: "As failover-async-replication (200 ms replication lag, failover at 3 s), but every grant waits (`WAIT 1 200`) for the replica: the window in which the promoted replica lacks the holder's grant narrows but does not close (a grant is trusted once WAIT times out), so two holders remain possible (exclusion broken, excused by the failover), never a fencing failure.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.deployment = Deployment::replicated_for(s, 1);
            spec.net.repl_lag = Duration::from_millis(200);
            spec.workload.wait_replicas = Some(WaitReplicas {
                replicas: 1,
                timeout: Duration::from_millis(200),
            });
            spec.faults = vec![at(
                3_000,
                Fault::Failover {
                    group: 0,
                    restart_after_ms: Some(2_000),
                    split: None,
                },
            )];
            spec
        },
        expect: single_and_redlock(
            Expect::AtWorst(Verdict::ExclusionBroken),
            Expect::Pending("the simulated WAIT workload drives the single-node mutex"),
        ),
        swarm_signature: &[],
    },
    Scenario {
        name: "fence-expiry-mid-stream",
        design_item: 0,
        summary: "Fence keys outlive their lock by only 200 ms and clients think 250-700 ms between holds, so the fence key expires again and again mid-stream; at 5 s the node's clock steps back 120 ms (less than the margin) during the run. Every token must still exceed every earlier one: server time has moved on by the margin since the forgotten token was issued.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.fence_margin = Some(FENCE_MARGIN);
            spec.workload.think = (Duration::from_millis(250), Duration::from_millis(700));
            spec.faults = vec![at(
                5_000,
                Fault::NodeClockJump {
                    node: 0,
                    by_ms: -120,
                },
            )];
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "reentry-shorter-ttl",
        design_item: 0,
        summary: "Every holder re-enters its lock with a tenth of its TTL and releases that inner hold at once. The outer lease must keep its length: nobody else may be granted the lock while the outer guard trusts its lease (a script that set the key's TTL to the last hold's would let them in).",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.workload.reentry = Some(Reentry::Nested { ttl: TTL / 10 });
            spec
        },
        expect: single_and_redlock(
            Expect::Exactly(Verdict::Safe),
            Expect::Pending("RedLock does not re-enter"),
        ),
        swarm_signature: &[],
    },
    Scenario {
        name: "reentry-pending-handoff",
        design_item: 0,
        summary: "Each client waits with two holds of one owner side by side; the second granted must join the first one's epoch and token. With FairQueue a release hands the lock to one of them while the other refreshes its place: that refresh must not re-enter the unclaimed hand-off and get the previous holder's token. 5% of messages are lost, so some hand-off messages never arrive and the head claims only at its next refresh, racing its sibling's.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.reentry = Some(Reentry::Sibling { ttl: TTL });
            // A lost hand-off message leaves the head to claim at its next refresh, which
            // races its sibling's refresh: the window this scenario is about.
            spec.net.loss = HANDOFF_LOSS;
            spec
        },
        expect: single_and_redlock(
            Expect::AtWorst(Verdict::SafeWithFencing),
            Expect::Pending("RedLock does not re-enter"),
        ),
        swarm_signature: &[],
    },
    Scenario {
        name: "rwlock-lossy",
        design_item: 9,
        summary: "Read-write lock, 4 clients reading 60% of the time, 2% of messages lost: acquires, renewals and releases of read and write holds time out after possibly running. A writer must never share the lock with anyone, readers only with readers, and no belief may outlive its hold (read holds are scored by their deadline in the readers set).",
        build: |s, seed| {
            let mut spec = family(s, seed, LockKind::ReadWrite { read_percent: 60 });
            spec.net.loss = 0.02;
            spec
        },
        expect: rwlock_cells(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "rwlock-holder-pause",
        design_item: 1,
        summary: "Read-write lock, 4 clients reading 60% of the time; whoever holds at 2 s stops for 3 s. A paused writer's or reader's lease expires and a conflicting hold is granted while it still believes (excused by the pause, and only by it): exclusion broken, fencing keeps writes safe.",
        build: |s, seed| {
            let mut spec = family(s, seed, LockKind::ReadWrite { read_percent: 60 });
            spec.faults = vec![holder_pause()];
            spec
        },
        expect: rwlock_cells(Expect::Exactly(Verdict::ExclusionBroken)),
        swarm_signature: &[],
    },
    Scenario {
        name: "semaphore-lossy",
        design_item: 9,
        summary: "Semaphore with 2 permits, 4 clients, 2% of messages lost: never more holders than permits, and no permit believed after it left the permits set.",
        build: |s, seed| {
            let mut spec = family(s, seed, LockKind::Semaphore { permits: 2 });
            spec.net.loss = 0.02;
            spec
        },
        expect: semaphore_cells(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "semaphore-holder-pause",
        design_item: 1,
        summary: "Semaphore with 2 permits, 4 clients; a holder stops for 3 s at 2 s. Its permit expires and is granted again while it still believes: a third believed holder of two permits (exclusion broken, excused by the pause, and only by it).",
        build: |s, seed| {
            let mut spec = family(s, seed, LockKind::Semaphore { permits: 2 });
            spec.faults = vec![holder_pause()];
            spec
        },
        expect: semaphore_cells(Expect::Exactly(Verdict::ExclusionBroken)),
        swarm_signature: &[],
    },
    Scenario {
        name: "node-pause",
        design_item: 7,
        summary: "Every node stalls for 2 s at 2 s (docker pause), mid-hold: renewals and acquires pile up unanswered and time out, the node's clock runs on, and when it wakes it works through what reached it: the holder's renewal finds its lease already gone, and acquires the clients gave up on may still take the lock (ambiguous; the client resolves them). The holder's validity counts from its last answered renewal's send, so its lost signal fires before the key ends.",
        build: |s, seed| node_outage(s, seed, |node, ms| Fault::NodePause { node, ms }),
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "node-partition",
        design_item: 7,
        summary: "Every node is cut from every client (and every other node) for 2 s at 2 s, mid-hold: requests and replies across the cut are lost. As partition, but everyone loses the node at once: no renewal lands, the holder's lost signal fires before its key ends, and the line resumes after the cut heals.",
        build: |s, seed| node_outage(s, seed, |node, ms| Fault::NodeIsolate { node, ms }),
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "crash-restart-aof-always",
        design_item: 5,
        summary: "As crash-restart-no-persistence, but with `appendfsync always`: every acknowledged write survives the crash, so the node comes back 300 ms later with the holder's lease (and the fence key) intact, and nobody else is granted while it is held (antirez's answer to the restart argument). RedLock: the bare-quorum holder keeps n0, so no second quorum forms.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            for node in &mut spec.deployment.nodes {
                node.persistence = Persistence::AofAlways;
            }
            spec.faults = vec![at(
                2_000,
                Fault::NodeCrash {
                    node: 0,
                    restart_after_ms: Some(300),
                },
            )];
            bare_quorum(spec, 2_000)
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
        swarm_signature: &[],
    },
    Scenario {
        name: "failover-zombie-master",
        design_item: 6,
        summary: "A network split at 3 s leaves the master with the holder only; Sentinel promotes the replica 500 ms later for everyone else, and the split heals at 6 s, when the old master rejoins as a replica and drops what it granted meanwhile. The holder keeps renewing (and re-acquiring) on the zombie while the others are granted on the new master once the replicated lease ends there: two holders (exclusion broken, excused by the failover). Both masters issue tokens from correct clocks, so fencing holds. RedLock (n0 replicated, bare quorum): the holder keeps {n0, n1, n2} through the zombie, and a second quorum {n0', n3, n4} forms.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.deployment = Deployment::replicated_for(s, 1);
            spec.faults = vec![at(
                3_000,
                Fault::Failover {
                    group: 0,
                    restart_after_ms: None,
                    split: Some(Split {
                        near: ProcSel::Holder,
                        detect_ms: 500,
                        heal_after_ms: 3_000,
                    }),
                },
            )];
            bare_quorum(spec, 3_000)
        },
        // RedLock: the second quorum needs the holder to still hold when n0''s copy of
        // its lease runs out, a race it wins on some seeds only.
        expect: single_and_redlock(
            Expect::Exactly(Verdict::ExclusionBroken),
            Expect::AtWorst(Verdict::ExclusionBroken),
        ),
        swarm_signature: &[],
    },
];

/// How long the node-pause and node-partition scenarios keep the nodes away: twice the
/// TTL, so every lease held when they start ends during the outage (the real-fault runs
/// use the same 2 s).
const NODE_OUTAGE_MS: u64 = 2_000;

/// The run of a node-outage scenario: holds of 1.5-3 s (whoever holds when the outage
/// starts usually means to hold on past its lease, so the outage decides whether it learns
/// in time), and `fault` for [`NODE_OUTAGE_MS`] at 2 s on every node of the deployment (one
/// node, or all of RedLock's masters), as a `docker pause` or a network cut of every data
/// node does.
fn node_outage(strategy: Strategy, seed: u64, fault: fn(NodeId, u64) -> Fault) -> RunSpec {
    let mut spec = base(strategy, seed);
    spec.workload.hold = (Duration::from_millis(1_500), Duration::from_millis(3_000));
    spec.faults = (0..spec.deployment.nodes.len())
        .map(|node| at(2_000, fault(node, NODE_OUTAGE_MS)))
        .collect();
    spec
}

/// Looks a scenario up by name.
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

/// The outcome of one scenario for one strategy over several seeds.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Scenario name.
    pub scenario: &'static str,
    /// Strategy.
    pub strategy: Strategy,
    /// What was expected.
    pub expected: Expect,
    /// Worst verdict over the seeds (`None` when pending).
    pub worst: Option<Verdict>,
    /// Verdict per seed.
    pub verdicts: Vec<Verdict>,
    /// Whether the expectation was met.
    pub met: bool,
    /// Smallest lost-signal margin seen (ms).
    pub lost_margin_ms: Option<f64>,
    /// Overlapping hold pairs over all seeds.
    pub overlaps: u64,
    /// Broken exclusions (overlaps or leases the servers no longer held) that no fault
    /// touching the hold explains, over all seeds: a cell with any is not met, whatever
    /// its verdict.
    pub unexcused: u64,
    /// Stale writes the fenced resource rejected over all seeds.
    pub stale_rejected: u64,
    /// Acquisitions over all seeds.
    pub acquisitions: u64,
    /// The first seed that produced the worst verdict.
    pub worst_seed: Option<u64>,
}

/// Runs `scenario` for `strategy` on seeds `0..seeds`.
pub fn run_cell(
    scenario: &'static Scenario,
    strategy: Strategy,
    seeds: u64,
) -> Result<Cell, crate::world::SimError> {
    let expected = scenario.expect(strategy);
    let mut cell = Cell {
        scenario: scenario.name,
        strategy,
        expected,
        worst: None,
        verdicts: Vec::new(),
        met: true,
        lost_margin_ms: None,
        overlaps: 0,
        unexcused: 0,
        stale_rejected: 0,
        acquisitions: 0,
        worst_seed: None,
    };
    if matches!(expected, Expect::Pending(_)) {
        return Ok(cell);
    }
    for seed in 0..seeds {
        let result = crate::run::run(&scenario.spec(strategy, seed))?;
        let verdict = result.verdict();
        cell.verdicts.push(verdict);
        if cell.worst.is_none_or(|w| verdict > w) {
            cell.worst = Some(verdict);
            cell.worst_seed = Some(seed);
        }
        let f = &result.findings;
        cell.overlaps += f.overlap_count;
        cell.unexcused += f
            .problems
            .iter()
            .filter(|p| p.kind.verdict() == Verdict::ExclusionBroken && !p.excused)
            .count() as u64;
        cell.stale_rejected += f.stale_rejected;
        cell.acquisitions += f.acquisitions;
        if let Some(m) = f.lost_margin_ms {
            cell.lost_margin_ms = Some(cell.lost_margin_ms.map_or(m, |c: f64| c.min(m)));
        }
    }
    cell.met = cell.unexcused == 0 && cell.worst.is_some_and(|w| expected.met_by(w));
    Ok(cell)
}
