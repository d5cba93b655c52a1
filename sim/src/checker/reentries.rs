//! Re-entries, read off the keyspace: the acquire calls a node granted while it kept another
//! live hold of the same owner.
//!
//! Why it exists: an owner that holds a lock re-enters it past the line and past waiting
//! writers, by design (`acquire.lua`, `rw_*_acquire.lua`: the owner's epoch lasts while one
//! of its holds is live). The per-waiter verdicts ([`super::fifo`], [`super::writers`])
//! must tell such a grant from a bypass in a workload whose holds share their process's
//! owner, and must not take the script's word for it: a script that wrongly re-enters (an
//! epoch whose holds have all lapsed, another owner's) would excuse itself.
//!
//! Invariant: a grant is a re-entry exactly when the node that ran it, right after it ran,
//! kept a hold other than the call's own, of the call's owner, whose deadline was still
//! ahead of the node's clock ([`HistKind::Kept`]: the keyspace, not the reply). Each hold's
//! owner is the one its acquire calls named. Permits have no owner and never re-enter.

use std::collections::{BTreeMap, BTreeSet};

use crate::world::calls::{LockOp, OpKind};
use crate::world::history::{HistEvent, HistKind};

/// The acquire calls, by id, whose node kept another live hold of their owner.
#[derive(Debug, Default)]
pub(super) struct Reentries(BTreeSet<u64>);

impl Reentries {
    /// The re-entries of `history`.
    pub(super) fn read(history: &[HistEvent]) -> Self {
        let mut owners: BTreeMap<u64, u64> = BTreeMap::new();
        let mut acquires: BTreeMap<u64, LockOp> = BTreeMap::new();
        let mut found = BTreeSet::new();
        for ev in history {
            match &ev.kind {
                HistKind::Call { id, op, .. } if op.kind == OpKind::Acquire && op.owner != 0 => {
                    owners.insert(op.hold, op.owner);
                    acquires.insert(*id, *op);
                }
                HistKind::Kept {
                    id, now_ms, keys, ..
                } => {
                    let Some(op) = acquires.remove(id) else {
                        continue;
                    };
                    let held = keys.iter().flat_map(|k| &k.holds).any(|&(hold, deadline)| {
                        hold != op.hold
                            && deadline > *now_ms
                            && owners.get(&hold) == Some(&op.owner)
                    });
                    if held {
                        found.insert(*id);
                    }
                }
                _ => {}
            }
        }
        Self(found)
    }

    /// Whether call `id` was granted as a re-entry (if it was granted at all).
    pub(super) fn contains(&self, id: u64) -> bool {
        self.0.contains(&id)
    }
}
