//! One simulation run: a deployment, a workload, a fault schedule and a seed in; a
//! verdict, statistics and (optionally) the trace out.
//!
//! Invariant: `run(spec)` is a pure function of `spec` — the replay command rebuilds the
//! same spec from the seed and options and gets the same trace.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::checker::{self, CheckConfig, Findings, Nodes};
use crate::model::NodeId;
use crate::model::coverage::Coverage;
use crate::model::node::{Persistence, ServerClock};
use crate::workload::client;
use crate::workload::client_marks;
use crate::workload::designs::file::DesignFile;
use crate::workload::designs::{self, Which};
use crate::workload::{LockKind, Reentry, Strategy, Workload};
use crate::world::executor::SentinelEvidence;
use crate::world::faults::ScheduledFault;
use crate::world::history::{FaultMark, HistEvent};
use crate::world::net::{NetConfig, Target};
use crate::world::{NodeSpec, RunEnd, SimError, World, WorldConfig};

/// Masters of a RedLock deployment: the N = 5 the RedLock description uses (a quorum of 3
/// tolerates 2 masters down).
pub const REDLOCK_MASTERS: usize = 5;

/// The Redis deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    /// Nodes.
    pub nodes: Vec<NodeSpec>,
    /// What each client connects to.
    pub targets: Vec<Target>,
    /// Replication groups' initial masters.
    pub groups: Vec<usize>,
    /// How the servers' scripts read the clock (their Redis version).
    #[serde(default)]
    pub server_clock: ServerClock,
}

impl Deployment {
    /// One master, no persistence.
    pub fn single() -> Self {
        Self::masters(1)
    }

    /// A master with `replicas` replicas, reached through discovery (`Target::Service`).
    pub fn replicated(replicas: usize) -> Self {
        Self::masters_replicated(1, replicas)
    }

    /// `n` independent masters (nodes `0..n`), every client connected to each (RedLock).
    pub fn masters(n: usize) -> Self {
        Self {
            nodes: vec![NodeSpec::default(); n],
            targets: (0..n).map(Target::Node).collect(),
            groups: Vec::new(),
            server_clock: ServerClock::Frozen,
        }
    }

    /// As [`Deployment::masters`], but master 0 has `replicas` replicas (nodes `n..`) and
    /// is reached through discovery, so it can fail over (group 0).
    pub fn masters_replicated(n: usize, replicas: usize) -> Self {
        let mut deployment = Self::masters(n.max(1));
        deployment.nodes.extend((0..replicas).map(|_| NodeSpec {
            replica_of: Some(0),
            ..NodeSpec::default()
        }));
        deployment.targets[0] = Target::Service(0);
        deployment.groups = vec![0];
        deployment
    }

    /// This deployment with every node persisting as `persistence`.
    pub fn persisting(mut self, persistence: Persistence) -> Self {
        for node in &mut self.nodes {
            node.persistence = persistence;
        }
        self
    }

    /// What `strategy` runs on: one node, or [`REDLOCK_MASTERS`] masters.
    pub fn for_strategy(strategy: Strategy) -> Self {
        Self::masters(Self::master_count(strategy))
    }

    /// What `strategy` runs on with a replicated, failover-capable group 0 (the single
    /// node, or RedLock's master 0).
    pub fn replicated_for(strategy: Strategy, replicas: usize) -> Self {
        Self::masters_replicated(Self::master_count(strategy), replicas)
    }

    /// Independent masters `strategy` uses.
    pub fn master_count(strategy: Strategy) -> usize {
        match strategy {
            Strategy::RedLock => REDLOCK_MASTERS,
            Strategy::Spin | Strategy::PubSub | Strategy::FairQueue => 1,
        }
    }

    /// The first replica's node id, if any.
    pub fn first_replica(&self) -> Option<NodeId> {
        self.nodes.iter().position(|n| n.replica_of.is_some())
    }
}

/// Everything that defines a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    /// Seed.
    pub seed: u64,
    /// Number of client processes.
    pub clients: usize,
    /// What each client does.
    pub workload: Workload,
    /// Redis deployment.
    pub deployment: Deployment,
    /// Network.
    pub net: NetConfig,
    /// Fault schedule.
    pub faults: Vec<ScheduledFault>,
    /// Virtual run length.
    #[serde(with = "crate::engine::duration_text")]
    pub horizon: Duration,
    /// Checker parameters.
    pub check: CheckConfig,
    /// Record the trace.
    pub trace: bool,
    /// A design described by a file whose clients the run uses instead of Leasehold's (or
    /// of the workload's built-in design), carried whole so the spec replays without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design_file: Option<DesignFile>,
}

/// Counters of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct RunStats {
    /// Executor polls.
    pub polls: u64,
    /// Commands the Redis nodes processed.
    pub commands: u64,
    /// Successful acquisitions.
    pub acquisitions: u64,
    /// Virtual milliseconds simulated.
    pub virtual_ms: u64,
    /// What the Sentinel faults did (stale answers, lookups across a cut).
    pub sentinel: SentinelEvidence,
    /// Messages the network's loss model lost on client connections.
    pub losses: u64,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The checker's findings.
    pub findings: Findings,
    /// How the run ended.
    pub end: RunEnd,
    /// The trace (empty unless `spec.trace`).
    pub trace: String,
    /// Counters.
    pub stats: RunStats,
    /// The script call sites the run reached (empty unless run by [`run_covered`]).
    pub coverage: Coverage,
    /// The client paths the run took ([`client_marks`]; empty unless run by
    /// [`run_covered`]).
    pub client_marks: BTreeSet<String>,
    /// The history the checker judged (kept for the run's picture, [`crate::report::picture`]).
    pub history: Vec<HistEvent>,
    /// The faults that landed, as the checker saw them.
    pub fault_log: Vec<FaultMark>,
}

impl RunResult {
    /// The verdict, with a livelock counted as starvation (nobody makes progress).
    pub fn verdict(&self) -> checker::Verdict {
        match self.end {
            RunEnd::Livelock => self.findings.verdict.max(checker::Verdict::Starvation),
            RunEnd::Horizon => self.findings.verdict,
        }
    }
}

/// Slack for a waiter's own scheduling on top of its wake-up: the simulator's hiccups stop
/// a client for up to 1 ms after a poll, and a wake takes a few polls (timer, reply,
/// subscription message).
const WAKE_SLACK: Duration = Duration::from_millis(20);

/// How soon, at the latest, a semaphore waiter told "busy" asks again once a permit is
/// free on the server ([`CheckConfig::permit_wake`]): the slowest wake of any wait
/// strategy (a Spin poll, or any waiter whose subscription is down, [`leasehold::Backoff`]'s
/// `SPIN.max`; a PubSub release message or a busy answer's PTTL come sooner), plus two
/// round trips of the run's network for the message that wakes it and its subscription's
/// retry, and [`WAKE_SLACK`].
fn permit_wake(net: &NetConfig) -> Duration {
    leasehold::Backoff::SPIN.max + net.max_delay * 4 + WAKE_SLACK
}

/// Runs `spec` to its horizon and checks the history.
pub fn run(spec: &RunSpec) -> Result<RunResult, SimError> {
    run_recording(spec, false)
}

/// [`run`], recording which script call sites the run reaches and which client paths it
/// takes (the same run: recording only observes).
pub fn run_covered(spec: &RunSpec) -> Result<RunResult, SimError> {
    run_recording(spec, true)
}

fn run_recording(spec: &RunSpec, coverage: bool) -> Result<RunResult, SimError> {
    let mut world = World::new(WorldConfig {
        seed: spec.seed,
        nodes: spec.deployment.nodes.clone(),
        targets: spec.deployment.targets.clone(),
        groups: spec.deployment.groups.clone(),
        net: spec.net,
        faults: spec.faults.clone(),
        trace: spec.trace,
        server_clock: spec.deployment.server_clock,
    })?;
    if coverage {
        world.record_coverage()?;
    }
    if let LockKind::Semaphore { permits } = spec.workload.kind {
        let locks: Vec<String> = (0..spec.workload.locks.max(1))
            .map(client::lock_name)
            .collect();
        world.count_permits(&locks, permits);
    }
    let main = match (&spec.design_file, spec.workload.design) {
        (Some(file), _) => {
            designs::process_main(Which::File(Arc::new(file.clone())), spec.workload)
        }
        (None, Some(design)) => designs::process_main(Which::Builtin(design), spec.workload),
        (None, None) => client::process_main(spec.workload),
    };
    for i in 0..spec.clients {
        // Staggered starts (1 ms apart) give the first client a deterministic head start,
        // so "the holder" exists when early faults fire.
        world.add_process(Duration::from_millis(i as u64), Arc::clone(&main));
    }
    let (end, client_marks) = if coverage {
        client_marks::recording(|| world.run(spec.horizon))
    } else {
        (world.run(spec.horizon), BTreeSet::new())
    };
    let horizon = u64::try_from(spec.horizon.as_nanos()).unwrap_or(u64::MAX);
    let history = world.history();
    // A re-entering workload's holds may carry a longer lease than the outer one's.
    let reentry_ttl = match spec.workload.reentry {
        Some(Reentry::Nested { ttl, .. } | Reentry::Sibling { ttl }) => ttl,
        None => Duration::ZERO,
    };
    let check = CheckConfig {
        shared_owner: spec.workload.reentry.is_some(),
        lease_ttl: spec.check.lease_ttl.max(reentry_ttl),
        // A waiter handed the lock believes it only once `WAIT` answers (up to its
        // timeout), so a line whose grants wait for replicas is not judged for hand-offs.
        fair_entry_timeout: (spec.workload.strategy == Strategy::FairQueue
            && spec.workload.wait_replicas.is_none())
        .then(|| {
            spec.workload
                .entry_timeout
                .unwrap_or(leasehold::DEFAULT_QUEUE_ENTRY_TIMEOUT)
        }),
        // A fair writer waits by its line entry, not an intent: the line's order judges it.
        writer_intent: (matches!(spec.workload.kind, LockKind::ReadWrite { .. })
            && spec.workload.strategy != Strategy::FairQueue)
            .then_some(leasehold::DEFAULT_WRITER_INTENT_TIMEOUT),
        permit_wake: matches!(spec.workload.kind, LockKind::Semaphore { .. })
            .then(|| permit_wake(&spec.net)),
        // Another design's clients issue no fencing token.
        unfenced: spec.workload.design.is_some() || spec.design_file.is_some(),
        ..spec.check
    };
    let nodes = Nodes {
        clocks: world.node_clocks(),
        persistence: spec
            .deployment
            .nodes
            .iter()
            .map(|n| n.persistence)
            .collect(),
        groups: spec
            .deployment
            .groups
            .iter()
            .map(|&master| {
                let replicas = (0..spec.deployment.nodes.len())
                    .filter(|&n| spec.deployment.nodes[n].replica_of == Some(master));
                std::iter::once(master).chain(replicas).collect()
            })
            .collect(),
        fence_margin: spec
            .workload
            .fence_margin
            .unwrap_or(leasehold::DEFAULT_FENCE_MARGIN),
        targets: spec.deployment.targets.clone(),
        keys_at_end: world.keys_at(horizon),
        key_lifetime: spec.workload.ttl.max(reentry_ttl)
            + spec
                .workload
                .entry_timeout
                .unwrap_or(leasehold::DEFAULT_QUEUE_ENTRY_TIMEOUT)
            + leasehold::DEFAULT_WRITER_INTENT_TIMEOUT
            + spec
                .workload
                .fence_margin
                .unwrap_or(leasehold::DEFAULT_FENCE_MARGIN),
    };
    let fault_log = world.fault_log();
    let findings = checker::check(&history, (&fault_log, &nodes), &check, horizon);
    let stats = RunStats {
        polls: world.polls(),
        commands: world.node_commands(),
        acquisitions: findings.acquisitions,
        virtual_ms: u64::try_from(spec.horizon.as_millis()).unwrap_or(u64::MAX),
        sentinel: world.sentinel_evidence(),
        losses: world.message_losses(),
    };
    let trace = world.trace();
    let coverage = world.coverage();
    world.shutdown();
    Ok(RunResult {
        findings,
        end,
        trace,
        stats,
        coverage,
        client_marks,
        history,
        fault_log,
    })
}
