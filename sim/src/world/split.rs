//! Split failovers: the group's master is cut off with one client, Sentinel promotes a
//! replica for everyone else, and the old master lives on as a zombie until the split heals.
//!
//! Why it exists: a crash failover is the kind version. Real deployments lose locks when
//! the old master is still up and still reachable by some clients: they keep acquiring and
//! renewing there while the rest of the world has a new master, and everything the zombie
//! granted vanishes when it rejoins as a replica.
//!
//! Invariant: until the promotion nobody but the near client reaches the old master (the
//! others see timeouts, as while Sentinel still counts down); from the promotion to the
//! healing the near client routes the group to the old master and everyone else to the new
//! one; at the healing the old master takes the new one's data, and every client routes to
//! the new master.

use super::World;
use crate::faults::Split;
use crate::model::NodeId;
use crate::net::{Endpoint, Event, ProcId};

/// A split in progress, by fault index.
pub(super) struct SplitState {
    group: usize,
    old: NodeId,
    near: Option<ProcId>,
    /// The promoted master, once Sentinel acted.
    new: Option<NodeId>,
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
            if let Some(p) = near {
                core.stale_routes.insert((p, group), old);
            }
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
                new: None,
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
            let new = self.promote(group, old, true);
            if let Some(state) = self.splits.get_mut(&index) {
                state.new = new;
            }
            return;
        }
        let Some(state) = self.splits.remove(&index) else {
            return;
        };
        self.cut_node(state.old, state.near, false);
        if let Some(p) = state.near {
            self.executor.lock().stale_routes.remove(&(p, state.group));
        }
        if let Some(new) = state.new {
            self.demote(state.old, new);
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
            core.net.set_cut(Endpoint::Node(node), peer, cut);
        }
        core.trace_line(|| {
            let what = if cut { "cut off" } else { "reconnected" };
            let with = spare.map_or(String::new(), |p| format!(" (but for c{p})"));
            format!("node n{node} {what}{with}")
        });
    }
}
