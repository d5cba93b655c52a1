//! The token rule on hand-made grants: which node issued a token, and whether its clock and
//! fence key explain one that did not exceed an earlier token.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::engine::clock::ClockChange;
use crate::world::calls::{LockOp, OpKind};

const MS: u64 = 1_000_000;

fn clock(jumps: &[(u64, i64)]) -> ClockModel {
    let mut c = ClockModel::new(NODE_CLOCK_BASE, false);
    for &(at_ms, by_ms) in jumps {
        c.apply(at_ms * MS, ClockChange::Jump(by_ms * MS as i64));
    }
    c
}

/// The lock every hold of these cases is of.
const LOCK: &str = "l";

fn nodes(clocks: Vec<ClockModel>) -> Nodes {
    Nodes {
        persistence: vec![Persistence::None; clocks.len()],
        clocks,
        groups: Vec::new(),
        fence_margin: Duration::from_secs(60),
        ..Nodes::default()
    }
}

/// `proc` calls `node` at `at_ms` and is granted `token` 1 ms later; its hold.
fn granted(proc: usize, node: NodeId, at_ms: u64, token: u64) -> (Vec<HistEvent>, Hold) {
    let id = (proc as u64) << 32 | at_ms;
    let event = |at, kind| HistEvent {
        at,
        proc,
        incarnation: 0,
        lock: "l".into(),
        kind,
    };
    let op = LockOp {
        family: Family::Mutex,
        kind: OpKind::Acquire,
        hold: id,
        owner: 0,
        ttl_ms: 1_000,
        queued: false,
        entry_ms: 0,
    };
    let history = vec![
        event(
            at_ms * MS,
            HistKind::Call {
                id,
                target: Target::Node(node),
                op,
            },
        ),
        event(
            (at_ms + 1) * MS,
            HistKind::Return {
                id,
                reply: LockReply::Granted { token },
            },
        ),
    ];
    (history, hold(proc, at_ms, token))
}

/// `proc`'s exclusive hold of `token`, requested at `at_ms` and granted 1 ms later.
fn hold(proc: usize, at_ms: u64, token: u64) -> Hold {
    Hold {
        proc,
        incarnation: 0,
        token,
        access: crate::world::history::Access::Exclusive,
        requested: at_ms * MS,
        sent: at_ms * MS,
        granted_at: None,
        nodes: Vec::new(),
        start: (at_ms + 1) * MS,
        end: (at_ms + 50) * MS,
        by_lost: false,
        ids: Vec::new(),
    }
}

fn explain(
    nodes: &Nodes,
    marks: &[FaultMark],
    a: (usize, NodeId, u64),
    b: (usize, NodeId, u64),
) -> Option<(&'static str, String)> {
    let token_at = |node: NodeId, at_ms: u64| wall_us(&nodes.clocks[node], at_ms * MS) as u64;
    let (mut history, earlier) = granted(a.0, a.1, a.2, token_at(a.1, a.2));
    // The later grant's token is what its node's clock read, without `last + 1`: the
    // shape of a token that went backwards.
    let (later_events, later) = granted(b.0, b.1, b.2, token_at(b.1, b.2));
    assert!(
        later.token <= earlier.token,
        "the case must put tokens out of order"
    );
    history.extend(later_events);
    nodes.explain_token((&Issuers::read(&history), LOCK), (&earlier, &later), marks)
}

fn mark(fault: Fault, at_ms: u64) -> FaultMark {
    FaultMark {
        fault,
        proc: None,
        from: at_ms * MS,
        until: u64::MAX,
    }
}

/// n0's clock steps back 500 ms at 150 ms.
fn step_back_500_at_150() -> FaultMark {
    mark(
        Fault::NodeClockJump {
            node: 0,
            by_ms: -500,
        },
        150,
    )
}

#[test]
fn a_step_back_on_a_node_that_kept_its_fence_key_explains_nothing() {
    // n0 steps back 500 ms at 150 ms; its fence key still holds the earlier token, so
    // a correct script issues last + 1: a token at or below it is a bug.
    let n = nodes(vec![clock(&[(150, -500)])]);
    let jump = step_back_500_at_150();
    assert_eq!(explain(&n, &[jump], (0, 0, 100), (1, 0, 200)), None);
}

#[test]
fn an_eviction_of_the_fence_key_with_the_clock_behind_explains_it() {
    // n0 steps back 500 ms, then evicts a key: its own fence key explains the token
    // from its clock alone; the lock key, or another lock's fence key, does not.
    let n = nodes(vec![clock(&[(150, -500)])]);
    let jump = step_back_500_at_150();
    let evict = |key: &str| {
        mark(
            Fault::Evict {
                node: 0,
                policy: crate::world::faults::EvictionPolicy::VolatileRandom,
                keys: 1,
                evicted: vec![key.to_owned()],
            },
            160,
        )
    };
    let fence = format!("leasehold:{{{LOCK}}}:fence");
    let marks = [jump.clone(), evict(&fence)];
    let (rule, why) = explain(&n, &marks, (0, 0, 100), (1, 0, 200)).expect("explained");
    assert_eq!(rule, FENCE_EVICTED);
    assert!(why.contains(&fence) && why.contains("n0 evicted"), "{why}");
    for other in [
        format!("leasehold:{{{LOCK}}}"),
        "leasehold:{other}:fence".into(),
    ] {
        let marks = [jump.clone(), evict(&other)];
        assert_eq!(
            explain(&n, &marks, (0, 0, 100), (1, 0, 200)),
            None,
            "{other}"
        );
    }
}

#[test]
fn a_restart_that_lost_the_fence_key_with_the_clock_behind_explains_it() {
    let n = nodes(vec![clock(&[(150, -500)])]);
    let marks = [
        mark(
            Fault::NodeClockJump {
                node: 0,
                by_ms: -500,
            },
            150,
        ),
        mark(
            Fault::NodeCrash {
                node: 0,
                restart_after_ms: Some(10),
            },
            160,
        ),
    ];
    let (rule, why) = explain(&n, &marks, (0, 0, 100), (1, 0, 200)).expect("explained");
    assert_eq!(rule, STATE_LOST);
    assert!(
        why.contains("from n0") && why.contains("node-crash"),
        "{why}"
    );
    // A step back too small to reach the earlier token does not: n0's clock read
    // 180 ms of true time at the later grant, past the token it issued at 100 ms, so a
    // token at or below that one came from no clock (here: the earlier token again).
    let n = nodes(vec![clock(&[(150, -20)])]);
    let small = [
        mark(
            Fault::NodeClockJump {
                node: 0,
                by_ms: -20,
            },
            150,
        ),
        marks[1].clone(),
    ];
    let (history, earlier) = granted(0, 0, 100, wall_us(&n.clocks[0], 100 * MS) as u64);
    let (later_events, later) = granted(1, 0, 200, earlier.token);
    let all: Vec<HistEvent> = history.into_iter().chain(later_events).collect();
    assert_eq!(
        n.explain_token((&Issuers::read(&all), LOCK), (&earlier, &later), &small),
        None
    );
}

#[test]
fn another_master_behind_the_one_that_issued_the_earlier_token_explains_it() {
    // RedLock's masters keep their own fence keys: n0 runs 5 s ahead, so n1's correct
    // clock issues a lower token; the evidence names both and the cause.
    let n = nodes(vec![clock(&[(0, 5_000)]), clock(&[])]);
    let jump = mark(
        Fault::NodeClockJump {
            node: 0,
            by_ms: 5_000,
        },
        0,
    );
    let (rule, why) = explain(&n, &[jump], (0, 0, 100), (1, 1, 200)).expect("explained");
    assert_eq!(rule, OTHER_NODE);
    assert!(
        why.contains("from n1") && why.contains("not above token"),
        "{why}"
    );
    assert!(
        why.contains("n0's clock read") && why.contains("+5000 ms"),
        "{why}"
    );
}

#[test]
fn another_master_with_an_agreeing_clock_explains_nothing() {
    // Both clocks read true time, so a token from n0 above what n1 read later came
    // from no clock: a bug (here n0's token inflated by 1 s), not a disagreement.
    let n = nodes(vec![clock(&[]), clock(&[])]);
    let (mut history, earlier) = granted(
        0,
        0,
        100,
        wall_us(&n.clocks[0], 100 * MS) as u64 + 1_000_000,
    );
    let (later_events, later) = granted(1, 1, 200, wall_us(&n.clocks[1], 200 * MS) as u64);
    assert!(later.token <= earlier.token);
    history.extend(later_events);
    assert_eq!(
        n.explain_token((&Issuers::read(&history), LOCK), (&earlier, &later), &[]),
        None
    );
}

#[test]
fn a_grant_with_no_recorded_call_is_attributed_to_the_deployment_targets() {
    // The read-write lock's scripts are not recorded: its grants may come from any
    // target the clients use, here node 1, whose clock is 5 s behind node 0's.
    let mut n = nodes(vec![clock(&[(0, 5_000)]), clock(&[])]);
    n.targets = vec![Target::Node(0), Target::Node(1)];
    let earlier = hold(0, 100, wall_us(&n.clocks[0], 100 * MS) as u64);
    let later = hold(1, 200, wall_us(&n.clocks[1], 200 * MS) as u64);
    let (rule, _) = n
        .explain_token((&Issuers::default(), LOCK), (&earlier, &later), &[])
        .expect("explained");
    assert_eq!(rule, OTHER_NODE);
    // With no target named, nothing explains it.
    n.targets.clear();
    assert_eq!(
        n.explain_token((&Issuers::default(), LOCK), (&earlier, &later), &[]),
        None
    );
}

#[test]
fn an_owner_s_old_epoch_is_excused_only_by_a_fault_that_can_keep_it_where_it_was_granted() {
    // The epoch was granted on n0 (group 0 with n1; n2 alone in group 1) at 100 ms and
    // re-entered at 400 ms.
    let mut n = nodes(vec![clock(&[]), clock(&[]), clock(&[])]);
    n.groups = vec![vec![0, 1], vec![2]];
    let (history, own) = granted(0, 0, 100, 7);
    let issuers = Issuers::read(&history);
    let (_, again) = granted(0, 0, 400, 7);
    let later = (again.token, again.start, again.label());
    let explain = |n: &Nodes, marks: &[FaultMark]| {
        n.explain_stale_epoch((&issuers, &own), (later.0, later.1, &later.2), marks)
    };
    assert_eq!(explain(&n, &[]), None);
    let failover = |group| {
        mark(
            Fault::Failover {
                group,
                restart_after_ms: None,
                split: None,
                promote_after_ms: None,
            },
            300,
        )
    };
    let (rule, why) = explain(&n, &[failover(0)]).expect("explained");
    assert_eq!(rule, STALE_EPOCH);
    assert!(why.contains("failover of group 0"), "{why}");
    // Another group's failover keeps nothing of n0's.
    assert_eq!(explain(&n, &[failover(1)]), None);
    // A crash and restart (at 300 and 350 ms) keeps the epoch only where the node's
    // log can keep the grant and lose the release, and only on the node that had it.
    let crash = |node| FaultMark {
        until: 350 * MS,
        ..mark(
            Fault::NodeCrash {
                node,
                restart_after_ms: Some(50),
            },
            300,
        )
    };
    for (persistence, excused) in [
        (Persistence::None, false),
        (Persistence::AofAlways, false),
        (Persistence::AofEverySec, true),
    ] {
        n.persistence = vec![persistence; 3];
        assert_eq!(
            explain(&n, &[crash(0)]).is_some(),
            excused,
            "{persistence:?}"
        );
        assert_eq!(explain(&n, &[crash(2)]), None, "{persistence:?}");
    }
}

#[test]
fn a_node_whose_fence_key_had_the_earlier_token_is_not_excused_by_its_clock() {
    // n0 runs 5 s ahead and grants first; n1 (a promoted replica, say) grants later with
    // a lower token from its correct clock. Where n1's run is witnessed with a fence key
    // that lacked the earlier token (replication had not brought it), its clock explains
    // the token; where the fence key already held the earlier token, the script would have
    // issued above it, so nothing about n1's clock does.
    let n = nodes(vec![clock(&[(0, 5_000)]), clock(&[])]);
    let jump = mark(
        Fault::NodeClockJump {
            node: 0,
            by_ms: 5_000,
        },
        0,
    );
    let explain_with = |fence: Option<u64>| {
        let (mut history, earlier) = granted(0, 0, 100, wall_us(&n.clocks[0], 100 * MS) as u64);
        let (later_events, later) = granted(1, 1, 200, wall_us(&n.clocks[1], 200 * MS) as u64);
        history.extend(later_events);
        history.insert(
            history.len() - 1,
            HistEvent {
                at: 200 * MS,
                proc: 1,
                incarnation: 0,
                lock: LOCK.into(),
                kind: HistKind::Ran {
                    id: 1 << 32 | 200,
                    reply: Some(LockReply::Granted { token: later.token }),
                    node: 1,
                    clock_ms: 200,
                    fence,
                },
            },
        );
        n.explain_token(
            (&Issuers::read(&history), LOCK),
            (&earlier, &later),
            std::slice::from_ref(&jump),
        )
        .map(|(rule, _)| rule)
    };
    let earlier_token = wall_us(&n.clocks[0], 100 * MS) as u64;
    assert_eq!(explain_with(None), Some(OTHER_NODE));
    assert_eq!(explain_with(Some(0)), Some(OTHER_NODE));
    assert_eq!(explain_with(Some(earlier_token - 1)), Some(OTHER_NODE));
    assert_eq!(explain_with(Some(earlier_token)), None);
}
