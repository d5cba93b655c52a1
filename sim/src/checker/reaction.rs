//! Reaction to "not held": a client stops believing a hold within a reply wait of a renewal
//! of it answered "not held".
//!
//! Invariant (DESIGN §2 "watchdog + `lost()`"): "the lease is marked lost when the server
//! reports the hold gone", and "lost" is final; `Guard::extend()` answered "not held"
//! fails. Either way the application's belief ends when the answer arrives. A renewal
//! answered "not held" is the server's own word, so no fault excuses a belief that goes on
//! past it (it is never excused). A process that could not run (paused, cut off, crashed)
//! after the answer is given that stretch on top of the reaction time, and no more.
//! RedLock's renewals are not judged one master at a time: one master's "not held" does
//! not end a quorum's lease.
//!
//! Every family is judged: a mutex or write hold by the mutex's `renew.lua`, a read hold by
//! `rw_read_renew.lua`, a permit by `semaphore_renew.lua` (one watchdog serves them all, and
//! each script answers "not held" only for a hold it no longer has); an answer speaks only
//! for a belief of the access its script renews ([`super::renewals::renews`]).

use std::time::Duration;

use super::problems::{Judge, ProblemKind, Reach};
use super::renewals::{self, Renewals, Targets};
use super::timeline::Timeline;

/// How soon after the answer the belief ends: the watchdog marks the lease lost on the
/// answer and the application's wait on `lost()` wakes at once; one reply wait
/// (`leasehold::MIN_REPLY_WAIT`, the least time the library gives any reply) leaves room
/// for scheduling and hiccups, and is far below the lease a belief could otherwise run on.
pub(super) const REACT_WITHIN: Duration = leasehold::MIN_REPLY_WAIT;

/// Beliefs that went on for longer than [`REACT_WITHIN`] after a renewal of their hold was
/// answered "not held", while their process could run.
pub(super) fn not_held(
    (renewals, targets): (&Renewals, &Targets),
    t: &Timeline,
    judge: &mut Judge<'_>,
) {
    let within = u64::try_from(REACT_WITHIN.as_nanos()).unwrap_or(u64::MAX);
    let refused = renewals.iter().flat_map(|((who, lock), list)| {
        list.iter().filter_map(move |r| match r.answer {
            Some((answered, false)) => Some((*who, lock, (r.family, r.hold), r.sent, answered)),
            _ => None,
        })
    });
    for (who, lock, (family, renewed), sent, answered) in refused {
        if !targets.single(who.0, lock) {
            continue;
        }
        // A process that could not run after the answer reacts once it runs again: the
        // reaction's due time moves by each hampering stretch that began before it, by its
        // own length, never more.
        let mut due = answered.saturating_add(within);
        let mut hampering: Vec<(u64, u64)> = t
            .impairments
            .iter()
            .filter(|&&(p, _, until)| p == who.0 && until > answered)
            .map(|&(_, from, until)| (from, until))
            .collect();
        hampering.sort_unstable();
        for (from, until) in hampering {
            if from <= due {
                due = due.max(until.saturating_add(within));
            }
        }
        judge.case(ProblemKind::NotHeldIgnored, true);
        let Some(hold) = t.holds.get(lock).and_then(|holds| {
            holds.iter().find(|h| {
                h.who() == who
                    && renewals::renews(family, h.access)
                    && h.named(renewed)
                    && h.start <= sent
                    && h.end > due
            })
        }) else {
            continue;
        };
        judge.add_explained(
            ProblemKind::NotHeldIgnored,
            lock,
            due,
            (&[(who, sent, due)], Reach::Windows),
            (format!(
                "c{}.{}'s renewal sent at t={:.3}s was answered \"not held\" at t={:.3}s, yet it believed the hold until t={:.3}s (within {} ms expected)",
                who.0,
                who.1,
                sent as f64 / 1e9,
                answered as f64 / 1e9,
                hold.end as f64 / 1e9,
                REACT_WITHIN.as_millis()
            ), None),
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::ProblemKind;
    use super::super::fixtures::{self, FAMILIES, KEY};
    use crate::world::calls::{Family, LockReply, OpKind};
    use crate::world::history::{Access, HistEvent, HistKind};
    use crate::world::net::Target;

    fn ev(at_ms: u64, lock: &str, kind: HistKind) -> HistEvent {
        fixtures::ev(at_ms, 1, lock, kind)
    }

    fn renew(at_ms: u64, id: u64, node: usize, (family, key): (Family, &str)) -> HistEvent {
        let op = fixtures::renewal(family, 7);
        let target = Target::Node(node);
        ev(at_ms, key, HistKind::Call { id, target, op })
    }

    /// c1 holds from 0 ms with `access`; its renewal by `family`'s script on `key` at
    /// 300 ms is answered "not held" at 301 ms; its belief ends at `end_ms` (by the lost
    /// signal).
    fn refused_hold(end_ms: u64, (access, family, key): (Access, Family, &str)) -> Vec<HistEvent> {
        vec![
            ev(0, "l", HistKind::Acquired { token: 1, access }),
            renew(300, 0, 0, (family, key)),
            ev(
                301,
                key,
                HistKind::Return {
                    id: 0,
                    reply: LockReply::Renewed(false),
                },
            ),
            ev(end_ms, "l", HistKind::Lost),
        ]
    }

    /// A mutex hold's [`refused_hold`].
    fn refused(end_ms: u64) -> Vec<HistEvent> {
        refused_hold(end_ms, FAMILIES[0])
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
    fn a_write_hold_a_read_hold_and_a_permit_end_on_not_held_too() {
        for family in FAMILIES {
            assert!(kinds(&refused_hold(301, family)).is_empty(), "{family:?}");
            assert_eq!(
                kinds(&refused_hold(900, family)),
                vec![ProblemKind::NotHeldIgnored],
                "{family:?}"
            );
        }
    }

    #[test]
    fn a_not_held_answer_speaks_only_for_the_access_its_script_renews() {
        // A reader's renewal answered "not held" says nothing of a write hold.
        let (_, read, key) = FAMILIES[2];
        let h = refused_hold(900, (Access::Exclusive, read, key));
        assert!(kinds(&h).is_empty());
    }

    #[test]
    fn a_not_held_answer_speaks_only_for_the_hold_it_renews() {
        // The belief was granted by a call of hold `granted`; the refused renewal is of
        // hold 7. A re-entering process renews each of its holds apart: a sibling's end
        // says nothing of the hold it believes.
        let by = |granted: u64| {
            let mut h = refused(900);
            let op = fixtures::op(Family::Mutex, OpKind::Acquire, (granted, 1), 1_000, false);
            let call = HistKind::Call {
                id: 10,
                target: Target::Node(0),
                op,
            };
            let reply = LockReply::Granted { token: 1 };
            h.insert(0, ev(0, KEY, call));
            h.insert(1, ev(0, KEY, HistKind::Return { id: 10, reply }));
            h
        };
        assert!(kinds(&by(8)).is_empty());
        assert_eq!(kinds(&by(7)), vec![ProblemKind::NotHeldIgnored]);
    }

    #[test]
    fn a_sibling_granted_before_the_belief_began_speaks_for_it_only_until_it_re_enters() {
        // Two acquires of one owner race: holds 8 and 7 are both answered granted before
        // the client records the belief (as hold 8's), so both name its granting calls.
        // Once hold 7 is recorded as the re-entry, its renewal's "not held" is about the
        // sibling, not the hold the belief rests on; before that it speaks for the belief.
        let raced = |reentered: Option<u64>| {
            let mut h = refused(900);
            for (id, hold) in [(10, 8), (11, 7)] {
                let op = fixtures::op(Family::Mutex, OpKind::Acquire, (hold, 1), 1_000, false);
                let call = HistKind::Call {
                    id,
                    target: Target::Node(0),
                    op,
                };
                let reply = LockReply::Granted { token: 1 };
                h.insert(0, ev(0, KEY, HistKind::Return { id, reply }));
                h.insert(0, ev(0, KEY, call));
            }
            if let Some(hold) = reentered {
                let at = h.iter().position(|e| e.at > 0).unwrap();
                h.insert(at, ev(10, "l", HistKind::Reentered { token: 1, hold }));
            }
            h
        };
        assert!(kinds(&raced(Some(7))).is_empty());
        assert_eq!(kinds(&raced(None)), vec![ProblemKind::NotHeldIgnored]);
        // A re-entry naming the other hold takes that one out instead: 7 still speaks.
        assert_eq!(kinds(&raced(Some(8))), vec![ProblemKind::NotHeldIgnored]);
    }

    #[test]
    fn one_redlock_master_answering_not_held_ends_nothing() {
        let mut h = refused(900);
        h.insert(1, renew(299, 1, 1, (Family::Mutex, KEY)));
        assert!(kinds(&h).is_empty());
    }
}
