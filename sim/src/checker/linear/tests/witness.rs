//! The check on histories the simulator witnessed: a call a node ran is judged where and
//! in the time it ran, with the reply the node produced, and a key whose calls move to
//! another node starts afresh.

use super::super::{AMBIGUOUS_WINDOW_NS, check};
use super::{H, acquire};
use crate::world::calls::{LockOp, LockReply, OpKind};

#[test]
fn an_unanswered_call_a_node_ran_is_answered_by_what_the_node_said() {
    // A's renewal sent at 0.9 s loses its reply; the node ran it at `ran_ms`.
    let history = |ran_ms, said| {
        H::default()
            .granted(0, 1, 0, 1, 100)
            .renewed(0, 1, 900, None)
            .ran(0, 0, None)
            .ran(2, ran_ms, said)
    };
    let renewed = Some(LockReply::Renewed(true));
    // Run while the lease was live, "renewed" is legal.
    assert_eq!(history(950, renewed).findings(), Vec::<String>::new());
    // Run after the lease ended, "renewed" has no linearization: the node's own answer
    // is judged, where an ambiguous call could simply not have taken effect.
    let found = history(1_100, renewed).findings();
    assert!(
        found.len() == 1 && found[0].contains("renewed a hold"),
        "{found:?}"
    );
    assert_eq!(history(1_100, None).findings(), Vec::<String>::new());
}

#[test]
fn lost_replies_a_node_ran_do_not_pile_up_as_ambiguous_calls() {
    // A client cut off from its answers renews every 10 ms for 2 s: each renewal runs and
    // its reply is lost. Witnessed with their replies, none stays ambiguous, so the key is
    // checked to the end, and a grant to another owner while the lease is kept alive is
    // still a finding.
    let mut h = H::default().granted(0, 1, 0, 1, 100);
    for i in 0..200 {
        let sent = 10 + i * 10;
        let id = h.0.len() as u64;
        h = h
            .renewed(0, 1, sent, None)
            .ran(id, sent, Some(LockReply::Renewed(true)));
    }
    h = h.granted(1, 2, 1_500, 1_501, 200);
    let report = check(&h.0, &[], AMBIGUOUS_WINDOW_NS);
    assert_eq!(
        (report.reach.unchecked, report.reach.widened),
        (0, 0),
        "{report:?}"
    );
    assert!(
        report.findings[0].detail.contains("granted while"),
        "{report:?}"
    );
}

#[test]
fn a_key_whose_calls_move_to_another_node_starts_afresh() {
    // A is granted on node 0 until 1 s; at 0.5 s B is granted by the node that now runs
    // the key's calls. On another node (a promoted replica that lacked A's grant) that is
    // the new node's state, judged from there on; on the same node it has no
    // linearization.
    let history = |second: usize| {
        H::default()
            .granted(0, 1, 0, 1, 100)
            .granted(1, 2, 500, 501, 200)
            .renewed(0, 1, 600, Some(601))
            .ran_on(0, 0, 0, Some(LockReply::Granted { token: 100 }))
            .ran_on(second, 2, 500, Some(LockReply::Granted { token: 200 }))
            .ran_on(second, 4, 600, Some(LockReply::Renewed(true)))
    };
    assert_eq!(history(1).findings(), Vec::<String>::new());
    let found = history(0).findings();
    assert!(found[0].contains("granted while"), "{found:?}");
}

#[test]
fn a_witnessed_call_is_judged_in_the_time_its_node_read() {
    // A is granted at 0 ms for 1 s; B is granted at 0.5 s of true time by the same node,
    // whose clock then reads `clock_ms` (it stepped forward by 600 ms meanwhile, or not).
    let history = |clock_ms| {
        H::default()
            .granted(0, 1, 0, 1, 100)
            .granted(1, 2, 500, 501, 2_000)
            .ran_on(0, 0, 0, Some(LockReply::Granted { token: 100 }))
            .ran_clocked(
                0,
                2,
                (500, clock_ms),
                Some(LockReply::Granted { token: 2_000 }),
            )
    };
    // In the node's time A's lease had ended (at 1,000 ms): the script was right.
    assert_eq!(history(1_100).findings(), Vec::<String>::new());
    // With the node's clock on time, the grant came while A's lease ran.
    let found = history(500).findings();
    assert!(
        found.len() == 1 && found[0].contains("granted while"),
        "{found:?}"
    );
}

#[test]
fn a_grant_after_a_reset_of_a_hold_asked_before_it_is_judged_as_one_the_reset_hid() {
    // Hold 1 waits on node 0 (refused at 0 ms); from 500 ms node 1 runs the key's calls (a
    // promoted replica, whose state the search never saw) and grants it for 1 s; at
    // 1,600 ms its release is answered "released". The lost state may have granted hold 1
    // before the reset (a hand-off to a waiter) with a deadline the replica kept, so the
    // answer is legal. A hold first asked for after the reset has only the grant the
    // search saw: its lease had ended.
    let history = |asked_before: bool| {
        let (proc, hold) = if asked_before { (0, 1) } else { (2, 2) };
        H::default()
            .call(
                proc,
                acquire(hold, proc as u64 + 100),
                0,
                Some((1, LockReply::Denied)),
            )
            .granted(0, 1, 500, 501, 100)
            .released(0, 1, 1_600, 1_601, 0)
            .ran_on(0, 0, 0, Some(LockReply::Denied))
            .ran_on(1, 2, 500, Some(LockReply::Granted { token: 100 }))
            .ran_on(1, 4, 1_600, Some(LockReply::Released(0)))
    };
    assert_eq!(history(true).findings(), Vec::<String>::new());
    let found = history(false).findings();
    assert!(
        found.len() == 1 && found[0].contains("released a hold whose own lease had ended"),
        "{found:?}"
    );
}

/// A "not held" the node said about a hold whose own lease certainly runs past the
/// script's run is a finding: a correct server drops a hold only at its deadline, by its
/// release, or with its state. Hold 1 is granted at 0-1 ms for 1 s; its renewal is answered
/// "not held" by a node that ran it at `ran_ms`. Unwitnessed, the answer's point is not
/// known in the node's time, so it stays legal.
#[test]
fn a_witnessed_not_held_about_a_certainly_live_hold_is_a_finding() {
    let refused = LockReply::Renewed(false);
    let history = |ran_ms: u64, witnessed: bool| {
        let renew = LockOp {
            kind: OpKind::Renew,
            owner: 0,
            ..acquire(1, 100)
        };
        let h = H::default().granted(0, 1, 0, 1, 100).call(
            0,
            renew,
            ran_ms,
            Some((ran_ms + 1, refused)),
        );
        let id = h.0.len() as u64 - 2;
        if witnessed {
            h.ran(id, ran_ms, Some(refused))
        } else {
            h
        }
    };
    let found = history(500, true).findings();
    assert!(
        found.len() == 1 && found[0].contains("answered \"not held\" about a hold"),
        "{found:?}"
    );
    assert_eq!(history(1_100, true).findings(), Vec::<String>::new());
    assert_eq!(history(500, false).findings(), Vec::<String>::new());
}

#[test]
fn a_witnessed_refusal_once_every_lease_has_ended_is_a_finding() {
    // Process 0 holds from 1 ms for 1 s; process 1 asks at `ran_ms` and is refused, the
    // node witnessed running it then. Process 2, where `queued`, waits in a fair line.
    let history = |ran_ms: u64, witnessed: bool, queued: bool| {
        let mut h = H::default().granted(0, 1, 0, 1, 100);
        if queued {
            let line = LockOp {
                queued: true,
                ..acquire(3, 102)
            };
            h = h.call(2, line, 2, Some((3, LockReply::Denied)));
        }
        let h = h.call(
            1,
            acquire(2, 101),
            ran_ms,
            Some((ran_ms + 1, LockReply::Denied)),
        );
        let id = h.0.len() as u64 - 2;
        if witnessed {
            h.ran(id, ran_ms, Some(LockReply::Denied))
        } else {
            h
        }
    };
    // While the lease may be live, a refusal is legal.
    assert_eq!(history(500, true, false).findings(), Vec::<String>::new());
    let found = history(1_100, true, false).findings();
    assert!(
        found.len() == 1 && found[0].contains("refused while the lock was free"),
        "{found:?}"
    );
    // Unwitnessed (a real server's history: its point in the node's time is unknown), or
    // with a fair line that may hold the lock back for its head, it is legal.
    assert_eq!(
        history(1_100, false, false).findings(),
        Vec::<String>::new()
    );
    assert_eq!(history(1_100, true, true).findings(), Vec::<String>::new());
    // So is one after a renewal found live a hold the spec never saw granted (after a
    // failover, say): the server may keep a lease the spec does not know the end of.
    let unseen = history(1_100, true, false).renewed(3, 9, 900, Some(901));
    assert_eq!(unseen.findings(), Vec::<String>::new());
}
