//! What the linearizability search ([`super::linear`]) asks of a lock family's sequential
//! spec: the mutex's ([`super::lease_spec`]), the read-write lock's ([`super::rw_spec`]) and
//! the semaphore's ([`super::permit_spec`]) each answer it, so one search judges them all.
//!
//! Invariant: every method only ever over-approximates what the server may have done:
//! [`SeqSpec::apply`] admits every state a correct server can reach, [`SeqSpec::absorb`]
//! merges two states into one admitting all either did, and [`SeqSpec::holds`] and
//! [`SeqSpec::unseen_owners`] name every hold and owner whose ambiguous calls may explain an
//! answer. So a finding is still one no linearization explains.

use std::fmt::Debug;

use crate::world::calls::LockOp;

use super::lease_spec::{self, Epoch, Illegal, Spec, Step, Timing};

/// A lock family's sequential spec: its discrete state, told apart by the search's
/// configurations (the timed part is [`Timing`]).
pub trait SeqSpec: Clone + Debug + Ord {
    /// What configurations must agree on to be merged by widening.
    type Group: Ord;

    /// The states after `step` from `state` (see [`lease_spec::apply`]).
    fn apply(state: &(Self, Timing), step: &Step) -> Result<Vec<(Self, Timing)>, Illegal<Self>>;

    /// The holds this state keeps (their ambiguous calls may explain an answer).
    fn holds(&self) -> Vec<u64>;

    /// Owners who may hold holds the spec never saw granted (a release of one of them may
    /// have freed the lock).
    fn unseen_owners(&self) -> Vec<u64>;

    /// What a widened configuration keeps exact.
    fn group(&self) -> Self::Group;

    /// How long (ms) a hold `op` asks for may live on the server after its last call ran:
    /// its TTL, the longest lease any script gives it (a hand-off caps the lease at the
    /// TTL too).
    fn unseen_lease(op: &LockOp) -> u64 {
        op.ttl_ms
    }

    /// `other` (of the same group) merged in: afterwards `self` admits all either did.
    fn absorb(&mut self, other: Self);
}

impl SeqSpec for Spec {
    type Group = (Option<(u64, Option<u64>)>, u64);

    fn apply(state: &(Self, Timing), step: &Step) -> Result<Vec<(Self, Timing)>, Illegal<Self>> {
        lease_spec::apply(state, step)
    }

    fn holds(&self) -> Vec<u64> {
        self.epoch
            .iter()
            .flat_map(|e| e.holds.iter().map(|&(h, _, _)| h))
            .collect()
    }

    fn unseen_owners(&self) -> Vec<u64> {
        self.epoch
            .iter()
            .filter(|e| e.unseen)
            .map(|e| e.owner)
            .collect()
    }

    /// The epoch's owner and token, and the highest token.
    fn group(&self) -> Self::Group {
        (
            self.epoch.as_ref().map(|e| (e.owner, e.token)),
            self.max_token,
        )
    }

    /// The holds' union, each over the hull of its intervals, and, where the holds
    /// differed, the epoch marked as possibly holding holds the spec never saw granted.
    /// More holds and a looser interval only ever make an answer legal (a hold's own lease
    /// live, a release's count reachable), and such an epoch may end at any point after
    /// the last one (what a lost grant's hold allows).
    fn absorb(&mut self, other: Self) {
        if let (Some(into), Some(from)) = (self.epoch.as_mut(), other.epoch) {
            let ids = |e: &Epoch| e.holds.iter().map(|&(h, _, _)| h).collect::<Vec<_>>();
            into.unseen |= from.unseen || ids(into) != ids(&from);
            for (hold, earliest, latest) in from.holds {
                match into.holds.binary_search_by_key(&hold, |&(h, _, _)| h) {
                    Ok(at) => {
                        let held = &mut into.holds[at];
                        held.1 = held.1.min(earliest);
                        held.2 = held.2.max(latest);
                    }
                    Err(at) => into.holds.insert(at, (hold, earliest, latest)),
                }
            }
        }
    }
}

/// Leases by hold, sorted by hold id, each with the earliest and the latest it can end (ms):
/// the state the read-write lock's readers and the semaphore's permits keep.
pub type Leases = Vec<(u64, u64, u64)>;

/// `hold`'s lease in `leases`, as (earliest end, latest end), if it is there.
pub fn lease_of(leases: &Leases, hold: u64) -> Option<(u64, u64)> {
    leases
        .iter()
        .find(|&&(h, _, _)| h == hold)
        .map(|&(_, earliest, latest)| (earliest, latest))
}

/// `hold`'s lease in `leases` set to end in `[earliest, latest]`, kept sorted.
pub fn set_lease(leases: &mut Leases, hold: u64, earliest: u64, latest: u64) {
    match leases.binary_search_by_key(&hold, |&(h, _, _)| h) {
        Ok(at) => leases[at] = (hold, earliest, latest),
        Err(at) => leases.insert(at, (hold, earliest, latest)),
    }
}
