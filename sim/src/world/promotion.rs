//! Failover in the world: Sentinel's promotion of a group's most up-to-date replica, and
//! an old master's return as a replica.
//!
//! Invariant: a promotion hands the group to the replica with the longest replication
//! offset, with the data it had applied (writes it never received are lost, as in
//! production), and the group's clock becomes that replica's: where it reads otherwise
//! than the old master's, the fault log records the step at the promotion's instant.

use super::World;
use crate::model::{NodeId, Role};
use crate::world::faults::Fault;
use crate::world::history::FaultMark;

impl World {
    /// Fails over `group`: crashes its master and promotes the most up-to-date replica.
    pub(super) fn failover(&mut self, group: usize) {
        let Some(old) = self.executor.lock().service_master.get(group).copied() else {
            return;
        };
        self.crash_node(old);
        self.promote(group, old, false);
    }

    /// The delayed promotion of crash failover `index` of `group` is due: Sentinel
    /// promotes the most up-to-date replica, unless the crashed master is back (a master
    /// that returns before it is judged down keeps its role).
    pub(super) fn promote_late(&mut self, index: usize, group: usize) {
        let Some(old) = self.late_promotions.remove(&index) else {
            return;
        };
        if self.nodes.get(old).is_some_and(|n| n.up) {
            self.executor
                .lock()
                .trace_line(|| format!("failover of group {group}: n{old} is back, none"));
            return;
        }
        self.promote(group, old, false);
    }

    /// Promotes the most up-to-date live replica of `old`, master of `group`, and points
    /// the group's other nodes at it. The old master follows too unless `zombie` (it is cut
    /// off and still acts as a master for whoever reaches it). Returns the new master.
    pub(super) fn promote(&mut self, group: usize, old: NodeId, zombie: bool) -> Option<NodeId> {
        let best = self
            .nodes
            .iter()
            .filter(|n| n.up && n.role == Role::Replica(old))
            .max_by_key(|n| (n.repl_offset, std::cmp::Reverse(n.id)))
            .map(|n| n.id);
        let Some(new) = best else {
            self.executor
                .lock()
                .trace_line(|| format!("failover of group {group}: no replica to promote"));
            return None;
        };
        let data = self.nodes[new].data().clone();
        for n in &mut self.nodes {
            if n.id == new {
                n.role = Role::Master;
                n.replica_acks.clear();
            } else if n.role == Role::Replica(old) || (n.id == old && !zombie) {
                n.role = Role::Replica(new);
                if n.up {
                    n.full_sync(data.clone(), 0);
                }
            }
        }
        let mut core = self.executor.lock();
        // The group's clock is now the promoted replica's: where it reads otherwise than the
        // old master's, the group's clock steps by the difference at this instant (its
        // offset from the start is no step until it serves).
        let now = core.now;
        let reads = |id: NodeId| {
            self.nodes
                .get(id)
                .map_or(0, |n| i128::from(n.clock.local_nanos(now)))
        };
        let step_ms = (reads(new) - reads(old)) / 1_000_000;
        if let Ok(by_ms) = i64::try_from(step_ms)
            && by_ms != 0
        {
            core.fault_log.push(FaultMark {
                fault: Fault::NodeClockJump { node: new, by_ms },
                proc: None,
                from: now,
                until: now,
            });
        }
        if let Some(master) = core.service_master.get_mut(group) {
            *master = new;
        }
        self.sentinel_views.promoted(core.now, group, old);
        core.trace_line(|| format!("failover of group {group}: n{new} promoted"));
        Some(new)
    }

    /// The zombie `old` master rejoins `new` as its replica, dropping its own writes: at
    /// once if `new` is a live master, else when it next syncs (Sentinel reconfigures a
    /// rejoining master whether or not the current one is up).
    pub(super) fn demote(&mut self, old: NodeId, new: NodeId) {
        let state = self.master_dataset(new);
        if let Some(n) = self.nodes.get_mut(old).filter(|n| n.role == Role::Master) {
            n.role = Role::Replica(new);
            n.replica_acks.clear();
            if let (true, Some((data, offset))) = (n.up, state) {
                n.full_sync(data, offset);
            }
        }
        self.executor
            .lock()
            .trace_line(|| format!("n{old} rejoins as a replica of n{new}"));
    }

    /// The crashed former master of `group`, now a replica of the current one.
    pub(super) fn old_master_of(&self, group: usize) -> Option<NodeId> {
        let current = self.executor.lock().service_master.get(group).copied()?;
        self.nodes
            .iter()
            .find(|n| !n.up && n.role == Role::Replica(current))
            .map(|n| n.id)
    }
}
