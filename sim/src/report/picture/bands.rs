//! The faults of a picture as bands: what landed, on which process or node, over which
//! stretch of virtual time, and which lanes it covers.
//!
//! Invariant: a band is drawn from the fault log ([`FaultMark`]), so it shows only faults
//! that hit something, over the stretch they acted; a lasting change (a clock's new rate)
//! runs to the end of the run.

use crate::model::NodeId;
use crate::world::faults::Fault;
use crate::world::history::FaultMark;
use crate::world::net::{ProcId, Target};

use super::lanes::Owner;
use super::svg::secs;

/// Whom a fault hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Victim {
    Client(ProcId),
    Node(NodeId),
    Group(usize),
}

/// One fault that landed, ready to draw.
#[derive(Debug, Clone)]
pub(super) struct Band {
    pub(super) from: u64,
    /// Its end, clamped to the run's end.
    pub(super) to: u64,
    /// Short name: the kind (as a problem's `touched_by` names it) and the victim.
    pub(super) label: String,
    /// Exact times and the fault's parameters, for the tooltip.
    pub(super) note: String,
    /// A lasting change (a clock's new rate or step), drawn lighter to the run's end.
    pub(super) lasting: bool,
    victim: Option<Victim>,
}

impl Band {
    /// The band of `mark`, in a run that ended at `end`.
    pub(super) fn of(mark: &FaultMark, end: u64) -> Self {
        let fault = &mark.fault;
        let victim = match (mark.proc, fault) {
            (Some((proc, _)), _) => Some(Victim::Client(proc)),
            (None, Fault::ClientClockDrift { proc, .. } | Fault::ClientClockJump { proc, .. }) => {
                Some(Victim::Client(*proc))
            }
            (
                None,
                Fault::NodeClockJump { node, .. }
                | Fault::NodeClockDrift { node, .. }
                | Fault::NodeCrash { node, .. }
                | Fault::NodePause { node, .. }
                | Fault::NodeIsolate { node, .. }
                | Fault::ScriptFlush { node }
                | Fault::Evict { node, .. }
                | Fault::ReplicaCut { replica: node, .. },
            ) => Some(Victim::Node(*node)),
            (None, Fault::Failover { group, .. } | Fault::SentinelStale { group, .. }) => {
                Some(Victim::Group(*group))
            }
            (None, _) => None,
        };
        let whom = match (victim, mark.proc) {
            (_, Some((proc, incarnation))) => format!("c{proc}.{incarnation}"),
            (Some(Victim::Client(proc)), None) => format!("c{proc}"),
            (Some(Victim::Node(node)), None) => format!("node {node}"),
            (Some(Victim::Group(group)), None) => format!("group {group}"),
            (None, None) => "nobody".to_owned(),
        };
        let size = match fault {
            Fault::Pause { ms, .. }
            | Fault::Isolate { ms, .. }
            | Fault::NodePause { ms, .. }
            | Fault::NodeIsolate { ms, .. }
            | Fault::ReplicaCut { ms, .. }
            | Fault::SentinelCut { ms, .. } => format!(" {ms} ms"),
            Fault::SentinelStale { lag_ms, ms, .. } => format!(" {lag_ms} ms behind {ms} ms"),
            Fault::CutFrom { node, ms, .. } => format!(" from node {node} {ms} ms"),
            Fault::OneWay { replies, ms, .. } => {
                let lost = if *replies { "replies" } else { "requests" };
                format!(" {lost} {ms} ms")
            }
            Fault::Slow { extra_ms, .. } => format!(" +{extra_ms} ms"),
            Fault::ClientClockDrift { ppm, .. } | Fault::NodeClockDrift { ppm, .. } => {
                format!(" {ppm:+} ppm")
            }
            Fault::ClientClockJump { by_ms, .. } | Fault::NodeClockJump { by_ms, .. } => {
                format!(" {by_ms:+} ms")
            }
            Fault::Failover { split: Some(_), .. } => " (split)".to_owned(),
            Fault::Evict { evicted, .. } => format!(" {}", evicted.join(" ")),
            Fault::Crash { .. }
            | Fault::NodeCrash { .. }
            | Fault::Failover { .. }
            | Fault::ScriptFlush { .. } => String::new(),
        };
        let label = format!("{} {whom}{size}", fault.kind());
        let until = if mark.until == u64::MAX {
            "the end of the run (lasting)".to_owned()
        } else {
            secs(mark.until)
        };
        let params = serde_json::to_string(fault).unwrap_or_default();
        Self {
            from: mark.from.min(end),
            to: mark.until.min(end).max(mark.from.min(end)),
            note: format!("{label}: from {} until {until}; {params}", secs(mark.from)),
            label,
            lasting: mark.until == u64::MAX,
            victim,
        }
    }

    /// Whether the band covers the lane of `owner`; `node_lanes` says whether a node has
    /// a lane of its own (a node without one, a replica or a service's master, is drawn
    /// over the service lanes).
    pub(super) fn covers(&self, owner: Owner, node_lanes: &dyn Fn(NodeId) -> bool) -> bool {
        match (self.victim, owner) {
            (Some(Victim::Client(p)), Owner::Client(q)) => p == q,
            (Some(Victim::Node(n)), Owner::Server(Target::Node(m))) => n == m,
            (Some(Victim::Node(n)), Owner::Server(Target::Service(_))) => !node_lanes(n),
            (Some(Victim::Group(g)), Owner::Server(Target::Service(h))) => g == h,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::faults::ProcSel;

    #[test]
    fn a_pause_covers_its_process_and_a_node_fault_its_node() {
        let pause = Band::of(
            &FaultMark {
                fault: Fault::Pause {
                    who: ProcSel::Holder,
                    ms: 3000,
                },
                proc: Some((2, 0)),
                from: 2_000_000_000,
                until: 5_000_000_000,
            },
            4_000_000_000,
        );
        assert_eq!(pause.label, "pause c2.0 3000 ms");
        assert_eq!(pause.to, 4_000_000_000);
        let no_node = |_| false;
        assert!(pause.covers(Owner::Client(2), &no_node));
        assert!(!pause.covers(Owner::Client(1), &no_node));
        assert!(!pause.covers(Owner::Server(Target::Node(0)), &no_node));
        let jump = Band::of(
            &FaultMark {
                fault: Fault::NodeClockJump {
                    node: 3,
                    by_ms: 500,
                },
                proc: None,
                from: 1_000,
                until: u64::MAX,
            },
            9_000,
        );
        assert_eq!(jump.label, "node-jump node 3 +500 ms");
        assert!(jump.note.contains("lasting"));
        assert!(jump.covers(Owner::Server(Target::Node(3)), &no_node));
        assert!(jump.covers(Owner::Server(Target::Service(0)), &no_node));
        assert!(!jump.covers(Owner::Server(Target::Service(0)), &|n| n == 3));
    }
}
