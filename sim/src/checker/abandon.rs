//! Abandoned acquires: an acquire that gave up (cancelled or timed out) after an attempt
//! that may have left a hold or a queue entry on the server sends that hold's release.
//!
//! Invariant (DESIGN §2 "cancellation", `lock/src/pending.rs`): from the first send until
//! a grant becomes a guard, a release stands armed; it is disarmed only by a reply saying
//! nothing was created (a busy answer to an attempt that did not queue). So when the last
//! acquire call of a wait that gave up was unanswered, granted, or queued, a release of its
//! hold id leaves the process at once: a timed-out acquire sends it before it returns, a
//! cancelled one from the background task its drop spawns. Without it the lock (or the
//! line) is stranded for a lease or an entry timeout with nobody believing in it.
//!
//! Every family is judged: the read-write lock's and the semaphore's acquires run the same
//! acquire loop and `PendingRelease`, and each family's release script removes what its
//! acquire left (`rw_read_release.lua` a reader's zset entry, `rw_write_release.lua` a
//! write hold or a waiting writer's intent, `semaphore_release.lua` a permit or a queue
//! entry). A busy answer left something exactly when the attempt waited in a line
//! ([`LockOp::queued`]): a fair waiter's queue entry (mutex, semaphore) or a waiting
//! writer's intent; a reader never leaves anything behind a busy answer.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::world::calls::{self, LockOp, LockReply, OpKind};
use crate::world::history::{FaultMark, HistEvent, HistKind};

use super::problems::{Judge, ProblemKind, Reach};
use super::timeline::{Timeline, Who};

/// How soon after giving up the release must have left: the background release is
/// spawned when the acquire is dropped and sends at once, and a timed-out acquire sends
/// it before returning; one reply wait (`leasehold::MIN_REPLY_WAIT`, the least time the
/// library gives any reply) leaves room for scheduling and hiccups without reaching the
/// lease (10 ms at least) a stranded grant would last.
const RELEASE_WITHIN: Duration = leasehold::MIN_REPLY_WAIT;

/// The error texts of giving up while waiting: the client loop's cancellation, and
/// `leasehold::Error::Timeout` (other errors are the library's to explain, and a refused
/// single attempt leaves nothing behind).
fn gave_up(error: &str) -> bool {
    error.starts_with("cancelled") || error.contains("not acquired within")
}

/// An acquire call of a wait: its hold, whether it queued, and when it was sent.
#[derive(Clone, Copy)]
struct Attempt {
    id: u64,
    op: LockOp,
    sent: u64,
}

/// A release owed: `who` gave up at `at` and must release `hold` (whose last attempt went
/// out at `sent`) by `at` + [`RELEASE_WITHIN`].
struct Owed {
    who: Who,
    lock: String,
    hold: u64,
    sent: u64,
    at: u64,
}

/// Acquires that gave up after an attempt that may have left something on the server, and
/// sent no release of its hold in time, while nothing hampered their process.
pub(super) fn abandoned(
    history: &[HistEvent],
    t: &Timeline,
    faults: &[FaultMark],
    end: u64,
    judge: &mut Judge<'_>,
) {
    let within = u64::try_from(RELEASE_WITHIN.as_nanos()).unwrap_or(u64::MAX);
    let mut last: BTreeMap<(Who, String), Attempt> = BTreeMap::new();
    let mut replies: BTreeMap<u64, LockReply> = BTreeMap::new();
    let mut releases: BTreeMap<(Who, u64), Vec<u64>> = BTreeMap::new();
    let mut crashed: BTreeMap<Who, u64> = BTreeMap::new();
    let mut owed = Vec::new();
    for ev in history {
        let who = (ev.proc, ev.incarnation);
        match &ev.kind {
            HistKind::WaitStart => {
                last.remove(&(who, ev.lock.clone()));
            }
            HistKind::Call { id, op, .. } if op.kind == OpKind::Acquire => {
                let attempt = Attempt {
                    id: *id,
                    op: *op,
                    sent: ev.at,
                };
                last.insert((who, calls::lock_name(&ev.lock).to_owned()), attempt);
            }
            HistKind::Call { op, .. } if op.kind == OpKind::Release => {
                releases.entry((who, op.hold)).or_default().push(ev.at);
            }
            HistKind::Return { id, reply } => {
                replies.insert(*id, *reply);
            }
            HistKind::Crashed => {
                crashed.insert(who, ev.at);
            }
            HistKind::AcquireFailed { error } if gave_up(error) => {
                let Some(attempt) = last.remove(&(who, ev.lock.clone())) else {
                    continue;
                };
                let left_something = match replies.get(&attempt.id) {
                    None | Some(LockReply::Granted { .. }) => true,
                    Some(LockReply::Denied) => attempt.op.queued,
                    Some(_) => false,
                };
                if left_something {
                    owed.push(Owed {
                        who,
                        lock: ev.lock.clone(),
                        hold: attempt.op.hold,
                        sent: attempt.sent,
                        at: ev.at,
                    });
                }
            }
            _ => {}
        }
    }
    for o in owed {
        let due = o.at.saturating_add(within);
        let paid = releases
            .get(&(o.who, o.hold))
            .is_some_and(|sends| sends.iter().any(|&s| s >= o.sent && s <= due));
        // Inconclusive: the run ended, the process died, or a fault hampered it (a pause,
        // a cut link) or its node (a release waits for its connection) before it was due.
        let hampered = due > end
            || crashed.get(&o.who).is_some_and(|&c| c <= due)
            || t.impaired(o.who.0, (o.sent, due))
            || faults
                .iter()
                .any(|m| m.proc.is_none() && m.from <= due && m.until >= o.sent);
        if paid || hampered {
            continue;
        }
        judge.add(
            ProblemKind::AbandonedHold,
            &o.lock,
            due,
            (&[(o.who, o.sent, due)], Reach::Windows),
            format!(
                "c{}.{} gave up at t={:.3}s after an attempt that may have left its hold on the server, and sent no release of it within {} ms",
                o.who.0,
                o.who.1,
                o.at as f64 / 1e9,
                RELEASE_WITHIN.as_millis()
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::ProblemKind;
    use super::super::fixtures;
    use crate::world::calls::{Family, LockOp, LockReply, OpKind};
    use crate::world::history::{HistEvent, HistKind};
    use crate::world::net::Target;

    fn ev(at_ms: u64, lock: &str, kind: HistKind) -> HistEvent {
        fixtures::ev(at_ms, 1, lock, kind)
    }

    fn call(at_ms: u64, id: u64, kind: OpKind, queued: bool) -> HistEvent {
        call_by((Family::Mutex, "leasehold:{l}"), at_ms, id, kind, queued)
    }

    fn call_by(
        (family, key): (Family, &str),
        at_ms: u64,
        id: u64,
        kind: OpKind,
        queued: bool,
    ) -> HistEvent {
        let op = LockOp {
            family,
            kind,
            hold: 7,
            owner: 9,
            ttl_ms: 1_000,
            queued,
            entry_ms: 0,
        };
        let target = Target::Node(0);
        ev(at_ms, key, HistKind::Call { id, target, op })
    }

    /// A waiter of `family` whose attempt on `key` (queued or not) got `reply` (none: no
    /// answer), was cancelled at 500 ms, and sent a release at `release_ms`, if any.
    fn cancelled_by(
        family: (Family, &str),
        queued: bool,
        reply: Option<LockReply>,
        release_ms: Option<u64>,
    ) -> Vec<HistEvent> {
        let mut h = vec![
            ev(0, "l", HistKind::WaitStart),
            call_by(family, 1, 0, OpKind::Acquire, queued),
        ];
        h.extend(reply.map(|reply| ev(2, family.1, HistKind::Return { id: 0, reply })));
        h.push(ev(
            500,
            "l",
            HistKind::AcquireFailed {
                error: "cancelled: dropped".into(),
            },
        ));
        h.extend(release_ms.map(|at| call_by(family, at, 1, OpKind::Release, false)));
        h
    }

    /// A fair waiter that queued (the attempt answered busy), was cancelled at 500 ms,
    /// and sent a release at `release_ms`, if any.
    fn cancelled(release_ms: Option<u64>) -> Vec<HistEvent> {
        let mutex = (Family::Mutex, "leasehold:{l}");
        cancelled_by(mutex, true, Some(LockReply::Denied), release_ms)
    }

    fn kinds(h: &[HistEvent]) -> Vec<ProblemKind> {
        fixtures::kinds(h, &[], None, 5_000)
    }

    #[test]
    fn a_cancelled_queued_acquire_must_release_its_hold() {
        assert_eq!(kinds(&cancelled(None)), vec![ProblemKind::AbandonedHold]);
        assert_eq!(
            kinds(&cancelled(Some(800))),
            vec![ProblemKind::AbandonedHold]
        );
        assert!(kinds(&cancelled(Some(501))).is_empty());
    }

    #[test]
    fn a_busy_answer_to_an_attempt_that_did_not_queue_leaves_nothing_to_release() {
        let mut h = cancelled(None);
        h[1] = call(1, 0, OpKind::Acquire, false);
        assert!(kinds(&h).is_empty());
    }

    #[test]
    fn a_writer_a_reader_and_a_permit_that_may_have_left_something_release_it() {
        let write = (Family::Write, "leasehold:{l}:rw");
        let read = (Family::Read, "leasehold:{l}:rw");
        let permit = (Family::Permit, "leasehold:{l}:sem");
        // A permit carries no fencing token: the semaphore grants with token 0.
        let permit_granted = Some(LockReply::Granted { token: 0 });
        let busy = Some(LockReply::Denied);
        // A waiting writer's intent, a reader's unanswered attempt, a granted permit and
        // a permit's queue entry: each owes its release.
        let owing = [
            (write, true, busy),
            (read, false, None),
            (permit, false, permit_granted),
            (permit, true, busy),
        ];
        for (family, queued, reply) in owing {
            let h = cancelled_by(family, queued, reply, None);
            assert_eq!(kinds(&h), vec![ProblemKind::AbandonedHold], "{family:?}");
            assert!(kinds(&cancelled_by(family, queued, reply, Some(501))).is_empty());
        }
        // A busy reader or an unqueued busy permit left nothing.
        for family in [read, permit] {
            assert!(kinds(&cancelled_by(family, false, busy, None)).is_empty());
        }
    }
}
