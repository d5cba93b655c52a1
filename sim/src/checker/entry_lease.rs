//! The fair line's hand-off lease: a release that hands a FairQueue lock to the head of
//! its line grants it for no longer than the head's entry has left, and never to an entry
//! already expired (`lock/scripts/release.lua`: `lease = min(ttl, deadline - now)`, and an
//! entry whose deadline passed is skipped as a waiter that died in line).
//!
//! Why it exists: a waiter that died in line leaves an entry that lives until its
//! deadline. A hand-off past that deadline, or for longer than it, strands the lock for a
//! whole lease with nobody believing in it, a stall that a liveness bound sized for
//! crashed holders cannot tell from a correct one. The node's hand-off message names the
//! grantee and the lease ([`HistKind::HandedOff`]), so the rule is judged on the server's
//! own effect.
//!
//! Invariant: the entry's deadline is bounded by what the history shows. Each queued
//! attempt of the grantee's hold ran on the server when the simulator witnessed it run,
//! and otherwise no later than its answer (or than the hand-off, if that came first), and
//! set the deadline one entry timeout after it, on the node's clock. So the rule judges
//! only a hand-off whose node's clock can be read across that span on its own terms: no
//! step back of that clock in it, and the attempt ran on the node that handed off (one
//! that ran on a master the line has since failed over from set its deadline on another
//! clock; without the witness, no failover before the hand-off).
//!
//! The mutex's line and the read-write lock's (whose releases hand a writer head, or each
//! reader of a run, the same capped lease: `rw_*_release.lua`); not the semaphore's, whose
//! line hands out several permits at once by reservation, judged by capacity
//! (`capacity.rs`) instead.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::NodeId;
use crate::world::calls::{self, Family, LockOp, OpKind};
use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent, HistKind};

use super::issuers::Nodes;
use super::problems::{Judge, ProblemKind, Reach};
use super::timeline::Who;

/// Slack on the node's clock, ms: the scripts read the clock in whole milliseconds and
/// format the deadline and the lease as integers.
pub(super) const TOLERANCE_MS: u64 = 2;

/// A queued acquire attempt: whose, on which lock (by name: a read-write lock's releases
/// name another of its keys than its acquires), for which hold, sent and answered when.
struct Attempt<'a> {
    who: Who,
    lock: &'a str,
    op: LockOp,
    sent: u64,
    answered: Option<u64>,
    /// When and where a node ran it, where the simulator witnessed it.
    ran: Option<(u64, NodeId)>,
}

/// Hand-offs that granted past their grantee's entry deadline.
pub(super) fn hand_off_leases(
    history: &[HistEvent],
    nodes: &Nodes,
    faults: &[FaultMark],
    entry_timeout: Duration,
    judge: &mut Judge<'_>,
) {
    let mut attempts: BTreeMap<u64, Attempt<'_>> = BTreeMap::new();
    let entry_ms = u64::try_from(entry_timeout.as_millis()).unwrap_or(u64::MAX);
    // With the server's witness, an attempt not yet seen running when the hand-off ran
    // had not run: it set no deadline.
    let witnessed = history
        .iter()
        .any(|ev| matches!(ev.kind, HistKind::Ran { .. }));
    for ev in history {
        match &ev.kind {
            HistKind::Call { id, op, .. }
                if op.family != Family::Permit && op.kind == OpKind::Acquire && op.queued =>
            {
                attempts.insert(
                    *id,
                    Attempt {
                        who: (ev.proc, ev.incarnation),
                        lock: calls::lock_name(&ev.lock),
                        op: *op,
                        sent: ev.at,
                        answered: None,
                        ran: None,
                    },
                );
            }
            HistKind::Return { id, .. } => {
                if let Some(a) = attempts.get_mut(id) {
                    a.answered = Some(ev.at);
                }
            }
            HistKind::Ran { id, node, .. } => {
                if let Some(a) = attempts.get_mut(id) {
                    a.ran = Some((ev.at, *node));
                }
            }
            HistKind::HandedOff {
                hold,
                lease_ms,
                node,
                ..
            } => {
                let t = ev.at;
                // The latest moment an attempt of the grantee's hold can have run before
                // the hand-off, and whose attempt it was.
                let Some((ran, who, ran_on)) = attempts
                    .values()
                    .filter(|a| {
                        a.lock == calls::lock_name(&ev.lock)
                            && a.op.hold == *hold
                            && a.sent <= t
                            && (a.ran.is_some() || !witnessed)
                    })
                    .map(|a| {
                        let at = a.ran.map(|r| r.0).or(a.answered).unwrap_or(t).min(t);
                        (at, a.who, a.ran.map(|r| r.1))
                    })
                    .max()
                else {
                    continue;
                };
                // The entry's deadline is on the clock of the node its attempt ran on: one
                // the line failed over from cannot be read on the hand-off node's (without
                // the witness, any failover before the hand-off may have moved it).
                let moved = match ran_on {
                    Some(n) => n != *node,
                    None => faults
                        .iter()
                        .any(|m| matches!(m.fault, Fault::Failover { .. }) && m.from <= t),
                };
                let unreadable = moved
                    || faults.iter().any(|m| match m.fault {
                        Fault::NodeClockJump { node: n, by_ms } => {
                            n == *node && by_ms < 0 && m.from >= ran && m.from <= t
                        }
                        _ => false,
                    });
                judge.case(ProblemKind::HandOffPastEntry, !unreadable);
                let Some(clock) = nodes.clocks.get(*node).filter(|_| !unreadable) else {
                    continue;
                };
                let local_ms = |at: u64| clock.local_nanos(at) / 1_000_000;
                let deadline = local_ms(ran) + entry_ms + TOLERANCE_MS;
                let until = local_ms(t) + lease_ms;
                if until <= deadline {
                    continue;
                }
                judge.add_explained(
                    ProblemKind::HandOffPastEntry,
                    calls::lock_name(&ev.lock),
                    t,
                    (&[(who, ran, t)], Reach::Windows),
                    (
                        format!(
                            "a release at t={:.3}s handed the lock to c{}.{}'s queued hold for {lease_ms} ms, to n{node}'s {until} ms, past its entry's deadline: at most {deadline} ms (its last queued attempt ran by t={:.3}s, plus the {entry_ms} ms entry timeout)",
                            t as f64 / 1e9,
                            who.0,
                            who.1,
                            ran as f64 / 1e9
                        ),
                        None,
                    ),
                );
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::checker::{CheckConfig, check};
    use crate::engine::clock::ClockModel;
    use crate::model::node::NODE_CLOCK_BASE;
    use crate::world::net::Target;

    const HOLD: u64 = 7;

    fn ev_on(key: &str, at_ms: u64, kind: HistKind) -> HistEvent {
        HistEvent {
            at: at_ms * 1_000_000,
            proc: 1,
            incarnation: 0,
            lock: key.into(),
            kind,
        }
    }

    /// c1's queued attempt sent at 0 ms and answered at 1 ms, then a hand-off to its hold
    /// at `at_ms` for `lease_ms`; the entry timeout is 1 s.
    fn hand_off(at_ms: u64, lease_ms: u64, faults: &[FaultMark]) -> Vec<String> {
        hand_off_by(Family::Mutex, at_ms, lease_ms, faults)
    }

    /// [`hand_off`] by `family`'s scripts: a read-write lock's acquires name its write
    /// hash, and a reader's release (which hands off too) its readers' sorted set.
    fn hand_off_by(family: Family, at_ms: u64, lease_ms: u64, faults: &[FaultMark]) -> Vec<String> {
        let (acquired, released) = match family {
            Family::Read => ("leasehold:{l}:rw", "leasehold:{l}:rw:readers"),
            Family::Write => ("leasehold:{l}:rw", "leasehold:{l}:rw"),
            Family::Mutex | Family::Permit => ("leasehold:{l}", "leasehold:{l}"),
        };
        let ev = |at_ms, kind| ev_on(acquired, at_ms, kind);
        let op = LockOp {
            family,
            kind: OpKind::Acquire,
            hold: HOLD,
            owner: 1,
            ttl_ms: 5_000,
            queued: true,
            entry_ms: 0,
        };
        let h = [
            ev(
                0,
                HistKind::Call {
                    id: 0,
                    target: Target::Node(0),
                    op,
                },
            ),
            ev(
                1,
                HistKind::Return {
                    id: 0,
                    reply: crate::world::calls::LockReply::Denied,
                },
            ),
            ev_on(
                released,
                at_ms,
                HistKind::HandedOff {
                    hold: HOLD,
                    lease_ms,
                    node: 0,
                    token: 2,
                    clock_ms: 0,
                },
            ),
        ];
        let nodes = Nodes {
            clocks: vec![ClockModel::new(NODE_CLOCK_BASE, false)],
            ..Nodes::default()
        };
        let config = CheckConfig {
            liveness_bound: Duration::from_secs(60),
            lease_ttl: Duration::from_secs(5),
            shared_owner: false,
            fair_entry_timeout: Some(Duration::from_secs(1)),
            writer_intent: None,
            permit_wake: None,
            unfenced: false,
        };
        check(&h, (faults, &nodes), &config, 10_000_000_000)
            .problems
            .into_iter()
            .filter(|p| p.kind == ProblemKind::HandOffPastEntry)
            .map(|p| p.detail)
            .collect()
    }

    #[test]
    fn a_hand_off_within_the_entry_s_deadline_is_clean() {
        assert!(hand_off(500, 400, &[]).is_empty());
        // To the deadline itself: the lease the script computes, min(ttl, deadline - now).
        assert!(hand_off(500, 501, &[]).is_empty());
    }

    #[test]
    fn a_hand_off_to_an_expired_entry_is_a_finding() {
        let found = hand_off(1_500, 5_000, &[]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("past its entry's deadline"),
            "{}",
            found[0]
        );
    }

    #[test]
    fn a_hand_off_for_longer_than_the_entry_has_left_is_a_finding() {
        assert_eq!(hand_off(500, 700, &[]).len(), 1);
    }

    #[test]
    fn a_read_write_lock_s_hand_offs_are_judged_as_the_mutex_s() {
        for family in [Family::Read, Family::Write] {
            assert!(hand_off_by(family, 500, 400, &[]).is_empty());
            assert_eq!(hand_off_by(family, 1_500, 1_000, &[]).len(), 1);
        }
    }

    #[test]
    fn a_hand_off_after_a_failover_or_across_a_step_back_is_not_judged() {
        let mark = |fault: Fault| FaultMark {
            fault,
            proc: None,
            from: 200_000_000,
            until: 200_000_000,
        };
        let failover = mark(Fault::Failover {
            group: 0,
            restart_after_ms: None,
            split: None,
            promote_after_ms: None,
        });
        assert!(hand_off(1_500, 5_000, &[failover]).is_empty());
        let back = mark(Fault::NodeClockJump {
            node: 0,
            by_ms: -800,
        });
        assert!(hand_off(1_500, 5_000, &[back]).is_empty());
    }
}
