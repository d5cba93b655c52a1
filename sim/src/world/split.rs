//! Split failovers: the group's master is cut off with one client, Sentinel promotes a
//! replica for everyone else, and the old master lives on as a zombie until the split heals.
//!
//! Why it exists: a crash failover is the kind version. Real deployments lose locks when
//! the old master is still up and still reachable by some clients: they keep acquiring and
//! renewing there while the rest of the world has a new master, and everything the zombie
//! granted vanishes when it rejoins as a replica.
//!
//! Invariant: until the promotion nobody but the near client reaches the old master (the
//! others see timeouts, and the Sentinels still name it, as while they count down); from
//! the promotion the Sentinels name the new master. Who uses which master is the production
//! Sentinel backend's doing (`crate::world::discovery`): the near client keeps the old master while
//! nothing fails there, and the others, whose requests to it timed out, resolve the new
//! one. At the healing the old master rejoins as a replica of the group's master of that
//! moment (the one promoted for the split, or whichever a later failover promoted) and takes
//! its data, so a write the near client still sends it is refused with `READONLY`, and that
//! client resolves the current master too. No healed split leaves two masters.

use super::World;
use crate::model::NodeId;
use crate::world::faults::Split;
use crate::world::net::{Endpoint, Event, ProcId};

/// A split in progress, by fault index.
pub(super) struct SplitState {
    group: usize,
    old: NodeId,
    near: Option<ProcId>,
    /// Whether Sentinel promoted a replica (with none to promote, the old master stays the
    /// group's).
    replaced: bool,
    promoted: bool,
}

impl World {
    /// Fault `index` splits `group` off with `split.near`; the promotion and the healing
    /// follow as the same fault's ends.
    pub(super) fn split_begin(&mut self, index: usize, group: usize, split: Split) {
        let (now, old) = {
            let core = self.executor.lock();
            (core.now, core.service_master.get(group).copied())
        };
        let Some(old) = old.filter(|old| self.nodes.get(*old).is_some_and(|n| n.up)) else {
            return;
        };
        let near = self.select(split.near);
        self.cut_node(old, near, true);
        {
            let mut core = self.executor.lock();
            core.schedule(
                now + super::ns_from_ms(split.detect_ms),
                Event::FaultEnd(index),
            );
            let heal = split.heal_after_ms.max(split.detect_ms);
            core.schedule(now + super::ns_from_ms(heal), Event::FaultEnd(index));
        }
        self.splits.insert(
            index,
            SplitState {
                group,
                old,
                near,
                replaced: false,
                promoted: false,
            },
        );
    }

    /// The next step of split `index`: Sentinel promotes a replica, then the split heals.
    pub(super) fn split_step(&mut self, index: usize) {
        let Some(state) = self.splits.get_mut(&index) else {
            return;
        };
        if !state.promoted {
            state.promoted = true;
            let (group, old) = (state.group, state.old);
            let replaced = self.promote(group, old, true).is_some();
            if let Some(state) = self.splits.get_mut(&index) {
                state.replaced = replaced;
            }
            return;
        }
        let Some(state) = self.splits.remove(&index) else {
            return;
        };
        self.cut_node(state.old, state.near, false);
        // The old master rejoins whichever master the group has now: a later failover may
        // have replaced the one promoted for this split.
        let current = self
            .executor
            .lock()
            .service_master
            .get(state.group)
            .copied();
        if let (true, Some(current)) = (state.replaced, current.filter(|c| *c != state.old)) {
            self.demote(state.old, current);
        }
    }

    /// Cuts (or heals) every link of `node` to each other node and each client process
    /// but `spare`.
    pub(super) fn cut_node(&self, node: NodeId, spare: Option<ProcId>, cut: bool) {
        let mut core = self.executor.lock();
        let peers: Vec<Endpoint> = (0..core.procs.len())
            .filter(|p| Some(*p) != spare)
            .map(Endpoint::Process)
            .chain(
                (0..self.nodes.len())
                    .filter(|n| *n != node)
                    .map(Endpoint::Node),
            )
            .collect();
        for peer in peers {
            core.set_cut(Endpoint::Node(node), peer, cut);
        }
        core.trace_line(|| {
            let what = if cut { "cut off" } else { "reconnected" };
            let with = spare.map_or(String::new(), |p| format!(" (but for c{p})"));
            format!("node n{node} {what}{with}")
        });
    }
}
