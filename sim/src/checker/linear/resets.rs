//! Where a lock key's server-side state may have been lost, so the linearizability check
//! starts that key afresh instead of judging what follows against a state no server
//! holds any more.
//!
//! Why it exists: a failover promotes a replica that may lack the last writes, a node
//! restarted from its persistence may lack what it did not save, and an eviction deletes
//! keys outright. The spec's state before such a moment is not the server's after it, so
//! every later answer would contradict it; excusing those for the rest of the run would
//! switch the check off. Instead the check resets there and goes on judging.
//!
//! Invariant: a reset is placed only where the simulator's own record shows the key's
//! state could change without a call: the calls of one key on one target were run by a
//! different node than the one before (a promotion, a split's other side), the node that
//! last ran them restarted after a crash, its replication group failed over, or it
//! evicted that key; or where the time the check judges it in (the node's own clock) may
//! have run backwards: that node's clock stepped back. Without that record (a real
//! server's history), every node the key's target reaches counts as having run its
//! calls. Nothing else resets a key, so between resets every answer is judged: no fault
//! excuses a finding.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::NodeId;
use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent, HistKind};
use crate::world::net::Target;

use crate::checker::evictions;
use crate::checker::lease_spec::{TOLERANCE_MS, Timing};
use crate::checker::seq_spec::SeqSpec;

use super::frontier::{Frontier, merge};
use super::{NS_PER_MS, Search};

/// Per (target, lock key): the moments (virtual ns, sorted) its server state may have been
/// lost.
pub(super) fn resets(
    history: &[HistEvent],
    faults: &[FaultMark],
) -> BTreeMap<(Target, String), Vec<u64>> {
    let mut key_of: BTreeMap<u64, (Target, &str)> = BTreeMap::new();
    // Per key: which node ran its calls, from when (ns), in order.
    let mut served: BTreeMap<(Target, &str), Vec<(u64, NodeId)>> = BTreeMap::new();
    let mut out: BTreeMap<(Target, String), Vec<u64>> = BTreeMap::new();
    for ev in history {
        match &ev.kind {
            HistKind::Call { id, target, op } => {
                key_of.insert(
                    *id,
                    (*target, super::order::judge_of(op, ev.lock.as_str()).1),
                );
            }
            HistKind::Ran { id, node, .. } => {
                let Some(&key) = key_of.get(id) else {
                    continue;
                };
                let runs = served.entry(key).or_default();
                if runs.last().is_some_and(|&(_, last)| last != *node) {
                    out.entry((key.0, key.1.to_owned()))
                        .or_default()
                        .push(ev.at);
                }
                if runs.last().is_none_or(|&(_, last)| last != *node) {
                    runs.push((ev.at, *node));
                }
            }
            _ => {}
        }
    }
    // The node that ran `key`'s calls last before `at`.
    let serving = |runs: &[(u64, NodeId)], at: u64| {
        runs.iter()
            .take_while(|&&(from, _)| from <= at)
            .last()
            .map(|&(_, node)| node)
    };
    let keys: BTreeSet<(Target, &str)> = key_of.values().copied().collect();
    for (target, key) in keys {
        // Whether `node` ran the key's calls at `at`. Without the server's witness (a real
        // server's history) that is unknown: every node the key's target reaches may have.
        let ran_them = |node: NodeId, at: u64| match served.get(&(target, key)) {
            Some(runs) => serving(runs, at) == Some(node),
            None => target == Target::Node(node) || matches!(target, Target::Service(_)),
        };
        for mark in faults {
            let at = lost_at(mark, (target, key), ran_them);
            if !at.is_empty() {
                out.entry((target, key.to_owned())).or_default().extend(at);
            }
        }
    }
    for list in out.values_mut() {
        list.sort_unstable();
        list.dedup();
    }
    out
}

/// When `mark` may have lost the state of `key` on `target`, given whether a node ran the
/// key's calls at a moment (`ran_them`): a restart after a crash of that node, its group's
/// failover (and the old master's return), a step back of its clock, its eviction of the
/// key.
fn lost_at(
    mark: &FaultMark,
    (target, key): (Target, &str),
    ran_them: impl Fn(NodeId, u64) -> bool,
) -> Vec<u64> {
    match &mark.fault {
        Fault::NodeCrash {
            node,
            restart_after_ms: Some(_),
        } if mark.until != u64::MAX && ran_them(*node, mark.until) => vec![mark.until],
        Fault::Failover { group, .. } if target == Target::Service(*group) => {
            [mark.from, mark.until]
                .into_iter()
                .filter(|&t| t != u64::MAX)
                .collect()
        }
        // Judged in the node's own time, a step back would revisit points already passed:
        // the key starts afresh there instead.
        Fault::NodeClockJump { node, by_ms } if *by_ms < 0 && ran_them(*node, mark.from) => {
            vec![mark.from]
        }
        Fault::Evict { node, .. }
            if ran_them(*node, mark.from) && evictions::took_key_of(mark, key) =>
        {
            vec![mark.from]
        }
        _ => Vec::new(),
    }
}

impl<'a, S: SeqSpec> Search<'a, S> {
    /// The search, starting the key afresh before each of `restarts` ((position in the
    /// order, ns), in order).
    pub(super) fn restarting(mut self, restarts: &'a [(usize, u64)]) -> Self {
        self.restarts = restarts;
        self
    }

    /// The key's state may have been lost at `at` (ns): every configuration starts from
    /// `initial`, a key nobody has used, its calls still pending. Holds granted before may
    /// live on unseen for as long as their leases can run, so until then an epoch may hold
    /// holds the spec never saw granted, and no earlier grant makes a call strict.
    pub(super) fn restart(&mut self, frontier: Frontier<S>, initial: &S, at: u64) -> Frontier<S> {
        let at_ms = at / NS_PER_MS;
        self.fog_until = Some(at_ms + self.longest_lease + TOLERANCE_MS);
        let mut next = Frontier::new();
        for ((_, pending), (_, ambiguous)) in frontier {
            // The node now running the key's calls may read an earlier time than the last
            // one did (a replica's clock behind, a step back): any point may come next.
            let timing = Timing {
                now: 0,
                lease: (0, 0),
                since: at_ms,
            };
            merge(&mut next, (initial.clone(), pending), (timing, ambiguous));
        }
        next
    }
}
