//! A cell's verdict over its seeded tries and its agreement with the simulator: the worst
//! verdict with counts per verdict, how many tries' faults landed, and the comparison with
//! the simulator's cell for the same scenario, strategy and lock kind.
//!
//! Invariant: a cell passes only on evidence. It is "inconclusive" when no try's fault
//! landed; and where the simulator finds the scenario unsafe (its expectation's bound is
//! exclusion broken or worse), a real cell that never got that bad is "not reproduced",
//! not "agree": a check that only ever passes has shown nothing.

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario::Expect;

use crate::safety::report::{Agreement, CellReport, TryReport};
use crate::safety::scenario::SafetyScenario;
use crate::safety::subject::Subject;

/// The cell of `scenario` for `subject` from its tries (simulator columns still empty).
pub(super) fn cell(
    scenario: &SafetyScenario,
    subject: Subject,
    tries: Vec<TryReport>,
) -> CellReport {
    let real = tries.iter().map(|t| t.real).max().unwrap_or(Verdict::Safe);
    let mut verdicts: Vec<(Verdict, u64)> = Vec::new();
    for t in &tries {
        match verdicts.iter_mut().find(|(v, _)| *v == t.real) {
            Some((_, n)) => *n += 1,
            None => verdicts.push((t.real, 1)),
        }
    }
    verdicts.sort_by_key(|&(v, _)| std::cmp::Reverse(v));
    CellReport {
        scenario: scenario.name.to_owned(),
        sim_scenario: scenario.sim.map(str::to_owned),
        design_item: scenario.design_item,
        subject,
        kind: scenario.kind,
        ttl_ms: u64::try_from(scenario.ttl.as_millis()).unwrap_or(u64::MAX),
        real,
        verdicts,
        landed: tries.iter().filter(|t| t.fault.landed).count() as u64,
        sim_expected: None,
        sim_observed: None,
        agreement: Agreement::NoSim,
        tries,
    }
}

/// Fills in the simulator's expectation and observation (over `seeds` seeds; 0: the
/// expectation only) and the agreement.
pub(super) async fn compare_with_sim(cell: &mut CellReport, scenario: &SafetyScenario, seeds: u64) {
    cell.agreement = match cell.subject {
        Subject::Leasehold(strategy) => sim_agreement(cell, scenario, strategy, seeds).await,
        Subject::Rslock { .. } => Agreement::Peer,
    };
    if cell.landed == 0 {
        let why = cell
            .tries
            .iter()
            .map(|t| t.fault.evidence.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        cell.agreement = Agreement::Inconclusive(format!("no try's fault landed ({why})"));
    }
}

/// Fills in the simulator's columns of a Leasehold cell and returns its agreement.
async fn sim_agreement(
    cell: &mut CellReport,
    scenario: &SafetyScenario,
    strategy: leasehold_sim::workload::Strategy,
    seeds: u64,
) -> Agreement {
    let Some(sim) = scenario.sim.and_then(leasehold_sim::scenario::find) else {
        return Agreement::NoSim;
    };
    let expected = sim.expect(strategy);
    cell.sim_expected = Some(expected.to_string());
    if let Expect::Pending(why) = expected {
        return Agreement::SimPending(why.to_owned());
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
    agreement(cell.real, expected, cell.sim_observed, cell.tries.len())
}

/// The agreement of a worst real verdict over `tries` tries with the simulator's
/// expectation and (if it ran) its worst verdict.
fn agreement(
    real: Verdict,
    expected: Expect,
    observed: Option<Verdict>,
    tries: usize,
) -> Agreement {
    let saw = observed.map_or(String::new(), |v| format!(" (and saw '{v}')"));
    let bound = match expected {
        Expect::Exactly(v) | Expect::AtWorst(v) => v,
        Expect::Pending(why) => return Agreement::SimPending(why.to_owned()),
    };
    if real > bound {
        return Agreement::Disagree(format!(
            "real Redis gave '{real}', the simulator expects {expected}{saw}"
        ));
    }
    if bound >= Verdict::ExclusionBroken && real < Verdict::ExclusionBroken {
        return Agreement::NotReproduced(format!(
            "the simulator finds this unsafe ({expected}{saw}); the worst of {tries} real tries was '{real}'"
        ));
    }
    if let Expect::Exactly(v) = expected
        && real < v
    {
        return Agreement::NotReproduced(format!(
            "the simulator's worst over its seeds is '{v}'{saw}; the worst of {tries} real tries was '{real}'"
        ));
    }
    Agreement::Agree
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsafe_bound_must_be_reproduced() {
        let bound = Expect::AtWorst(Verdict::ExclusionBroken);
        assert!(matches!(
            agreement(Verdict::Safe, bound, None, 3),
            Agreement::NotReproduced(_)
        ));
        assert_eq!(
            agreement(Verdict::ExclusionBroken, bound, None, 3),
            Agreement::Agree
        );
    }

    #[test]
    fn a_safe_bound_agrees_below_and_disagrees_above() {
        let bound = Expect::AtWorst(Verdict::SafeWithFencing);
        assert_eq!(agreement(Verdict::Safe, bound, None, 3), Agreement::Agree);
        assert!(matches!(
            agreement(Verdict::ExclusionBroken, bound, None, 3),
            Agreement::Disagree(_)
        ));
    }

    #[test]
    fn an_exact_verdict_missed_from_below_is_not_reproduced() {
        let exact = Expect::Exactly(Verdict::SafeWithFencing);
        assert!(matches!(
            agreement(Verdict::Safe, exact, None, 3),
            Agreement::NotReproduced(_)
        ));
        assert_eq!(
            agreement(Verdict::SafeWithFencing, exact, None, 3),
            Agreement::Agree
        );
    }
}
