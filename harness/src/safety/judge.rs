//! Judging one cell: the real history through the simulator's checker, the measures only a
//! real run has (lost-lease margin against the server's TTL, recovery time, leftover lease),
//! and the comparison with the simulator's cell for the same scenario and strategy.
//!
//! Invariant: the verdict is the simulator's own checker's, with the simulator's liveness
//! bound for the strategy and TTL, so "agree" compares like with like.

use std::collections::BTreeMap;

use leasehold_sim::checker::{self, CheckConfig, ProblemKind};
use leasehold_sim::history::{HistEvent, HistKind};
use leasehold_sim::scenario::{Expect, liveness_bound};
use leasehold_sim::workload::Strategy;

use crate::safety::monitor::{self, Observation};
use crate::safety::report::{Agreement, CellReport, FaultTiming};
use crate::safety::run_history::ms_from_ns;
use crate::safety::scenario::SafetyScenario;

/// What a finished cell left behind, for [`judge`].
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

/// Judges a run's history with the simulator's checker and derives the real-only measures;
/// the simulator columns are left for [`compare_with_sim`].
pub(super) fn judge(
    scenario: &SafetyScenario,
    strategy: Strategy,
    outcome: CellOutcome<'_>,
) -> CellReport {
    let CellOutcome {
        events,
        end_ns,
        fault,
        observations,
        leftover,
    } = outcome;
    let config = CheckConfig {
        liveness_bound: liveness_bound(strategy, scenario.ttl),
        lease_ttl: scenario.ttl,
    };
    // Real faults have no sim fault log: nothing is excused here, the verdict says what happened.
    let findings = checker::check(events, &[], &config, end_ns);
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
    CellReport {
        scenario: scenario.name.to_owned(),
        sim_scenario: scenario.sim.map(str::to_owned),
        design_item: scenario.design_item,
        strategy,
        ttl_ms: u64::try_from(scenario.ttl.as_millis()).unwrap_or(u64::MAX),
        real: findings.verdict,
        sim_expected: None,
        sim_observed: None,
        agreement: Agreement::NoSim,
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

/// Fills in the simulator's expectation and observation (over `seeds` seeds; 0: the
/// expectation only) and the agreement.
pub(super) async fn compare_with_sim(
    cell: &mut CellReport,
    scenario: &SafetyScenario,
    strategy: Strategy,
    seeds: u64,
) {
    let Some(sim) = scenario.sim.and_then(leasehold_sim::scenario::find) else {
        cell.agreement = Agreement::NoSim;
        return;
    };
    let expected = sim.expect(strategy);
    cell.sim_expected = Some(expected.to_string());
    if let Expect::Pending(why) = expected {
        cell.agreement = Agreement::SimPending(why.to_owned());
        return;
    }
    if seeds > 0 {
        // The simulator is CPU-bound and synchronous: keep it off the async workers.
        let observed = tokio::task::spawn_blocking(move || {
            leasehold_sim::scenario::run_cell(sim, strategy, seeds)
        })
        .await;
        match observed {
            Ok(Ok(sim_cell)) => cell.sim_observed = sim_cell.worst,
            Ok(Err(err)) => tracing::warn!(%err, scenario = sim.name, "simulator cell failed"),
            Err(err) => tracing::warn!(%err, scenario = sim.name, "simulator task failed"),
        }
    }
    let saw = cell
        .sim_observed
        .map_or(String::new(), |v| format!(" (and saw '{v}')"));
    cell.agreement = if expected.met_by(cell.real) {
        Agreement::Agree
    } else if let Expect::Exactly(worst) = expected
        && cell.real < worst
    {
        // `Exactly` is the worst over the simulator's seeds; one real run is one sample.
        Agreement::NotReproduced(format!(
            "real Redis gave '{}' in one run; the simulator's worst over its seeds is '{worst}'{saw}",
            cell.real
        ))
    } else {
        Agreement::Disagree(format!(
            "real Redis gave '{}', the simulator expects {expected}{saw}",
            cell.real
        ))
    };
}
