//! Reaction to "not held": a client stops believing a hold within a reply wait of a renewal
//! of it answered "not held".
//!
//! Invariant (DESIGN §2 "watchdog + `lost()`"): "the lease is marked lost when the server
//! reports the hold gone", and "lost" is final; `Guard::extend()` answered "not held"
//! fails. Either way the application's belief ends when the answer arrives. A renewal
//! answered "not held" is the server's own word, so no fault excuses a belief that goes on
//! past it: only a process that could not run (paused, cut off, crashed) after the answer
//! is not judged. RedLock's renewals are not judged one master at a time: one master's
//! "not held" does not end a quorum's lease.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::calls::{self, LockReply, OpKind};
use crate::history::{HistEvent, HistKind};
use crate::net::{ProcId, Target};

use super::problems::{Judge, ProblemKind, Reach};
use super::timeline::{Timeline, Who};

/// How soon after the answer the belief ends: the watchdog marks the lease lost on the
/// answer and the application's wait on `lost()` wakes at once; one reply wait
/// (`leasehold::MIN_REPLY_WAIT`, the least time the library gives any reply) leaves room
/// for scheduling and hiccups, and is far below the lease a belief could otherwise run on.
pub(super) const REACT_WITHIN: Duration = leasehold::MIN_REPLY_WAIT;

/// A renewal answered "not held": by whom, on which lock, sent and answered when.
struct Refused {
    who: Who,
    lock: String,
    sent: u64,
    answered: u64,
}

/// Beliefs that went on for longer than [`REACT_WITHIN`] after a renewal of their hold was
/// answered "not held", while their process could run.
pub(super) fn not_held(history: &[HistEvent], t: &Timeline, judge: &mut Judge<'_>) {
    let within = u64::try_from(REACT_WITHIN.as_nanos()).unwrap_or(u64::MAX);
    let mut renewals: BTreeMap<u64, (Who, String, u64)> = BTreeMap::new();
    let targets = Targets::read(history);
    let mut refused = Vec::new();
    for ev in history {
        match &ev.kind {
            HistKind::Call { id, op, .. } if op.kind == OpKind::Renew => {
                let lock = calls::lock_name(&ev.lock).to_owned();
                let who = (ev.proc, ev.incarnation);
                renewals.insert(*id, (who, lock, ev.at));
            }
            HistKind::Return {
                id,
                reply: LockReply::Renewed(false),
            } => {
                if let Some((who, lock, sent)) = renewals.remove(id) {
                    refused.push(Refused {
                        who,
                        lock,
                        sent,
                        answered: ev.at,
                    });
                }
            }
            _ => {}
        }
    }
    for r in refused {
        if !targets.single(r.who.0, &r.lock) {
            continue;
        }
        let due = r.answered.saturating_add(within);
        let Some(hold) = t.holds.get(&r.lock).and_then(|holds| {
            holds
                .iter()
                .find(|h| h.who() == r.who && h.start <= r.sent && h.end > due)
        }) else {
            continue;
        };
        let hampered = t
            .impairments
            .iter()
            .any(|&(p, from, until)| p == r.who.0 && from <= due && until >= r.answered);
        if hampered {
            continue;
        }
        judge.add(
            ProblemKind::NotHeldIgnored,
            &r.lock,
            due,
            (&[(r.who, r.sent, due)], Reach::Windows),
            format!(
                "c{}.{}'s renewal sent at t={:.3}s was answered \"not held\" at t={:.3}s, yet it believed the hold until t={:.3}s (within {} ms expected)",
                r.who.0,
                r.who.1,
                r.sent as f64 / 1e9,
                r.answered as f64 / 1e9,
                hold.end as f64 / 1e9,
                REACT_WITHIN.as_millis()
            ),
        );
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::ProblemKind;
    use super::super::fixtures::{self, KEY};
    use crate::calls::LockReply;
    use crate::history::{Access, HistEvent, HistKind};
    use crate::net::Target;

    fn ev(at_ms: u64, lock: &str, kind: HistKind) -> HistEvent {
        fixtures::ev(at_ms, 1, lock, kind)
    }

    fn renew(at_ms: u64, id: u64, node: usize) -> HistEvent {
        let op = fixtures::renewal(7);
        let target = Target::Node(node);
        ev(at_ms, KEY, HistKind::Call { id, target, op })
    }

    /// c1 holds from 0 ms; its renewal at 300 ms is answered "not held" at 301 ms; its
    /// belief ends at `end_ms` (by the lost signal).
    fn refused(end_ms: u64) -> Vec<HistEvent> {
        let access = Access::Exclusive;
        vec![
            ev(0, "l", HistKind::Acquired { token: 1, access }),
            renew(300, 0, 0),
            ev(
                301,
                KEY,
                HistKind::Return {
                    id: 0,
                    reply: LockReply::Renewed(false),
                },
            ),
            ev(end_ms, "l", HistKind::Lost),
        ]
    }

    fn kinds(h: &[HistEvent]) -> Vec<ProblemKind> {
        fixtures::kinds(h, &[], None, 2_000)
    }

    #[test]
    fn a_belief_ends_within_a_reply_wait_of_a_not_held_answer() {
        assert!(kinds(&refused(301)).is_empty());
        assert_eq!(kinds(&refused(900)), vec![ProblemKind::NotHeldIgnored]);
    }

    #[test]
    fn one_redlock_master_answering_not_held_ends_nothing() {
        let mut h = refused(900);
        h.insert(1, renew(299, 1, 1));
        assert!(kinds(&h).is_empty());
    }
}
