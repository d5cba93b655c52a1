//! The fault vocabulary: what can go wrong, when, and to whom.
//!
//! Invariant: a run's faults are a plain, serialisable schedule fixed before the run
//! (clock faults are folded into the clock models up front), so a schedule can be printed,
//! shrunk and replayed; faults aimed at "the holder" or "a waiter" are resolved from the
//! history at the instant they fire, deterministically (lowest process id first).

use serde::{Deserialize, Serialize};

use crate::model::NodeId;
pub use crate::model::eviction::EvictionPolicy;
use crate::world::net::ProcId;

/// Which client process a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProcSel {
    /// This process.
    Id(ProcId),
    /// Whoever believes it holds a lock when the fault fires.
    Holder,
    /// Whoever is waiting for a lock when the fault fires.
    Waiter,
}

/// One fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Fault {
    /// Stop-the-world pause: the process's tasks do not run; its timers fire late.
    Pause {
        /// Victim.
        who: ProcSel,
        /// Length in ms.
        ms: u64,
    },
    /// The process dies (its tasks vanish, its locks are orphaned); optionally restarts.
    Crash {
        /// Victim.
        who: ProcSel,
        /// Restart after this many ms, if any.
        restart_after_ms: Option<u64>,
    },
    /// The process is cut from every Redis node (not from the resource): what its
    /// connections send across the cut waits for the heal, or their reset if the cut
    /// outlasts TCP's retransmission budget (see `net`).
    Isolate {
        /// Victim.
        who: ProcSel,
        /// Length in ms.
        ms: u64,
    },
    /// The process is cut from one node only (a partial partition), the others still
    /// reachable: held and reset as for `Isolate`.
    CutFrom {
        /// Victim.
        who: ProcSel,
        /// The node it cannot reach.
        node: NodeId,
        /// Length in ms.
        ms: u64,
    },
    /// One way of the process's links to every node is cut: with `replies`, its requests
    /// reach the nodes and run while their replies (and pushes) are held; without, its
    /// requests are held. Held and reset as for `Isolate`.
    OneWay {
        /// Victim.
        who: ProcSel,
        /// Replies are held (else requests).
        replies: bool,
        /// Length in ms.
        ms: u64,
    },
    /// Everything the process sends or receives is delayed.
    Slow {
        /// Victim.
        who: ProcSel,
        /// Extra one-way delay in ms.
        extra_ms: u64,
        /// Length in ms.
        ms: u64,
    },
    /// The process's clock changes rate from now on.
    ClientClockDrift {
        /// Victim.
        proc: ProcId,
        /// Rate error in parts per million (positive: fast).
        ppm: i64,
    },
    /// The process's monotonic clock jumps forward.
    ClientClockJump {
        /// Victim.
        proc: ProcId,
        /// Jump in ms (forward only; monotonic clocks ignore backward jumps).
        by_ms: i64,
    },
    /// A node's wall clock steps (forward expires keys early).
    NodeClockJump {
        /// Victim.
        node: NodeId,
        /// Step in ms (may be negative).
        by_ms: i64,
    },
    /// A node's wall clock runs fast or slow from now on (its expiries come early or late
    /// in true time; its tokens stay monotonic).
    NodeClockDrift {
        /// Victim (a replica too: its clock matters once it is promoted).
        node: NodeId,
        /// Rate error in parts per million (positive: fast).
        ppm: i64,
    },
    /// A Redis node crashes; optionally restarts with what its persistence kept.
    NodeCrash {
        /// Victim.
        node: NodeId,
        /// Restart after this many ms, if any.
        restart_after_ms: Option<u64>,
    },
    /// A Redis node stalls (`docker pause`, a long fork or disk stall): it answers nothing
    /// and replicates nothing for this long, then works through what arrived meanwhile,
    /// with its clock having run on (so leases that ended during the stall are gone).
    NodePause {
        /// Victim.
        node: NodeId,
        /// Length in ms.
        ms: u64,
    },
    /// A Redis node is cut from every client and every other node for this long (its
    /// network fails): what connections send across the cut waits for the heal, or their
    /// reset if the cut outlasts TCP's retransmission budget; replication across it is lost
    /// (see `net`).
    NodeIsolate {
        /// Victim.
        node: NodeId,
        /// Length in ms.
        ms: u64,
    },
    /// The group's master dies and its most up-to-date replica is promoted; or, with a
    /// `split`, the master is cut off with some clients and a replica is promoted while the
    /// old master lives on for them.
    Failover {
        /// Replication group.
        group: usize,
        /// The old master restarts (as a replica) after this many ms, if any (a crash
        /// failover; a split's old master rejoins when the split heals).
        restart_after_ms: Option<u64>,
        /// A network split instead of a crash.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        split: Option<Split>,
        /// A crash failover's promotion comes this many ms after the crash (Sentinel's
        /// `down-after-milliseconds` plus its election), the group meanwhile without a
        /// master that accepts writes; at once if absent. No promotion happens if the old
        /// master is back by then.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        promote_after_ms: Option<u64>,
    },
    /// The replication link between a replica and its master is cut: what the master
    /// replicates across it is lost, and the replica resynchronises when it heals.
    ReplicaCut {
        /// The replica.
        replica: NodeId,
        /// Length in ms.
        ms: u64,
    },
    /// An operator runs `SCRIPT FLUSH`.
    ScriptFlush {
        /// Node.
        node: NodeId,
    },
    /// The node runs out of memory under `maxmemory` with a `volatile-*` policy and evicts
    /// keys that carry a TTL (every lock key does), live locks included; the evictions
    /// replicate as deletions.
    Evict {
        /// Victim.
        node: NodeId,
        /// Which keys with a TTL go first.
        policy: EvictionPolicy,
        /// How many keys it evicts.
        keys: u32,
        /// The keys it did evict: empty in a schedule, filled in the fault log when the
        /// fault lands, so only a hold whose key went is excused by it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evicted: Vec<String>,
    },
    /// The process is cut from the Sentinels (not from the Redis nodes): its lookups are
    /// held as across any cut and time out, so a client that drops its master meanwhile
    /// cannot find one.
    SentinelCut {
        /// Victim.
        who: ProcSel,
        /// Length in ms.
        ms: u64,
    },
    /// The Sentinel the clients ask first lags behind the others: for `ms` it names the
    /// master the group had `lag_ms` ago (it learns of a promotion only from the others'
    /// hello messages, and a Sentinel cut off during a failover names the old master until
    /// it rejoins), whether that node is dead, a replica again or a cut-off zombie.
    SentinelStale {
        /// Replication group.
        group: usize,
        /// How far behind its view is, in ms.
        lag_ms: u64,
        /// Length in ms.
        ms: u64,
    },
}

/// How a split failover unfolds: the way Redis Sentinel deployments really lose locks.
/// The old master stays up, cut from its replicas and from every client but `near`, which
/// keeps reaching it (and only it) as the master: a zombie that grants and renews. After
/// `detect_ms` (Sentinel's down-after-milliseconds plus its election), the most up-to-date
/// replica is promoted for everyone else. When the split heals, the old master rejoins as
/// a replica of the new one and drops what it granted meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// The client left on the old master's side.
    pub near: ProcSel,
    /// From the split to the promotion, in ms.
    pub detect_ms: u64,
    /// From the split to its healing, in ms (at least `detect_ms`).
    pub heal_after_ms: u64,
}

/// A fault and when it fires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduledFault {
    /// Virtual milliseconds from the start of the run.
    pub at_ms: u64,
    /// The fault.
    pub fault: Fault,
}

impl Fault {
    /// A short name for tables and CLI filters.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Pause { .. } => "pause",
            Self::Crash { .. } => "crash",
            Self::Isolate { .. } => "partition",
            Self::Slow { .. } => "delay",
            Self::ClientClockDrift { .. } => "client-drift",
            Self::ClientClockJump { .. } => "client-jump",
            Self::NodeClockJump { .. } => "node-jump",
            Self::NodeClockDrift { .. } => "node-drift",
            Self::NodeCrash { .. } => "node-crash",
            Self::NodePause { .. } => "node-pause",
            Self::NodeIsolate { .. } => "node-partition",
            Self::Failover { .. } => "failover",
            Self::ScriptFlush { .. } => "script-flush",
            Self::Evict { .. } => EVICT,
            Self::CutFrom { .. } => NODE_CUT,
            Self::OneWay { .. } => ONE_WAY,
            Self::ReplicaCut { .. } => REPL_CUT,
            Self::SentinelCut { .. } => SENTINEL_CUT,
            Self::SentinelStale { .. } => SENTINEL_STALE,
        }
    }

    /// Every fault kind name, for the CLI.
    pub const KINDS: [&'static str; 19] = [
        "pause",
        "crash",
        "partition",
        "delay",
        "client-drift",
        "client-jump",
        "node-jump",
        "node-crash",
        "node-pause",
        "node-partition",
        "failover",
        "script-flush",
        "node-drift",
        EVICT,
        NODE_CUT,
        ONE_WAY,
        REPL_CUT,
        SENTINEL_CUT,
        SENTINEL_STALE,
    ];
}

/// The kind name of [`Fault::Evict`] (drawn apart from the scheduled faults, see
/// `memory`).
pub const EVICT: &str = "evict";

/// The kind name of [`Fault::CutFrom`] (drawn apart, see `links`).
pub const NODE_CUT: &str = "node-cut";

/// The kind name of [`Fault::OneWay`] (drawn apart, see `links`).
pub const ONE_WAY: &str = "one-way";

/// The kind name of [`Fault::ReplicaCut`] (drawn apart, see `links`).
pub const REPL_CUT: &str = "repl-cut";

/// The kind name of [`Fault::SentinelCut`] (drawn apart, see `lookups`).
pub const SENTINEL_CUT: &str = "sentinel-cut";

/// The kind name of [`Fault::SentinelStale`] (drawn apart, see `lookups`).
pub const SENTINEL_STALE: &str = "sentinel-stale";

/// The kinds drawn apart from the swarm's mix of scheduled faults, each by a draw of its
/// own after every other (`node_clocks`, `memory`, `links`, `lookups`), so adding one
/// changed no earlier choice.
pub const APART: [&str; 7] = [
    "node-drift",
    EVICT,
    NODE_CUT,
    ONE_WAY,
    REPL_CUT,
    SENTINEL_CUT,
    SENTINEL_STALE,
];
