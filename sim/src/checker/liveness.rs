//! Liveness: a waiter that sees the lock free for longer than the bound, while nothing
//! hampers it, starved.
//!
//! Invariant: time the lock was held (believed, or granted and not yet believed) and time
//! a fault hampered the waiter count as covered; only the longest uncovered stretch of a
//! wait is judged. One fault is sized on top (rule [`PROMOTED_BEHIND`]): a failover whose
//! group's node clocks disagree. Replication carries each expiry as an absolute time on the
//! master's clock, and a promoted node reads it on its own, so a lock the old master had
//! released or let expire may linger on the new one by as much as the promoted clock is
//! behind; a wait on that group after the failover is excused by at most the widest gap
//! between its nodes' clocks at the wait's end, and no more.

use std::time::Duration;

use crate::world::faults::Fault;

use super::Nodes;
use super::problems::{Judge, ProblemKind, Reach};
use super::timeline::Timeline;

/// The rule that excuses a wait by the lingering of replicated expiries on a promoted node
/// whose clock is behind its old master's.
pub const PROMOTED_BEHIND: &str = "promoted-clock-behind";

/// Waits that saw the lock free for longer than the bound while nothing hampered them.
pub(super) fn liveness(
    t: &Timeline,
    nodes: &Nodes,
    liveness_bound: Duration,
    judge: &mut Judge<'_>,
) {
    let bound = u64::try_from(liveness_bound.as_nanos()).unwrap_or(u64::MAX);
    for wait in &t.waits {
        // Time the waiter was hampered counts as covered, like time someone held the lock.
        // Only stretches that meet the wait matter (a long run has thousands of holds per
        // lock, and sorting them all for every wait made this check quadratic).
        let meets = |&(from, until): &(u64, u64)| until > wait.start && from < wait.stop;
        let mut covered: Vec<(u64, u64)> = t
            .holds
            .get(&wait.lock)
            .map(|l| l.iter().map(|h| (h.start, h.end)).filter(meets).collect())
            .unwrap_or_default();
        covered.extend(
            t.impairments
                .iter()
                .filter(|&&(p, _, _)| p == wait.who.0)
                .map(|&(_, from, until)| (from, until))
                .filter(meets),
        );
        // So does time the lock was granted to someone not yet believing it.
        covered.extend(
            t.unbelieved
                .iter()
                .filter(|(lock, _, _)| *lock == wait.lock)
                .map(|&(_, from, until)| (from, until))
                .filter(meets),
        );
        covered.sort_unstable();
        judge.case(ProblemKind::Starvation, true);
        let gap = longest_free_gap(&covered, wait.start, wait.stop);
        if gap > bound {
            let excuse = promoted_behind(nodes, judge, wait.stop)
                .filter(|&(lag, _)| gap <= bound.saturating_add(lag))
                .map(|(_, evidence)| (PROMOTED_BEHIND, evidence));
            judge.add_explained(
                ProblemKind::Starvation,
                &wait.lock,
                wait.stop,
                (&[(wait.who, wait.start, wait.stop)], Reach::Lasting),
                (format!(
                    "c{}.{} waited {:.0} ms from t={:.3}s with the lock free for {:.0} ms (bound {} ms)",
                    wait.who.0,
                    wait.who.1,
                    (wait.stop - wait.start) as f64 / 1e6,
                    wait.start as f64 / 1e9,
                    gap as f64 / 1e6,
                    liveness_bound.as_millis()
                ), excuse),
            );
        }
    }
}

/// The widest gap, ns, between the clocks of a group that failed over before `at`, at
/// `at`, with its evidence (the failover, and the two nodes' clocks); `None` without one.
fn promoted_behind(nodes: &Nodes, judge: &Judge<'_>, at: u64) -> Option<(u64, String)> {
    judge
        .faults()
        .iter()
        .filter(|m| m.from <= at)
        .filter_map(|m| match m.fault {
            Fault::Failover { group, .. } => Some((m, group, nodes.groups.get(group)?)),
            _ => None,
        })
        .filter_map(|(m, index, group)| {
            let read = |n: &usize| Some((nodes.clocks.get(*n)?.local_nanos(at), *n));
            let ahead = group.iter().filter_map(read).max()?;
            let behind = group.iter().filter_map(read).min()?;
            let lag = ahead.0 - behind.0;
            (lag > 0).then(|| {
                let evidence = format!(
                    "failover of group {} at t={:.3}s; n{}'s clock {:.0} ms behind n{}'s at t={:.3}s",
                    index,
                    m.from as f64 / 1e9,
                    behind.1,
                    lag as f64 / 1e6,
                    ahead.1,
                    at as f64 / 1e9
                );
                (lag, evidence)
            })
        })
        .max_by_key(|(lag, _)| *lag)
}

/// The longest stretch of `[start, stop]` not covered by any of the `covered` intervals
/// (sorted by start).
fn longest_free_gap(covered: &[(u64, u64)], start: u64, stop: u64) -> u64 {
    let mut cursor = start;
    let mut longest = 0;
    for &(from, until) in covered {
        if until <= cursor || from >= stop {
            continue;
        }
        if from > cursor {
            longest = longest.max(from - cursor);
        }
        cursor = cursor.max(until);
    }
    if stop > cursor {
        longest = longest.max(stop - cursor);
    }
    longest
}
