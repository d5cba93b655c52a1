//! The stranded-state rule on hand-made histories, through the whole checker: each excess
//! is found beside the same history without it, which is not.

use crate::checker::fixtures::{KEY, ev, kinds, op};
use crate::checker::problems::ProblemKind;
use crate::world::calls::{Family, LockOp, LockReply, OpKind};
use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent, HistKind};
use crate::world::kept::KeptKey;
use crate::world::net::Target;

const HOLDER: u64 = 11;
const WAITER: u64 = 22;
const SEM: &str = "leasehold:{l}:sem";

/// A history of script calls on node 0, each run on arrival, its node's wall clock reading
/// the virtual ms.
#[derive(Default)]
struct Runs(Vec<HistEvent>);

impl Runs {
    /// `proc` sends `op` on `key` at `at_ms`; the node runs it then, answers `reply`, and
    /// keeps `holds` (hold, deadline ms) in `key` until `expires_ms` (`None`: the key is
    /// gone).
    fn run(
        mut self,
        (at_ms, proc, key): (u64, usize, &str),
        op: LockOp,
        reply: LockReply,
        kept: Option<(i64, &[(u64, i64)])>,
    ) -> Self {
        let id = self.0.len() as u64;
        let target = Target::Node(0);
        self.0
            .push(ev(at_ms, proc, key, HistKind::Call { id, target, op }));
        let reply = Some(reply);
        let (node, clock_ms) = (0, at_ms);
        self.0.push(ev(
            at_ms,
            proc,
            key,
            HistKind::Ran {
                id,
                reply,
                node,
                clock_ms,
                fence: None,
            },
        ));
        let keys = kept
            .map(|(expires, holds)| KeptKey {
                key: key.to_owned(),
                expires_ms: Some(expires),
                holds: holds.to_vec(),
            })
            .into_iter()
            .collect();
        self.0.push(ev(
            at_ms,
            proc,
            key,
            HistKind::Kept {
                id,
                node: 0,
                now_ms: at_ms as i64,
                keys,
            },
        ));
        self
    }

    /// How many stranded-state problems the checker finds, under `faults`.
    fn stranded(&self, faults: &[FaultMark]) -> usize {
        kinds(&self.0, faults, None, 10_000)
            .into_iter()
            .filter(|k| *k == ProblemKind::Stranded)
            .count()
    }
}

fn acquire(family: Family, hold: u64, ttl_ms: u64, entry_ms: u64) -> LockOp {
    LockOp {
        entry_ms,
        ..op(family, OpKind::Acquire, (hold, 1), ttl_ms, entry_ms > 0)
    }
}

fn release(family: Family, hold: u64) -> LockOp {
    op(family, OpKind::Release, (hold, 1), 0, false)
}

const GRANTED: LockReply = LockReply::Granted { token: 1 };

/// A permit granted at 0 for 1 s and released at 200, after which the node keeps `kept`.
fn released_permit(kept: Option<(i64, &[(u64, i64)])>) -> Runs {
    Runs::default()
        .run(
            (0, 0, SEM),
            acquire(Family::Permit, HOLDER, 1_000, 0),
            GRANTED,
            Some((1_000, &[(HOLDER, 1_000)])),
        )
        .run(
            (200, 0, SEM),
            release(Family::Permit, HOLDER),
            LockReply::Released(0),
            kept,
        )
}

#[test]
fn a_deadline_past_the_lease_asked_for_is_stranded_state() {
    let kept = |deadline: i64| {
        Runs::default()
            .run(
                (100, 0, KEY),
                acquire(Family::Mutex, HOLDER, 1_000, 0),
                GRANTED,
                Some((deadline, &[(HOLDER, deadline)])),
            )
            .stranded(&[])
    };
    assert_eq!(kept(1_100), 0, "the lease asked for");
    assert_eq!(kept(1_102), 0, "within the clock's whole-ms slack");
    assert!(kept(1_600) > 0, "500 ms more than asked");
}

#[test]
fn a_hold_kept_after_its_release_ran_is_stranded_state() {
    let after = |kept: Option<(i64, &[(u64, i64)])>| released_permit(kept).stranded(&[]);
    assert_eq!(after(None), 0, "the permit left with its release");
    assert_eq!(
        after(Some((1_000, &[(HOLDER, 1_000)]))),
        1,
        "the release answered and the permit stayed"
    );
}

#[test]
fn a_hand_off_is_bounded_by_the_grantees_entry_not_by_its_message() {
    // The waiter's attempt at 0 asks a 1 s lease and a 500 ms entry; the holder's release
    // at 300 hands it the lock: for at most the 200 ms its entry had left.
    let handed = |deadline: i64, expires: i64| {
        Runs::default()
            .run(
                (0, 0, KEY),
                acquire(Family::Mutex, HOLDER, 1_000, 0),
                GRANTED,
                Some((1_000, &[(HOLDER, 1_000)])),
            )
            .run(
                (0, 1, KEY),
                acquire(Family::Mutex, WAITER, 1_000, 500),
                LockReply::Denied,
                Some((1_000, &[(HOLDER, 1_000)])),
            )
            .run(
                (300, 0, KEY),
                release(Family::Mutex, HOLDER),
                LockReply::Released(0),
                Some((expires, &[(WAITER, deadline)])),
            )
            .stranded(&[])
    };
    assert_eq!(
        handed(500, 1_000),
        0,
        "the capped lease; the key as the holder's"
    );
    assert!(
        handed(1_300, 1_300) > 0,
        "the whole TTL past the entry's deadline"
    );
    assert!(
        handed(500, 1_300) > 0,
        "the capped lease in the field, the whole TTL on the key"
    );
}

#[test]
fn a_semaphore_claim_keeps_its_entry_deadline_when_that_is_later() {
    // The waiter's attempt at 0 asks a 5 s entry; the release at 100 reserves the permit
    // until then, and the claim at 200 keeps that later deadline (`ZADD GT`).
    let claimed = |deadline: i64| {
        Runs::default()
            .run(
                (0, 1, SEM),
                acquire(Family::Permit, WAITER, 1_000, 5_000),
                LockReply::Denied,
                Some((900, &[(HOLDER, 900)])),
            )
            .run(
                (100, 0, SEM),
                release(Family::Permit, HOLDER),
                LockReply::Released(0),
                Some((5_000, &[(WAITER, 5_000)])),
            )
            .run(
                (200, 1, SEM),
                acquire(Family::Permit, WAITER, 1_000, 5_000),
                GRANTED,
                Some((deadline, &[(WAITER, deadline)])),
            )
            .stranded(&[])
    };
    assert_eq!(claimed(5_000), 0);
    assert!(
        claimed(5_300) > 0,
        "past both the entry and the claim's lease"
    );
}

#[test]
fn a_failover_lets_a_node_show_an_earlier_state() {
    // The release ran and the permit left; after a failover the promoted node shows it
    // again (its copy predates the release): a state the requests no longer bound.
    let runs = released_permit(None).run(
        (400, 1, SEM),
        op(Family::Permit, OpKind::Probe, (WAITER, 0), 0, false),
        LockReply::Probed {
            held: false,
            token: None,
        },
        Some((1_500, &[(HOLDER, 1_500)])),
    );
    let failover = FaultMark {
        fault: Fault::Failover {
            group: 0,
            restart_after_ms: None,
            split: None,
            promote_after_ms: None,
        },
        proc: None,
        from: 300_000_000,
        until: 350_000_000,
    };
    assert_eq!(runs.stranded(&[failover]), 0);
    assert!(
        runs.stranded(&[]) > 0,
        "without it, 500 ms past any request"
    );
}
