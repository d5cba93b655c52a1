//! Which key, under which spec, the linearizability search judges a call on, and the order
//! in which it replays one key's calls: invocations and answers as the history recorded
//! them, a witnessed call where its node ran it, and the moments the key's state may have
//! been lost.
//!
//! Invariant: a call the simulator saw its node run with a readable reply is invoked and
//! answered at that instant and nowhere else; an unanswered call no node ran is left out
//! (where the history witnesses runs at all); every other call keeps its interval.

use crate::world::calls::{self, Family, LockOp};

use super::Call;

/// One event of a key's calls, as the history recorded it, with its time (ns).
pub(super) enum Seen {
    /// The call was sent.
    Invoked(usize, u64),
    /// A node ran it and produced a reply that reads as its script documents.
    Ran(usize, u64),
    /// Its reply reached the client.
    Answered(usize, u64),
}

impl Seen {
    fn at(&self) -> u64 {
        match *self {
            Self::Invoked(_, at) | Self::Ran(_, at) | Self::Answered(_, at) => at,
        }
    }
}

/// A key's events as the search replays them: invocations (Ok) and answers (Err) by call,
/// a witnessed call invoked and answered where its node ran it; and where the key's state
/// may have been lost, at `lost` (ns, sorted): (the position in the order it precedes, ns).
#[allow(clippy::type_complexity)]
pub(super) fn ordered(
    calls: &[Call],
    seen: Vec<Seen>,
    lost: &[u64],
    witnessed: bool,
) -> (Vec<Result<usize, usize>>, Vec<(usize, u64)>) {
    let mut lost = lost.iter().peekable();
    let mut order = Vec::new();
    let mut restarts = Vec::new();
    for e in seen {
        while let Some(&&at) = lost.peek()
            && at <= e.at()
        {
            restarts.push((order.len(), at));
            lost.next();
        }
        match e {
            Seen::Invoked(index, _) => {
                let call = &calls[index];
                if call.ran_at.is_none() && (!witnessed || call.reply.is_some() || call.ran) {
                    order.push(Ok(index));
                }
            }
            Seen::Ran(index, _) => order.extend([Ok(index), Err(index)]),
            Seen::Answered(index, _) if calls[index].ran_at.is_none() => order.push(Err(index)),
            Seen::Answered(..) => {}
        }
    }
    (order, restarts)
}

/// Which sequential spec judges a key's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Judge {
    /// The mutex's ([`lease_spec`]).
    Mutex,
    /// The read-write lock's ([`super::rw_spec`]).
    RwLock,
    /// The semaphore's ([`super::permit_spec`]).
    Semaphore,
}

/// The spec that judges a call on `key`, and the key its calls are grouped by. The
/// read-write lock's scripts name its write hash (`leasehold:{name}:rw`) or its readers'
/// zset first, and its writer renews and probes with the mutex's scripts on the write hash:
/// all of one read-write lock's calls are grouped by its name (every key of a lock carries
/// its name as the hash tag, `lock/src/keys.rs`).
pub(super) fn judge_of<'k>(op: &LockOp, key: &'k str) -> (Judge, &'k str) {
    let rw_hash = key
        .strip_suffix(leasehold::RWLOCK_FAMILY)
        .is_some_and(|base| base.ends_with(':'));
    match op.family {
        Family::Mutex if !rw_hash => (Judge::Mutex, key),
        Family::Mutex | Family::Read | Family::Write => (Judge::RwLock, calls::lock_name(key)),
        Family::Permit => (Judge::Semaphore, calls::lock_name(key)),
    }
}
