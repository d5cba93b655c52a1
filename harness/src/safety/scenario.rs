//! The real-fault catalogue: the docs/DESIGN.md §5 scenarios that containers can produce, each with
//! the topology it needs, the fault it injects, the strategies it applies to and the name of
//! the simulator scenario it corresponds to (whose expected verdicts it is judged against).
//!
//! Invariant: a scenario with a `sim` name injects the same kind of fault at the same point
//! of a hold as that simulator scenario (same TTL, same client count), so the two verdicts
//! are comparable; scenarios the simulator cannot express have `sim: None`.

use std::time::Duration;

use crate::topology::persistence::Persistence;
use leasehold_sim::workload::{LockKind, Strategy};

/// Lease TTL of most runs: the simulator scenarios' 1 s, so margins compare directly.
pub const TTL: Duration = Duration::from_secs(1);

/// Lease TTL of the lost-grant failovers: a forced Sentinel failover takes one to three
/// seconds here, so with the simulator's 1 s TTL the lost grant would have run out before
/// the promoted replica grants again; 5 s keeps it believed across the promotion.
pub const FAILOVER_TTL: Duration = Duration::from_secs(5);

/// FairQueue's queue entry timeout in the lost-grant failovers: shorter than
/// [`FAILOVER_TTL`]. The promoted replica still has the grantee's queue entry as it was
/// before the loss, at the head, and nobody else is granted while it lives. With the
/// default entry timeout (5 s, the TTL here) that stale entry outlived the lost lease: in
/// the run before this setting, the promoted master granted again only 6.7-7.3 s after the
/// kill and all 3 tries stayed safe. The queue narrows the window; it does not close it (an
/// entry refreshed after the last replicated write, or a grant on a free lock, is not
/// covered), and a 1 s entry shows the loss the simulator bounds.
pub const LOST_GRANT_QUEUE_ENTRY: Duration = Duration::from_secs(1);

/// FairQueue's queue entry timeout under a node clock drift. A key that expires early is
/// released by nobody, so a fair waiter finds it gone only at its next entry refresh, and
/// the holds overlap only when that refresh lands between the key's expiry (0.77 TTL at
/// 30 % fast) and the holder's validity deadline (0.99 TTL). With the default entry (5 s,
/// refreshed every 1.7 s) 1 of 3 tries broke in one run and none in the next; with this
/// one (refreshed every 0.33 s) all 3 broke in each of two runs, as the simulator's seeds
/// do.
pub const DRIFT_QUEUE_ENTRY: Duration = Duration::from_secs(1);

/// How far the replica's clock is behind in `failover-replica-clock-behind`: the
/// simulator's 10 s (`clock_offset_ms = -10_000` in sim/src/scenario/node_faults.rs).
pub const REPLICA_BEHIND: Duration = Duration::from_secs(10);

/// Contending clients per run of the mutex: the simulator scenarios' three.
pub const CLIENTS: usize = 3;

/// Contending clients per run of the read-write lock and the semaphore: the simulator's
/// family scenarios' four (`leasehold_sim::scenario`, `family`).
pub const FAMILY_CLIENTS: usize = 4;

/// The read-write lock's mix: 60 % of acquisitions read, as in the simulator's `rwlock-*`
/// scenarios.
pub const RWLOCK: LockKind = LockKind::ReadWrite { read_percent: 60 };

/// The semaphore of the simulator's `semaphore-*` scenarios: 2 permits (for 4 clients).
pub const SEMAPHORE: LockKind = LockKind::Semaphore { permits: 2 };

/// When the fault is injected (run time): after the first hand-offs (a mid-hold fault then
/// waits, bounded, for a holder).
pub const FAULT_AT: Duration = Duration::from_millis(800);

/// Single-node strategies.
const SINGLE: &[Strategy] = &[Strategy::Spin, Strategy::PubSub, Strategy::FairQueue];
/// The read-write lock's strategies: the single-node ones (RedLock is a mutex).
const RWLOCK_STRATEGIES: &[Strategy] = SINGLE;
/// Single-node strategies and RedLock.
const ALL: &[Strategy] = &[
    Strategy::Spin,
    Strategy::PubSub,
    Strategy::FairQueue,
    Strategy::RedLock,
];

/// RedLock's classic deployment: five masters, quorum three.
pub const REDLOCK_MASTERS: usize = 5;

/// Masters restarted in the RedLock crash scenarios: a quorum's worth, so that a second
/// quorum becomes possible once they come back empty (one restart of five cannot do it).
pub const REDLOCK_RESTARTED: usize = 3;

/// The containers a scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One node with this persistence (RedLock cells run on [`REDLOCK_MASTERS`] masters
    /// with the same persistence).
    Single(Persistence),
    /// A master, one replica and three Sentinels.
    Sentinel,
    /// [`Topology::Single`] without persistence, every data node with a movable wall clock
    /// ([`NodeOptions::clock_control`](crate::NodeOptions::clock_control)).
    ClockedSingle,
    /// [`Topology::Sentinel`] with movable wall clocks on master and replica.
    ClockedSentinel,
}

/// The injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RealFault {
    /// The holder "freezes" in process (its watchdog off for the run, `lost()` unobserved)
    /// for this long, then writes with its old token.
    HolderPause(Duration),
    /// The holder's worker process is stopped for real (SIGSTOP, its watchdog and every
    /// timer frozen with it) for this long, then continued (SIGCONT).
    HolderFreeze(Duration),
    /// `docker pause` of every data node for this long.
    NodePause(Duration),
    /// The node is disconnected from its network for this long (everyone loses it).
    NodeCut(Duration),
    /// Only the holder's connections are cut for this long.
    HolderPartition(Duration),
    /// Mid-hold, SIGKILL the node's container (RedLock: [`REDLOCK_RESTARTED`] masters) and
    /// start it again after this long (plus the ~1.5 s a container start takes).
    Restart(Duration),
    /// Mid-hold, crash the server process in place (RedLock: [`REDLOCK_RESTARTED`]
    /// masters; `DEBUG CRASH-AND-RECOVER`: no save, every connection dropped) and start it
    /// again after this long, as a supervisor would: back within milliseconds of it.
    CrashRecover(Duration),
    /// `SCRIPT FLUSH` on every data node at this period.
    ScriptFlush(Duration),
    /// `CLIENT KILL TYPE normal` on every data node at this period (drops in-flight
    /// acquires: their outcome becomes ambiguous).
    ClientKill(Duration),
    /// Mid-hold, the wall clock of the lock's node (RedLock: master 0, once the holder
    /// holds on masters 0–2 only) jumps forward by this much; see `clock_faults`.
    NodeClockJump(Duration),
    /// The wall clock of every data node runs `ppm` parts per million fast from the fault
    /// on (RedLock: as `masters` says); see `clock_drift`.
    NodeClockDrift {
        /// The drift rate.
        ppm: i64,
        /// Which RedLock masters drift.
        masters: DriftedMasters,
    },
    /// The Sentinel master refuses its replica's replication, grants once more, is SIGKILLed
    /// and the stale replica is promoted: the grant is lost; see `lost_grant`.
    FailoverLostGrant {
        /// How far the replica's wall clock is behind (zero: in step).
        replica_behind: Duration,
        /// Whether the workers' mutexes `WAIT` for a replica after each acquire.
        wait_replicas: bool,
    },
}

/// Which RedLock masters a [`RealFault::NodeClockDrift`] makes drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftedMasters {
    /// Every master, and nothing else happens (the simulator's `drifting_nodes`).
    Every,
    /// Master 0 only, in `node-clock-jump`'s Kleppmann setting (the simulator's
    /// `redlock_clock_ahead`): masters 3 and 4 cut so the holder has {n0, n1, n2}, then n0
    /// down for 3 s once it has drifted as long as the simulator's before its outage.
    MasterZero,
}

impl RealFault {
    /// Whether the fault kills the Sentinel master (the cell then restarts it afterwards).
    pub fn fails_over(&self) -> bool {
        matches!(self, RealFault::FailoverLostGrant { .. })
    }

    /// FairQueue's queue entry timeout for the run (`None`: the library's default). The
    /// lost-grant failovers use [`LOST_GRANT_QUEUE_ENTRY`], the node clock drifts
    /// [`DRIFT_QUEUE_ENTRY`]: see there.
    pub fn queue_entry(&self) -> Option<Duration> {
        match self {
            RealFault::FailoverLostGrant { .. } => Some(LOST_GRANT_QUEUE_ENTRY),
            RealFault::NodeClockDrift { .. } => Some(DRIFT_QUEUE_ENTRY),
            _ => None,
        }
    }

    /// Whether the workers renew with the watchdog: not where the fault's holder must be
    /// frozen (holder-pause), nor where the lost grant's holder must still believe its
    /// lease when the promoted replica grants again (a renewal reaching the new master
    /// would end its belief first; this models a holder busy in a long operation), nor
    /// under a node clock drift, which the simulator runs without renewals so that each
    /// lease ends by its holder's validity deadline against a key expiring by the drifted
    /// clock.
    pub fn leaves_watchdog_on(&self) -> bool {
        !matches!(
            self,
            RealFault::HolderPause(_)
                | RealFault::FailoverLostGrant { .. }
                | RealFault::NodeClockDrift { .. }
        )
    }
}

/// How long a scenario's workers hold, as the matching simulator scenario's do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// 20-200 ms: many hand-offs per second.
    Short,
    /// 0.5-1.5 TTL: the watchdog matters (the simulator's `long_holds`).
    Long,
    /// 1-2 TTL: a holder cut off mid-hold usually outlives its lease and learns of the loss
    /// from its lost signal (the simulator's family partitions).
    Longer,
}

/// One real-fault scenario.
#[derive(Debug, Clone, Copy)]
pub struct SafetyScenario {
    /// Table name.
    pub name: &'static str,
    /// The simulator scenario with the same fault shape, if any.
    pub sim: Option<&'static str>,
    /// docs/DESIGN.md §5 item.
    pub design_item: u8,
    /// What happens.
    pub summary: &'static str,
    /// Containers.
    pub topology: Topology,
    /// The fault.
    pub fault: RealFault,
    /// Strategies it runs for.
    pub strategies: &'static [Strategy],
    /// How long the workers hold.
    pub holds: Holds,
    /// Lease TTL.
    pub ttl: Duration,
    /// The member of the lock family the clients take (the strategies must allow it).
    pub kind: LockKind,
    /// Also run rslock's rows (single node, and RedLock where the scenario runs RedLock).
    pub rslock: bool,
}

/// Length of the holder pauses: past the lease (1 TTL) plus a hand-off, so another client
/// is granted while the paused holder still believes.
const HOLDER_PAUSE: Duration = Duration::from_millis(2_000);
/// Length of the node outages (pause, cut): past the lease, so every lease held at the
/// start runs out during the outage.
const NODE_OUTAGE: Duration = Duration::from_millis(1_500);
/// Length of the holder's partition: past the lease, as the simulator's 3 s partition.
const HOLDER_CUT: Duration = Duration::from_millis(2_000);
/// Down time of the immediate restarts: the simulator's 100 ms (`restart_after_ms` of
/// crash-restart-no-persistence), well inside the 1 s TTL and shorter than redis-rs' first
/// reconnect retry, so waiters come back before a holder's next renewal (docs/DESIGN.md §5).
const CRASH_DOWN: Duration = Duration::from_millis(100);
/// Down time of the delayed restart: 2 TTL, as the simulator's crash-restart-delayed.
const DELAYED_RESTART: Duration = Duration::from_millis(2_000);

/// The node clock drift of `node-clock-drift`: 30 % fast, the simulator's 300 000 ppm.
const NODE_DRIFT_PPM: i64 = 300_000;
/// The node clock drift of `node-clock-drift-within-margin`: 0.9 % fast, the simulator's
/// 9 000 ppm, inside the library's 1 % drift margin.
const NODE_DRIFT_WITHIN_MARGIN_PPM: i64 = 9_000;

/// The plain mutex (every scenario but the read-write lock's and the semaphore's).
const MUTEX: LockKind = LockKind::Mutex;

/// The catalogue, in docs/DESIGN.md §5 order; the read-write lock's and the semaphore's
/// rows follow the mutex's.
pub const SCENARIOS: &[SafetyScenario] = &[
    SafetyScenario {
        name: "holder-pause",
        sim: Some("holder-pause"),
        design_item: 1,
        summary: "The next holder after the fault point stops in process for 2 TTL (its watchdog off for the run, lost() unobserved), then writes with its old token.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::HolderPause(HOLDER_PAUSE),
        strategies: ALL,
        holds: Holds::Short,
        ttl: TTL,
        kind: MUTEX,
        rslock: true,
    },
    SafetyScenario {
        name: "holder-freeze",
        sim: Some("holder-pause"),
        design_item: 1,
        summary: "The holder's worker process (its own OS process, watchdog on) stops itself with SIGSTOP at a hold for 2 TTL and is continued: every timer of the client froze with it.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::HolderFreeze(HOLDER_PAUSE),
        strategies: ALL,
        holds: Holds::Short,
        ttl: TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "node-pause",
        sim: Some("node-pause"),
        design_item: 7,
        summary: "docker pause of the Redis node for 1.5 TTL mid-hold: renewals hang, lost() must fire before the lease ends.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::NodePause(NODE_OUTAGE),
        strategies: SINGLE,
        holds: Holds::Long,
        ttl: TTL,
        kind: MUTEX,
        rslock: true,
    },
    SafetyScenario {
        name: "partition",
        sim: Some("partition"),
        design_item: 7,
        summary: "Only the holder's connections are cut for 2 s: its renewals stall, lost() must fire before the others are granted.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::HolderPartition(HOLDER_CUT),
        strategies: SINGLE,
        holds: Holds::Long,
        ttl: TTL,
        kind: MUTEX,
        rslock: true,
    },
    SafetyScenario {
        name: "node-partition",
        sim: Some("node-partition"),
        design_item: 7,
        summary: "The node is cut from its network for 1.5 s (every client loses it) and restored.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::NodeCut(NODE_OUTAGE),
        strategies: SINGLE,
        holds: Holds::Long,
        ttl: TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "node-clock-jump",
        sim: Some("node-clock-jump"),
        design_item: 3,
        summary: "The node's wall clock jumps 5 s forward mid-hold: the lease key expires early while the holder trusts it. RedLock (Kleppmann): n3, n4 cut so the holder has {n0, n1, n2}; n0 jumps, a second quorum {n0, n3, n4} forms; n0 is down 3 s from 2 s later, so a quorum without it issues lower tokens.",
        topology: Topology::ClockedSingle,
        fault: RealFault::NodeClockJump(Duration::from_millis(5_000)),
        strategies: ALL,
        holds: Holds::Long,
        ttl: TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "node-clock-drift",
        sim: Some("node-clock-drift"),
        design_item: 4,
        summary: "The node's clock runs 30% fast for 4 TTL; watchdog off and holds of 1-2 TTL (the simulator's 1.2-1.5 s: every hold outlives its lease), so each key is gone after ~0.77 TTL of real time while its holder trusts it until 0.99 TTL. RedLock (holds of 0.5-1.5 TTL, as the simulator's): only n0 drifts; n3, n4 cut for 1.5 s so the holder has {n0, n1, n2}, then restored; after 4 s of drift (n0 1.2 s ahead, as in the simulator) n0 is down 3 s, so a quorum without it issues lower tokens.",
        topology: Topology::ClockedSingle,
        fault: RealFault::NodeClockDrift {
            ppm: NODE_DRIFT_PPM,
            masters: DriftedMasters::MasterZero,
        },
        strategies: ALL,
        holds: Holds::Longer,
        ttl: TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "node-clock-drift-within-margin",
        sim: Some("node-clock-drift-within-margin"),
        design_item: 4,
        summary: "Every node's clock (RedLock: every master's) runs 0.9% fast for 4 TTL, within the 1% drift margin; watchdog off and holds of 1-2 TTL: each holder's lost() must fire before its key expires by the fast clock.",
        topology: Topology::ClockedSingle,
        fault: RealFault::NodeClockDrift {
            ppm: NODE_DRIFT_WITHIN_MARGIN_PPM,
            masters: DriftedMasters::Every,
        },
        strategies: ALL,
        holds: Holds::Longer,
        ttl: TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "crash-restart-no-persistence",
        sim: Some("crash-restart-no-persistence"),
        design_item: 5,
        summary: "Server crash mid-hold and restart 100 ms later without persistence (RedLock: 3 of 5 masters): the lock is gone server-side while the holder still trusts it.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::CrashRecover(CRASH_DOWN),
        strategies: ALL,
        holds: Holds::Long,
        ttl: TTL,
        kind: MUTEX,
        rslock: true,
    },
    SafetyScenario {
        name: "crash-restart-aof-always",
        sim: Some("crash-restart-aof-always"),
        design_item: 5,
        summary: "As crash-restart-no-persistence with appendfsync always: the lock survives the restart.",
        topology: Topology::Single(Persistence::AppendOnlyAlways),
        fault: RealFault::CrashRecover(CRASH_DOWN),
        strategies: ALL,
        holds: Holds::Long,
        ttl: TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "crash-restart-delayed",
        sim: Some("crash-restart-delayed"),
        design_item: 5,
        summary: "SIGKILL mid-hold, restart empty only after 2 TTL: every lost() fires during the outage.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::Restart(DELAYED_RESTART),
        strategies: ALL,
        holds: Holds::Long,
        ttl: TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "failover-lost-grant",
        sim: Some("failover-async-replication"),
        design_item: 6,
        summary: "The master refuses its replica's replication, grants once more and is SIGKILLed; SENTINEL FAILOVER promotes the stale replica: the grant is lost, a second holder appears, fencing rejects the first holder's stale write. Watchdog off, 5 s TTL (the failover takes seconds). FairQueue waiters' queue entries last 1 s (see LOST_GRANT_QUEUE_ENTRY).",
        topology: Topology::Sentinel,
        fault: RealFault::FailoverLostGrant {
            replica_behind: Duration::ZERO,
            wait_replicas: false,
        },
        strategies: SINGLE,
        holds: Holds::Long,
        ttl: FAILOVER_TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "failover-lost-grant-wait",
        sim: Some("failover-async-replication"),
        design_item: 6,
        summary: "As failover-lost-grant with wait_replicas(1): WAIT cannot prevent the loss, it reports the lost grant as acknowledged by 0 replicas. FairQueue waiters' queue entries last 1 s (see LOST_GRANT_QUEUE_ENTRY).",
        topology: Topology::Sentinel,
        fault: RealFault::FailoverLostGrant {
            replica_behind: Duration::ZERO,
            wait_replicas: true,
        },
        strategies: SINGLE,
        holds: Holds::Long,
        ttl: FAILOVER_TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "failover-replica-clock-behind",
        sim: Some("failover-replica-clock-behind"),
        design_item: 6,
        summary: "As failover-lost-grant with the replica's clock 10 s behind: the promoted master issues the last replicated token + 1, below the lost grant's (fencing goes backwards), and replicated expiries outlive their TTL by the skew. RedLock's replicated-master variant is not run (no such topology). FairQueue waiters' queue entries last 1 s (see LOST_GRANT_QUEUE_ENTRY).",
        topology: Topology::ClockedSentinel,
        fault: RealFault::FailoverLostGrant {
            replica_behind: REPLICA_BEHIND,
            wait_replicas: false,
        },
        strategies: SINGLE,
        holds: Holds::Long,
        ttl: FAILOVER_TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "ambiguous-acquire",
        sim: Some("ambiguous-acquire"),
        design_item: 9,
        summary: "CLIENT KILL TYPE normal every 300 ms: in-flight acquires, renewals and releases lose their connection.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::ClientKill(Duration::from_millis(300)),
        strategies: ALL,
        holds: Holds::Short,
        ttl: TTL,
        kind: MUTEX,
        rslock: true,
    },
    SafetyScenario {
        name: "script-flush",
        sim: Some("script-flush"),
        design_item: 10,
        summary: "SCRIPT FLUSH every 500 ms: EVALSHA answers NOSCRIPT, the client falls back to EVAL.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::ScriptFlush(Duration::from_millis(500)),
        strategies: ALL,
        holds: Holds::Short,
        ttl: TTL,
        kind: MUTEX,
        rslock: false,
    },
    SafetyScenario {
        name: "rwlock-holder-pause",
        sim: Some("rwlock-holder-pause"),
        design_item: 1,
        summary: "Read-write lock, 4 clients reading 60 % of the time: the next holder after the fault point (reader or writer) stops in process for 2 TTL; a conflicting hold is granted while it still believes.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::HolderPause(HOLDER_PAUSE),
        strategies: RWLOCK_STRATEGIES,
        holds: Holds::Short,
        ttl: TTL,
        kind: RWLOCK,
        rslock: false,
    },
    SafetyScenario {
        name: "rwlock-partition",
        sim: Some("rwlock-partition"),
        design_item: 7,
        summary: "Read-write lock: the holder's connections are cut for 2 s; its lost() must fire before a conflicting grant.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::HolderPartition(HOLDER_CUT),
        strategies: RWLOCK_STRATEGIES,
        holds: Holds::Longer,
        ttl: TTL,
        kind: RWLOCK,
        rslock: false,
    },
    SafetyScenario {
        name: "rwlock-crash-restart",
        sim: Some("rwlock-crash-restart"),
        design_item: 5,
        summary: "Read-write lock: server crash mid-hold and restart 100 ms later without persistence; the readers set and the write hash vanish while their holders still trust them.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::CrashRecover(CRASH_DOWN),
        strategies: RWLOCK_STRATEGIES,
        holds: Holds::Long,
        ttl: TTL,
        kind: RWLOCK,
        rslock: false,
    },
    SafetyScenario {
        name: "rwlock-ambiguous-acquire",
        sim: Some("rwlock-lossy"),
        design_item: 9,
        summary: "Read-write lock: CLIENT KILL TYPE normal every 300 ms, so read and write acquires, renewals and releases lose their replies (the simulator loses 2 % of messages).",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::ClientKill(Duration::from_millis(300)),
        strategies: RWLOCK_STRATEGIES,
        holds: Holds::Short,
        ttl: TTL,
        kind: RWLOCK,
        rslock: false,
    },
    SafetyScenario {
        name: "semaphore-holder-pause",
        sim: Some("semaphore-holder-pause"),
        design_item: 1,
        summary: "Semaphore of 2 permits, 4 clients: the next holder after the fault point stops in process for 2 TTL; its permit is granted again while it still believes (a third holder of two permits).",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::HolderPause(HOLDER_PAUSE),
        strategies: SINGLE,
        holds: Holds::Short,
        ttl: TTL,
        kind: SEMAPHORE,
        rslock: false,
    },
    SafetyScenario {
        name: "semaphore-partition",
        sim: Some("semaphore-partition"),
        design_item: 7,
        summary: "Semaphore of 2 permits: a holder's connections are cut for 2 s; its lost() must fire before its permit is granted again.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::HolderPartition(HOLDER_CUT),
        strategies: SINGLE,
        holds: Holds::Longer,
        ttl: TTL,
        kind: SEMAPHORE,
        rslock: false,
    },
    SafetyScenario {
        name: "semaphore-crash-restart",
        sim: Some("semaphore-crash-restart"),
        design_item: 5,
        summary: "Semaphore of 2 permits: server crash mid-hold and restart 100 ms later without persistence; the permits set vanishes while its holders still trust it.",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::CrashRecover(CRASH_DOWN),
        strategies: SINGLE,
        holds: Holds::Long,
        ttl: TTL,
        kind: SEMAPHORE,
        rslock: false,
    },
    SafetyScenario {
        name: "semaphore-ambiguous-acquire",
        sim: Some("semaphore-lossy"),
        design_item: 9,
        summary: "Semaphore of 2 permits: CLIENT KILL TYPE normal every 300 ms (the simulator loses 2 % of messages).",
        topology: Topology::Single(Persistence::None),
        fault: RealFault::ClientKill(Duration::from_millis(300)),
        strategies: SINGLE,
        holds: Holds::Short,
        ttl: TTL,
        kind: SEMAPHORE,
        rslock: false,
    },
];

/// Looks a scenario up by name.
pub fn find(name: &str) -> Option<&'static SafetyScenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

impl SafetyScenario {
    /// Whether the fault stops a worker's process, which then runs on its own.
    pub fn fault_needs_process(&self) -> bool {
        matches!(self.fault, RealFault::HolderFreeze(_))
    }

    /// Contending clients per try: the simulator's count for the same lock kind.
    pub fn clients(&self) -> usize {
        match self.kind {
            LockKind::Mutex => CLIENTS,
            LockKind::ReadWrite { .. } | LockKind::Semaphore { .. } => FAMILY_CLIENTS,
        }
    }

    /// Hold time range of this scenario's workers for `strategy`. RedLock in the Kleppmann
    /// clock setting ([`DriftedMasters::MasterZero`]) holds as in `node-clock-jump`
    /// ([`Holds::Long`]), as the simulator's `redlock_clock_ahead` does whatever its
    /// scenario's single-node cells hold: shorter hand-offs than a TTL are what let a
    /// grant without the drifted master follow one with it by less than its lead.
    pub fn holds(&self, strategy: Strategy) -> (Duration, Duration) {
        let holds = match self.fault {
            RealFault::NodeClockDrift {
                masters: DriftedMasters::MasterZero,
                ..
            } if strategy == Strategy::RedLock => Holds::Long,
            _ => self.holds,
        };
        match holds {
            Holds::Short => (Duration::from_millis(20), Duration::from_millis(200)),
            Holds::Long => (self.ttl / 2, self.ttl * 3 / 2),
            Holds::Longer => (self.ttl, self.ttl * 2),
        }
    }
}

/// Think time between a worker's holds (the simulator's contended workload).
pub const THINK: (Duration, Duration) = (Duration::ZERO, Duration::from_millis(50));
