//! Each process's renewals of each lock, and where its calls went: what the per-hold
//! verdicts on renewals (`reaction.rs`, `spurious_lost.rs`) read, read once per history.
//!
//! Invariant: a renewal is known by its call and its answer only, as the history recorded
//! them; a renewal with no answer is in flight for good (it may or may not have run).

use std::collections::BTreeMap;

use crate::calls::{self, Family, LockReply, OpKind};
use crate::history::{HistEvent, HistKind};
use crate::net::{ProcId, Target};

use super::timeline::Who;

/// A renewal: when it was sent, and when it was answered and whether "renewed".
pub(super) struct Renewal {
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
            HistKind::Call { id, op, .. }
                if op.family == Family::Mutex && op.kind == OpKind::Renew =>
            {
                let key = (
                    (ev.proc, ev.incarnation),
                    calls::lock_name(&ev.lock).to_owned(),
                );
                let list = renewals.entry(key.clone()).or_default();
                list.push(Renewal {
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
