//! The linearizability check on crafted histories: legal ones pass (ambiguous calls
//! taking effect or not), each kind of illegal answer is a finding, and a finding flows
//! through the checker's verdict and causal excuses.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use super::{AMBIGUOUS_WINDOW_NS, check};
use crate::checker::{self, CheckConfig, ProblemKind, Verdict};
use crate::world::calls::{Family, LockOp, LockReply, OpKind};
use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent, HistKind};
use crate::world::net::Target;

mod hand_off;
mod witness;

const TTL: u64 = 1_000;

/// A history under construction: calls with their invocation and (optional) answer.
#[derive(Default)]
struct H(Vec<HistEvent>);

impl H {
    fn call(
        mut self,
        proc: usize,
        op: LockOp,
        sent_ms: u64,
        answer: Option<(u64, LockReply)>,
    ) -> Self {
        let id = self.0.len() as u64;
        let ev = |at_ms: u64, kind| HistEvent {
            at: at_ms * 1_000_000,
            proc,
            incarnation: 0,
            lock: "leasehold:{l}".into(),
            kind,
        };
        self.0.push(ev(
            sent_ms,
            HistKind::Call {
                id,
                target: Target::Node(0),
                op,
            },
        ));
        if let Some((at, reply)) = answer {
            self.0.push(ev(at, HistKind::Return { id, reply }));
        }
        self.0.sort_by_key(|e| e.at);
        self
    }

    /// A node ran call `id` at `at_ms` (the simulator's witness), producing `reply` where
    /// it reads as the script documents.
    fn ran(self, id: u64, at_ms: u64, reply: Option<LockReply>) -> Self {
        self.ran_on(0, id, at_ms, reply)
    }

    /// Node `node` ran call `id` at `at_ms`, producing `reply`.
    fn ran_on(self, node: usize, id: u64, at_ms: u64, reply: Option<LockReply>) -> Self {
        self.ran_clocked(node, id, (at_ms, at_ms), reply)
    }

    /// Node `node` ran call `id` at `at_ms` while its clock read `clock_ms`.
    fn ran_clocked(
        mut self,
        node: usize,
        id: u64,
        (at_ms, clock_ms): (u64, u64),
        reply: Option<LockReply>,
    ) -> Self {
        self.0.push(HistEvent {
            at: at_ms * 1_000_000,
            proc: 0,
            incarnation: 0,
            lock: "leasehold:{l}".into(),
            kind: HistKind::Ran {
                id,
                reply,
                node,
                clock_ms,
                fence: None,
            },
        });
        self.0.sort_by_key(|e| e.at);
        self
    }

    /// `owner` acquires hold `hold`, sent at `sent`, granted `token` at `got`.
    fn granted(self, proc: usize, hold: u64, sent: u64, got: u64, token: u64) -> Self {
        let owner = proc as u64 + 100;
        self.call(
            proc,
            acquire(hold, owner),
            sent,
            Some((got, LockReply::Granted { token })),
        )
    }

    fn released(self, proc: usize, hold: u64, sent: u64, got: u64, left: i64) -> Self {
        let op = release(proc, hold);
        self.call(proc, op, sent, Some((got, LockReply::Released(left))))
    }

    fn renewed(self, proc: usize, hold: u64, sent: u64, got: Option<u64>) -> Self {
        let op = LockOp {
            family: Family::Mutex,
            kind: OpKind::Renew,
            hold,
            owner: 0,
            ttl_ms: TTL,
            queued: false,
            entry_ms: 0,
        };
        self.call(proc, op, sent, got.map(|at| (at, LockReply::Renewed(true))))
    }

    fn findings(&self) -> Vec<String> {
        check(&self.0, &[], AMBIGUOUS_WINDOW_NS)
            .findings
            .into_iter()
            .map(|f| f.detail)
            .collect()
    }
}

fn acquire(hold: u64, owner: u64) -> LockOp {
    LockOp {
        family: Family::Mutex,
        kind: OpKind::Acquire,
        hold,
        owner,
        ttl_ms: TTL,
        queued: false,
        entry_ms: 0,
    }
}

#[test]
fn sequential_grants_renewals_and_releases_are_linearizable() {
    let h = H::default()
        .granted(0, 1, 0, 1, 100)
        .renewed(0, 1, 800, Some(801))
        .released(0, 1, 1_500, 1_501, 0)
        .granted(1, 2, 1_502, 1_503, 200)
        // Past its lease (1 s, no renewal) the next holder may take it.
        .granted(0, 3, 2_600, 2_601, 300);
    assert_eq!(h.findings(), Vec::<String>::new());
    assert_eq!(check(&h.0, &[], AMBIGUOUS_WINDOW_NS).calls, 5);
}

/// Process `proc`'s release of `hold`.
fn release(proc: usize, hold: u64) -> LockOp {
    LockOp {
        family: Family::Mutex,
        kind: OpKind::Release,
        hold,
        owner: proc as u64 + 100,
        ttl_ms: 0,
        queued: false,
        entry_ms: 0,
    }
}

/// A release of `hold` by process `proc` that was never answered.
fn unanswered_release(h: H, proc: usize, hold: u64, sent: u64) -> H {
    h.call(proc, release(proc, hold), sent, None)
}

/// Process 0's owner holds hold 1 (seen) and hold 2 (a fair hand-off's grant to its
/// queued attempt, never seen granted). Hold 1's release says one hold remains; hold 2's
/// release goes unanswered: it may have been the last, so process 1's grant right after
/// is legal. Without a hand-off to count on (no queued attempt), the same release count
/// is a finding.
#[test]
fn an_unanswered_release_of_a_hold_never_seen_granted_may_free_the_lock() {
    let queued = LockOp {
        family: Family::Mutex,
        queued: true,
        ..acquire(2, 100)
    };
    let start = |attempt: LockOp| {
        H::default()
            .granted(0, 1, 0, 1, 100)
            .call(0, attempt, 2, Some((3, LockReply::Denied)))
            .released(0, 1, 300, 301, 1)
    };
    let h = unanswered_release(start(queued), 0, 2, 302).granted(1, 3, 310, 311, 200);
    assert_eq!(h.findings(), Vec::<String>::new());
    let unqueued = start(acquire(2, 100)).findings();
    assert_eq!(unqueued.len(), 1, "{unqueued:?}");
    assert!(unqueued[0].contains("could be live"), "{unqueued:?}");
}

/// Each hold is a lease of its own. Process 0's owner holds hold 1 (1 s) and re-enters with
/// hold 2 (100 ms); hold 2's release goes unanswered. At 500 ms hold 2's own lease has
/// ended whatever became of that release, so hold 1's release may say no hold remains, but
/// not that one does: no hand-off (nothing queued) can have granted another.
#[test]
fn a_release_may_count_only_holds_whose_own_lease_is_live() {
    let inner = LockOp {
        family: Family::Mutex,
        ttl_ms: 100,
        ..acquire(2, 100)
    };
    let start = || {
        let h = H::default().granted(0, 1, 0, 1, 100).call(
            0,
            inner,
            10,
            Some((11, LockReply::Granted { token: 100 })),
        );
        unanswered_release(h, 0, 2, 20)
    };
    assert_eq!(
        start().released(0, 1, 500, 501, 0).findings(),
        Vec::<String>::new()
    );
    let found = start().released(0, 1, 500, 501, 1).findings();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("could be live"), "{found:?}");
    // While hold 2's lease may still be live, it may be the one that remains.
    assert_eq!(
        start().released(0, 1, 100, 101, 1).findings(),
        Vec::<String>::new()
    );
}

/// A release that leaves holds shortens the epoch to theirs. Process 0's owner holds
/// hold 1 (1 s, asked at 0 ms, granted by 300 ms) and hold 2 (2 s); it releases hold 2 at
/// 900 ms and one hold remains. Hold 1's own lease ends between 1,000 and 1,300 ms, so
/// another owner may be granted the lock from 1,000 ms on, but not before.
#[test]
fn a_release_that_leaves_holds_ends_the_epoch_with_theirs() {
    let longer = LockOp {
        family: Family::Mutex,
        ttl_ms: 2 * TTL,
        ..acquire(2, 100)
    };
    let start = || {
        H::default()
            .granted(0, 1, 0, 300, 100)
            .call(0, longer, 0, Some((300, LockReply::Granted { token: 100 })))
            .released(0, 2, 900, 1_200, 1)
    };
    assert_eq!(
        start().granted(1, 3, 1_250, 1_251, 200).findings(),
        Vec::<String>::new()
    );
    let early = start().granted(1, 3, 950, 951, 200).findings();
    assert!(early[0].contains("granted while the lease"), "{early:?}");
}

/// As above, but the longer hold's release goes unanswered: if it ran, hold 1's lease
/// (ending by 1,300 ms) is the epoch's, so a grant at 1,250 ms is legal.
#[test]
fn an_unanswered_release_may_end_the_epoch_with_the_other_holds() {
    let longer = LockOp {
        family: Family::Mutex,
        ttl_ms: 2 * TTL,
        ..acquire(2, 100)
    };
    let h = H::default().granted(0, 1, 0, 300, 100).call(
        0,
        longer,
        0,
        Some((300, LockReply::Granted { token: 100 })),
    );
    let h = unanswered_release(h, 0, 2, 400).granted(1, 3, 1_250, 1_251, 200);
    assert_eq!(h.findings(), Vec::<String>::new());
}

/// Process 0's owner holds hold 1 by a fair hand-off (never seen granted) and re-enters
/// with hold 2 (2 s); hold 2's release says one hold remains: the unseen one, whose lease
/// may end any time after that release, so another owner's grant then is legal.
#[test]
fn a_hold_never_seen_granted_may_end_any_time_after_it_was_live() {
    let queued = LockOp {
        family: Family::Mutex,
        queued: true,
        ..acquire(1, 100)
    };
    let longer = LockOp {
        family: Family::Mutex,
        ttl_ms: 2 * TTL,
        ..acquire(2, 100)
    };
    let h = H::default()
        .call(0, queued, 0, Some((1, LockReply::Denied)))
        .call(
            0,
            longer,
            100,
            Some((101, LockReply::Granted { token: 100 })),
        )
        .released(0, 2, 102, 103, 1)
        .granted(1, 3, 500, 501, 200);
    assert_eq!(h.findings(), Vec::<String>::new());
}

#[test]
fn a_grant_while_another_lease_is_live_is_a_finding() {
    let h = H::default()
        .granted(0, 1, 0, 1, 100)
        .granted(1, 2, 500, 501, 200);
    let found = h.findings();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("granted while the lease"), "{found:?}");
    // Two overlapping acquires both granted: whichever went first, the other broke it.
    let both = H::default()
        .granted(0, 1, 0, 50, 100)
        .granted(1, 2, 10, 40, 200);
    assert_eq!(both.findings().len(), 1);
}

#[test]
fn concurrent_calls_may_be_ordered_either_way() {
    // B's grant is answered before A's release is, but the release may have run first.
    let h = H::default()
        .granted(0, 1, 0, 1, 100)
        .released(0, 1, 100, 200, 0)
        .granted(1, 2, 150, 160, 200);
    assert_eq!(h.findings(), Vec::<String>::new());
}

#[test]
fn an_ambiguous_call_may_take_effect_or_not() {
    // A's release never answered: it may have freed the lock before B's grant.
    let lost_release = unanswered_release(H::default().granted(0, 1, 0, 1, 100), 0, 1, 300)
        .granted(1, 2, 400, 401, 200);
    assert_eq!(lost_release.findings(), Vec::<String>::new());
    // A's ambiguous acquire may never have run: B's grant is legal.
    let lost_acquire = H::default()
        .call(0, acquire(1, 100), 0, None)
        .granted(1, 2, 100, 101, 200);
    assert_eq!(lost_acquire.findings(), Vec::<String>::new());
    // A's later renewal succeeds only if its unanswered renewal extended the lease.
    let extended = H::default()
        .granted(0, 1, 0, 1, 100)
        .renewed(0, 1, 900, None)
        .renewed(0, 1, 1_500, Some(1_501));
    assert_eq!(extended.findings(), Vec::<String>::new());
    let without = H::default()
        .granted(0, 1, 0, 1, 100)
        .renewed(0, 1, 1_500, Some(1_501));
    let found = without.findings();
    assert!(
        found.len() == 1 && found[0].contains("lease had ended"),
        "{found:?}"
    );
}

#[test]
fn an_unanswered_call_no_node_ran_explains_nothing() {
    // A's renewal at 1.5 s succeeds only if its unanswered one at 0.9 s extended the
    // lease. Where the simulator witnessed what its node ran (calls 0 and 3 ran), a
    // renewal that never ran extended nothing.
    let history = || {
        H::default()
            .granted(0, 1, 0, 1, 100)
            .renewed(0, 1, 900, None)
            .renewed(0, 1, 1_500, Some(1_501))
            .ran(0, 0, None)
            .ran(3, 1_500, None)
    };
    let found = history().findings();
    assert!(
        found.len() == 1 && found[0].contains("lease had ended"),
        "{found:?}"
    );
    // Run, though unanswered, it may have extended the lease.
    assert_eq!(history().ran(2, 950, None).findings(), Vec::<String>::new());
}

#[test]
fn tokens_must_grow_and_a_reentry_joins_its_epoch() {
    let backwards = H::default()
        .granted(0, 1, 0, 1, 100)
        .released(0, 1, 10, 11, 0)
        .granted(1, 2, 20, 21, 50);
    let found = backwards.findings();
    assert!(
        found.len() == 1 && found[0].contains("does not exceed"),
        "{found:?}"
    );
    // The same owner (proc 0 owns as 100) re-enters with the epoch's token.
    let reentry = H::default()
        .granted(0, 1, 0, 1, 100)
        .granted(0, 2, 10, 11, 100);
    assert_eq!(reentry.findings(), Vec::<String>::new());
    let other_token = H::default()
        .granted(0, 1, 0, 1, 100)
        .granted(0, 2, 10, 11, 101);
    let found = other_token.findings();
    assert!(
        found.len() == 1 && found[0].contains("not its epoch's"),
        "{found:?}"
    );
}

#[test]
fn releasing_a_hold_another_epoch_replaced_is_a_finding() {
    // A's lease ran out, B took the lock, and A's release still "succeeded".
    let h = H::default()
        .granted(0, 1, 0, 1, 100)
        .granted(1, 2, 1_200, 1_201, 200)
        .released(0, 1, 1_300, 1_301, 0);
    let found = h.findings();
    assert!(
        found.len() == 1 && found[0].contains("no longer held"),
        "{found:?}"
    );
    // A release of a hold never granted (a fair hand-off's reservation) is legal.
    let reserved = H::default().released(1, 9, 0, 1, 0);
    assert_eq!(reserved.findings(), Vec::<String>::new());
}

#[test]
fn a_finding_breaks_exclusion_and_only_a_reset_of_its_node_ends_it() {
    let h = H::default()
        .granted(0, 1, 0, 1, 100)
        .granted(1, 2, 500, 501, 200);
    let config = CheckConfig {
        liveness_bound: Duration::from_secs(10),
        lease_ttl: Duration::from_millis(TTL),
        shared_owner: false,
        fair_entry_timeout: None,
        writer_intent: None,
        permit_wake: None,
        unfenced: false,
    };
    let f = checker::check(
        &h.0,
        (&[], &checker::Nodes::default()),
        &config,
        2_000_000_000,
    );
    assert_eq!(f.verdict, Verdict::ExclusionBroken);
    let problem = f
        .problems
        .iter()
        .find(|p| p.kind == ProblemKind::NotLinearizable)
        .unwrap();
    assert!(!problem.excused);
    assert_eq!(problem.lock, "l");
    let crash = |node| FaultMark {
        fault: Fault::NodeCrash {
            node,
            restart_after_ms: Some(10),
        },
        proc: None,
        from: 200_000_000,
        until: 210_000_000,
    };
    let judged = |marks: &[FaultMark]| {
        checker::check(
            &h.0,
            (marks, &checker::Nodes::default()),
            &config,
            2_000_000_000,
        )
        .problems
        .into_iter()
        .filter(|p| p.kind == ProblemKind::NotLinearizable)
        .collect::<Vec<_>>()
    };
    // The node that served the key restarted empty before the second grant: the key starts
    // afresh there, and the grant is legal.
    assert!(judged(&[crash(0)]).is_empty());
    // Another node's crash changes nothing, and excuses nothing.
    let other = judged(&[crash(1)]);
    assert_eq!(other.len(), 1);
    assert!(!other[0].excused, "no fault excuses a finding");
}

#[test]
fn a_hold_an_ambiguous_grant_gave_is_released_with_its_epoch() {
    // A's first acquire (hold 1) was never answered, yet a probe finds it live with token
    // 100; its sibling hold 2 re-enters; both are released, the last with 0 left: the lock
    // is free for B.
    let probe = LockOp {
        family: Family::Mutex,
        kind: OpKind::Probe,
        hold: 1,
        owner: 0,
        ttl_ms: 0,
        queued: false,
        entry_ms: 0,
    };
    let h = H::default()
        .call(0, acquire(1, 100), 0, None)
        .call(
            0,
            probe,
            500,
            Some((
                501,
                LockReply::Probed {
                    held: true,
                    token: Some(100),
                },
            )),
        )
        .granted(0, 2, 502, 503, 100)
        .released(0, 2, 600, 601, 1)
        .released(0, 1, 602, 603, 0)
        .granted(1, 3, 610, 611, 200);
    assert_eq!(h.findings(), Vec::<String>::new());
}

/// An ambiguous call of another owner can make a pending call legal, and that call the
/// answer. Process 0 holds hold 1 (granted by 553 ms) and re-enters with hold 2, whose
/// answer (and a renewal's) never comes. Its releases of both answer after process 1's
/// grant at 1,428 ms: hold 1's says one hold remains (hold 2, granted after all), hold 2's
/// that none does. Both ran before process 1's grant, which is therefore legal.
#[test]
fn an_ambiguous_re_entry_may_explain_a_release_that_frees_the_lock_for_another() {
    let inner = LockOp {
        family: Family::Mutex,
        ttl_ms: 300,
        ..acquire(2, 100)
    };
    let h = H::default()
        .granted(0, 1, 282, 553, 100)
        .call(0, inner, 1_094, None)
        .renewed(0, 1, 1_182, None)
        .released(0, 1, 1_271, 1_541, 1)
        .released(0, 2, 1_271, 1_541, 0)
        .granted(1, 3, 1_428, 1_429, 200);
    assert_eq!(h.findings(), Vec::<String>::new());
}

/// One acquire's attempts reuse its hold id. Process 0's hold 1 is granted, found ended
/// (its release answers -1), and asked for again in the queue (denied); a fair hand-off
/// then grants it unseen, and its release answers that none of the owner's holds remain.
/// The first grant says nothing of the second: that release is legal.
#[test]
fn a_hold_id_asked_for_again_is_judged_by_its_latest_answer() {
    let queued = LockOp {
        family: Family::Mutex,
        queued: true,
        ..acquire(1, 100)
    };
    let h = H::default()
        .granted(0, 1, 0, 1, 100)
        .released(0, 1, 2_000, 2_001, -1)
        .call(0, queued, 2_100, Some((2_101, LockReply::Denied)))
        .released(0, 1, 2_500, 2_501, 0);
    assert_eq!(h.findings(), Vec::<String>::new());
}

/// A node that stalled answers the pile of refusals it held at once: forty acquires of
/// other owners, each denied, all pending together. Each may be linearized anywhere in
/// its window; they change nothing, so the check keeps them pending instead of trying
/// every subset, stays exact, and still finds the illegal grant that follows.
#[test]
fn a_pile_of_refusals_answered_at_once_stays_checked() {
    let mut h = H::default().granted(0, 1, 0, 1, 100);
    for waiter in 1..=40 {
        let op = acquire(1_000 + waiter, waiter + 100);
        h = h.call(
            waiter as usize,
            op,
            100 + waiter,
            Some((500, LockReply::Denied)),
        );
    }
    let h = h.granted(41, 2, 600, 601, 200);
    let report = check(&h.0, &[], AMBIGUOUS_WINDOW_NS);
    assert_eq!(
        (report.reach.unchecked, report.reach.widened),
        (0, 0),
        "{report:?}"
    );
    assert_eq!(report.findings.len(), 1, "{report:?}");
    assert!(
        report.findings[0]
            .detail
            .contains("granted while the lease")
    );
}

/// An owner half of whose re-entries' replies were lost (a flaky link): each lost grant may have joined the epoch or not, so the configurations
/// multiply until the frontier is widened. The widened check goes on to the end and
/// still finds a token that goes backwards; without it, the history is legal.
#[test]
fn lost_grants_widen_the_frontier_and_the_check_goes_on() {
    let lost = |backwards: bool| {
        let mut h = H::default().granted(0, 1, 0, 1, 100);
        for i in 0..12 {
            h = h.call(0, acquire(10 + i, 100), 100 + 50 * i, None).granted(
                0,
                100 + i,
                110 + 50 * i,
                120 + 50 * i,
                100,
            );
        }
        let token = if backwards { 50 } else { 300 };
        h.granted(1, 2, 3_000, 3_001, token)
    };
    let report = check(&lost(true).0, &[], AMBIGUOUS_WINDOW_NS);
    assert_eq!(report.reach.widened, 1, "{report:?}");
    assert_eq!(report.reach.unchecked, 0, "{report:?}");
    assert_eq!(report.findings.len(), 1, "{report:?}");
    assert!(report.findings[0].detail.contains("does not exceed"));
    let legal = check(&lost(false).0, &[], AMBIGUOUS_WINDOW_NS);
    assert_eq!(
        (legal.reach.widened, legal.findings.len()),
        (1, 0),
        "{legal:?}"
    );
}
