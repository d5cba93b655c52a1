//! The write epochs the server kept, read from the keyspace (`HistKind::Kept`, recorded
//! right after each lock-script call ran, not any script's word): per read-write key, after
//! each call, which owners' write holds the write hash kept and until when.
//!
//! Why it exists: a fair release hands the write lock to the head of its line with no call
//! of the grantee's own, so the spec never sees that epoch begin. Where the keyspace shows
//! an owner's write hold live when its next grant ran, that grant, if its token is the
//! epoch's and not a new one, is the epoch's re-entry, which the owner's own live readers
//! do not block (`rw_write_acquire.lua` line 117; `rw_spec::joins_unseen`). Invariant: a
//! snapshot counts for a call only if it was taken before that call ran, on the same key.

use std::collections::BTreeMap;

use crate::model::node::EPOCH_US;
use crate::world::history::{HistEvent, HistKind};

use super::Search;
use super::order::{Judge, judge_of};
use super::read::Key;
use crate::checker::lease_spec::TOLERANCE_MS;
use crate::checker::seq_spec::SeqSpec;

/// What the write hash kept right after one call ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Kept {
    /// When, virtual ns.
    at: u64,
    /// Each write hold's owner and deadline, ms of the node's clock (as `Step` counts).
    holds: Vec<(u64, u64)>,
}

/// Per read-write key, what its write hash kept after each call a master ran, in order.
pub(super) fn kept_writers(history: &[HistEvent]) -> BTreeMap<Key<'_>, Vec<Kept>> {
    let mut key_of: BTreeMap<u64, Key<'_>> = BTreeMap::new();
    let mut owner_of: BTreeMap<u64, u64> = BTreeMap::new();
    let mut out: BTreeMap<Key<'_>, Vec<Kept>> = BTreeMap::new();
    let epoch_ms = EPOCH_US / 1_000;
    for ev in history {
        match &ev.kind {
            HistKind::Call { id, target, op } => {
                let (judge, key) = judge_of(op, ev.lock.as_str());
                key_of.insert(*id, (judge, *target, key));
                owner_of.insert(op.hold, op.owner);
            }
            HistKind::Kept { id, keys, .. } => {
                let Some(&key) = key_of
                    .get(id)
                    .filter(|(judge, _, _)| *judge == Judge::RwLock)
                else {
                    continue;
                };
                let write_hash = format!(":{}", leasehold::RWLOCK_FAMILY);
                let holds = keys
                    .iter()
                    .filter(|k| k.key.ends_with(&write_hash))
                    .flat_map(|k| &k.holds)
                    .filter_map(|&(hold, deadline)| {
                        let owner = *owner_of.get(&hold)?;
                        Some((owner, u64::try_from(deadline - epoch_ms).ok()?))
                    })
                    .collect();
                out.entry(key).or_default().push(Kept { at: ev.at, holds });
            }
            _ => {}
        }
    }
    out
}

impl<'a, S: SeqSpec> Search<'a, S> {
    /// The search with its key's write-hash snapshots.
    pub(super) fn keeping(mut self, kept: &'a [Kept]) -> Self {
        self.kept = kept;
        self
    }

    /// Whether the write hash, as the node kept it after the last call that ran before
    /// `ran_at` (ns), held a write hold of `owner` still live at `point_ms`.
    pub(super) fn kept_writer(&self, owner: u64, ran_at: u64, point_ms: u64) -> bool {
        let before = self.kept.partition_point(|k| k.at < ran_at);
        before > 0
            && self.kept[before - 1]
                .holds
                .iter()
                .any(|&(o, until)| o == owner && point_ms <= until + TOLERANCE_MS)
    }
}
