//! The fair line: a release that frees a FairQueue lock while a live waiter stands in a
//! clean line hands the lock on at once.
//!
//! Invariant (DESIGN §2 "FairQueue", `lock/scripts/release.lua`): the release that frees
//! the lock grants it, inside the script, to the first waiter whose entry has not expired,
//! and tells that waiter's client; a waiter that misses the message polls. So when every
//! hold id that ever queued on the lock is accounted for when the release is sent — its
//! waiter is still waiting and unhampered, it was granted or released, or its entry has
//! surely expired — and one of them is waiting, some client believes the lock within
//! [`HAND_OFF_WITHIN`] of the release's answer. A waiter served by then (its wait ended in
//! a grant) was handed the lock, or took it; a waiter still waiting whose entry the history
//! cannot place in the line is alive, so if the release finds it there, it believes the
//! hand-off as a live one would. A line that is not clean (a waiter that died in it or gave
//! up, whose entry may still be live) is not judged: the script rightly hands off to a dead
//! entry, which holds the line until its deadline.
//!
//! Mutex only: the read-write lock's release may hand a run of readers the lock while
//! other readers hold it, and the semaphore's line hands out several permits at once,
//! which this rule's one holder and one head do not model; the read-write lock's line is
//! judged by its order ([`super::fifo`]) and its hand-offs' leases (`entry_lease.rs`),
//! the semaphore's waiters by capacity (`capacity.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::world::calls::{self, Family, LockReply, OpKind};
use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent, HistKind};
use crate::world::net::RETRANSMIT_BUDGET;

use super::problems::{Judge, ProblemKind, Reach};
use super::timeline::{Timeline, Wait, Who};

/// How soon after a freeing release's answer someone believes the lock: the hand-off
/// message takes one network delay; a waiter whose subscription is down polls on Spin's
/// schedule (`Backoff::SPIN.max` between attempts) and an attempt answers within a reply
/// wait (`MIN_REPLY_WAIT`); twice the polling gap covers a poll that just missed it. It is
/// well below the fair waiter's own refresh (a third of its entry timeout), which is what
/// moves a line whose release handed off to nobody.
const HAND_OFF_WITHIN: Duration = leasehold::Backoff::SPIN
    .max
    .saturating_mul(2)
    .saturating_add(leasehold::MIN_REPLY_WAIT);

/// One hold id that queued on a lock: whose, when it first and last queued (sent), the
/// send and answer times of its last answered queued attempt, and when a release of it
/// was answered.
#[derive(Default, Clone)]
struct Queued {
    who: Option<Who>,
    first: u64,
    last_sent: u64,
    last_answered: Option<(u64, u64)>,
    released: Option<u64>,
}

/// A release that freed the lock: sent at `sent`, answered at `answered`.
struct Freeing {
    lock: String,
    sent: u64,
    answered: u64,
}

/// Freeing releases with a live waiter in a clean line after which nobody believed the
/// lock in time, while nothing hampered anyone involved. `entry_timeout` is the fair
/// waiters' entry timeout.
pub(super) fn hand_offs(
    history: &[HistEvent],
    t: &Timeline,
    faults: &[FaultMark],
    entry_timeout: Duration,
    judge: &mut Judge<'_>,
) {
    let within = nanos(HAND_OFF_WITHIN);
    let expiry = nanos(entry_timeout);
    let budget = nanos(RETRANSMIT_BUDGET);
    // Per lock name: every hold id that queued on it.
    let mut queued: BTreeMap<String, BTreeMap<u64, Queued>> = BTreeMap::new();
    let mut calls: BTreeMap<u64, (Who, String, u64, OpKind, bool, u64)> = BTreeMap::new();
    let mut freeing = Vec::new();
    for ev in history {
        let who = (ev.proc, ev.incarnation);
        match &ev.kind {
            HistKind::Call { id, op, .. } if op.family == Family::Mutex => {
                let lock = calls::lock_name(&ev.lock).to_owned();
                if op.kind == OpKind::Acquire && op.queued {
                    let q = queued
                        .entry(lock.clone())
                        .or_default()
                        .entry(op.hold)
                        .or_default();
                    if q.who.is_none() {
                        q.who = Some(who);
                        q.first = ev.at;
                    }
                    q.last_sent = ev.at;
                }
                calls.insert(*id, (who, lock, op.hold, op.kind, op.queued, ev.at));
            }
            HistKind::Return { id, reply } => {
                let Some((_, lock, hold, kind, is_queued, sent)) = calls.get(id) else {
                    continue;
                };
                let q = queued.get_mut(lock).and_then(|l| l.get_mut(hold));
                match (kind, reply) {
                    (OpKind::Acquire, _) if *is_queued => {
                        if let Some(q) = q {
                            q.last_answered = Some((*sent, ev.at));
                        }
                    }
                    (OpKind::Release, LockReply::Released(n)) => {
                        if let Some(q) = q {
                            q.released = Some(ev.at);
                        }
                        if *n == 0 {
                            freeing.push(Freeing {
                                lock: lock.clone(),
                                sent: *sent,
                                answered: ev.at,
                            });
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    let mut waits: BTreeMap<(&str, Who), Vec<&Wait>> = BTreeMap::new();
    for w in &t.waits {
        waits.entry((w.lock.as_str(), w.who)).or_default().push(w);
    }
    for f in freeing {
        let Some(line) = queued.get(&f.lock) else {
            continue;
        };
        let due = f.answered.saturating_add(within);
        let linger = lingering(faults, expiry, due);
        let wait_of = |q: &Queued| {
            q.who.and_then(|who| {
                waits
                    .get(&(f.lock.as_str(), who))?
                    .iter()
                    .find(|w| w.start <= q.first && q.first <= w.stop)
                    .copied()
            })
        };
        // Waiters surely in line and waiting through the hand-off's bound; waiters alive
        // through it that may or may not be in line; and whether one was served by then.
        let mut live: Vec<&Wait> = Vec::new();
        let mut alive: Vec<&Wait> = Vec::new();
        let mut served = false;
        let mut clean = true;
        for q in line.values().filter(|q| q.first < f.sent) {
            let Some(wait) = wait_of(q) else {
                clean = false;
                break;
            };
            let gone = q.released.is_some_and(|r| r < f.sent)
                || q.last_answered.map_or(q.last_sent + budget, |(_, a)| a) + linger < f.sent;
            if gone {
                continue;
            }
            let grant_ended =
                |h: &&super::timeline::Hold| h.who() == wait.who && h.start == wait.stop;
            let holds = t.holds.get(&f.lock);
            if holds.is_some_and(|l| l.iter().filter(grant_ended).any(|h| h.start < f.sent)) {
                continue;
            }
            // A wait that ended by the hand-off's bound ended in a grant (the hand-off's,
            // or a fresh one: either way someone believes) or without one, when its entry
            // may still stand with nobody to take a hand-off: a line that is not clean.
            if wait.stop <= due {
                if holds.is_some_and(|l| l.iter().any(|h| grant_ended(&h))) {
                    served = true;
                    continue;
                }
                clean = false;
                break;
            }
            // In line and still waiting through the hand-off's bound: live, if an attempt
            // answered before the release was sent put it there, recently enough that its
            // entry cannot have lapsed (an entry lives an entry timeout of server time from
            // the attempt's run, after its send; half of it leaves room for a fast clock).
            // A waiter whose entry is not so placed is alive all the same: if the release
            // finds it in line, it is handed the lock and believes it as any live waiter.
            let entered = q
                .last_answered
                .is_some_and(|(sent, answered)| answered < f.sent && sent + expiry / 2 > f.sent);
            if entered {
                live.push(wait);
            } else {
                alive.push(wait);
            }
        }
        if !clean {
            judge.case(ProblemKind::HandOffStalled, false);
            continue;
        }
        if live.is_empty() && !served {
            continue;
        }
        let believed = t
            .holds
            .get(&f.lock)
            .is_some_and(|holds| holds.iter().any(|h| h.start > f.sent && h.start <= due))
            || t.unbelieved
                .iter()
                .any(|(lock, from, _)| *lock == f.lock && *from > f.sent && *from <= due);
        if believed {
            judge.case(ProblemKind::HandOffStalled, true);
            continue;
        }
        // Inconclusive: a waiter the release may have handed the lock to was hampered
        // around the hand-off, or a node fault could have changed the line the release read
        // (see [`unsettled`]).
        let first_join = live.iter().map(|w| w.start).min().unwrap_or(f.sent);
        let hampered = live
            .iter()
            .chain(&alive)
            .any(|w| t.impaired(w.who.0, (first_join.min(w.start), due)))
            || faults
                .iter()
                .any(|m| unsettled(m, (f.sent, due), (expiry, linger)));
        judge.case(ProblemKind::HandOffStalled, !hampered);
        if hampered {
            continue;
        }
        let windows: Vec<(Who, u64, u64)> = live.iter().map(|w| (w.who, w.start, due)).collect();
        let names: Vec<String> = live
            .iter()
            .map(|w| format!("c{}.{}", w.who.0, w.who.1))
            .collect();
        judge.add(
            ProblemKind::HandOffStalled,
            &f.lock,
            due,
            (&windows, Reach::Windows),
            format!(
                "a release freed the lock at t={:.3}s with {} waiting in a clean line, and nobody held it within {} ms",
                f.answered as f64 / 1e9,
                names.join(", "),
                HAND_OFF_WITHIN.as_millis()
            ),
        );
    }
}

/// How long past its last refresh a dead waiter's entry may still stand in true time, ns,
/// for a hand-off due at `due`: the entry timeout, stretched by the slowest node clock
/// drift begun by then (drifts are drawn up to 10 %) and by the largest step back of a node
/// clock by then.
fn lingering(faults: &[FaultMark], expiry: u64, due: u64) -> u64 {
    let before = faults.iter().filter(|m| m.from <= due);
    let slow_ppm = before
        .clone()
        .filter_map(|m| match m.fault {
            Fault::NodeClockDrift { ppm, .. } if ppm < 0 => Some(ppm.unsigned_abs()),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let back_ns = before
        .filter_map(|m| match m.fault {
            Fault::NodeClockJump { by_ms, .. } if by_ms < 0 => {
                Some(by_ms.unsigned_abs().saturating_mul(1_000_000))
            }
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let stretch =
        u64::try_from(u128::from(expiry) * u128::from(slow_ppm) / 1_000_000).unwrap_or(u64::MAX);
    expiry.saturating_add(stretch).saturating_add(back_ns)
}

/// Whether node fault `m` could have changed the line a release sent at `sent` read, or
/// its hand-off due at `due`, given the entry timeout `expiry` and how long a dead entry
/// may linger (`lingering`, ns). A drift or a step back of a node clock only makes entries
/// last longer or shorter, by an effect sized in [`lingering`] and in the half entry
/// timeout a live entry is granted of slack: it never unsettles the line. A forward jump
/// lapses live entries early: from an entry timeout before the release to the hand-off. A
/// crash, restart, pause, partition, failover or eviction leaves the line as the node's
/// memory or replication kept it, entries of holds released elsewhere included, until every
/// entry written before the fault ended has lapsed.
fn unsettled(m: &FaultMark, (sent, due): (u64, u64), (expiry, lingering): (u64, u64)) -> bool {
    if m.proc.is_some() || m.from > due {
        return false;
    }
    match m.fault {
        Fault::NodeClockDrift { .. } => false,
        Fault::NodeClockJump { by_ms, .. } if by_ms < 0 => false,
        Fault::NodeClockJump { .. } => m.from.saturating_add(expiry) >= sent,
        _ => m.until.saturating_add(lingering) >= sent,
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::ProblemKind;
    use super::super::fixtures::{self, KEY, ev};
    use crate::world::calls::{Family, LockOp, LockReply, OpKind};
    use crate::world::history::{Access, HistEvent, HistKind};
    use crate::world::net::{ProcId, Target};
    use std::time::Duration;

    fn call(at_ms: u64, proc: ProcId, id: u64, kind: OpKind, hold: u64) -> HistEvent {
        let op = LockOp {
            family: Family::Mutex,
            kind,
            hold,
            owner: hold,
            ttl_ms: 1_000,
            queued: kind == OpKind::Acquire,
            entry_ms: 0,
        };
        let target = Target::Node(0);
        ev(at_ms, proc, KEY, HistKind::Call { id, target, op })
    }

    fn answer(at_ms: u64, proc: ProcId, id: u64, reply: LockReply) -> HistEvent {
        ev(at_ms, proc, KEY, HistKind::Return { id, reply })
    }

    /// c0 holds the lock; c1 queues behind it at 10 ms; c0's release frees the lock at
    /// 100 ms; c1 holds it from `handed_ms`, if ever.
    fn line(handed_ms: Option<u64>) -> Vec<HistEvent> {
        let access = Access::Exclusive;
        let mut h = vec![
            ev(0, 0, "l", HistKind::Acquired { token: 1, access }),
            ev(5, 1, "l", HistKind::WaitStart),
            call(10, 1, 0, OpKind::Acquire, 2),
            answer(11, 1, 0, LockReply::Denied),
            ev(99, 0, "l", HistKind::Released),
            call(99, 0, 1, OpKind::Release, 1),
            answer(100, 0, 1, LockReply::Released(0)),
        ];
        h.extend(handed_ms.map(|at| ev(at, 1, "l", HistKind::Acquired { token: 2, access })));
        h
    }

    fn kinds(h: &[HistEvent]) -> Vec<ProblemKind> {
        fixtures::kinds(h, &[], Some(Duration::from_secs(5)), 3_000)
    }

    #[test]
    fn a_freeing_release_hands_the_lock_to_the_live_waiter_at_once() {
        assert!(kinds(&line(Some(101))).is_empty());
        // Found only at the waiter's next refresh: the hand-off went nowhere.
        assert_eq!(kinds(&line(Some(1_500))), vec![ProblemKind::HandOffStalled]);
    }

    #[test]
    fn a_line_with_a_waiter_that_died_in_it_is_not_judged() {
        // c2 queued first and crashed: its entry may hold the line until its deadline.
        let mut h = line(Some(1_500));
        h.splice(
            0..0,
            [
                ev(1, 2, "l", HistKind::WaitStart),
                call(2, 2, 9, OpKind::Acquire, 3),
                answer(3, 2, 9, LockReply::Denied),
                ev(4, 2, "", HistKind::Crashed),
            ],
        );
        assert!(kinds(&h).is_empty());
    }

    #[test]
    fn a_waiter_the_history_cannot_place_in_line_leaves_the_release_judged() {
        // c3 sent its first attempt at 50 ms and had no answer when the release went out:
        // it may or may not stand in line, but it waits on, so either way the hand-off
        // goes to a waiter that believes it.
        let with_c3 = |handed_ms| {
            let mut h = line(handed_ms);
            h.splice(
                2..2,
                [
                    ev(49, 3, "l", HistKind::WaitStart),
                    call(50, 3, 9, OpKind::Acquire, 3),
                ],
            );
            h.sort_by_key(|e| e.at);
            h
        };
        assert!(kinds(&with_c3(Some(101))).is_empty());
        assert_eq!(
            kinds(&with_c3(Some(1_500))),
            vec![ProblemKind::HandOffStalled]
        );
    }

    #[test]
    fn a_node_fault_unsettles_the_line_only_until_its_entries_lapse() {
        use crate::world::faults::Fault;
        use crate::world::history::FaultMark;
        const MS: u64 = 1_000_000;
        let mark = |fault, from_ms: u64, until_ms: u64| FaultMark {
            fault,
            proc: None,
            from: from_ms * MS,
            until: until_ms * MS,
        };
        let crash = |until_ms| {
            let fault = Fault::NodeCrash {
                node: 0,
                restart_after_ms: Some(100),
            };
            mark(fault, 1_000, until_ms)
        };
        // A release sent at 10 s, due 500 ms later; entries of 1 s.
        let (expiry, window) = (1_000 * MS, (10_000 * MS, 10_500 * MS));
        let settled = |m: &FaultMark| !super::unsettled(m, window, (expiry, expiry));
        assert!(
            settled(&crash(1_100)),
            "a restart long before: every entry lapsed since"
        );
        assert!(
            !settled(&crash(9_500)),
            "a restart less than an entry timeout before"
        );
        assert!(!settled(&crash(u64::MAX / MS)), "a node down for good");
        let drift = Fault::NodeClockDrift {
            node: 0,
            ppm: -100_000,
        };
        assert!(
            settled(&mark(drift.clone(), 0, u64::MAX / MS)),
            "a drift is sized, not a fault"
        );
        // A slow clock's 10 % keeps a dead entry 100 ms longer.
        let drifting = [mark(drift, 0, u64::MAX / MS)];
        assert_eq!(super::lingering(&drifting, expiry, window.1), 1_100 * MS);
        let jump = |by_ms, at_ms| mark(Fault::NodeClockJump { node: 0, by_ms }, at_ms, at_ms);
        assert!(
            !settled(&jump(600, 9_800)),
            "a forward jump may lapse a live entry"
        );
        assert!(
            settled(&jump(600, 5_000)),
            "one before the live entries were written"
        );
        assert!(
            settled(&jump(-600, 9_800)),
            "a step back only lengthens entries"
        );
        assert_eq!(
            super::lingering(&[jump(-600, 9_800)], expiry, window.1),
            1_600 * MS
        );
    }
}
