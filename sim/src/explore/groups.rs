//! The swarm's replication groups: which masters of a run have replicas, and the
//! failovers drawn against them.
//!
//! Why it exists: with replicas only ever behind master 0, a RedLock run never lost any
//! master but the first to a failover, nor two masters of one quorum to two failovers, and
//! RedLock's masters are not interchangeable (the token is the maximum over the granting
//! ones, and each master keeps its own fence key).
//!
//! Invariant: every group is one of the independent masters (nodes `0..masters`), reached
//! through discovery (`Target::Service(group)`), with its replicas after the masters; a
//! failover names only a group the deployment has. A deployment of one replicated master
//! draws no word for its group, so single-node runs draw what they drew before.

use std::time::Duration;

use crate::engine::rng::SimRng;
use crate::explore::params::Scale;
use crate::model::NodeId;
use crate::model::node::MinReplicas;
use crate::scenario::run::{Deployment, RunSpec};
use crate::workload::Strategy;
use crate::world::NodeSpec;
use crate::world::faults::{Fault, ProcSel, Split};
use crate::world::net::Target;

/// Fewest and most replicas per replicated master (uniform).
const REPLICAS_RANGE: (u64, u64) = (1, 2);

/// Shortest and longest replication lag, ms (uniform): from a same-rack link to a
/// replica far behind under load.
const REPL_LAG_RANGE_MS: (u64, u64) = (1, 500);

/// Share of failovers that are splits (a zombie master one client keeps using).
const SPLIT_CHANCE: f64 = 0.5;

/// Gives `spec` replicas, so failovers can hit it: the single node, or, on RedLock's
/// masters, one to a quorum of them (consecutive from a drawn master, wrapping): failing
/// over a quorum's worth of masters is where a lock held on async replicas can be lost.
pub fn replicate(rng: &mut SimRng, spec: &mut RunSpec) {
    let replicas = rng.between(REPLICAS_RANGE.0, REPLICAS_RANGE.1) as usize;
    let persistence = spec.deployment.nodes[0].persistence;
    let masters = spec.deployment.targets.len();
    spec.net.repl_lag =
        Duration::from_millis(rng.between(REPL_LAG_RANGE_MS.0, REPL_LAG_RANGE_MS.1));
    let groups: Vec<NodeId> = if masters > 1 {
        let count = rng.between(1, (masters / 2 + 1) as u64) as usize;
        let first = rng.index(masters);
        (0..count).map(|i| (first + i) % masters).collect()
    } else {
        vec![0]
    };
    spec.deployment = replicated(masters, &groups, replicas).persisting(persistence);
}

/// `masters` independent masters (nodes `0..masters`), each of `groups` with `replicas`
/// replicas (after the masters) and reached through discovery; the others are reached
/// directly.
fn replicated(masters: usize, groups: &[NodeId], replicas: usize) -> Deployment {
    let mut deployment = Deployment::masters(masters);
    for (group, &master) in groups.iter().enumerate() {
        deployment.nodes.extend((0..replicas).map(|_| NodeSpec {
            replica_of: Some(master),
            ..NodeSpec::default()
        }));
        deployment.targets[master] = Target::Service(group);
    }
    deployment.groups = groups.to_vec();
    deployment
}

/// A failover of one of `spec`'s groups (drawn when it has several), its old master
/// restarting after a while; half of them splits whose old master `near` keeps using.
pub fn failover(rng: &mut SimRng, spec: &RunSpec, scale: Scale, near: ProcSel) -> Fault {
    let groups = spec.deployment.groups.len();
    let group = if groups > 1 { rng.index(groups) } else { 0 };
    let ms = |base_ms: u64| scale.ms(base_ms);
    Fault::Failover {
        group,
        restart_after_ms: Some(ms(rng.between(100, 3_000))),
        split: rng.chance(SPLIT_CHANCE).then(|| {
            let detect_ms = ms(rng.between(100, 3_000));
            Split {
                near,
                detect_ms,
                heal_after_ms: detect_ms + ms(rng.between(0, 4_000)),
            }
        }),
        promote_after_ms: None,
    }
}

/// Share of crash failovers whose promotion waits for Sentinel (see [`late_promotions`]).
const LATE_PROMOTION_CHANCE: f64 = 0.6;

/// Longest wait for a promotion drawn, ms at a 1 s lease: `down-after-milliseconds` set to
/// a few seconds plus an election.
const MAX_PROMOTION_MS: u64 = 4_000;

/// Gives some of `spec`'s crash failovers a promotion after a realistic delay (Sentinel's
/// `down-after-milliseconds` plus its election, log-uniform from 200 ms at a 1 s lease),
/// during which their group has no master that accepts writes: the liveness bound grows by
/// each delay. Drawn after every other draw of a swarm spec, so adding it changed no
/// earlier choice.
pub fn late_promotions(rng: &mut SimRng, spec: &mut RunSpec) {
    let scale = Scale::of(spec.workload.ttl);
    let mut waits = 0;
    for scheduled in &mut spec.faults {
        if let Fault::Failover {
            split: None,
            promote_after_ms,
            ..
        } = &mut scheduled.fault
            && rng.chance(LATE_PROMOTION_CHANCE)
        {
            let ms = scale.ms(rng.log_between(200, MAX_PROMOTION_MS));
            *promote_after_ms = Some(ms);
            waits += ms;
        }
    }
    spec.check.liveness_bound += Duration::from_millis(waits);
}

/// Share of replicated runs whose groups refuse writes short of good replicas (see
/// [`min_replicas`]).
const MIN_REPLICAS_CHANCE: f64 = 0.4;

/// Fewest and most seconds of `min-replicas-max-lag` drawn (uniform): Redis's default is
/// 10, but a deployment that sets it for its locks keeps it short, and the swarm's replica
/// faults last up to a few seconds.
const MAX_LAG_RANGE_S: (u64, u64) = (1, 2);

/// In some replicated runs, sets `min-replicas-to-write` (1 to a group's replica count) and
/// `min-replicas-max-lag` on every node of `spec`'s replication groups, in their
/// configuration files, so a promoted replica and a restarted node keep it. A master whose
/// replicas are cut off, frozen or down past the lag refuses writes with `NOREPLICAS` until
/// enough are back, and a failover leaves the new master a replica short until the old one
/// rejoins: the liveness bound grows by each such fault's length and, for a release turned
/// away meanwhile, a lease. Not drawn where a replica of a group is lost for good: its
/// master would refuse every write to the run's end, an outage no bound can judge. Not
/// drawn on RedLock either: a refusing master is one "no" vote there, while the checker
/// counts a process whose calls are refused unrun as hampered on every master
/// (`checker/timeline.rs`, `Timeline::impairments`), which would excuse waits the
/// other masters should have served. Drawn after every other draw of a swarm spec, so
/// adding it changed no earlier choice.
pub fn min_replicas(rng: &mut SimRng, spec: &mut RunSpec) {
    let groups = &spec.deployment.groups;
    if groups.is_empty()
        || spec.workload.strategy == Strategy::RedLock
        || !rng.chance(MIN_REPLICAS_CHANCE)
    {
        return;
    }
    let nodes = &spec.deployment.nodes;
    let members: Vec<NodeId> = (0..nodes.len())
        .filter(|&n| groups.contains(&n) || nodes[n].replica_of.is_some())
        .collect();
    let member = |node: NodeId| members.contains(&node);
    let mut outages = Vec::new();
    for scheduled in &spec.faults {
        let outage = match scheduled.fault {
            Fault::ReplicaCut { ms, .. } => Some(Some(ms)),
            Fault::NodePause { node, ms } | Fault::NodeIsolate { node, ms } if member(node) => {
                Some(Some(ms))
            }
            Fault::NodeCrash {
                node,
                restart_after_ms,
            } if member(node) => Some(restart_after_ms),
            Fault::Failover {
                restart_after_ms,
                split,
                ..
            } => Some(split.map(|s| s.heal_after_ms).or(restart_after_ms)),
            _ => None,
        };
        match outage {
            Some(Some(ms)) => outages.push(ms),
            Some(None) => return,
            None => {}
        }
    }
    let replicas = nodes
        .iter()
        .filter(|n| n.replica_of == Some(groups[0]))
        .count();
    let min = MinReplicas {
        to_write: rng.between(1, replicas.max(1) as u64) as usize,
        max_lag: Duration::from_secs(rng.between(MAX_LAG_RANGE_S.0, MAX_LAG_RANGE_S.1)),
    };
    for &node in &members {
        spec.deployment.nodes[node].min_replicas = Some(min);
    }
    spec.check.liveness_bound += Duration::from_millis(outages.iter().sum())
        + super::lost_release_allowance(spec) * u32::try_from(outages.len()).unwrap_or(u32::MAX);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn one_replicated_master_is_the_deployment_with_replicas_behind_master_0() {
        assert_eq!(replicated(3, &[0], 2), Deployment::masters_replicated(3, 2));
        assert_eq!(replicated(1, &[0], 1), Deployment::replicated(1));
    }

    #[test]
    fn each_group_is_a_master_reached_through_discovery_with_its_own_replicas() {
        let d = replicated(5, &[4, 0], 1);
        assert_eq!(d.groups, vec![4, 0]);
        assert_eq!(d.targets[4], Target::Service(0));
        assert_eq!(d.targets[0], Target::Service(1));
        assert_eq!(d.targets[2], Target::Node(2));
        assert_eq!(d.nodes[5].replica_of, Some(4));
        assert_eq!(d.nodes[6].replica_of, Some(0));
    }
}
