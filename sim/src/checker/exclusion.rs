//! Exclusion: conflicting beliefs of one lock's holds, and beliefs the server-truth oracle
//! saw outlive their hold on the servers.
//!
//! Invariant: beliefs are judged in true time by each lock's access rule, whatever the
//! resource did about them; a fault can excuse a conflict only through [`super::problems`].

use std::time::Duration;

use serde::Serialize;

use super::problems::{Judge, KEPT_PER_KIND, ProblemKind, Reach};
use super::timeline::{self, Hold, Timeline, Who};

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
pub(super) fn exclusion(lock: &str, list: &[Hold], judge: &mut Judge<'_>, f: &mut Exclusion) {
    let mut active: Vec<&Hold> = Vec::new();
    for (i, hold) in list.iter().enumerate() {
        active.retain(|h| h.end > hold.start);
        if timeline::conflicts(hold, &active) {
            f.overlap_count += 1;
            // The conflict is one belief's outliving its turn on the servers: the
            // holders' faults are the candidate causes.
            let first = active[0];
            if f.overlaps.len() < KEPT_PER_KIND {
                f.overlaps.push(Overlap {
                    lock: lock.to_owned(),
                    first: first.clone(),
                    second: hold.clone(),
                });
            }
            // Each earlier belief, from its request to the conflicting grant; and the
            // conflicting grant itself, from its request to its receipt: a slow reply can
            // bring news of a grant the servers made *before* the earlier belief's, whose
            // lease a fault then cut short (a node clock jump while the reply travelled).
            // A fault touching the holder that did not outlive its lease excuses nothing
            // the oracle would not also see: that holder's own belief is then checked
            // against the servers on its own.
            let windows: Vec<(Who, u64, u64)> = active
                .iter()
                .map(|h| (h.who(), h.requested, hold.start))
                .chain([(hold.who(), hold.requested, hold.start)])
                .collect();
            judge.add(
                ProblemKind::Overlap,
                lock,
                hold.start,
                (&windows, Reach::Windows),
                format!("{} held while {} was granted", first.label(), hold.label()),
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

/// Beliefs the oracle saw outlive their hold on the servers, and those that went on for
/// longer than a lease after that.
pub(super) fn server_truth(t: &Timeline, lease_ttl: Duration, judge: &mut Judge<'_>) {
    let lease_ns = u64::try_from(lease_ttl.as_nanos()).unwrap_or(u64::MAX);
    for gone in &t.gone {
        let Some(hold) = t.holds.get(&gone.lock).and_then(|l| l.get(gone.hold)) else {
            continue;
        };
        judge.add(
            ProblemKind::LeaseGone,
            &gone.lock,
            gone.at,
            (&[(hold.who(), hold.requested, gone.at)], Reach::Windows),
            format!(
                "{} still believed held at t={:.3}s, but only {} of the {} nodes needed held it",
                hold.label(),
                gone.at as f64 / 1e9,
                gone.holding.0,
                gone.holding.1
            ),
        );
        let limit = gone.at.saturating_add(lease_ns);
        if hold.end > limit {
            judge.add(
                ProblemKind::LeaseOutlived,
                &gone.lock,
                limit,
                (&[(hold.who(), gone.at, hold.end)], Reach::Windows),
                format!(
                    "{} still believed held {:.0} ms after its hold left the servers at t={:.3}s, longer than any lease ({} ms)",
                    hold.label(),
                    (hold.end - gone.at) as f64 / 1e6,
                    gone.at as f64 / 1e9,
                    lease_ttl.as_millis()
                ),
            );
        }
    }
}
