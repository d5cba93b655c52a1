//! Liveness: a waiter that sees the lock free for longer than the bound, while nothing
//! hampers it, starved.
//!
//! Invariant: time the lock was held (believed, or granted and not yet believed) and time
//! a fault hampered the waiter count as covered; only the longest uncovered stretch of a
//! wait is judged.

use std::time::Duration;

use super::problems::{Judge, ProblemKind, Reach};
use super::timeline::Timeline;

/// Waits that saw the lock free for longer than the bound while nothing hampered them.
pub(super) fn liveness(t: &Timeline, liveness_bound: Duration, judge: &mut Judge<'_>) {
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
        let gap = longest_free_gap(&covered, wait.start, wait.stop);
        if gap > bound {
            judge.add(
                ProblemKind::Starvation,
                &wait.lock,
                wait.stop,
                (&[(wait.who, wait.start, wait.stop)], Reach::Lasting),
                format!(
                    "c{}.{} waited {:.0} ms from t={:.3}s with the lock free for {:.0} ms (bound {} ms)",
                    wait.who.0,
                    wait.who.1,
                    (wait.stop - wait.start) as f64 / 1e6,
                    wait.start as f64 / 1e9,
                    gap as f64 / 1e6,
                    liveness_bound.as_millis()
                ),
            );
        }
    }
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
