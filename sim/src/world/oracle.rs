//! The server-truth oracle in the driver loop: before every event, each hold a client
//! believes it has is looked up on the nodes that granted it.
//!
//! Invariant: the check runs before the world handles the event at instant `t`, so every
//! belief it sees was open over the whole stretch since the previous event, and a key that
//! expired or vanished in that stretch is caught at `t` at the latest; it only reads the
//! model, so a checked run is the same run as an unchecked one.

use super::World;
use crate::model::NodeId;
use crate::world::executor::Core;
use crate::world::history::{HistEvent, HistKind};
use crate::world::net::{ProcId, Target};

impl World {
    /// The node behind deployment target `index` for `proc` right now: a service's
    /// master as that process's Sentinel backend last resolved it, the one whose answers
    /// its belief rests on.
    fn node_of_target(&self, core: &Core, proc: ProcId, index: usize) -> Option<NodeId> {
        match *self.config.targets.get(index)? {
            Target::Node(node) => Some(node),
            Target::Service(group) => core
                .routes
                .get(&(proc, group))
                .or_else(|| core.service_master.get(group))
                .copied(),
        }
    }

    /// Records `LeaseGone` (once per hold) for every believed hold that fewer than its
    /// quorum of granting nodes still hold.
    pub(super) fn check_beliefs(&self) {
        let mut core = self.executor.lock();
        let now = core.now;
        let mut gone = Vec::new();
        for (who, belief) in &core.beliefs {
            if belief.reported {
                continue;
            }
            let claim = &belief.claim;
            let holding = claim
                .members
                .iter()
                .filter(|(target, member)| {
                    self.node_of_target(&core, who.0, *target)
                        .and_then(|node| self.nodes.get(node))
                        .is_some_and(|node| member.held_on(node, &claim.key, now))
                })
                .count();
            let holding = u32::try_from(holding).unwrap_or(u32::MAX);
            if holding < claim.quorum {
                gone.push((who.clone(), holding, claim.quorum));
            }
        }
        for ((proc, incarnation, lock), holding, quorum) in gone {
            core.trace_line(|| {
                format!("ORACLE c{proc}.{incarnation} {lock}: believed held, on {holding} of {quorum} nodes")
            });
            if let Some(belief) = core.beliefs.get_mut(&(proc, incarnation, lock.clone())) {
                belief.reported = true;
            }
            core.history.push(HistEvent {
                at: now,
                proc,
                incarnation,
                lock,
                kind: HistKind::LeaseGone { holding, quorum },
            });
        }
    }
}
