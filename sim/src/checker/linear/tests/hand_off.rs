//! The check on fair hand-offs: a hold the release script grants with no call of its
//! grantee's own, judged as a step where the node ran that release, and, where the
//! history has no word of it, by the leases the spec must allow it.

use super::{H, TTL, acquire, release};
use crate::world::calls::{Family, LockOp, LockReply};
use crate::world::history::{HistEvent, HistKind};

/// A fair hand-off grants its hold a lease of its own (up to the queued attempt's TTL),
/// unseen. Process 0's queued attempt (hold 1, 1 s) is handed the lock; the owner re-enters
/// with hold 2 (100 ms, token 100 seen) and releases it, one hold said to remain. Its
/// release of hold 1 is refused (not run), so at 130 ms the owner's next acquire re-enters
/// the epoch hold 1 still keeps: token 100 again is legal, though every lease the spec saw
/// granted had ended. The same after a 50 ms queued attempt is a finding.
#[test]
fn a_hold_a_hand_off_granted_keeps_its_epoch_for_the_queued_ttl() {
    let history = |queued_ttl: u64| {
        let queued = LockOp {
            family: Family::Mutex,
            queued: true,
            ttl_ms: queued_ttl,
            ..acquire(1, 100)
        };
        let inner = LockOp {
            family: Family::Mutex,
            ttl_ms: 100,
            ..acquire(2, 100)
        };
        H::default()
            .call(0, queued, 0, Some((1, LockReply::Denied)))
            .call(0, inner, 10, Some((11, LockReply::Granted { token: 100 })))
            .released(0, 2, 20, 21, 1)
            .call(0, release(0, 1), 30, Some((31, LockReply::NotRun)))
            .granted(0, 3, 130, 131, 100)
    };
    assert_eq!(history(TTL).findings(), Vec::<String>::new());
    let short = history(50).findings();
    assert_eq!(short.len(), 1, "{short:?}");
    assert!(short[0].contains("does not exceed"), "{short:?}");
}

/// A hold a fair hand-off granted unseen shows itself by its renewals. Process 0's queued
/// attempt (hold 1) is handed the lock; the owner re-enters with hold 2 (100 ms, token 100),
/// hold 1's watchdog renews it (a renewal names only its hold), hold 2's release finds it
/// gone, and at 200 ms the owner re-enters again with token 100: legal, hold 1 keeps the
/// epoch. Without the renewal, nothing shows the epoch lives on, and the same grant is a
/// finding.
#[test]
fn a_renewal_of_a_hold_a_hand_off_granted_keeps_its_epoch() {
    let history = |renewed: bool| {
        let queued = LockOp {
            queued: true,
            ..acquire(1, 100)
        };
        let inner = |hold| LockOp {
            ttl_ms: 100,
            ..acquire(hold, 100)
        };
        let h = H::default()
            .call(0, queued, 0, Some((1, LockReply::Denied)))
            .call(
                0,
                inner(2),
                10,
                Some((11, LockReply::Granted { token: 100 })),
            );
        let h = if renewed {
            h.renewed(0, 1, 20, Some(21))
        } else {
            h
        };
        h.released(0, 2, 150, 151, -1).call(
            0,
            inner(3),
            200,
            Some((201, LockReply::Granted { token: 100 })),
        )
    };
    assert_eq!(history(true).findings(), Vec::<String>::new());
    let unrenewed = history(false).findings();
    assert_eq!(unrenewed.len(), 1, "{unrenewed:?}");
    assert!(unrenewed[0].contains("does not exceed"), "{unrenewed:?}");
}

/// A fair hand-off is a step of the spec where the release that names it ran. Process 1's
/// queued attempt (hold 1) is refused; process 0's release of its hold runs at 101 ms and
/// hands hold 1 the lock (token 60, a 1 s lease); process 1 re-enters with hold 2 (100 ms,
/// token 60), hold 2's release finds it gone, and at 700 ms it re-enters again with token
/// 60: legal, the handed hold keeps the epoch until 1,101 ms. Without the node's word of
/// the hand-off nothing shows that epoch lives on, and the same grant is a finding; after
/// the handed lease ended, so is a re-entry with its token.
#[test]
fn a_hand_off_grants_its_hold_where_the_release_naming_it_ran() {
    let history = |handed: bool, again_ms: u64| {
        let queued = LockOp {
            queued: true,
            entry_ms: 5_000,
            ..acquire(1, 101)
        };
        let inner = |hold| LockOp {
            ttl_ms: 100,
            ..acquire(hold, 101)
        };
        let h = H::default()
            .call(1, queued, 0, Some((1, LockReply::Denied)))
            .granted(0, 5, 2, 3, 50)
            .call(0, release(0, 5), 100, Some((102, LockReply::Released(0))));
        let release_id = h.0.len() as u64 - 2;
        let mut h = h.ran(release_id, 101, Some(LockReply::Released(0)));
        if handed {
            h.0.push(HistEvent {
                at: 101 * 1_000_000 + 1,
                proc: 0,
                incarnation: 0,
                lock: "leasehold:{l}".into(),
                kind: HistKind::HandedOff {
                    hold: 1,
                    lease_ms: TTL,
                    node: 0,
                    token: 60,
                    clock_ms: 101,
                },
            });
            h.0.sort_by_key(|e| e.at);
        }
        h.call(
            1,
            inner(2),
            300,
            Some((301, LockReply::Granted { token: 60 })),
        )
        .released(1, 2, 500, 501, -1)
        .call(
            1,
            inner(3),
            again_ms,
            Some((again_ms + 1, LockReply::Granted { token: 60 })),
        )
        .findings()
    };
    assert_eq!(history(true, 700), Vec::<String>::new());
    for found in [history(false, 700), history(true, 1_300)] {
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("does not exceed"), "{found:?}");
    }
}
