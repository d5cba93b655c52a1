//! Each process's renewals of each lock, and where its calls went: what the per-hold
//! verdicts on renewals (`reaction.rs`, `spurious_lost.rs`) read, read once per history.
//!
//! Invariant: a renewal is known by its call and its answer only, as the history recorded
//! them; a renewal with no answer is in flight for good (it may or may not have run). Every
//! family's renewals are read, each with its family, and a renewal speaks only for the
//! beliefs of the access its script renews ([`renews`]): the mutex's `renew.lua` a mutex
//! or write hold (the writer renews with it), `rw_read_renew.lua` a read hold,
//! `semaphore_renew.lua` a permit. Each answers "renewed" exactly when its hold was live
//! (the key's or hash field's deadline, or the zset member's score, after now), the same
//! record the server-truth oracle reads. A renewal names its hold id, and speaks only for
//! the belief whose granting calls named it ([`super::timeline::Hold::named`]): a process
//! that re-enters renews each of its holds apart, and one hold's end says nothing of
//! another's.

use std::collections::BTreeMap;

use crate::world::calls::{self, Family, LockReply, OpKind};
use crate::world::history::{Access, HistEvent, HistKind};
use crate::world::net::{ProcId, Target};

use super::timeline::Who;

/// A renewal: its family, the hold it renews, when it was sent, and when it was answered
/// and whether "renewed".
pub(super) struct Renewal {
    pub(super) family: Family,
    /// The hold id it renews.
    pub(super) hold: u64,
    pub(super) sent: u64,
    pub(super) answer: Option<(u64, bool)>,
}

/// Per (process, lock name): its renewals in send order.
pub(super) type Renewals = BTreeMap<(Who, String), Vec<Renewal>>;

/// The renewals of `history`.
pub(super) fn read(history: &[HistEvent]) -> Renewals {
    let mut renewals = Renewals::new();
    let mut pending: BTreeMap<u64, ((Who, String), usize)> = BTreeMap::new();
    for ev in history {
        match &ev.kind {
            HistKind::Call { id, op, .. } if op.kind == OpKind::Renew => {
                let key = (
                    (ev.proc, ev.incarnation),
                    calls::lock_name(&ev.lock).to_owned(),
                );
                let list = renewals.entry(key.clone()).or_default();
                list.push(Renewal {
                    family: op.family,
                    hold: op.hold,
                    sent: ev.at,
                    answer: None,
                });
                pending.insert(*id, (key, list.len() - 1));
            }
            HistKind::Return {
                id,
                reply: LockReply::Renewed(renewed),
            } => {
                if let Some((key, index)) = pending.remove(id)
                    && let Some(r) = renewals.get_mut(&key).and_then(|l| l.get_mut(index))
                {
                    r.answer = Some((ev.at, *renewed));
                }
            }
            _ => {}
        }
    }
    renewals
}

/// Whether a renewal of `family` renews a belief of `access` (see the module's invariant).
pub(super) fn renews(family: Family, access: Access) -> bool {
    match family {
        Family::Mutex => access == Access::Exclusive,
        Family::Read => access == Access::Shared,
        Family::Permit => matches!(access, Access::Permit { .. }),
        // A write hold has no renew script of its own: the writer renews with the mutex's.
        Family::Write => false,
    }
}

/// The deployment targets each process's calls on each lock went to: one for a single
/// node or replicated service, several for RedLock's masters (each master's client names
/// its holds its own way, so the hold ids do not tell).
pub(super) struct Targets(BTreeMap<(ProcId, String), (Target, bool)>);

impl Targets {
    pub(super) fn read(history: &[HistEvent]) -> Self {
        let mut map: BTreeMap<(ProcId, String), (Target, bool)> = BTreeMap::new();
        for ev in history {
            if let HistKind::Call { target, .. } = &ev.kind {
                let key = (ev.proc, calls::lock_name(&ev.lock).to_owned());
                let entry = map.entry(key).or_insert((*target, true));
                entry.1 &= entry.0 == *target;
            }
        }
        Self(map)
    }

    /// Whether every call of `proc` on `lock` went to one target.
    pub(super) fn single(&self, proc: ProcId, lock: &str) -> bool {
        self.0
            .get(&(proc, lock.to_owned()))
            .is_some_and(|&(_, one)| one)
    }
}
