//! The semaphore's spec on hand-made histories: permits up to the size pass, one more is a
//! finding, and so is a permit freed or renewed after its lease ended.

use crate::world::calls::{Family, LockOp, LockReply, OpKind};
use crate::world::history::{Access, HistKind};

use super::super::fixtures::{Calls, ev, op};

const KEY: &str = "leasehold:{l}:sem";
const TTL: u64 = 1_000;

/// A semaphore of two permits (a guard of it seen granted tells the check its size).
fn two_permits() -> Calls {
    let access = Access::Permit { permits: 2 };
    Calls::default().event(ev(0, 9, "l", HistKind::Acquired { token: 0, access }))
}

/// Process `proc` acquires hold `hold` at `sent` ms, answered `reply` at `got` ms.
fn acquire(h: Calls, proc: usize, hold: u64, (sent, got): (u64, u64), reply: LockReply) -> Calls {
    let acquire = op(Family::Permit, OpKind::Acquire, (hold, 0), TTL, false);
    h.call((proc, KEY), acquire, sent, Some((got, reply)))
}

fn release(h: Calls, proc: usize, hold: u64, (sent, got): (u64, u64), left: i64) -> Calls {
    let release = op(Family::Permit, OpKind::Release, (hold, 0), 0, false);
    h.call(
        (proc, KEY),
        release,
        sent,
        Some((got, LockReply::Released(left))),
    )
}

const GRANTED: LockReply = LockReply::Granted { token: 0 };

#[test]
fn permits_up_to_the_size_are_held_at_once_and_a_freed_one_is_granted_again() {
    let h = acquire(two_permits(), 1, 1, (10, 11), GRANTED);
    let h = acquire(h, 2, 2, (20, 21), GRANTED);
    let h = acquire(h, 3, 3, (30, 31), LockReply::Denied);
    let h = release(h, 1, 1, (40, 41), 0);
    let h = acquire(h, 3, 3, (50, 51), GRANTED);
    // An expired permit frees its place too.
    let h = acquire(h, 4, 4, (1_100, 1_101), GRANTED);
    assert_eq!(h.findings(), Vec::<String>::new());
    assert_eq!(h.reach().semaphore.keys, 1);
}

#[test]
fn one_permit_more_than_the_size_is_a_finding() {
    let h = acquire(two_permits(), 1, 1, (10, 11), GRANTED);
    let h = acquire(h, 2, 2, (20, 21), GRANTED);
    let h = acquire(h, 3, 3, (30, 31), GRANTED);
    let found = h.findings();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("while 2 others were live, of 2"),
        "{found:?}"
    );
}

#[test]
fn an_unanswered_release_may_have_freed_the_permit_a_grant_needs() {
    let h = acquire(two_permits(), 1, 1, (10, 11), GRANTED);
    let h = acquire(h, 2, 2, (20, 21), GRANTED);
    let lost = op(Family::Permit, OpKind::Release, (1, 0), 0, false);
    let h = h.call((1, KEY), lost, 25, None);
    let h = acquire(h, 3, 3, (30, 31), GRANTED);
    assert_eq!(h.findings(), Vec::<String>::new());
}

#[test]
fn a_permit_handed_to_a_waiter_is_claimed_whatever_the_count() {
    let queued = op(Family::Permit, OpKind::Acquire, (3, 0), TTL, true);
    let h = acquire(two_permits(), 1, 1, (10, 11), GRANTED);
    let h = acquire(h, 2, 2, (20, 21), GRANTED);
    let h = h.call((3, KEY), queued, 30, Some((31, LockReply::Denied)));
    // The release hands hold 3 the permit; the waiter claims it after a fourth acquire
    // saw the semaphore full.
    let h = release(h, 1, 1, (40, 41), 0);
    let h = acquire(h, 4, 4, (50, 51), LockReply::Denied);
    let h = h.call((3, KEY), queued, 60, Some((61, GRANTED)));
    assert_eq!(h.findings(), Vec::<String>::new());
    // Without the line, the same claim would be a third permit.
    let h = acquire(two_permits(), 1, 1, (10, 11), GRANTED);
    let h = acquire(h, 2, 2, (20, 21), GRANTED);
    let h = acquire(h, 3, 3, (60, 61), GRANTED);
    assert_eq!(h.findings().len(), 1);
}

#[test]
fn freeing_a_permit_whose_lease_ended_is_a_finding() {
    let h = acquire(two_permits(), 1, 1, (10, 11), GRANTED);
    let h = release(h, 1, 1, (2_000, 2_001), 0);
    let found = h.findings();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("released (freed) a permit"), "{found:?}");
    // A hold never certainly granted may have been granted by a call whose reply was lost.
    let h = release(two_permits(), 1, 1, (10, 11), 0);
    assert_eq!(h.findings(), Vec::<String>::new());
    // Answered -1 ("not held"), the same release is legal.
    let h = acquire(two_permits(), 1, 1, (10, 11), GRANTED);
    let h = release(h, 1, 1, (2_000, 2_001), -1);
    assert_eq!(h.findings(), Vec::<String>::new());
}

#[test]
fn a_renewal_of_an_ended_permit_and_a_token_are_findings() {
    let renew = op(Family::Permit, OpKind::Renew, (1, 0), TTL, false);
    let h = acquire(two_permits(), 1, 1, (10, 11), GRANTED);
    let h = h.call((1, KEY), renew, 500, Some((501, LockReply::Renewed(true))));
    // Renewed at 0.5 s for 1 s: live until 1.5 s.
    let h = h.call(
        (1, KEY),
        renew,
        1_400,
        Some((1_401, LockReply::Renewed(true))),
    );
    assert_eq!(h.findings(), Vec::<String>::new());
    let h = h.call(
        (1, KEY),
        renew,
        3_000,
        Some((3_001, LockReply::Renewed(true))),
    );
    assert_eq!(h.findings().len(), 1);
    let h = acquire(
        two_permits(),
        1,
        1,
        (10, 11),
        LockReply::Granted { token: 7 },
    );
    assert!(h.findings()[0].contains("token 7"));
}

/// A fair waiter asks on node 0 and is refused; the key's calls move to node 1 at 2 s (a
/// failover: its state may be lost there); the waiter's claim is granted at 3.5 s and its
/// release at 3.8 s finds the permit live. A permit handed to it before the move keeps the
/// waiter's entry deadline (its entry timeout, 10 s, far longer than its 100 ms TTL), so
/// the release is legal. The same release of a hold first asked for after the move, and
/// granted at once, frees a permit whose lease had ended.
#[test]
fn a_permit_handed_before_a_reset_lives_to_its_entry_deadline() {
    const SHORT_TTL: u64 = 100;
    let waiter = LockOp {
        entry_ms: 10_000,
        ..op(Family::Permit, OpKind::Acquire, (3, 0), SHORT_TTL, true)
    };
    let run = |queued_before: bool| {
        let h = acquire(two_permits(), 1, 1, (10, 11), GRANTED).ran_on(0, 10);
        let h = acquire(h, 2, 2, (20, 21), GRANTED).ran_on(0, 20);
        let h = if queued_before {
            h.call((3, KEY), waiter, 30, Some((31, LockReply::Denied)))
                .ran_on(0, 30)
        } else {
            h
        };
        let h = release(h, 1, 1, (1_000, 1_001), 0).ran_on(0, 1_000);
        let h = acquire(h, 4, 4, (2_000, 2_001), LockReply::Denied).ran_on(1, 2_000);
        let h = h
            .call((3, KEY), waiter, 3_500, Some((3_501, GRANTED)))
            .ran_on(1, 3_500);
        release(h, 3, 3, (3_800, 3_801), 0)
            .ran_on(1, 3_800)
            .findings()
    };
    assert_eq!(run(true), Vec::<String>::new());
    let found = run(false);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("released (freed) a permit"), "{found:?}");
}
