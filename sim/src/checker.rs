//! Judges a history: mutual exclusion, fencing-token monotonicity and liveness.
//!
//! Invariant: the verdict depends only on the history in true (virtual) time. Mutual
//! exclusion is over the intervals clients *believed* they held; a fenced resource that
//! rejected every stale write turns an exclusion failure into "safe with fencing"; tokens
//! that fail to grow across grants (or are reused by two holders) are violations because
//! fencing then protects nothing; a waiter that sees the lock free for longer than the
//! liveness bound, while nothing hampers it, starved.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::history::{HistEvent, HistKind};
use crate::net::ProcId;

/// How bad a run was, in increasing severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Verdict {
    /// No overlapping holds, no stale writes, no starvation.
    Safe,
    /// Holds overlapped (mutual exclusion failed), but the fenced resource rejected every
    /// stale write: an unfenced resource would have been corrupted.
    SafeWithFencing,
    /// A waiter saw the lock free for longer than the liveness bound.
    Starvation,
    /// Fencing itself failed: a grant's token did not exceed the previous grant's, or two
    /// holders wrote with the same token.
    Violation,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Safe => "safe",
            Self::SafeWithFencing => "safe with fencing",
            Self::Starvation => "starvation",
            Self::Violation => "VIOLATION",
        })
    }
}

/// Checker parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckConfig {
    /// Longest a waiter may see the lock free (by beliefs) without acquiring it.
    pub liveness_bound: Duration,
}

/// A hold as the client believed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hold {
    /// Process.
    pub proc: ProcId,
    /// Incarnation.
    pub incarnation: u32,
    /// Fencing token.
    pub token: u64,
    /// Start (lock() returned), virtual ns.
    pub start: u64,
    /// End (unlock called, lost observed, crash, or end of run), virtual ns.
    pub end: u64,
    /// Ended by the lost-lease signal.
    pub by_lost: bool,
}

/// Two holds that overlapped in true time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Overlap {
    /// Lock name.
    pub lock: String,
    /// The earlier hold.
    pub first: Hold,
    /// The later hold.
    pub second: Hold,
}

/// What the checker found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Findings {
    /// Successful acquisitions.
    pub acquisitions: u64,
    /// Acquire attempts that failed.
    pub failed_acquires: u64,
    /// Holds ended by the lost-lease signal.
    pub lost: u64,
    /// Writes at the resource.
    pub writes: u64,
    /// Writes the fenced resource rejected (an unfenced one would have accepted them).
    pub stale_rejected: u64,
    /// Overlapping believed holds (first few).
    pub overlaps: Vec<Overlap>,
    /// Number of overlapping pairs.
    pub overlap_count: u64,
    /// Fencing failures, described.
    pub token_problems: Vec<String>,
    /// Starved waits, described.
    pub starvations: Vec<String>,
    /// Smallest gap between a lost-lease signal and the next holder's grant, in ms
    /// (how early the signal came); `None` if no lost signal preceded another grant.
    pub lost_margin_ms: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
}

/// How many overlaps to keep in full.
const OVERLAPS_KEPT: usize = 5;

/// Checks `history` of a run that ended at virtual time `end`.
pub fn check(history: &[HistEvent], config: &CheckConfig, end: u64) -> Findings {
    let mut holds: BTreeMap<String, Vec<Hold>> = BTreeMap::new();
    let mut open: BTreeMap<(ProcId, u32), Vec<(String, usize)>> = BTreeMap::new();
    let mut waits: Vec<(String, ProcId, u32, u64, u64)> = Vec::new();
    let mut open_waits: BTreeMap<(ProcId, u32), Vec<(String, u64)>> = BTreeMap::new();
    let mut impairments: Vec<(ProcId, u64, u64)> = Vec::new();
    let mut tokens_by_writer: BTreeMap<(String, u64), Vec<(ProcId, u32)>> = BTreeMap::new();
    let mut f = Findings {
        acquisitions: 0,
        failed_acquires: 0,
        lost: 0,
        writes: 0,
        stale_rejected: 0,
        overlaps: Vec::new(),
        overlap_count: 0,
        token_problems: Vec::new(),
        starvations: Vec::new(),
        lost_margin_ms: None,
        verdict: Verdict::Safe,
    };
    let close_wait = |open_waits: &mut BTreeMap<(ProcId, u32), Vec<(String, u64)>>,
                      waits: &mut Vec<(String, ProcId, u32, u64, u64)>,
                      ev: &HistEvent| {
        if let Some(list) = open_waits.get_mut(&(ev.proc, ev.incarnation)) {
            let (done, keep): (Vec<_>, Vec<_>) = list
                .drain(..)
                .partition(|(lock, _)| ev.lock.is_empty() || *lock == ev.lock);
            *list = keep;
            for (lock, start) in done {
                waits.push((lock, ev.proc, ev.incarnation, start, ev.at));
            }
        }
    };
    for ev in history {
        let who = (ev.proc, ev.incarnation);
        match &ev.kind {
            HistKind::WaitStart => open_waits
                .entry(who)
                .or_default()
                .push((ev.lock.clone(), ev.at)),
            HistKind::Acquired { token } => {
                f.acquisitions += 1;
                close_wait(&mut open_waits, &mut waits, ev);
                let list = holds.entry(ev.lock.clone()).or_default();
                list.push(Hold {
                    proc: ev.proc,
                    incarnation: ev.incarnation,
                    token: *token,
                    start: ev.at,
                    end,
                    by_lost: false,
                });
                open.entry(who)
                    .or_default()
                    .push((ev.lock.clone(), list.len() - 1));
            }
            HistKind::Reentered { token } => {
                let epoch = open
                    .get(&who)
                    .and_then(|list| list.iter().find(|(lock, _)| *lock == ev.lock))
                    .and_then(|(lock, index)| holds.get(lock).and_then(|l| l.get(*index)));
                match epoch {
                    Some(held) if held.token == *token => {}
                    Some(held) => f.token_problems.push(format!(
                        "{}: re-entry by c{}.{} at t={:.3}s got token {token}, not its epoch's {}",
                        ev.lock,
                        ev.proc,
                        ev.incarnation,
                        ev.at as f64 / 1e9,
                        held.token
                    )),
                    None => f.token_problems.push(format!(
                        "{}: re-entry by c{}.{} at t={:.3}s (token {token}) while it held no epoch",
                        ev.lock,
                        ev.proc,
                        ev.incarnation,
                        ev.at as f64 / 1e9
                    )),
                }
            }
            HistKind::AcquireFailed { .. } => {
                f.failed_acquires += 1;
                close_wait(&mut open_waits, &mut waits, ev);
            }
            HistKind::Released | HistKind::Lost | HistKind::Crashed => {
                let by_lost = ev.kind == HistKind::Lost;
                f.lost += u64::from(by_lost);
                if ev.kind == HistKind::Crashed {
                    close_wait(&mut open_waits, &mut waits, ev);
                }
                if let Some(list) = open.get_mut(&who) {
                    let (done, keep): (Vec<_>, Vec<_>) = list
                        .drain(..)
                        .partition(|(lock, _)| ev.lock.is_empty() || *lock == ev.lock);
                    *list = keep;
                    for (lock, index) in done {
                        if let Some(hold) = holds.get_mut(&lock).and_then(|l| l.get_mut(index)) {
                            hold.end = ev.at;
                            hold.by_lost = by_lost;
                        }
                    }
                }
            }
            HistKind::Impaired { until } => impairments.push((ev.proc, ev.at, *until)),
            HistKind::Write {
                token, accepted, ..
            } => {
                f.writes += 1;
                if *accepted {
                    let writers = tokens_by_writer
                        .entry((ev.lock.clone(), *token))
                        .or_default();
                    if !writers.contains(&who) {
                        writers.push(who);
                    }
                } else {
                    f.stale_rejected += 1;
                }
            }
        }
    }
    for (who, list) in open_waits {
        for (lock, start) in list {
            waits.push((lock, who.0, who.1, start, end));
        }
    }
    for ((lock, token), writers) in &tokens_by_writer {
        if writers.len() > 1 {
            f.token_problems.push(format!(
                "{lock}: token {token} accepted from {} different holders {writers:?}",
                writers.len()
            ));
        }
    }
    for (lock, list) in &mut holds {
        list.sort_by_key(|h| (h.start, h.proc, h.incarnation));
        check_holds(lock, list, &mut f);
    }
    let bound = u64::try_from(config.liveness_bound.as_nanos()).unwrap_or(u64::MAX);
    for (lock, proc, incarnation, start, stop) in waits {
        // Time the waiter was hampered counts as covered, like time someone held the lock.
        let mut covered: Vec<(u64, u64)> = holds
            .get(&lock)
            .map(|l| l.iter().map(|h| (h.start, h.end)).collect())
            .unwrap_or_default();
        covered.extend(
            impairments
                .iter()
                .filter(|&&(p, _, _)| p == proc)
                .map(|&(_, from, until)| (from, until)),
        );
        covered.sort_unstable();
        let gap = longest_free_gap(&covered, start, stop);
        if gap > bound {
            f.starvations.push(format!(
                "{lock}: c{proc}.{incarnation} waited {:.0} ms from t={:.3}s with the lock free for {:.0} ms (bound {} ms)",
                (stop - start) as f64 / 1e6,
                start as f64 / 1e9,
                gap as f64 / 1e6,
                config.liveness_bound.as_millis()
            ));
        }
    }
    f.verdict = if !f.token_problems.is_empty() {
        Verdict::Violation
    } else if !f.starvations.is_empty() {
        Verdict::Starvation
    } else if f.overlap_count > 0 || f.stale_rejected > 0 {
        Verdict::SafeWithFencing
    } else {
        Verdict::Safe
    };
    f
}

/// Overlaps, token growth and lost-signal margins of one lock's holds (sorted by start).
fn check_holds(lock: &str, list: &[Hold], f: &mut Findings) {
    let mut latest: Option<&Hold> = None;
    for (i, hold) in list.iter().enumerate() {
        if let Some(prev) = list[..i].last()
            && hold.token <= prev.token
            && (prev.proc, prev.incarnation) != (hold.proc, hold.incarnation)
        {
            f.token_problems.push(format!(
                "{lock}: grant to c{}.{} at t={:.3}s got token {} <= previous grant's {} (c{}.{})",
                hold.proc,
                hold.incarnation,
                hold.start as f64 / 1e9,
                hold.token,
                prev.token,
                prev.proc,
                prev.incarnation
            ));
        }
        if let Some(before) = latest
            && before.end > hold.start
        {
            f.overlap_count += 1;
            if f.overlaps.len() < OVERLAPS_KEPT {
                f.overlaps.push(Overlap {
                    lock: lock.to_owned(),
                    first: before.clone(),
                    second: hold.clone(),
                });
            }
        }
        if latest.is_none_or(|l| hold.end > l.end) {
            latest = Some(hold);
        }
        if hold.by_lost
            && let Some(next) = list[i + 1..].iter().find(|n| n.start >= hold.end)
        {
            let margin = (next.start - hold.end) as f64 / 1e6;
            f.lost_margin_ms = Some(f.lost_margin_ms.map_or(margin, |m: f64| m.min(margin)));
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

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
    };

    /// `proc` holds `token` from `from_ms` until it releases at `to_ms`.
    fn hold(from_ms: u64, to_ms: u64, proc: ProcId, token: u64) -> [HistEvent; 2] {
        [
            ev(from_ms, proc, HistKind::Acquired { token }),
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

    #[test]
    fn disjoint_holds_are_safe() {
        let h = [hold(0, 10, 0, 1), hold(11, 20, 1, 2)].concat();
        assert_eq!(check(&h, &CONFIG, 30_000_000).verdict, Verdict::Safe);
    }

    #[test]
    fn overlap_with_rejected_stale_write_is_safe_with_fencing() {
        let h = vec![
            ev(0, 0, HistKind::Acquired { token: 1 }),
            ev(5, 1, HistKind::Acquired { token: 2 }),
            ev(
                6,
                1,
                HistKind::Write {
                    token: 2,
                    highest: 1,
                    accepted: true,
                },
            ),
            ev(
                7,
                0,
                HistKind::Write {
                    token: 1,
                    highest: 2,
                    accepted: false,
                },
            ),
            ev(8, 0, HistKind::Released),
            ev(9, 1, HistKind::Released),
        ];
        let f = check(&h, &CONFIG, 10_000_000);
        assert_eq!(f.verdict, Verdict::SafeWithFencing);
        assert_eq!(f.stale_rejected, 1);
        assert_eq!(f.overlap_count, 1);
    }

    #[test]
    fn token_regression_is_a_violation() {
        let h = [hold(0, 1, 0, 5), hold(2, 3, 1, 5)].concat();
        assert_eq!(check(&h, &CONFIG, 4_000_000).verdict, Verdict::Violation);
    }

    #[test]
    fn waiting_on_a_free_lock_starves() {
        let h = vec![ev(0, 1, HistKind::WaitStart), timed_out(5_000, 1)];
        assert_eq!(
            check(&h, &CONFIG, 6_000_000_000).verdict,
            Verdict::Starvation
        );
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
        assert_eq!(check(&h, &CONFIG, 6_000_000_000).verdict, Verdict::Safe);
        let h = waited_impaired_until(1_000_000_000);
        assert_eq!(
            check(&h, &CONFIG, 6_000_000_000).verdict,
            Verdict::Starvation
        );
    }
}
