//! `min-replicas-to-write`: which replicas a master counts as good before it runs a
//! command, as Redis's `repl_good_slaves_count`.
//!
//! Invariant: a replica is good while its last acknowledgement is at most
//! `min-replicas-max-lag` old in whole seconds (Redis compares `unixtime - repl_ack_time`).
//! A replica the master can reach, up and not frozen, acknowledges once a second (the
//! replica's cron sends `REPLCONF ACK`), so it is good; its acknowledgement time is
//! refreshed when it is counted. One frozen or cut off stops acknowledging and turns bad
//! once its last acknowledgement is older than the lag allows: Redis notices at its next
//! once-a-second count, up to two seconds later than the model does.

use std::time::Duration;

use super::World;
use crate::model::node::MinReplicas;
use crate::model::{NodeId, Role};
use crate::world::net::Endpoint;

impl World {
    /// `CONFIG SET min-replicas-to-write` and `min-replicas-max-lag` on `master` (`None`:
    /// off, Redis's default).
    pub fn set_min_replicas(&mut self, master: NodeId, min: Option<MinReplicas>) {
        if let Some(n) = self.nodes.get_mut(master) {
            n.min_replicas = min;
        }
    }

    /// The replicas of `master` that are up: those it replicates to and counts.
    pub(super) fn live_replicas(&self, master: NodeId) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|n| n.up && n.role == Role::Replica(master))
            .map(|n| n.id)
            .collect()
    }

    /// Counts `master`'s good replicas at `now` into its `good_replicas`, if it refuses
    /// writes without enough of them.
    pub(super) fn count_good_replicas(&mut self, master: NodeId, now: u64) {
        let Some(min) = self.nodes.get(master).and_then(|n| n.min_replicas) else {
            return;
        };
        let replicas = self.live_replicas(master);
        let mut good = 0;
        for replica in replicas {
            if self.acknowledges(master, replica, now) {
                self.acked_at.insert(replica, now);
            }
            let acked = self.acked_at.get(&replica).copied().unwrap_or(0);
            good += usize::from(lag_within(now.saturating_sub(acked), min));
        }
        if let Some(n) = self.nodes.get_mut(master) {
            n.good_replicas = good;
        }
    }

    /// Whether `replica` sends `master` its once-a-second acknowledgement now: it is not
    /// frozen and the link is not cut either way.
    fn acknowledges(&self, master: NodeId, replica: NodeId, now: u64) -> bool {
        let frozen = self.stalled(replica, now);
        let core = self.executor.lock();
        let (m, r) = (Endpoint::Node(master), Endpoint::Node(replica));
        !frozen && !core.net.is_cut(m, r) && !core.net.is_cut(r, m)
    }
}

/// Whether a lag of `lag_ns` is within `min`'s, counted in whole seconds as Redis does.
fn lag_within(lag_ns: u64, min: MinReplicas) -> bool {
    Duration::from_nanos(lag_ns).as_secs() <= min.max_lag.as_secs()
}
