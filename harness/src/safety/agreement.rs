//! A cell's verdict over its seeded tries and its agreement with the simulator: the worst
//! verdict with counts per verdict, how many tries' faults landed, and the comparison with
//! the simulator's cell for the same scenario, strategy and lock kind.
//!
//! Invariant: a cell passes only on evidence. It is "inconclusive" when no try's fault
//! landed; and where the simulator finds the scenario unsafe (its expectation's bound is
//! exclusion broken or worse), a real cell that never got that bad is "not reproduced",
//! not "agree": a check that only ever passes has shown nothing. A design row is set
//! beside the simulator's design-matrix cell for the same design and fault class, outcome
//! against outcome: it agrees only when real Redis gave the simulator's worst outcome.

use leasehold_sim::checker::{ProblemKind, Verdict};
use leasehold_sim::report::designs::{self, Outcome, Row};
use leasehold_sim::scenario::Expect;
use leasehold_sim::workload::designs::Design;

use crate::safety::report::{Agreement, CellReport, DesignSim, TryReport};
use crate::safety::scenario::SafetyScenario;
use crate::safety::subject::Subject;

/// How many of `items` are each value, worst (largest) first.
pub(super) fn tally<T: Ord + Copy>(items: impl Iterator<Item = T>) -> Vec<(T, u64)> {
    let mut counts: Vec<(T, u64)> = Vec::new();
    for item in items {
        match counts.iter_mut().find(|(v, _)| *v == item) {
            Some((_, n)) => *n += 1,
            None => counts.push((item, 1)),
        }
    }
    counts.sort_by_key(|&(v, _)| std::cmp::Reverse(v));
    counts
}

/// The cell of `scenario` for `subject` from its tries (simulator columns still empty).
pub(super) fn cell(
    scenario: &SafetyScenario,
    subject: Subject,
    tries: Vec<TryReport>,
) -> CellReport {
    let real = tries.iter().map(|t| t.real).max().unwrap_or(Verdict::Safe);
    let verdicts = tally(tries.iter().map(|t| t.real));
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
        outcome: tries
            .iter()
            .map(|t| t.outcome)
            .max()
            .unwrap_or(Outcome::Safe),
        design_sim: None,
        tries,
    }
}

/// Fills in the simulator's expectation and observation (over `seeds` seeds; 0: the
/// expectation only) and the agreement.
pub(super) async fn compare_with_sim(cell: &mut CellReport, scenario: &SafetyScenario, seeds: u64) {
    cell.agreement = match cell.subject {
        Subject::Leasehold(strategy) => sim_agreement(cell, scenario, strategy, seeds).await,
        Subject::Rslock { .. } => Agreement::Peer,
        Subject::Design(design) => design_agreement(cell, scenario, design, seeds).await,
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

/// Seeds of the simulator's cell beside a design row (the design matrix's runs take
/// about 10 ms each): a design's worst in a few real tries is often a race the simulator
/// meets in one seed of four (`reports/designs.md`), so two seeds would call it a
/// disagreement the simulator has in fact seen.
pub const DESIGN_SIM_SEEDS: u64 = 16;

/// Fills in the simulator's design-matrix cell of a design row (over
/// [`DESIGN_SIM_SEEDS`] seeds; none when `seeds` is 0, as for Leasehold's rows) and
/// returns its agreement.
async fn design_agreement(
    cell: &mut CellReport,
    scenario: &SafetyScenario,
    design: Design,
    seeds: u64,
) -> Agreement {
    if seeds == 0 {
        return Agreement::NoSim;
    }
    let Some(class) = scenario.sim.and_then(designs::class_of_scenario) else {
        return Agreement::NoSim;
    };
    // The simulator is CPU-bound and synchronous: keep it off the async workers.
    let sim = tokio::task::spawn_blocking(move || {
        designs::run_cell(&Row::Other(design), class, DESIGN_SIM_SEEDS)
    })
    .await;
    let sim = match sim {
        Ok(Ok(sim)) => sim,
        Ok(Err(err)) => return Agreement::Inconclusive(format!("simulator cell failed: {err}")),
        Err(err) => return Agreement::Inconclusive(format!("simulator task failed: {err}")),
    };
    cell.design_sim = Some(DesignSim {
        class: sim.class.to_owned(),
        worst: sim.worst,
        worst_runs: sim.worst_runs,
        runs: sim.runs,
        landed: sim.landed,
        first_seed: sim.first_seed,
        problem: sim.problem,
        problem_kind: sim.problem_kind,
    });
    let agreement = outcome_agreement(cell.outcome, sim.worst, cell.tries.len());
    match (
        agreement,
        cell.design_sim.as_ref().and_then(|s| s.problem_kind),
    ) {
        (Agreement::NotReproduced(why), Some(ProblemKind::LeaseGone)) => {
            Agreement::NotReproduced(format!(
                "{why}: the simulator's finding is a belief the servers no longer backed \
                 (LeaseGone, read from its server-truth oracle), which a real run, judged on \
                 overlapping beliefs only, sees only when another client took the lock meanwhile"
            ))
        }
        (agreement, _) => agreement,
    }
}

/// The agreement of a design row's worst real outcome over `tries` tries with its
/// simulator cell's worst.
fn outcome_agreement(real: Outcome, sim: Outcome, tries: usize) -> Agreement {
    match real.cmp(&sim) {
        std::cmp::Ordering::Equal => Agreement::Agree,
        std::cmp::Ordering::Greater => Agreement::Disagree(format!(
            "real Redis gave '{}', the simulator's worst is '{}'",
            real.word(),
            sim.word()
        )),
        std::cmp::Ordering::Less => Agreement::NotReproduced(format!(
            "the simulator's worst is '{}'; the worst of {tries} real tries was '{}'",
            sim.word(),
            real.word()
        )),
    }
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
    fn a_design_row_agrees_only_on_the_simulators_outcome() {
        assert_eq!(
            outcome_agreement(Outcome::Stranded, Outcome::Stranded, 3),
            Agreement::Agree
        );
        assert!(matches!(
            outcome_agreement(Outcome::Safe, Outcome::ExclusionBroken, 3),
            Agreement::NotReproduced(_)
        ));
        assert!(matches!(
            outcome_agreement(Outcome::ExclusionBroken, Outcome::Stranded, 3),
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
