//! Judges a history: mutual exclusion, server truth, fencing tokens and liveness, each
//! finding with the faults that touched it.
//!
//! Invariant: the verdict depends only on the history and the fault log in true (virtual)
//! time.
//! - *Exclusion* is over the intervals clients *believed* they held, by each lock's access
//!   rule (one exclusive hold, readers together, at most N permits). Beliefs that conflict
//!   break exclusion, whatever the resource did about it.
//! - *Server truth*: a belief the oracle saw outlive the hold on its granting nodes breaks
//!   exclusion too, with or without a second holder.
//! - *Fencing*: every grant's token exceeds every earlier grant's (the running maximum, the
//!   same process's grants included), a re-entry gets its epoch's token, and no token is
//!   accepted from two holders; otherwise fencing protects nothing: a violation.
//! - *Liveness*: a waiter that sees the lock free for longer than the bound, while nothing
//!   hampers it, starved.
//! - *Linearizability* ([`linear`]): each lock key's script calls, ambiguous ones included,
//!   have a linearization under a TTL lock's sequential spec; otherwise the servers
//!   answered as no correct lock could (exclusion broken, excused only by a node fault).
//!
//! Each problem lists the kinds of fault that touched it ([`causes`]) and whether one of
//! them can explain a lease outliving its key; the verdict itself does not excuse anything
//! (a scenario expects "exclusion broken" under a pause), exploration does.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::history::{Access, FaultMark, HistEvent};
use crate::net::ProcId;

pub mod causes;
mod lease_spec;
pub mod linear;
mod timeline;

use timeline::{Timeline, Who};

/// How bad a run was, in increasing severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Verdict {
    /// No conflicting beliefs, no stale writes, no starvation.
    Safe,
    /// Beliefs never conflicted, but a late write arrived after a newer holder's and the
    /// fenced resource rejected it: an unfenced one would have been corrupted.
    SafeWithFencing,
    /// Mutual exclusion failed: two beliefs conflicted, or a client believed it held a
    /// lock its granting nodes no longer held. Fencing may still have kept the resource
    /// safe (the tokens are checked separately, and rank above this).
    ExclusionBroken,
    /// A waiter saw the lock free for longer than the liveness bound.
    Starvation,
    /// Fencing itself failed: a grant's token did not exceed an earlier grant's, a
    /// re-entry got another epoch's token, or two holders wrote with the same token.
    Violation,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Safe => "safe",
            Self::SafeWithFencing => "safe with fencing",
            Self::ExclusionBroken => "exclusion broken",
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
    /// The longest lease a hold is granted (the workload's TTL; a run raises it to a
    /// re-entering workload's inner or sibling TTL when longer). A client's every lease
    /// was counted from a request sent before its hold left the servers, so its belief
    /// must end within this much after that, whatever took the hold away.
    pub lease_ttl: Duration,
    /// Whether each process's holds share one owner (re-entry workloads), so that a
    /// process may be granted its own epoch's token again: by a re-entry while one of its
    /// holds is still live on the server, even one it never saw granted (a fair hand-off to
    /// an acquire it had abandoned, whose release is still on its way). The run sets it
    /// from its workload; whether that epoch could still be live is the linearizability
    /// check's to judge.
    #[serde(default)]
    pub shared_owner: bool,
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
    /// Whom it excludes.
    pub access: Access,
    /// When the client started waiting for it, virtual ns.
    pub requested: u64,
    /// Start (lock() returned), virtual ns.
    pub start: u64,
    /// End (unlock called, lost observed, crash, or end of run), virtual ns.
    pub end: u64,
    /// Ended by the lost-lease signal.
    pub by_lost: bool,
}

impl Hold {
    fn who(&self) -> Who {
        (self.proc, self.incarnation)
    }

    fn label(&self) -> String {
        format!(
            "c{}.{} [{:.3}s, {:.3}s] token {}",
            self.proc,
            self.incarnation,
            self.start as f64 / 1e9,
            self.end as f64 / 1e9,
            self.token
        )
    }
}

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

/// What kind of problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ProblemKind {
    /// Two beliefs conflicted.
    Overlap,
    /// A belief outlived its hold on the servers (the server-truth oracle).
    LeaseGone,
    /// A belief went on for longer than a lease after its hold left the servers: no
    /// lease the client was granted can last that long, so the client trusted something
    /// else (a renewal of a hold it no longer had, say).
    LeaseOutlived,
    /// A grant's token did not exceed the running maximum.
    TokenOrder,
    /// A re-entry got another epoch's token.
    ReentryToken,
    /// Two holders' writes were accepted with one token.
    TokenReuse,
    /// A waiter starved.
    Starvation,
    /// A lock key's script calls have no linearization under the TTL lock's sequential
    /// spec (see [`linear`]): the servers answered as no correct lock could.
    NotLinearizable,
}

impl ProblemKind {
    /// The verdict a problem of this kind gives a run.
    pub fn verdict(self) -> Verdict {
        match self {
            Self::Overlap | Self::LeaseGone | Self::LeaseOutlived | Self::NotLinearizable => {
                Verdict::ExclusionBroken
            }
            Self::TokenOrder | Self::ReentryToken | Self::TokenReuse => Verdict::Violation,
            Self::Starvation => Verdict::Starvation,
        }
    }
}

/// One finding, with the faults that touched it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    /// What.
    pub kind: ProblemKind,
    /// Lock name.
    pub lock: String,
    /// When it showed, virtual ns.
    pub at: u64,
    /// Described for a report.
    pub detail: String,
    /// Kinds of the faults that touched the holds (or the wait) involved.
    pub touched_by: Vec<String>,
    /// Whether one of those faults can make a lease outlive its key (see
    /// [`causes::outlive_lease`]): the only excuse for a broken exclusion.
    pub excused: bool,
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
    /// Conflicting believed holds (first few).
    pub overlaps: Vec<Overlap>,
    /// Number of conflicting pairs.
    pub overlap_count: u64,
    /// Beliefs the oracle saw outlive their hold on the servers.
    pub lease_gone: u64,
    /// Lock-script calls the linearizability check ordered.
    pub linear_calls: u64,
    /// Lock keys whose linearizability search outgrew its budget (unchecked, not passed).
    pub linear_unchecked: u64,
    /// Every problem (the first few of each kind per lock), with its causes.
    pub problems: Vec<Problem>,
    /// Smallest gap between a lost-lease signal and the next holder's grant, in ms
    /// (how early the signal came); `None` if no lost signal preceded another grant.
    pub lost_margin_ms: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
}

impl Findings {
    /// The problems of `kinds`, described.
    pub fn described(&self, kinds: &[ProblemKind]) -> Vec<String> {
        self.problems
            .iter()
            .filter(|p| kinds.contains(&p.kind))
            .map(|p| p.detail.clone())
            .collect()
    }
}

/// How many problems of one kind to keep in full per lock.
const KEPT_PER_KIND: usize = 5;

/// Checks `history` of a run that ended at virtual time `end`, with the faults that landed.
pub fn check(
    history: &[HistEvent],
    faults: &[FaultMark],
    config: &CheckConfig,
    end: u64,
) -> Findings {
    let mut t = timeline::read(history, end);
    let mut f = Findings {
        acquisitions: t.holds.values().map(|l| l.len() as u64).sum(),
        failed_acquires: t.failed_acquires,
        lost: t.lost,
        writes: t.writes,
        stale_rejected: t.stale_rejected,
        overlaps: Vec::new(),
        overlap_count: 0,
        lease_gone: t.gone.len() as u64,
        linear_calls: 0,
        linear_unchecked: 0,
        problems: Vec::new(),
        lost_margin_ms: None,
        verdict: Verdict::Safe,
    };
    let mut judge = Judge {
        faults,
        problems: Vec::new(),
    };
    for (lock, list) in &mut t.holds {
        list.sort_by_key(|h| (h.start, h.proc, h.incarnation));
        exclusion(lock, list, &mut judge, &mut f);
        tokens(lock, list, config.shared_owner, &mut judge);
    }
    server_truth(&t, config.lease_ttl, &mut judge);
    fencing(&t, &mut judge);
    liveness(&t, config, &mut judge);
    linearizable(history, &mut judge, &mut f);
    f.problems = judge.problems;
    f.verdict = f
        .problems
        .iter()
        .map(|p| p.kind.verdict())
        .max()
        .unwrap_or(Verdict::Safe)
        .max(if f.stale_rejected > 0 {
            Verdict::SafeWithFencing
        } else {
            Verdict::Safe
        });
    f
}

/// Which faults may have caused a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Those that touched the holds' (or the wait's) windows.
    Windows,
    /// Those, and every node fault before the problem whose effect lasts (a token out of
    /// order or reused, a lock that lingers: see [`causes::lasting`]).
    Lasting,
}

/// Collects problems, with their causes.
struct Judge<'a> {
    faults: &'a [FaultMark],
    problems: Vec<Problem>,
}

impl Judge<'_> {
    /// Records a problem of `kind` on `lock`, shown at `at`, involving `windows` (whose
    /// windows, as (process, from, to)), caused by what `reach` says; the first
    /// [`KEPT_PER_KIND`] per lock and kind only.
    fn add(
        &mut self,
        kind: ProblemKind,
        lock: &str,
        at: u64,
        (windows, reach): (&[(Who, u64, u64)], Reach),
        detail: String,
    ) {
        if self.full(kind, lock) {
            return;
        }
        let mut touched: Vec<&FaultMark> = windows
            .iter()
            .flat_map(|&(who, from, to)| causes::touching(self.faults, who, (from, to)))
            .collect();
        if reach == Reach::Lasting {
            touched.extend(causes::lasting(self.faults, at));
        }
        self.push(kind, lock, at, &touched, detail);
    }

    fn full(&self, kind: ProblemKind, lock: &str) -> bool {
        self.problems
            .iter()
            .filter(|p| p.kind == kind && p.lock == lock)
            .count()
            >= KEPT_PER_KIND
    }

    fn push(
        &mut self,
        kind: ProblemKind,
        lock: &str,
        at: u64,
        touched: &[&FaultMark],
        detail: String,
    ) {
        self.problems.push(Problem {
            kind,
            lock: lock.to_owned(),
            at,
            detail: format!("{lock}: {detail}"),
            touched_by: causes::kinds(touched.iter().copied()),
            excused: match kind {
                ProblemKind::LeaseOutlived => touched.iter().any(|m| causes::outlives_ttl(m)),
                ProblemKind::NotLinearizable => {
                    touched.iter().any(|m| causes::breaks_server_spec(m))
                }
                _ => causes::outlive_lease(touched),
            },
        });
    }
}

/// Conflicting beliefs of one lock's holds (sorted by start), and lost-signal margins.
fn exclusion(lock: &str, list: &[Hold], judge: &mut Judge<'_>, f: &mut Findings) {
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

/// Every grant's token must exceed the running maximum of the grants that precede it in
/// real time: those whose holder learned of them before this grant was even requested.
/// Grants whose request and reply windows overlap are concurrent, and the servers may have
/// ordered them either way (a slow client learns of an early grant late). Only exclusive
/// holds start epochs: a read hold carries the last write's token, a permit none. With
/// `shared_owner`, a process's grant may repeat the token of its own latest epoch (see
/// [`CheckConfig::shared_owner`]).
fn tokens(lock: &str, list: &[Hold], shared_owner: bool, judge: &mut Judge<'_>) {
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
            judge.add(
                ProblemKind::TokenOrder,
                lock,
                hold.start,
                (&[], Reach::Lasting),
                format!(
                    "grant {} does not exceed the highest token granted before it was requested, {}'s",
                    hold.label(),
                    top.label()
                ),
            );
        }
    }
}

/// Beliefs the oracle saw outlive their hold on the servers, and those that went on for
/// longer than a lease after that.
fn server_truth(t: &Timeline, lease_ttl: Duration, judge: &mut Judge<'_>) {
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

/// Re-entries with another epoch's token, and tokens accepted from two holders.
fn fencing(t: &Timeline, judge: &mut Judge<'_>) {
    for bad in &t.bad_reentries {
        judge.add(
            ProblemKind::ReentryToken,
            &bad.lock,
            bad.at,
            (&[(bad.who, bad.at, bad.at)], Reach::Windows),
            format!(
                "c{}.{} at t={:.3}s: {}",
                bad.who.0,
                bad.who.1,
                bad.at as f64 / 1e9,
                bad.detail
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
        judge.add(
            ProblemKind::TokenReuse,
            lock,
            at,
            (&windows, Reach::Lasting),
            format!(
                "token {token} accepted from {} different holders {writers:?}",
                writers.len()
            ),
        );
    }
}

/// Script calls no linearization explains: each is a problem over the window from the
/// state it contradicts to its answer (node faults in it, or lasting ones before, may
/// excuse it).
fn linearizable(history: &[HistEvent], judge: &mut Judge<'_>, f: &mut Findings) {
    let report = linear::check(history);
    f.linear_calls = report.calls;
    f.linear_unchecked = report.unchecked;
    for finding in report.findings {
        judge.add(
            ProblemKind::NotLinearizable,
            &finding.lock,
            finding.at,
            (&[(finding.who, finding.since, finding.at)], Reach::Lasting),
            finding.detail,
        );
    }
}

/// Waits that saw the lock free for longer than the bound while nothing hampered them.
fn liveness(t: &Timeline, config: &CheckConfig, judge: &mut Judge<'_>) {
    let bound = u64::try_from(config.liveness_bound.as_nanos()).unwrap_or(u64::MAX);
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
                    config.liveness_bound.as_millis()
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::faults::{Fault, ProcSel};
    use crate::history::HistKind;

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
        check(h, faults, &CONFIG, end_ms * 1_000_000)
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
        // The same pause on the later holder, or before the earlier hold was requested:
        // not excused.
        let on_other = check_ms(&overlapping(), &[mark(pause(1), Some(1), 1, 4)], 10);
        assert!(!on_other.problems[0].excused);
        let mut late_request = overlapping();
        late_request[0].at = 0;
        let before = check_ms(&late_request[1..], &[mark(pause(0), Some(0), 0, 0)], 10);
        assert!(
            before.problems[0].excused,
            "a pause at the grant instant touches it"
        );
        // A slow link never excuses a belief outliving its lease.
        let slow = Fault::Slow {
            who: ProcSel::Id(0),
            extra_ms: 500,
            ms: 10,
        };
        let delayed = check_ms(&overlapping(), &[mark(slow, Some(0), 0, 10)], 10);
        assert!(!delayed.problems[0].excused);
        assert_eq!(delayed.problems[0].touched_by, ["delay"]);
        // A client clock slow beyond the drift margin does; one within it does not.
        let drift = |ppm| Fault::ClientClockDrift { proc: 0, ppm };
        let slow_clock = check_ms(
            &overlapping(),
            &[mark(drift(-50_000), Some(0), 0, u64::MAX / 1_000_000)],
            10,
        );
        assert!(slow_clock.problems[0].excused);
        let within = check_ms(
            &overlapping(),
            &[mark(drift(-5_000), Some(0), 0, u64::MAX / 1_000_000)],
            10,
        );
        assert!(!within.problems[0].excused);
        // A granting node's clock fast beyond the margin does too; within it, not; and
        // two drifts within it that add up beyond it (a slow holder, a fast node) do.
        let node_drift = |ppm| Fault::NodeClockDrift { node: 0, ppm };
        let forever = u64::MAX / 1_000_000;
        let fast_node = check_ms(
            &overlapping(),
            &[mark(node_drift(50_000), None, 0, forever)],
            10,
        );
        assert!(fast_node.problems[0].excused);
        assert_eq!(fast_node.problems[0].touched_by, ["node-drift"]);
        let slow_node = check_ms(
            &overlapping(),
            &[mark(node_drift(-50_000), None, 0, forever)],
            10,
        );
        assert!(
            !slow_node.problems[0].excused,
            "a slow node clock only lengthens leases"
        );
        let within_node = check_ms(
            &overlapping(),
            &[mark(node_drift(6_000), None, 0, forever)],
            10,
        );
        assert!(!within_node.problems[0].excused);
        let together = check_ms(
            &overlapping(),
            &[
                mark(drift(-6_000), Some(0), 0, forever),
                mark(node_drift(6_000), None, 0, forever),
            ],
            10,
        );
        assert!(together.problems[0].excused);
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
        assert_eq!(check(&own, &[], &shared, 4_000_000).verdict, Verdict::Safe);
        let other = [hold(0, 1, 0, 5), hold(2, 3, 1, 5)].concat();
        let f = check(&other, &[], &shared, 4_000_000);
        assert_eq!(f.verdict, Verdict::Violation);
        assert_eq!(f.problems[0].kind, ProblemKind::TokenOrder);
        // Nor an older epoch of its own once a newer one was granted.
        let older = [hold(0, 1, 0, 5), hold(2, 3, 0, 7), hold(4, 5, 0, 5)].concat();
        assert_eq!(
            check(&older, &[], &shared, 6_000_000).verdict,
            Verdict::Violation
        );
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
}
