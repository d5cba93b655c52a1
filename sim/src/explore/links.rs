//! The swarm's draw of partial partitions: a client cut from one node only, a client whose
//! links lose one way, and a replica cut from its master.
//!
//! Why it exists: a partition is rarely whole. A RedLock client cut from one master still
//! reaches a quorum without it; a Sentinel client cut from its master still reaches the
//! Sentinels, which name the same master; a link that loses replies runs every request
//! and tells the client nothing (each a lock call that took effect unseen); a replica cut
//! from its master misses every write for the cut's length, and a failover then loses them
//! all. None of these excuses a lock's anomaly (`checker::causes`): a client fault only
//! makes the client give up sooner, and a replica behind its master loses writes only
//! through the failover that promotes it, which is excused as such.
//!
//! Invariant: these draws come after every other draw of a swarm spec, so adding them
//! changed no earlier choice; each client fault drawn here adds one plain liveness bound,
//! as the client faults drawn with the others do (a client cut off holds the line until
//! its lease or entry ends).

use crate::engine::rng::SimRng;
use crate::explore::params;
use crate::scenario::run::RunSpec;
use crate::world::faults::{Fault, NODE_CUT, ONE_WAY, ProcSel, REPL_CUT, ScheduledFault};

/// Share of runs with a client cut from one node, and with one-way loss.
const RUNS: f64 = 0.06;

/// Share of runs with replicas that cut a replica from its master (about half the runs
/// have replicas).
const REPL_CUT_RUNS: f64 = 0.12;

/// Longest cut drawn, ms at a 1 s lease (as for the other partitions).
const MAX_CUT_MS: u64 = 4_000;

/// Draws `spec`'s partial partitions among the `enabled` fault kinds: in some runs a
/// client cut from one node, in some one-way loss on a client's links, and, in runs with
/// replicas, a replica cut from its master.
pub fn draw(rng: &mut SimRng, spec: &mut RunSpec, enabled: impl Fn(&str) -> bool) {
    let horizon_ms = u64::try_from(spec.horizon.as_millis()).unwrap_or(u64::MAX);
    let scale = params::Scale::of(spec.workload.ttl);
    let per_client_fault = params::bound(spec);
    let when = |rng: &mut SimRng| {
        let at_ms = rng.between(horizon_ms / 20, horizon_ms * 8 / 10);
        (at_ms, scale.ms(rng.between(50, MAX_CUT_MS)))
    };
    let mut faults = Vec::new();
    if enabled(NODE_CUT) && rng.chance(RUNS) {
        let (at_ms, ms) = when(rng);
        let who = ProcSel::Id(rng.index(spec.clients));
        let node = rng.index(spec.deployment.nodes.len().max(1));
        faults.push(ScheduledFault {
            at_ms,
            fault: Fault::CutFrom { who, node, ms },
        });
    }
    if enabled(ONE_WAY) && rng.chance(RUNS) {
        let (at_ms, ms) = when(rng);
        let who = ProcSel::Id(rng.index(spec.clients));
        let replies = rng.chance(0.5);
        faults.push(ScheduledFault {
            at_ms,
            fault: Fault::OneWay { who, replies, ms },
        });
    }
    let replicas: Vec<usize> = spec
        .deployment
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.replica_of.is_some())
        .map(|(id, _)| id)
        .collect();
    if !replicas.is_empty() && enabled(REPL_CUT) && rng.chance(REPL_CUT_RUNS) {
        let (at_ms, ms) = when(rng);
        let replica = replicas[rng.index(replicas.len())];
        faults.push(ScheduledFault {
            at_ms,
            fault: Fault::ReplicaCut { replica, ms },
        });
    }
    let client_faults = faults
        .iter()
        .filter(|f| !matches!(f.fault, Fault::ReplicaCut { .. }))
        .count();
    spec.check.liveness_bound += per_client_fault * u32::try_from(client_faults).unwrap_or(0);
    spec.faults.extend(faults);
    spec.faults.sort_by_key(|f| f.at_ms);
}
