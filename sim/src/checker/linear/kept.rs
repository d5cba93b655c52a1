//! The write epochs the server kept, read from the keyspace (`HistKind::Kept`, recorded
//! right after each lock-script call ran, not any script's word): per read-write key, after
//! each call, which owners' write holds the write hash kept and until when.
//!
//! Why it exists: a fair release hands the write lock to the head of its line with no call
//! of the grantee's own, so the spec never sees that epoch begin. Where the keyspace shows
//! an owner's write hold live when its next grant ran, that grant, if its token is the
//! epoch's and not a new one, is the epoch's re-entry, which the owner's own live readers
//! do not block (`rw_write_acquire.lua` line 117; `rw_spec::joins_unseen`). Invariant: a
//! snapshot counts for a call only if it was taken before that call ran, on the same key;
//! the snapshots are gathered with the calls (`read.rs`), whose acquires name each hold's
//! owner.

use crate::model::node::EPOCH_US;
use crate::world::kept::KeptKey;

use super::Search;
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

impl Kept {
    /// What the write hash among `keys` (one `HistKind::Kept` event at `at` ns) held: each
    /// write hold whose owner `owner_of` knows (from its acquire), with its deadline in the
    /// node's clock.
    pub(super) fn of(at: u64, keys: &[KeptKey], owner_of: impl Fn(u64) -> Option<u64>) -> Self {
        let epoch_ms = EPOCH_US / 1_000;
        let holds = keys
            .iter()
            .filter(|k| {
                k.key
                    .strip_suffix(leasehold::RWLOCK_FAMILY)
                    .is_some_and(|base| base.ends_with(':'))
            })
            .flat_map(|k| &k.holds)
            .filter_map(|&(hold, deadline)| {
                let owner = owner_of(hold)?;
                Some((owner, u64::try_from(deadline - epoch_ms).ok()?))
            })
            .collect();
        Self { at, holds }
    }
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
