//! A try's "held" answer judged by what the servers told it. `WouldBlock` says the lock is
//! held, and the library gives it only when a server answered "busy" (`acquire.rs`'s
//! invariant; for RedLock, a master did): a lost reply the probe finds not granted is asked
//! again, and a quorum too few masters answered in time is `NoQuorum`. So a `try_*` that
//! failed with `WouldBlock` must have been answered "busy" by at least one call of its
//! attempt. One that was not reported a lock it could not see as held (a reset connection's
//! dropped attempt read as held, a slow quorum read as held), so its caller skips work on a
//! lock that may be free. Nothing excuses it: a fault loses or delays replies, it never
//! makes a server answer "busy".
//!
//! Invariant: truth is the replies that reached the client ([`HistKind::Return`]), never
//! the client's word and never a node's reply the client did not get; an acquire call is
//! its process's script calls on the lock from its `WaitStart` to its `AcquireFailed`.

use std::collections::BTreeMap;

use crate::world::calls::{self, LockReply, OpKind};
use crate::world::history::{HistEvent, HistKind};

use super::problems::{Judge, ProblemKind, Reach};

/// Tries answered `WouldBlock` that no server answered "busy".
pub(super) fn false_busy(history: &[HistEvent], judge: &mut Judge<'_>) {
    // Per process incarnation and lock name: whether the running acquire call was answered
    // busy, and how many of its script calls it sent.
    type Key = (usize, u32, String);
    let mut running: BTreeMap<Key, (bool, u32)> = BTreeMap::new();
    let mut call_of: BTreeMap<u64, Key> = BTreeMap::new();
    for ev in history {
        let key = |lock: &str| (ev.proc, ev.incarnation, lock.to_owned());
        match &ev.kind {
            HistKind::WaitStart => {
                running.insert(key(&ev.lock), (false, 0));
            }
            HistKind::Call { id, op, .. } if op.kind == OpKind::Acquire => {
                let key = key(calls::lock_name(&ev.lock));
                if let Some((_, sent)) = running.get_mut(&key) {
                    *sent += 1;
                }
                call_of.insert(*id, key);
            }
            HistKind::Return {
                id,
                reply: LockReply::Denied,
            } => {
                if let Some((busy, _)) = call_of.get(id).and_then(|key| running.get_mut(key)) {
                    *busy = true;
                }
            }
            HistKind::AcquireFailed { error } => {
                let Some((busy, sent)) = running.remove(&key(&ev.lock)) else {
                    continue;
                };
                let would_block = leasehold::Error::WouldBlock {
                    name: ev.lock.clone(),
                    retry_after: None,
                }
                .to_string();
                if *error != would_block {
                    continue;
                }
                judge.case(ProblemKind::FalseBusy, true);
                if busy {
                    continue;
                }
                let detail = format!(
                    "c{}.{}'s try on {} failed at t={:.3}s with WouldBlock (\"{error}\"), but none of the {sent} acquire call(s) it sent was answered busy",
                    ev.proc,
                    ev.incarnation,
                    ev.lock,
                    ev.at as f64 / 1e9
                );
                judge.add_explained(
                    ProblemKind::FalseBusy,
                    &ev.lock,
                    ev.at,
                    (&[], Reach::Windows),
                    (detail, None),
                );
            }
            HistKind::Acquired { .. } => {
                running.remove(&key(&ev.lock));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::ProblemKind;
    use super::super::fixtures::{self, KEY};
    use crate::world::calls::{Family, LockReply, OpKind};
    use crate::world::history::{HistEvent, HistKind};
    use crate::world::net::Target;

    fn ev(at_ms: u64, lock: &str, kind: HistKind) -> HistEvent {
        fixtures::ev(at_ms, 1, lock, kind)
    }

    /// c1 tries lock `l` at 0 ms: one acquire call, answered `reply` at 2 ms if any (the
    /// node ran it either way), then the try fails with `WouldBlock`.
    fn tried(reply: Option<LockReply>) -> Vec<HistEvent> {
        let op = fixtures::op(Family::Mutex, OpKind::Acquire, (7, 1), 1_000, false);
        let target = Target::Node(0);
        let mut h = vec![
            ev(0, "l", HistKind::WaitStart),
            ev(1, KEY, HistKind::Call { id: 0, target, op }),
        ];
        if let Some(reply) = reply {
            h.push(ev(2, KEY, HistKind::Return { id: 0, reply }));
        }
        let error = leasehold::Error::WouldBlock {
            name: "l".into(),
            retry_after: None,
        }
        .to_string();
        h.push(ev(3, "l", HistKind::AcquireFailed { error }));
        h
    }

    fn false_busy(h: &[HistEvent]) -> usize {
        fixtures::kinds(h, &[], None, 10)
            .into_iter()
            .filter(|k| *k == ProblemKind::FalseBusy)
            .count()
    }

    #[test]
    fn a_try_refused_as_held_must_have_been_answered_busy() {
        assert_eq!(false_busy(&tried(Some(LockReply::Denied))), 0);
        // Its reply lost: nothing said "held".
        assert_eq!(false_busy(&tried(None)), 1);
        // Answered, but not "busy" (a grant it then gave back, say).
        assert_eq!(false_busy(&tried(Some(LockReply::Granted { token: 1 }))), 1);
    }
}
