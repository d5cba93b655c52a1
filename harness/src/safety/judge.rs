//! Judging one try: the real history through the simulator's checker, and the measures only
//! a real run has (lost-lease margin against the server's TTL, recovery time, leftover
//! lease). The cell's verdict over its tries and the comparison with the simulator are
//! [`agreement`](crate::safety::agreement)'s.
//!
//! Invariant: the verdict is the simulator's own checker's, with the simulator's liveness
//! bound for the strategy, lock kind and TTL, so "agree" compares like with like. A try's
//! outcome in the design matrix's words (`leasehold_sim::report::designs::Outcome`) is the
//! worst of its problems' outcomes, and "stranded" also when the server showed the lock's
//! key with no expiry in two polls in a row (at least one poll period apart: longer than
//! any window between a client's two commands, so a key left without its expiry, not one
//! caught between `SETNX` and `PEXPIRE`).

use std::collections::BTreeMap;

use leasehold_sim::checker::{self, CheckConfig, Findings, ProblemKind};
use leasehold_sim::report::designs::Outcome;
use leasehold_sim::scenario::liveness_bound;
use leasehold_sim::workload::{LockKind, Strategy};
use leasehold_sim::world::history::{HistEvent, HistKind};

use crate::safety::monitor::{self, Observation};
use crate::safety::report::{FaultTiming, TryReport};
use crate::safety::run_history::ms_from_ns;
use crate::safety::scenario::SafetyScenario;
use crate::safety::subject::Subject;

/// What a finished try left behind, for [`judge`].
pub(super) struct CellOutcome<'a> {
    /// The whole history.
    pub events: &'a [HistEvent],
    /// When the workers were told to stop (run ns).
    pub end_ns: u64,
    /// The injected fault.
    pub fault: FaultTiming,
    /// The PTTL monitor's observations (empty for RedLock).
    pub observations: &'a [Observation],
    /// PTTL of the lock key after every worker stopped.
    pub leftover: Option<i64>,
}

/// The simulator's liveness bound for `subject` and `kind` (its `with_kind`): a waiting
/// writer of a read-write lock keeps readers out for its intent timeout; rslock retries
/// after a random delay as RedLock does.
fn bound(subject: Subject, kind: LockKind, ttl: std::time::Duration) -> std::time::Duration {
    let strategy = match subject {
        Subject::Leasehold(strategy) => strategy,
        Subject::Rslock { .. } => Strategy::RedLock,
        Subject::Design(design) => design.strategy(),
    };
    liveness_bound(strategy, ttl)
        + match kind {
            LockKind::ReadWrite { .. } => leasehold::DEFAULT_WRITER_INTENT_TIMEOUT,
            LockKind::Mutex | LockKind::Semaphore { .. } => std::time::Duration::ZERO,
        }
}

/// Judges a try's history with the simulator's checker and derives the real-only measures.
pub(super) fn judge(
    scenario: &SafetyScenario,
    subject: Subject,
    seed: u64,
    outcome: CellOutcome<'_>,
) -> TryReport {
    let CellOutcome {
        events,
        end_ns,
        fault,
        observations,
        leftover,
    } = outcome;
    let config = CheckConfig {
        liveness_bound: bound(subject, scenario.kind, scenario.ttl),
        lease_ttl: scenario.ttl,
        shared_owner: false,
        fair_entry_timeout: None,
        writer_intent: None,
        permit_wake: None,
        // A design's holds carry no token (as in the simulator's design runs).
        unfenced: matches!(subject, Subject::Design(_)),
    };
    // Real faults have no sim fault log: nothing is excused here, the verdict says what happened.
    let findings = checker::check(events, (&[], &checker::Nodes::default()), &config, end_ns);
    let fault_end_ns = (fault.end_ms * 1e6) as u64;
    let recovery_ms = events
        .iter()
        .find(|e| e.at >= fault_end_ns && matches!(e.kind, HistKind::Acquired { .. }))
        .map(|e| ms_from_ns(e.at - fault_end_ns));
    let lost_before_ttl_end_ms = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == HistKind::Lost)
        .filter_map(|(i, e)| {
            let granted = events[..i]
                .iter()
                .rev()
                .find(|g| g.proc == e.proc && matches!(g.kind, HistKind::Acquired { .. }))?;
            monitor::lease_end_before(observations, granted.at, e.at)
                .map(|lease_end| (lease_end as f64 - e.at as f64) / 1e6)
        })
        .reduce(f64::min);
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for e in events {
        if let HistKind::AcquireFailed { error } = &e.kind {
            *errors.entry(error.clone()).or_default() += 1;
        }
    }
    let no_expiry_ms = no_expiry_span_ms(observations);
    TryReport {
        seed,
        real: findings.verdict,
        outcome: matrix_outcome(&findings, no_expiry_ms),
        no_expiry_ms,
        fault,
        acquisitions: findings.acquisitions,
        failed_acquires: findings.failed_acquires,
        overlaps: findings.overlap_count,
        stale_rejected: findings.stale_rejected,
        token_problems: findings.described(&[
            ProblemKind::TokenOrder,
            ProblemKind::ReentryToken,
            ProblemKind::TokenReuse,
        ]),
        starvations: findings.described(&[ProblemKind::Starvation]),
        lost_signals: findings.lost,
        lost_before_ttl_end_ms,
        lost_before_next_grant_ms: findings.lost_margin_ms,
        recovery_ms,
        leftover_pttl_ms: leftover,
        errors: errors.into_iter().collect(),
        run_s: end_ns as f64 / 1e9,
    }
}

/// The longest span (ms) over which two polls in a row found the lock's key with no expiry
/// (`PTTL` -1), if any did.
fn no_expiry_span_ms(observations: &[Observation]) -> Option<f64> {
    observations
        .windows(2)
        .filter(|w| w[0].1 == -1 && w[1].1 == -1)
        .map(|w| ms_from_ns(w[1].0.saturating_sub(w[0].0)))
        .reduce(f64::max)
}

/// A try's outcome in the design matrix's words: its worst problem's, or stranded when
/// the key was seen with no expiry.
fn matrix_outcome(findings: &Findings, no_expiry_ms: Option<f64>) -> Outcome {
    let (worst, _) = Outcome::worst(&findings.problems);
    if no_expiry_ms.is_some() {
        worst.max(Outcome::Stranded)
    } else {
        worst
    }
}
