//! The nodes that serve a single-node deployment's locks, and the node faults that acted on
//! them: where a per-waiter verdict places a node fault before it lets it excuse anything.
//!
//! Invariant: a node fault counts only when the node it names (a failover: any node of
//! its group) is one the clients' deployment target can reach; a fault on a node no client
//! talks to explains nothing.

use crate::model::NodeId;
use crate::world::faults::Fault;
use crate::world::history::FaultMark;
use crate::world::net::Target;

use super::Nodes;

/// Whether node `node` serves the locks of `nodes`' deployment (or the deployment is not
/// known, as in a hand-made history: then every node does).
fn serves(nodes: &Nodes, node: NodeId) -> bool {
    nodes.targets.is_empty()
        || nodes.targets.iter().any(|target| match *target {
            Target::Node(n) => n == node,
            Target::Service(group) => nodes.groups.get(group).is_some_and(|g| g.contains(&node)),
        })
}

/// Whether `mark` is a node fault on a node that serves the locks.
pub(super) fn on_serving_node(nodes: &Nodes, mark: &FaultMark) -> bool {
    match mark.fault {
        Fault::NodeClockJump { node, .. }
        | Fault::NodeClockDrift { node, .. }
        | Fault::NodeCrash { node, .. }
        | Fault::NodePause { node, .. }
        | Fault::NodeIsolate { node, .. }
        | Fault::ScriptFlush { node }
        | Fault::Evict { node, .. }
        | Fault::ReplicaCut { replica: node, .. } => serves(nodes, node),
        Fault::Failover { group, .. } => {
            nodes.targets.is_empty()
                || nodes.targets.contains(&Target::Service(group))
                || nodes
                    .groups
                    .get(group)
                    .is_some_and(|g| g.iter().any(|&n| serves(nodes, n)))
        }
        Fault::Pause { .. }
        | Fault::Crash { .. }
        | Fault::Isolate { .. }
        | Fault::Slow { .. }
        | Fault::ClientClockDrift { .. }
        | Fault::ClientClockJump { .. }
        | Fault::CutFrom { .. }
        | Fault::OneWay { .. }
        // Client-side routing faults: the Sentinels serve no lock.
        | Fault::SentinelCut { .. }
        | Fault::SentinelStale { .. } => false,
    }
}

/// The fastest rate, in ppm, at which a serving node's clock runs ahead of true time (0
/// when none does).
pub(super) fn fastest_drift_ppm(nodes: &Nodes, faults: &[FaultMark]) -> u64 {
    faults
        .iter()
        .filter(|m| on_serving_node(nodes, m))
        .filter_map(|m| match m.fault {
            Fault::NodeClockDrift { ppm, .. } => u64::try_from(ppm).ok(),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// `mark` at a time, for a report's evidence.
pub(super) fn described(mark: &FaultMark) -> String {
    let at = format!("{} at t={:.3}s", mark.fault.kind(), mark.from as f64 / 1e9);
    match &mark.fault {
        Fault::Evict { node, evicted, .. } => format!("{at} (n{node} evicted {evicted:?})"),
        _ => at,
    }
}
