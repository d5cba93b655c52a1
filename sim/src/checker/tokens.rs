//! Fencing tokens: every grant's token exceeds every earlier grant's, a re-entry gets its
//! epoch's token, and no token is accepted from two holders.
//!
//! Invariant: "earlier" is real-time precedence (granted before the other was requested),
//! so the servers' freedom to order concurrent grants either way is never a finding.

use crate::world::history::{Access, FaultMark};

use super::evictions;
use super::issuers::{FENCE_EVICTED, Issuers, Nodes};
use super::problems::{Judge, ProblemKind, Reach};
use super::timeline::{BadReentry, Hold, Timeline, Who};

/// Every grant's token must exceed the running maximum of the grants that precede it in
/// real time: those whose holder learned of them before this grant was even requested.
/// Grants whose request and reply windows overlap are concurrent, and the servers may have
/// ordered them either way (a slow client learns of an early grant late). Only exclusive
/// holds start epochs: a read hold carries the last write's token, a permit none. With
/// `shared_owner`, a process's grant may repeat the token of its own latest epoch (see
/// [`CheckConfig::shared_owner`]).
///
/// Such a token is excused only when the node that issued it explains it (see
/// [`super::issuers`]): its clock read no more than the earlier token and its fence key
/// lacked that token; or it is the owner's own earlier epoch (a process keeps its owner id),
/// re-entered on a node that a failover or crash left without that epoch's release; or (a
/// re-entry's) the lock's fence key was evicted while the owner held the epoch.
pub(super) fn tokens(
    lock: &str,
    list: &[Hold],
    shared_owner: bool,
    (nodes, issuers): (&Nodes, &Issuers),
    judge: &mut Judge<'_>,
) {
    let list: Vec<&Hold> = list
        .iter()
        .filter(|h| h.access == Access::Exclusive)
        .collect();
    let mut by_request = list.clone();
    by_request.sort_by_key(|h| (h.requested, h.start));
    // `list` is sorted by start: `done` of them were granted before the current request.
    let mut done = 0;
    let mut max: Option<&Hold> = None;
    for hold in by_request {
        while let Some(&earlier) = list.get(done).filter(|e| e.start < hold.requested) {
            if max.is_none_or(|top| earlier.token > top.token) {
                max = Some(earlier);
            }
            done += 1;
        }
        let own_epoch =
            |top: &&Hold| shared_owner && top.token == hold.token && top.who() == hold.who();
        if let Some(top) = max.filter(|top| hold.token <= top.token && !own_epoch(top)) {
            // The owner's own earlier epoch, re-entered where a failover kept it (a
            // process keeps its owner id from one acquire to the next, re-entrant or not).
            let own = list
                .iter()
                .find(|h| h.who() == hold.who() && h.token == hold.token && h.start < hold.start);
            let later = (hold.token, hold.start, hold.label());
            let excuse = own
                .and_then(|own| {
                    nodes.explain_stale_epoch(
                        (issuers, own),
                        (later.0, later.1, &later.2),
                        judge.faults(),
                    )
                })
                .or_else(|| nodes.explain_token((issuers, lock), (top, hold), judge.faults()));
            judge.add_explained(
                ProblemKind::TokenOrder,
                lock,
                hold.start,
                (&[], Reach::Lasting),
                (
                    format!(
                        "grant {} does not exceed the highest token granted before it was requested, {}'s",
                        hold.label(),
                        top.label()
                    ),
                    excuse,
                ),
            );
        }
    }
}

/// Why a re-entry got another token than its epoch's: the lock's fence key, which names
/// the running epoch's token, was evicted while the owner held it (`acquire.lua` issues a
/// new token when it finds none, as after a restart). The eviction must fall between the
/// request of the owner's latest hold before the re-entry and the re-entry.
fn fence_evicted_under(
    t: &Timeline,
    bad: &BadReentry,
    marks: &[FaultMark],
) -> Option<(&'static str, String)> {
    let since = t
        .holds
        .get(&bad.lock)?
        .iter()
        .filter(|h| h.who() == bad.who && h.start < bad.at)
        .map(|h| h.requested)
        .max()?;
    marks
        .iter()
        .filter(|m| m.from >= since && m.from <= bad.at)
        .find_map(|m| evictions::fence_key_taken(m, &bad.lock))
        .map(|(key, at)| {
            (
                FENCE_EVICTED,
                format!(
                    "{key} was evicted at t={:.3}s, while the owner held the epoch it names",
                    at as f64 / 1e9
                ),
            )
        })
}

/// Re-entries with another epoch's token, and tokens accepted from two holders. A
/// re-entry that got its owner's own earlier epoch's token is excused only as that epoch
/// kept on a node a failover or crash left without its release (see
/// [`Nodes::explain_stale_epoch`]); any other re-entry with a foreign token is a violation.
pub(super) fn fencing(t: &Timeline, (nodes, issuers): (&Nodes, &Issuers), judge: &mut Judge<'_>) {
    for bad in &t.bad_reentries {
        let label = format!(
            "c{}.{}'s re-entry at t={:.3}s",
            bad.who.0,
            bad.who.1,
            bad.at as f64 / 1e9
        );
        let excuse = t
            .holds
            .get(&bad.lock)
            .into_iter()
            .flatten()
            .filter(|h| h.who() == bad.who && h.token == bad.token && h.start < bad.at)
            .find_map(|own| {
                nodes.explain_stale_epoch(
                    (issuers, own),
                    (bad.token, bad.at, &label),
                    judge.faults(),
                )
            })
            .or_else(|| fence_evicted_under(t, bad, judge.faults()));
        judge.add_explained(
            ProblemKind::ReentryToken,
            &bad.lock,
            bad.at,
            (&[(bad.who, bad.at, bad.at)], Reach::Windows),
            (
                format!(
                    "c{}.{} at t={:.3}s: {}",
                    bad.who.0,
                    bad.who.1,
                    bad.at as f64 / 1e9,
                    bad.detail
                ),
                excuse,
            ),
        );
    }
    for ((lock, token), writers) in &t.accepted_writers {
        if writers.len() < 2 {
            continue;
        }
        let windows: Vec<(Who, u64, u64)> = t
            .holds
            .get(lock)
            .into_iter()
            .flatten()
            .filter(|h| h.token == *token && writers.contains(&h.who()))
            .map(|h| (h.who(), h.requested, h.end))
            .collect();
        let at = windows.iter().map(|w| w.1).max().unwrap_or(0);
        // Never excused: a correct lock never gives two holders one token, whatever the
        // clocks did (a new epoch's token exceeds the fence key's, or is a later µs).
        judge.add_explained(
            ProblemKind::TokenReuse,
            lock,
            at,
            (&windows, Reach::Lasting),
            (
                format!(
                    "token {token} accepted from {} different holders {writers:?}",
                    writers.len()
                ),
                None,
            ),
        );
    }
}
