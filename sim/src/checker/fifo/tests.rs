//! The fair line's order judged on hand-made histories: the mutex's line, and the
//! read-write lock's between phases.

#![allow(clippy::unwrap_used)]

use super::super::ProblemKind;
use super::super::fixtures::{self, KEY, ev};
use crate::world::calls::{Family, LockOp, LockReply, OpKind};
use crate::world::faults::Fault;
use crate::world::history::{Access, FaultMark, HistEvent, HistKind};
use crate::world::net::{ProcId, Target};
use std::time::Duration;

/// The read-write lock's acquire calls name its write hash.
const RW_KEY: &str = "leasehold:{l}:rw";

/// A queued acquire of `hold` by `family`'s script: the mutex's on [`KEY`], a read or
/// write hold's on [`RW_KEY`].
fn attempt_by(family: Family, at_ms: u64, proc: ProcId, (id, hold): (u64, u64)) -> HistEvent {
    let op = LockOp {
        family,
        kind: OpKind::Acquire,
        hold,
        owner: hold,
        ttl_ms: 1_000,
        queued: true,
        entry_ms: 0,
    };
    let target = Target::Node(0);
    ev(at_ms, proc, key(family), HistKind::Call { id, target, op })
}

fn key(family: Family) -> &'static str {
    if family == Family::Mutex { KEY } else { RW_KEY }
}

fn attempt(at_ms: u64, proc: ProcId, id: u64, hold: u64) -> HistEvent {
    attempt_by(Family::Mutex, at_ms, proc, (id, hold))
}

fn answer(at_ms: u64, proc: ProcId, id: u64, reply: LockReply) -> HistEvent {
    ev(at_ms, proc, KEY, HistKind::Return { id, reply })
}

/// c0 holds the lock; c1 joins the line at 10 ms and refreshes at 400 ms (a third of
/// its entry timeout later, as a fair waiter does); c2 joins after it, at 20 ms; at
/// 800 ms c0's release hands the lock to `grantee`'s hold.
fn line(grantee: (ProcId, u64)) -> Vec<HistEvent> {
    let access = Access::Exclusive;
    vec![
        ev(0, 0, "l", HistKind::Acquired { token: 1, access }),
        ev(5, 1, "l", HistKind::WaitStart),
        attempt(10, 1, 0, 11),
        answer(11, 1, 0, LockReply::Denied),
        ev(15, 2, "l", HistKind::WaitStart),
        attempt(20, 2, 1, 12),
        answer(21, 2, 1, LockReply::Denied),
        attempt(400, 1, 2, 11),
        answer(401, 1, 2, LockReply::Denied),
        ev(799, 0, "l", HistKind::Released),
        ev(
            800,
            0,
            KEY,
            HistKind::HandedOff {
                hold: grantee.1,
                lease_ms: 1_000,
                node: 0,
                token: 2,
                clock_ms: 800,
            },
        ),
        ev(801, grantee.0, "l", HistKind::Acquired { token: 2, access }),
    ]
}

fn kinds(h: &[HistEvent], faults: &[FaultMark]) -> Vec<ProblemKind> {
    fixtures::kinds(h, faults, Some(Duration::from_secs(1)), 1_000)
}

#[test]
fn a_hand_off_past_a_live_waiter_that_queued_first_bypasses_it() {
    assert!(kinds(&line((1, 11)), &[]).is_empty());
    assert_eq!(kinds(&line((2, 12)), &[]), vec![ProblemKind::LineBypassed]);
}

#[test]
fn a_waiter_whose_entry_may_have_lapsed_is_not_bypassed() {
    // Without the refresh at 400 ms, c1's entry (1 s from its run) may be gone by 800 ms
    // on a fast node clock: c2 may rightly go first.
    let mut h = line((2, 12));
    h.drain(7..9);
    assert!(kinds(&h, &[]).is_empty());
}

#[test]
fn only_a_node_fault_large_enough_to_lapse_the_entry_makes_the_line_uncertain() {
    let jump = |by_ms| FaultMark {
        fault: Fault::NodeClockJump { node: 0, by_ms },
        proc: None,
        from: 700_000_000,
        until: u64::MAX,
    };
    // 700 ms forward, 300 ms after the refresh: the entry may have lapsed.
    assert!(kinds(&line((2, 12)), &[jump(700)]).is_empty());
    // A 5 ms step explains nothing; nor does a pause of the bypassing client.
    let pause = FaultMark {
        fault: Fault::Pause {
            who: crate::world::faults::ProcSel::Id(2),
            ms: 50,
        },
        proc: Some((2, 0)),
        from: 100_000_000,
        until: 150_000_000,
    };
    assert_eq!(
        kinds(&line((2, 12)), &[jump(5), pause]),
        vec![ProblemKind::LineBypassed]
    );
}

/// A read-write lock's line: c0 holds the write lock; c1 joins the line at 10 ms (to
/// read if `first` is [`Family::Read`], else to write) and refreshes at 400 ms; c2
/// joins after it at 20 ms, as `second`; at 800 ms c0's release hands the lock to c2's
/// hold (a read hand-off also to c1's, after it, as a run of readers is granted).
fn rw_line(first: Family, second: Family) -> Vec<HistEvent> {
    let access = |family| {
        if family == Family::Read {
            Access::Shared
        } else {
            Access::Exclusive
        }
    };
    let answer = |at_ms, proc, id, reply| ev(at_ms, proc, RW_KEY, HistKind::Return { id, reply });
    let handed = |hold| HistKind::HandedOff {
        hold,
        lease_ms: 1_000,
        node: 0,
        token: 2,
        clock_ms: 0,
    };
    let mut h = vec![
        ev(
            0,
            0,
            "l",
            HistKind::Acquired {
                token: 1,
                access: Access::Exclusive,
            },
        ),
        ev(5, 1, "l", HistKind::WaitStart),
        attempt_by(first, 10, 1, (0, 11)),
        answer(11, 1, 0, LockReply::Denied),
        ev(15, 2, "l", HistKind::WaitStart),
        attempt_by(second, 20, 2, (1, 12)),
        answer(21, 2, 1, LockReply::Denied),
        attempt_by(first, 400, 1, (2, 11)),
        answer(401, 1, 2, LockReply::Denied),
        ev(799, 0, "l", HistKind::Released),
        ev(800, 0, RW_KEY, handed(12)),
    ];
    let both_read = first == Family::Read && second == Family::Read;
    if both_read {
        h.push(ev(800, 0, RW_KEY, handed(11)));
    }
    let token = 2;
    h.push(ev(
        801,
        2,
        "l",
        HistKind::Acquired {
            token,
            access: access(second),
        },
    ));
    if both_read {
        h.push(ev(
            801,
            1,
            "l",
            HistKind::Acquired {
                token,
                access: access(first),
            },
        ));
    }
    h
}

#[test]
fn readers_of_one_phase_pass_each_other_but_no_phase_passes_another() {
    assert!(kinds(&rw_line(Family::Read, Family::Read), &[]).is_empty());
    let bypassed = vec![ProblemKind::LineBypassed];
    // A reader past a queued writer (writer preference), a writer past a queued reader,
    // a writer past a queued writer.
    assert_eq!(kinds(&rw_line(Family::Write, Family::Read), &[]), bypassed);
    assert_eq!(kinds(&rw_line(Family::Read, Family::Write), &[]), bypassed);
    assert_eq!(kinds(&rw_line(Family::Write, Family::Write), &[]), bypassed);
}

#[test]
fn a_reader_admitted_by_its_own_call_past_a_live_queued_writer_bypasses_it() {
    // c2's read is granted by its own attempt at 600 ms, while c0 still holds a read
    // (readers share) and c1 waits to write, live in the line.
    let read = |at_ms, id| attempt_by(Family::Read, at_ms, 2, (id, 12));
    let answer = |at_ms, id, reply| ev(at_ms, 2, RW_KEY, HistKind::Return { id, reply });
    let shared = Access::Shared;
    let h = vec![
        ev(
            0,
            0,
            "l",
            HistKind::Acquired {
                token: 0,
                access: shared,
            },
        ),
        attempt_by(Family::Write, 10, 1, (0, 11)),
        ev(
            11,
            1,
            RW_KEY,
            HistKind::Return {
                id: 0,
                reply: LockReply::Denied,
            },
        ),
        attempt_by(Family::Write, 400, 1, (1, 11)),
        ev(
            401,
            1,
            RW_KEY,
            HistKind::Return {
                id: 1,
                reply: LockReply::Denied,
            },
        ),
        read(600, 2),
        answer(601, 2, LockReply::Granted { token: 0 }),
        ev(
            602,
            2,
            "l",
            HistKind::Acquired {
                token: 0,
                access: shared,
            },
        ),
    ];
    assert_eq!(kinds(&h, &[]), vec![ProblemKind::LineBypassed]);
    // Without the writer's refresh its entry may have lapsed by then: inconclusive.
    let lapsed: Vec<HistEvent> = h
        .iter()
        .enumerate()
        .filter(|(i, _)| !(3..5).contains(i))
        .map(|(_, e)| e.clone())
        .collect();
    assert!(kinds(&lapsed, &[]).is_empty());
}

/// c0 holds the lock by hold 10 (owner 100, granted at 1 ms) while c1 waits live in the
/// line (the [`line`] history without c2); at 500 ms c0 asks for
/// a second hold, 20, of the same owner, granted at 501 ms, and the node then kept hold
/// 10 with the deadline `deadline_ms` (on a node clock reading 500 ms).
fn reentry(deadline_ms: i64) -> Vec<HistEvent> {
    let mut h = line((1, 11));
    h.truncate(9);
    h.retain(|e| e.proc != 2);
    let granted = LockReply::Granted { token: 1 };
    let own = |id, hold, at_ms| {
        let op = LockOp {
            family: Family::Mutex,
            kind: OpKind::Acquire,
            hold,
            owner: 100,
            ttl_ms: 1_000,
            queued: false,
            entry_ms: 0,
        };
        ev(
            at_ms,
            0,
            KEY,
            HistKind::Call {
                id,
                target: Target::Node(0),
                op,
            },
        )
    };
    let kept = HistKind::Kept {
        id: 21,
        node: 0,
        now_ms: 500,
        keys: vec![crate::world::kept::KeptKey {
            key: KEY.to_owned(),
            expires_ms: Some(1_500),
            holds: vec![(10, deadline_ms), (20, 1_500)],
        }],
    };
    h.extend([
        own(21, 20, 500),
        ev(500, 0, KEY, kept),
        answer(501, 0, 21, granted),
        ev(502, 0, "l", HistKind::Reentered { token: 1, hold: 0 }),
    ]);
    h.insert(0, own(20, 10, 0));
    h.insert(1, answer(1, 0, 20, granted));
    h.sort_by_key(|e| e.at);
    h
}

#[test]
fn an_owner_that_holds_the_lock_re_enters_past_the_line_and_no_other_grant_does() {
    let config = super::super::CheckConfig {
        shared_owner: true,
        ..fixtures::config(Some(Duration::from_secs(1)))
    };
    let found = |h: &[HistEvent]| -> Vec<ProblemKind> {
        fixtures::judged(h, &[], &config, 1_000)
            .into_iter()
            .map(|(kind, _)| kind)
            .filter(|k| *k == ProblemKind::LineBypassed)
            .collect()
    };
    // The node kept c0's first hold live: the second is a re-entry.
    assert!(found(&reentry(1_000)).is_empty());
    // Its first hold had lapsed (the script should have dropped it): a fresh grant past
    // c1, whatever the reply said.
    assert_eq!(found(&reentry(400)), vec![ProblemKind::LineBypassed]);
}
