//! The checker's rules, each on hand-made histories.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::*;
use crate::world::faults::{Fault, ProcSel};
use crate::world::history::{Access, FaultMark, HistEvent, HistKind};
use crate::world::net::{ProcId, Target};

fn ev(at_ms: u64, proc: ProcId, kind: HistKind) -> HistEvent {
    HistEvent {
        at: at_ms * 1_000_000,
        proc,
        incarnation: 0,
        lock: "l".into(),
        kind,
    }
}

const CONFIG: CheckConfig = CheckConfig {
    liveness_bound: Duration::from_secs(2),
    lease_ttl: Duration::from_secs(1),
    shared_owner: false,
    fair_entry_timeout: None,
    writer_intent: None,
    permit_wake: None,
    unfenced: false,
};

fn acquired(at_ms: u64, proc: ProcId, token: u64, access: Access) -> HistEvent {
    ev(at_ms, proc, HistKind::Acquired { token, access })
}

/// `proc` holds `token` exclusively from `from_ms` until it releases at `to_ms`.
fn hold(from_ms: u64, to_ms: u64, proc: ProcId, token: u64) -> [HistEvent; 2] {
    [
        acquired(from_ms, proc, token, Access::Exclusive),
        ev(to_ms, proc, HistKind::Released),
    ]
}

/// `proc` gives up waiting at `at_ms`.
fn timed_out(at_ms: u64, proc: ProcId) -> HistEvent {
    ev(
        at_ms,
        proc,
        HistKind::AcquireFailed {
            error: "timeout".into(),
        },
    )
}

fn mark(fault: Fault, proc: Option<ProcId>, from_ms: u64, until_ms: u64) -> FaultMark {
    FaultMark {
        fault,
        proc: proc.map(|p| (p, 0)),
        from: from_ms * 1_000_000,
        until: until_ms * 1_000_000,
    }
}

fn check_ms(h: &[HistEvent], faults: &[FaultMark], end_ms: u64) -> Findings {
    check(h, (faults, &Nodes::default()), &CONFIG, end_ms * 1_000_000)
}

#[test]
fn disjoint_holds_are_safe() {
    let h = [hold(0, 10, 0, 1), hold(11, 20, 1, 2)].concat();
    assert_eq!(check_ms(&h, &[], 30).verdict, Verdict::Safe);
}

/// c0 holds token 1 from 0 to 8 ms while c1 is granted token 2 at 5 ms.
fn overlapping() -> Vec<HistEvent> {
    vec![
        ev(0, 0, HistKind::WaitStart),
        acquired(0, 0, 1, Access::Exclusive),
        acquired(5, 1, 2, Access::Exclusive),
        ev(8, 0, HistKind::Released),
        ev(9, 1, HistKind::Released),
    ]
}

#[test]
fn conflicting_beliefs_break_exclusion_whatever_the_resource_did() {
    let f = check_ms(&overlapping(), &[], 10);
    assert_eq!(f.verdict, Verdict::ExclusionBroken);
    assert_eq!(f.overlap_count, 1);
    let problem = &f.problems[0];
    assert_eq!(problem.kind, ProblemKind::Overlap);
    assert!(!problem.excused, "no fault, no excuse");
}

#[test]
fn only_a_fault_that_touched_the_earlier_hold_excuses_an_overlap() {
    let pause = |who| Fault::Pause {
        who: ProcSel::Id(who),
        ms: 3,
    };
    // The earlier holder paused inside its hold: excused.
    let on_holder = check_ms(&overlapping(), &[mark(pause(0), Some(0), 1, 4)], 10);
    assert!(on_holder.problems[0].excused);
    assert_eq!(on_holder.problems[0].touched_by, ["pause"]);
    // The same pause on the later holder: not excused (see `effects` for sizes, places
    // and windows).
    let on_other = check_ms(&overlapping(), &[mark(pause(1), Some(1), 1, 4)], 10);
    assert!(!on_other.problems[0].excused);
    // A slow link never excuses a belief outliving its lease.
    let slow = Fault::Slow {
        who: ProcSel::Id(0),
        extra_ms: 500,
        ms: 10,
    };
    let delayed = check_ms(&overlapping(), &[mark(slow, Some(0), 0, 10)], 10);
    assert!(!delayed.problems[0].excused);
    assert_eq!(delayed.problems[0].touched_by, ["delay"]);
    // Clock drifts that stay within the library's margin (1 %) excuse nothing, however
    // long they ran; a slow node clock only lengthens leases.
    let forever = u64::MAX / 1_000_000;
    let mut long = overlapping();
    long[2].at = 5_000 * 1_000_000;
    long[3].at = 5_003 * 1_000_000;
    long[4].at = 5_004 * 1_000_000;
    let drift = |ppm| Fault::ClientClockDrift { proc: 0, ppm };
    let node_drift = |ppm| Fault::NodeClockDrift { node: 0, ppm };
    let within = check_ms(&long, &[mark(drift(-5_000), Some(0), 0, forever)], 6_000);
    assert!(!within.problems[0].excused);
    let within_node = check_ms(&long, &[mark(node_drift(6_000), None, 0, forever)], 6_000);
    assert!(!within_node.problems[0].excused);
    let slow_node = check_ms(&long, &[mark(node_drift(-50_000), None, 0, forever)], 6_000);
    assert!(!slow_node.problems[0].excused);
    // Beyond it, over 5 s, they cover a 3 ms overlap: alone, or adding up (a slow
    // holder, a fast node).
    let slow_clock = check_ms(&long, &[mark(drift(-50_000), Some(0), 0, forever)], 6_000);
    assert!(slow_clock.problems[0].excused);
    let together = check_ms(
        &long,
        &[
            mark(drift(-6_000), Some(0), 0, forever),
            mark(node_drift(6_000), None, 0, forever),
        ],
        6_000,
    );
    assert!(together.problems[0].excused);
    assert_eq!(
        together.problems[0].touched_by,
        ["client-drift", "node-drift"]
    );
}

#[test]
fn an_unexcused_overlap_after_many_excused_ones_is_never_dropped() {
    // Six overlaps, each while the earlier holder was paused (excused), then a seventh
    // that no fault touched: the seventh is what exploration must see.
    let pause = Fault::Pause {
        who: ProcSel::Id(0),
        ms: 3,
    };
    let mut h = Vec::new();
    let mut faults = Vec::new();
    for i in 0..7 {
        let base = i * 100;
        h.extend([
            acquired(base, 0, 2 * i + 1, Access::Exclusive),
            acquired(base + 5, 1, 2 * i + 2, Access::Exclusive),
            ev(base + 8, 0, HistKind::Released),
            ev(base + 9, 1, HistKind::Released),
        ]);
        if i < 6 {
            faults.push(mark(pause.clone(), Some(0), base + 1, base + 4));
        }
    }
    let f = check_ms(&h, &faults, 800);
    assert_eq!(f.overlap_count, 7);
    let unexcused: Vec<&Problem> = f.problems.iter().filter(|p| !p.excused).collect();
    assert_eq!(unexcused.len(), 1, "{:#?}", f.problems);
    assert_eq!(unexcused[0].kind, ProblemKind::Overlap);
    assert_eq!(unexcused[0].at, 605 * 1_000_000);
    let count = |excused| {
        f.problem_counts
            .iter()
            .filter(|c| c.kind == ProblemKind::Overlap && c.excused == excused)
            .map(|c| c.count)
            .sum::<u64>()
    };
    assert_eq!((count(true), count(false)), (6, 1));
    // Only the detail is capped: five of the six excused ones are kept in full.
    assert_eq!(f.problems.iter().filter(|p| p.excused).count(), 5);
}

#[test]
fn a_belief_the_servers_no_longer_hold_breaks_exclusion_without_contention() {
    let h = vec![
        acquired(0, 0, 1, Access::Exclusive),
        ev(
            7,
            0,
            HistKind::LeaseGone {
                holding: 0,
                quorum: 1,
            },
        ),
        ev(9, 0, HistKind::Released),
    ];
    let f = check_ms(&h, &[], 10);
    assert_eq!(f.verdict, Verdict::ExclusionBroken);
    assert_eq!(f.lease_gone, 1);
    assert_eq!(f.problems[0].kind, ProblemKind::LeaseGone);
    assert_eq!(f.overlap_count, 0);
}

#[test]
fn a_belief_longer_than_a_lease_past_its_hold_is_not_excused_by_the_node_fault() {
    // The node lost the hold at 7 ms (a crash excuses that), but the belief went on
    // for 1.5 s after it, longer than the 1 s lease: no crash explains that.
    let gone = |at| {
        ev(
            at,
            0,
            HistKind::LeaseGone {
                holding: 0,
                quorum: 1,
            },
        )
    };
    let crash = mark(
        Fault::NodeCrash {
            node: 0,
            restart_after_ms: Some(1),
        },
        None,
        6,
        7,
    );
    let long = vec![
        acquired(0, 0, 1, Access::Exclusive),
        gone(7),
        ev(1_507, 0, HistKind::Released),
    ];
    let f = check_ms(&long, std::slice::from_ref(&crash), 2_000);
    let kinds: Vec<ProblemKind> = f.problems.iter().map(|p| p.kind).collect();
    assert_eq!(kinds, [ProblemKind::LeaseGone, ProblemKind::LeaseOutlived]);
    assert!(f.problems[0].excused);
    assert!(!f.problems[1].excused);
    // Within a lease of the loss, the crash explains it all.
    let short = vec![
        acquired(0, 0, 1, Access::Exclusive),
        gone(7),
        ev(900, 0, HistKind::Released),
    ];
    let f = check_ms(&short, &[crash], 2_000);
    assert_eq!(f.problems.len(), 1);
    assert!(f.problems[0].excused);
}

#[test]
fn a_late_write_rejected_by_the_fence_is_safe_with_fencing() {
    let mut h = [hold(0, 5, 0, 1), hold(6, 9, 1, 2)].concat();
    h.push(ev(
        10,
        0,
        HistKind::Write {
            token: 1,
            highest: 2,
            accepted: false,
        },
    ));
    let f = check_ms(&h, &[], 11);
    assert_eq!(f.verdict, Verdict::SafeWithFencing);
    assert_eq!(f.stale_rejected, 1);
}

#[test]
fn tokens_must_exceed_the_running_maximum_not_just_the_previous_grant() {
    // 5, then 7, then 6: 6 exceeds nothing but its predecessor's predecessor.
    let h = [hold(0, 1, 0, 5), hold(2, 3, 1, 7), hold(4, 5, 2, 6)].concat();
    let f = check_ms(&h, &[], 6);
    assert_eq!(f.verdict, Verdict::Violation);
    assert_eq!(f.problems[0].kind, ProblemKind::TokenOrder);
    // The same process's grants count too.
    let own = [hold(0, 1, 0, 5), hold(2, 3, 0, 5)].concat();
    assert_eq!(check_ms(&own, &[], 4).verdict, Verdict::Violation);
}

#[test]
fn a_shared_owner_may_be_granted_its_own_epoch_again_but_nobody_else_s() {
    let shared = CheckConfig {
        shared_owner: true,
        ..CONFIG
    };
    let own = [hold(0, 1, 0, 5), hold(2, 3, 0, 5)].concat();
    assert_eq!(
        check(&own, (&[], &Nodes::default()), &shared, 4_000_000).verdict,
        Verdict::Safe
    );
    let other = [hold(0, 1, 0, 5), hold(2, 3, 1, 5)].concat();
    let f = check(&other, (&[], &Nodes::default()), &shared, 4_000_000);
    assert_eq!(f.verdict, Verdict::Violation);
    assert_eq!(f.problems[0].kind, ProblemKind::TokenOrder);
    // Nor an older epoch of its own once a newer one was granted.
    let older = [hold(0, 1, 0, 5), hold(2, 3, 0, 7), hold(4, 5, 0, 5)].concat();
    assert_eq!(
        check(&older, (&[], &Nodes::default()), &shared, 6_000_000).verdict,
        Verdict::Violation
    );
}

/// A design that issues no token records its write holds with token 0: with the run's
/// `unfenced` flag the token rule leaves them alone, and exclusion still judges them;
/// without it (every Leasehold run) the same tokens are a violation, as ever.
#[test]
fn holds_of_a_design_without_tokens_are_judged_for_exclusion_not_token_order() {
    let unfenced = CheckConfig {
        unfenced: true,
        ..CONFIG
    };
    let run = |h: &[HistEvent], config: &CheckConfig| {
        check(h, (&[], &Nodes::default()), config, 10_000_000)
    };
    let writes = [hold(0, 1, 0, 0), hold(2, 3, 1, 0), hold(4, 5, 0, 0)].concat();
    assert_eq!(run(&writes, &unfenced).verdict, Verdict::Safe);
    let judged = run(&writes, &CONFIG);
    assert_eq!(judged.verdict, Verdict::Violation);
    assert!(
        judged
            .problems
            .iter()
            .all(|p| p.kind == ProblemKind::TokenOrder)
    );
    // Leasehold's tokens going backwards are still found without the flag.
    let backwards = [hold(0, 1, 0, 7), hold(2, 3, 1, 5)].concat();
    assert_eq!(
        run(&backwards, &CONFIG).problems[0].kind,
        ProblemKind::TokenOrder
    );
    // A write beside a read is still broken exclusion with it.
    let overlap = vec![
        acquired(0, 0, 0, Access::Shared),
        acquired(1, 1, 0, Access::Exclusive),
        ev(3, 0, HistKind::Released),
        ev(4, 1, HistKind::Released),
    ];
    let f = run(&overlap, &unfenced);
    assert_eq!(f.verdict, Verdict::ExclusionBroken);
    assert!(f.problems.iter().all(|p| p.kind != ProblemKind::TokenOrder));
}

#[test]
fn readers_share_and_writers_exclude() {
    let h = vec![
        acquired(0, 0, 1, Access::Shared),
        acquired(1, 1, 2, Access::Shared),
        ev(3, 0, HistKind::Released),
        ev(4, 1, HistKind::Released),
    ];
    assert_eq!(check_ms(&h, &[], 5).verdict, Verdict::Safe);
    let writer = vec![
        acquired(0, 0, 1, Access::Shared),
        acquired(1, 1, 2, Access::Exclusive),
        ev(3, 0, HistKind::Released),
        ev(4, 1, HistKind::Released),
    ];
    assert_eq!(check_ms(&writer, &[], 5).verdict, Verdict::ExclusionBroken);
}

#[test]
fn never_more_holders_than_permits() {
    let permit = Access::Permit { permits: 2 };
    let two = vec![
        acquired(0, 0, 1, permit),
        acquired(1, 1, 2, permit),
        ev(3, 0, HistKind::Released),
        acquired(3, 2, 3, permit),
        ev(5, 1, HistKind::Released),
        ev(6, 2, HistKind::Released),
    ];
    assert_eq!(check_ms(&two, &[], 7).verdict, Verdict::Safe);
    let three = vec![
        acquired(0, 0, 1, permit),
        acquired(1, 1, 2, permit),
        acquired(2, 2, 3, permit),
        ev(5, 0, HistKind::Released),
        ev(5, 1, HistKind::Released),
        ev(6, 2, HistKind::Released),
    ];
    assert_eq!(check_ms(&three, &[], 7).verdict, Verdict::ExclusionBroken);
}

/// A resize of lock `l`'s semaphore to `permits`, sent by `proc` at `sent_ms` and answered
/// live at `answered_ms`.
fn resized(sent_ms: u64, answered_ms: u64, proc: ProcId, id: u64, permits: u32) -> [HistEvent; 2] {
    let at = |at_ms, kind| HistEvent {
        lock: "leasehold:{l}:sem".into(),
        ..ev(at_ms, proc, kind)
    };
    [
        at(sent_ms, HistKind::Resize { id, permits }),
        at(answered_ms, HistKind::Resized { id, live: true }),
    ]
}

#[test]
fn a_semaphores_capacity_follows_its_answered_resizes() {
    let permit = Access::Permit { permits: 2 };
    let wait = |at_ms, proc| ev(at_ms, proc, HistKind::WaitStart);
    // Grown to three at 1 ms: a third holder of permits asked for as two is in capacity.
    let grown = [
        vec![acquired(0, 0, 0, permit), acquired(0, 1, 0, permit)],
        resized(1, 2, 0, 10, 3).to_vec(),
        vec![wait(3, 2), acquired(4, 2, 0, permit)],
        vec![ev(9, 0, HistKind::Released), ev(9, 1, HistKind::Released)],
        vec![ev(9, 2, HistKind::Released)],
    ]
    .concat();
    assert_eq!(check_ms(&grown, &[], 10).verdict, Verdict::Safe);
    // Then shrunk back to two, answered before the third client began waiting: its grant
    // beside two held permits is one too many, though the grow once allowed it.
    let shrunk = [
        vec![acquired(0, 0, 0, permit), acquired(0, 1, 0, permit)],
        resized(1, 2, 0, 10, 3).to_vec(),
        resized(3, 4, 0, 11, 2).to_vec(),
        vec![wait(5, 2), acquired(6, 2, 0, permit)],
        vec![ev(9, 0, HistKind::Released), ev(9, 1, HistKind::Released)],
        vec![ev(9, 2, HistKind::Released)],
    ]
    .concat();
    assert_eq!(check_ms(&shrunk, &[], 10).verdict, Verdict::ExclusionBroken);
    // A wait that began before the shrink was answered may have been granted at three.
    let raced = [
        vec![acquired(0, 0, 0, permit), acquired(0, 1, 0, permit)],
        resized(1, 2, 0, 10, 3).to_vec(),
        vec![wait(2, 2)],
        resized(3, 4, 0, 11, 2).to_vec(),
        vec![acquired(6, 2, 0, permit)],
        vec![ev(9, 0, HistKind::Released), ev(9, 1, HistKind::Released)],
        vec![ev(9, 2, HistKind::Released)],
    ]
    .concat();
    assert_eq!(check_ms(&raced, &[], 10).verdict, Verdict::Safe);
}

#[test]
fn waiting_on_a_free_lock_starves() {
    let h = vec![ev(0, 1, HistKind::WaitStart), timed_out(5_000, 1)];
    assert_eq!(check_ms(&h, &[], 6_000).verdict, Verdict::Starvation);
}

#[test]
fn impaired_time_does_not_count_as_starving() {
    // A 5 s wait impaired until 3.5 s leaves 1.5 s judged, under the 2 s bound; one
    // impaired only until 1 s leaves 4 s.
    let waited_impaired_until = |until: u64| {
        vec![
            ev(0, 1, HistKind::WaitStart),
            ev(1, 1, HistKind::Impaired { until }),
            timed_out(5_000, 1),
        ]
    };
    let h = waited_impaired_until(3_500_000_000);
    assert_eq!(check_ms(&h, &[], 6_000).verdict, Verdict::Safe);
    let h = waited_impaired_until(1_000_000_000);
    assert_eq!(check_ms(&h, &[], 6_000).verdict, Verdict::Starvation);
}

/// The run's re-entry problem.
fn reentry(findings: &Findings) -> Problem {
    findings
        .problems
        .iter()
        .find(|p| p.kind == ProblemKind::ReentryToken)
        .cloned()
        .expect("a re-entry problem")
}

#[test]
fn a_re_entry_into_its_owner_s_old_epoch_is_excused_only_by_its_group_failing_over_between() {
    // Process 0 held token 5 and released it, was granted token 9, then re-entered and got
    // 5 back: its old epoch, still live on a node that never received the release.
    let mut h = [hold(5, 10, 0, 5)].concat();
    h.push(acquired(20, 0, 9, Access::Exclusive));
    h.push(ev(22, 0, HistKind::Reentered { token: 5, hold: 0 }));
    h.push(ev(30, 0, HistKind::Released));
    let plain = check_ms(&h, &[], 40);
    let unexplained = reentry(&plain);
    assert!(!unexplained.excused, "{unexplained:?}");
    assert_eq!(plain.verdict, Verdict::Violation);
    let failover = Fault::Failover {
        group: 0,
        restart_after_ms: None,
        split: None,
        promote_after_ms: None,
    };
    // The clients use group 0 (n0, n1), whose failover may keep the epoch; group 1's
    // cannot.
    let nodes = Nodes {
        groups: vec![vec![0, 1], vec![2]],
        targets: vec![Target::Service(0)],
        ..Nodes::default()
    };
    let across = |failover: Fault| {
        let marks = [mark(failover, None, 21, u64::MAX / 1_000_000)];
        reentry(&check(&h, (&marks, &nodes), &CONFIG, 40_000_000))
    };
    let explained = across(failover);
    assert!(explained.excused, "{explained:?}");
    assert_eq!(explained.rule, Some(issuers::STALE_EPOCH));
    let elsewhere = across(Fault::Failover {
        group: 1,
        restart_after_ms: None,
        split: None,
        promote_after_ms: None,
    });
    assert!(!elsewhere.excused, "{elsewhere:?}");
    // A failover before the old epoch was granted explains nothing.
    let early = Fault::Failover {
        group: 0,
        restart_after_ms: None,
        split: None,
        promote_after_ms: None,
    };
    let before = reentry(&check_ms(&h, &[mark(early, None, 2, 3)], 40));
    assert!(!before.excused, "{before:?}");
}

#[test]
fn a_re_entry_with_a_new_token_is_excused_only_by_its_fence_key_evicted_under_it() {
    // Process 0 was granted token 9 and re-entered with token 7: the epoch's fence key
    // was gone, so the script issued a token from its (slow) clock.
    let mut h = vec![acquired(20, 0, 9, Access::Exclusive)];
    h.push(ev(26, 0, HistKind::Reentered { token: 7, hold: 0 }));
    h.push(ev(30, 0, HistKind::Released));
    let evict = |key: &str, at_ms: u64| {
        let fault = Fault::Evict {
            node: 0,
            policy: crate::world::faults::EvictionPolicy::VolatileRandom,
            keys: 1,
            evicted: vec![key.to_owned()],
        };
        mark(fault, None, at_ms, at_ms)
    };
    let under = reentry(&check_ms(&h, &[evict("leasehold:{l}:fence", 23)], 40));
    assert!(under.excused, "{under:?}");
    assert_eq!(under.rule, Some(issuers::FENCE_EVICTED));
    // Another lock's fence key, the lock key itself, or an eviction before the epoch's
    // request or after the re-entry explains nothing.
    for (key, at_ms) in [
        ("leasehold:{other}:fence", 23),
        ("leasehold:{l}", 23),
        ("leasehold:{l}:fence", 10),
        ("leasehold:{l}:fence", 28),
    ] {
        let found = reentry(&check_ms(&h, &[evict(key, at_ms)], 40));
        assert!(!found.excused, "{key} at {at_ms} ms: {found:?}");
    }
}
