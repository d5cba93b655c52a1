//! Exclusion: conflicting beliefs of one lock's holds, and beliefs the server-truth oracle
//! saw outlive their hold on the servers.
//!
//! Invariant: beliefs are judged in true time by each lock's access rule, whatever the
//! resource did about them; a fault can excuse a conflict only through [`super::problems`].

use std::time::Duration;

use serde::Serialize;

use crate::world::history::FaultMark;

use super::effects::{self, Belief, Overrun};
use super::issuers::Nodes;
use super::problems::{Judge, KEPT_PER_KIND, ProblemKind, Reach};
use super::timeline::{self, Hold, Timeline, Who, Written};

/// Two holds whose beliefs conflicted in true time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Overlap {
    /// Lock name.
    pub lock: String,
    /// The earlier hold (the one whose belief outlived its turn).
    pub first: Hold,
    /// The later hold.
    pub second: Hold,
}

/// What the exclusion rule measured besides its problems.
#[derive(Debug, Default)]
pub(super) struct Exclusion {
    /// Conflicting believed holds (first few).
    pub overlaps: Vec<Overlap>,
    /// Number of conflicting pairs.
    pub overlap_count: u64,
    /// Smallest gap between a lost-lease signal and the next holder's grant, in ms.
    pub lost_margin_ms: Option<f64>,
}

/// Conflicting beliefs of one lock's holds (sorted by start), and lost-signal margins.
pub(super) fn exclusion(
    lock: &str,
    list: &[Hold],
    (nodes, resource): (&Nodes, &[Written]),
    judge: &mut Judge<'_>,
    f: &mut Exclusion,
) {
    let mut active: Vec<&Hold> = Vec::new();
    for (i, hold) in list.iter().enumerate() {
        active.retain(|h| h.end > hold.start);
        if timeline::conflicts(hold, &active) {
            f.overlap_count += 1;
            let first = active[0];
            if f.overlaps.len() < KEPT_PER_KIND {
                f.overlaps.push(Overlap {
                    lock: lock.to_owned(),
                    first: first.clone(),
                    second: hold.clone(),
                });
            }
            // The conflict is one belief's outliving its turn on the servers: of each pair,
            // the hold the servers granted first (the later grant was made once it had
            // expired there), judged by the faults that acted on it ([`effects`]).
            let excuse = active
                .iter()
                .find_map(|earlier| overlap_excuse((earlier, hold), lock, nodes, judge.faults()));
            let windows: Vec<(Who, u64, u64)> = active
                .iter()
                .map(|h| (h.who(), h.sent, hold.start))
                .chain([(hold.who(), hold.sent, hold.start)])
                .collect();
            judge.add_explained(
                ProblemKind::Overlap,
                lock,
                hold.start,
                (&windows, Reach::Windows),
                (
                    format!(
                        "{} held while {} was granted{}",
                        first.label(),
                        hold.label(),
                        fenced(resource, lock, first, hold)
                    ),
                    excuse,
                ),
            );
        }
        active.push(hold);
        if hold.by_lost
            && let Some(next) = list[i + 1..].iter().find(|n| n.start >= hold.end)
        {
            let margin = (next.start - hold.end) as f64 / 1e6;
            f.lost_margin_ms = Some(f.lost_margin_ms.map_or(margin, |m: f64| m.min(margin)));
        }
    }
}

/// The excuse for `earlier` and `later` believed together: the faults that acted on the
/// hold the servers granted first, before they granted the other, by at least the
/// beliefs' overlap.
fn overlap_excuse(
    (earlier, later): (&Hold, &Hold),
    lock: &str,
    nodes: &Nodes,
    marks: &[FaultMark],
) -> Option<(&'static str, String)> {
    let (outliver, grantee) = match (earlier.granted_at, later.granted_at) {
        (Some(a), Some(b)) if b < a => (later, earlier),
        _ => (earlier, later),
    };
    let size = earlier.end.min(later.end).saturating_sub(later.start);
    let belief = Belief {
        who: outliver.who(),
        from: outliver.sent,
        to: grantee.granted_at.unwrap_or(grantee.start),
        held: (outliver.sent, outliver.end),
        nodes: &outliver.nodes,
    };
    effects::excuse(marks, nodes, lock, (&belief, Overrun::PastExpiry), size)
}

/// What the fenced resource did while `first` and `second` were both believed: the writes
/// of each it accepted and rejected.
fn fenced(resource: &[Written], lock: &str, first: &Hold, second: &Hold) -> String {
    let (from, to) = (second.start, first.end.min(second.end));
    let tally = |hold: &Hold| {
        let writes = resource.iter().filter(|w| {
            w.lock == lock
                && w.who == hold.who()
                && w.token == hold.token
                && (from..=to).contains(&w.at)
        });
        writes.fold(
            (0, 0),
            |(a, r), w| if w.accepted { (a + 1, r) } else { (a, r + 1) },
        )
    };
    let ((a1, r1), (a2, r2)) = (tally(first), tally(second));
    if a1 + r1 + a2 + r2 == 0 {
        return String::new();
    }
    format!(
        "; meanwhile the resource accepted {a1} and rejected {r1} writes of token {}, accepted {a2} and rejected {r2} of token {}",
        first.token, second.token
    )
}

/// Beliefs the oracle saw outlive their hold on the servers, and those that went on for
/// longer than a lease after that; each excused only by faults whose effects on that
/// belief cover its overrun ([`effects`]).
pub(super) fn server_truth(
    t: &Timeline,
    nodes: &Nodes,
    lease_ttl: Duration,
    judge: &mut Judge<'_>,
) {
    let lease_ns = u64::try_from(lease_ttl.as_nanos()).unwrap_or(u64::MAX);
    let marks = judge.faults();
    for gone in &t.gone {
        let Some(hold) = t.holds.get(&gone.lock).and_then(|l| l.get(gone.hold)) else {
            continue;
        };
        let belief = Belief {
            who: hold.who(),
            from: hold.sent,
            to: gone.at,
            held: (hold.sent, hold.end),
            nodes: &hold.nodes,
        };
        let overrun = hold.end.saturating_sub(gone.at);
        let excuse = effects::excuse(
            marks,
            nodes,
            &gone.lock,
            (&belief, Overrun::PastExpiry),
            overrun,
        );
        judge.add_explained(
            ProblemKind::LeaseGone,
            &gone.lock,
            gone.at,
            (&[(hold.who(), hold.sent, gone.at)], Reach::Windows),
            (
                format!(
                    "{} still believed held at t={:.3}s, but only {} of the {} nodes needed held it",
                    hold.label(),
                    gone.at as f64 / 1e9,
                    gone.holding.0,
                    gone.holding.1
                ),
                excuse,
            ),
        );
        let limit = gone.at.saturating_add(lease_ns);
        if hold.end > limit {
            let belief = Belief {
                from: gone.at,
                to: hold.end,
                ..belief
            };
            let excuse = effects::excuse(
                marks,
                nodes,
                &gone.lock,
                (&belief, Overrun::PastLease),
                hold.end - limit,
            );
            judge.add_explained(
                ProblemKind::LeaseOutlived,
                &gone.lock,
                limit,
                (&[(hold.who(), gone.at, hold.end)], Reach::Windows),
                (
                    format!(
                        "{} still believed held {:.0} ms after its hold left the servers at t={:.3}s, longer than any lease ({} ms)",
                        hold.label(),
                        (hold.end - gone.at) as f64 / 1e6,
                        gone.at as f64 / 1e9,
                        lease_ttl.as_millis()
                    ),
                    excuse,
                ),
            );
        }
    }
}
