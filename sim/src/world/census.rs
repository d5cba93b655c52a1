//! The semaphore's server truth beside the oracle's: before every event, how many of each
//! semaphore's permits are free on the node that serves it, recorded when that changes.
//!
//! Why it exists: a waiter starves behind a semaphore with a free permit only when the
//! server had one free, which no client belief shows (a permit's holder may have crashed,
//! a release may have freed one and told nobody). The checker's capacity rule
//! ([`crate::checker`]'s `capacity`) judges these counts against the waits.
//!
//! Invariant: as the oracle, it only reads the model, before the world handles the event
//! at instant `t`, counting a permit live until its deadline has passed on the node's own
//! clock (a permit handed to a waiter and not yet claimed is taken), out of the size the
//! node stores (a resize changes it); a node that is down
//! frees nothing (it grants nothing meanwhile), so it is not counted.

use super::World;
use crate::model::Data;
use crate::world::history::{HistEvent, HistKind};
use crate::world::net::Target;

/// One semaphore the world counts: its lock name, permits and size keys, the run's
/// permits (its size while the node stores none), and the free count last recorded.
#[derive(Debug)]
pub(super) struct Census {
    lock: String,
    key: Vec<u8>,
    /// Its size key (`semaphore_acquire.lua`'s `KEYS[4]`).
    size_key: Vec<u8>,
    permits: u32,
    free: Option<u32>,
}

impl World {
    /// Counts the free permits of each semaphore of `locks` (lock names, `permits` each,
    /// served through the first deployment target) before every event, into the history.
    pub fn count_permits(&mut self, locks: &[String], permits: u32) {
        self.census = locks
            .iter()
            .map(|lock| Census {
                lock: lock.clone(),
                key: format!("leasehold:{{{lock}}}:sem").into_bytes(),
                size_key: format!("leasehold:{{{lock}}}:sem:size").into_bytes(),
                permits,
                free: None,
            })
            .collect();
    }

    /// Records each counted semaphore's free permits where they changed.
    pub(super) fn census_permits(&mut self) {
        if self.census.is_empty() {
            return;
        }
        let mut core = self.executor.lock();
        let now = core.now;
        let node = match self.config.targets.first() {
            Some(Target::Node(node)) => Some(*node),
            Some(Target::Service(group)) => core.service_master.get(*group).copied(),
            None => None,
        };
        let Some(node) = node.and_then(|n| self.nodes.get(n)).filter(|n| n.up) else {
            return;
        };
        let now_ms = node.wall_us(now).div_euclid(1_000);
        for census in &mut self.census {
            let live = node
                .data()
                .raw(&census.key)
                .filter(|entry| entry.expires_at.is_none_or(|at| now_ms <= at))
                .map_or(0, |entry| match &entry.data {
                    Data::ZSet(members) => members
                        .iter()
                        .filter(|(score, _)| *score >= now_ms as f64)
                        .count(),
                    _ => 0,
                });
            // The size the node stores (a resize changes it, and the first acquire of
            // an idle semaphore stores its own number); the run's permits when none is.
            let size = node
                .data()
                .raw(&census.size_key)
                .filter(|entry| entry.expires_at.is_none_or(|at| now_ms <= at))
                .and_then(|entry| match &entry.data {
                    Data::Str(bytes) => std::str::from_utf8(bytes).ok()?.parse::<u32>().ok(),
                    _ => None,
                })
                .unwrap_or(census.permits);
            let free = size.saturating_sub(u32::try_from(live).unwrap_or(u32::MAX));
            if census.free == Some(free) {
                continue;
            }
            census.free = Some(free);
            core.history.push(HistEvent {
                at: now,
                proc: 0,
                incarnation: 0,
                lock: census.lock.clone(),
                kind: HistKind::PermitsFree {
                    free,
                    node: node.id,
                },
            });
        }
    }
}
