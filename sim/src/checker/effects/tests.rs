//! The excuses by cause, through `checker::check`: each history of the review that an
//! unsized, unplaced or untimed fault used to excuse is not excused, beside the same fault
//! sized and placed to cause it, which is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::checker::fixtures::{self, KEY};
use crate::checker::{CheckConfig, Nodes, ProblemKind, check};
use crate::world::calls::{Family, LockReply, OpKind};
use crate::world::faults::{Fault, ProcSel};
use crate::world::history::{Access, FaultMark, HistEvent, HistKind};
use crate::world::net::{ProcId, Target};

const MS: u64 = 1_000_000;

/// A history built call by call: each call runs on node 0 the instant it is answered.
#[derive(Default)]
struct H(Vec<HistEvent>);

impl H {
    fn at(mut self, at_ms: u64, proc: ProcId, lock: &str, kind: HistKind) -> Self {
        self.0.push(fixtures::ev(at_ms, proc, lock, kind));
        self
    }

    /// `proc` asks for hold `hold` at `sent_ms` (a 400 ms lease), answered at `answer_ms`,
    /// granted or not.
    fn acquire(
        self,
        proc: ProcId,
        hold: u64,
        (sent_ms, answer_ms): (u64, u64),
        granted: bool,
    ) -> Self {
        let id = self.0.len() as u64;
        let op = fixtures::op(Family::Mutex, OpKind::Acquire, (hold, hold), 400, false);
        let reply = if granted {
            LockReply::Granted { token: hold }
        } else {
            LockReply::Denied
        };
        let target = Target::Node(0);
        let ran = HistKind::Ran {
            id,
            reply: Some(reply),
            node: 0,
            clock_ms: answer_ms,
            fence: None,
        };
        self.at(sent_ms, proc, KEY, HistKind::Call { id, target, op })
            .at(answer_ms, proc, KEY, ran)
            .at(answer_ms, proc, KEY, HistKind::Return { id, reply })
    }
}

/// c0 waits from 0 ms, asks at 1 ms (busy) and at 9 ms (granted at 10 ms) and believes
/// until `c0_until_ms`; c1 waits from 20 ms and is granted at 500 ms, believing until
/// 950 ms. Node 0 ran every call; node 1 is a replica nobody uses.
fn contended(c0_until_ms: u64) -> Vec<HistEvent> {
    let exclusive = Access::Exclusive;
    H::default()
        .at(0, 0, "l", HistKind::WaitStart)
        .acquire(0, 1, (1, 2), false)
        .acquire(0, 1, (9, 10), true)
        .at(
            10,
            0,
            "l",
            HistKind::Acquired {
                token: 1,
                access: exclusive,
            },
        )
        .at(20, 1, "l", HistKind::WaitStart)
        .acquire(1, 2, (499, 500), true)
        .at(
            500,
            1,
            "l",
            HistKind::Acquired {
                token: 2,
                access: exclusive,
            },
        )
        .at(c0_until_ms, 0, "l", HistKind::Released)
        .at(950, 1, "l", HistKind::Released)
        .0
}

fn nodes() -> Nodes {
    Nodes {
        groups: vec![vec![0, 1]],
        ..Nodes::default()
    }
}

/// Whether the overlap in `h` under `faults` is excused (it must be found).
fn overlap_excused(h: &[HistEvent], faults: &[FaultMark]) -> bool {
    let config = fixtures::config(None);
    let f = check(h, (faults, &nodes()), &config, 2_000 * MS);
    let overlap = f.problems.iter().find(|p| p.kind == ProblemKind::Overlap);
    overlap.expect("the overlap is found").excused
}

fn mark(fault: Fault, proc: Option<ProcId>, (from_ms, until_ms): (u64, u64)) -> FaultMark {
    FaultMark {
        fault,
        proc: proc.map(|p| (p, 0)),
        from: from_ms * MS,
        until: until_ms.saturating_mul(MS),
    }
}

fn pause(proc: ProcId, (from_ms, until_ms): (u64, u64)) -> FaultMark {
    let fault = Fault::Pause {
        who: ProcSel::Id(proc),
        ms: until_ms - from_ms,
    };
    mark(fault, Some(proc), (from_ms, until_ms))
}

fn client_drift(proc: ProcId, ppm: i64) -> FaultMark {
    mark(
        Fault::ClientClockDrift { proc, ppm },
        Some(proc),
        (0, u64::MAX / MS),
    )
}

fn node_jump(node: usize, by_ms: i64, at_ms: u64) -> FaultMark {
    mark(Fault::NodeClockJump { node, by_ms }, None, (at_ms, at_ms))
}

fn node_drift(node: usize, ppm: i64) -> FaultMark {
    mark(
        Fault::NodeClockDrift { node, ppm },
        None,
        (0, u64::MAX / MS),
    )
}

fn crash(node: usize, (from_ms, until_ms): (u64, u64)) -> FaultMark {
    let restart_after_ms = (until_ms != u64::MAX / MS).then_some(until_ms - from_ms);
    let fault = Fault::NodeCrash {
        node,
        restart_after_ms,
    };
    mark(fault, None, (from_ms, until_ms))
}

#[test]
fn without_a_fault_the_overlap_is_not_excused() {
    assert!(!overlap_excused(&contended(900), &[]));
}

#[test]
fn a_holders_pause_excuses_no_more_than_its_length() {
    let h = contended(900);
    // 400 ms of overlap: a 1 ms pause cannot cause it, a 450 ms one can.
    assert!(!overlap_excused(&h, &[pause(0, (300, 301))]));
    assert!(overlap_excused(&h, &[pause(0, (300, 750))]));
}

#[test]
fn a_pause_before_the_granting_request_was_sent_excuses_nothing() {
    let h = contended(900);
    // Paused for 6 ms between its busy attempt and the one that won it: the lease was
    // counted from the later send. The same 6 ms after the send, against a 5 ms overlap,
    // does excuse it.
    assert!(!overlap_excused(&h, &[pause(0, (2, 8))]));
    let short = contended(505);
    assert!(!overlap_excused(&short, &[pause(0, (2, 8))]));
    assert!(overlap_excused(&short, &[pause(0, (100, 106))]));
}

#[test]
fn the_grantees_faults_never_excuse_the_holders_belief() {
    let h = contended(900);
    assert!(!overlap_excused(&h, &[pause(1, (100, 150))]));
    assert!(!overlap_excused(&h, &[pause(1, (100, 750))]));
    // A 2 %-slow clock on c1 does nothing for c0's belief; on c0, against a 5 ms overlap
    // (2 % of the 490 ms c0 held before c1's grant is 9.8 ms), it can.
    let short = contended(505);
    assert!(!overlap_excused(&short, &[client_drift(1, -20_000)]));
    assert!(overlap_excused(&short, &[client_drift(0, -20_000)]));
    // And 2 % of 490 ms is no excuse for 400 ms.
    assert!(!overlap_excused(&h, &[client_drift(0, -20_000)]));
}

#[test]
fn a_node_clock_fault_excuses_only_holds_that_node_served_and_only_by_its_size() {
    let h = contended(900);
    // Node 1 granted nothing.
    assert!(!overlap_excused(&h, &[node_jump(1, 1, 200)]));
    assert!(!overlap_excused(&h, &[node_jump(1, 500, 200)]));
    assert!(!overlap_excused(&h, &[node_drift(1, 20_000)]));
    // Node 0 granted c0's hold: a +1 ms jump is too small for 400 ms, +450 ms is not.
    assert!(!overlap_excused(&h, &[node_jump(0, 1, 200)]));
    assert!(overlap_excused(&h, &[node_jump(0, 450, 200)]));
    // A backward jump only lengthens leases.
    assert!(!overlap_excused(&h, &[node_jump(0, -450, 200)]));
    // +2 % drift on node 0 against a 5 ms overlap.
    let short = contended(505);
    assert!(!overlap_excused(&short, &[node_drift(1, 20_000)]));
    assert!(overlap_excused(&short, &[node_drift(0, 20_000)]));
    // A jump before the granting request explains nothing of a lease counted after it.
    assert!(!overlap_excused(&h, &[node_jump(0, 450, 5)]));
}

#[test]
fn a_crash_excuses_only_holds_of_the_node_that_crashed_inside_their_window() {
    let h = contended(900);
    // A replica nobody uses, dead for good from the start.
    assert!(!overlap_excused(&h, &[crash(1, (0, u64::MAX / MS))]));
    // The granting node, restarting empty mid-hold.
    assert!(overlap_excused(&h, &[crash(0, (200, 210))]));
}

#[test]
fn a_double_grant_within_one_lease_is_never_excused() {
    // c1's grant at 100 ms falls inside c0's 400 ms lease: no correct server answers so.
    let exclusive = Access::Exclusive;
    let h = H::default()
        .acquire(0, 1, (9, 10), true)
        .at(
            10,
            0,
            "l",
            HistKind::Acquired {
                token: 1,
                access: exclusive,
            },
        )
        .acquire(1, 2, (99, 100), true)
        .at(
            100,
            1,
            "l",
            HistKind::Acquired {
                token: 2,
                access: exclusive,
            },
        )
        .at(150, 0, "l", HistKind::Released)
        .at(160, 1, "l", HistKind::Released)
        .0;
    let config = fixtures::config(None);
    for faults in [
        vec![node_drift(1, 1)],
        vec![node_drift(0, 20_000)],
        vec![node_jump(0, 300, 50)],
        vec![node_jump(1, 1, 0)],
    ] {
        let f = check(&h, (&faults, &nodes()), &config, 2_000 * MS);
        let linear: Vec<_> = f
            .problems
            .iter()
            .filter(|p| p.kind == ProblemKind::NotLinearizable)
            .collect();
        assert!(!linear.is_empty(), "{faults:?}");
        assert!(linear.iter().all(|p| !p.excused), "{faults:?}");
    }
}

#[test]
fn a_belief_kept_past_not_held_is_never_excused_but_a_pause_after_it_delays_it() {
    // c0's renewal at 300 ms is answered "not held" at 301 ms; it believes until 901 ms.
    let renewal = |h: H| {
        let id = h.0.len() as u64;
        let op = fixtures::renewal(Family::Mutex, 1);
        let target = Target::Node(0);
        let reply = LockReply::Renewed(false);
        h.at(300, 0, KEY, HistKind::Call { id, target, op }).at(
            301,
            0,
            KEY,
            HistKind::Return { id, reply },
        )
    };
    let exclusive = Access::Exclusive;
    let start = H::default().acquire(0, 1, (9, 10), true).at(
        10,
        0,
        "l",
        HistKind::Acquired {
            token: 1,
            access: exclusive,
        },
    );
    let h = renewal(start).at(901, 0, "l", HistKind::Lost).0;
    let config = CheckConfig {
        liveness_bound: Duration::from_secs(10),
        ..fixtures::config(None)
    };
    let judged = |faults: &[FaultMark]| {
        let f = check(&h, (faults, &nodes()), &config, 2_000 * MS);
        f.problems
            .into_iter()
            .filter(|p| p.kind == ProblemKind::NotHeldIgnored)
            .map(|p| p.excused)
            .collect::<Vec<_>>()
    };
    assert_eq!(judged(&[node_drift(1, 20_000)]), [false]);
    assert_eq!(judged(&[node_drift(0, 20_000)]), [false]);
    // Frozen from 302 ms to 899 ms, c0 could not react before it ran again.
    let frozen = mark(
        Fault::Pause {
            who: ProcSel::Id(0),
            ms: 597,
        },
        Some(0),
        (302, 899),
    );
    let mut impaired = h.clone();
    impaired.push(fixtures::ev(
        302,
        0,
        "",
        HistKind::Impaired { until: 899 * MS },
    ));
    impaired.sort_by_key(|e| e.at);
    let f = check(&impaired, (&[frozen], &nodes()), &config, 2_000 * MS);
    assert!(
        f.problems
            .iter()
            .all(|p| p.kind != ProblemKind::NotHeldIgnored)
    );
    // A pause too short to cover the belief is no reason.
    let mut brief = h;
    brief.push(fixtures::ev(
        302,
        0,
        "",
        HistKind::Impaired { until: 320 * MS },
    ));
    brief.sort_by_key(|e| e.at);
    let f = check(&brief, (&[], &nodes()), &config, 2_000 * MS);
    assert!(
        f.problems
            .iter()
            .any(|p| p.kind == ProblemKind::NotHeldIgnored && !p.excused)
    );
}
