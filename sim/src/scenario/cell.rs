//! Running one scenario for one strategy over several seeds, and what the table shows of
//! it: the worst verdict, whether it met the expectation, and the counts behind it.

use serde::Serialize;

use super::shape::{Expect, Scenario};
use crate::checker::Verdict;
use crate::workload::Strategy;

/// The outcome of one scenario for one strategy over several seeds.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Scenario name.
    pub scenario: &'static str,
    /// Strategy.
    pub strategy: Strategy,
    /// What was expected.
    pub expected: Expect,
    /// Worst verdict over the seeds (`None` when pending).
    pub worst: Option<Verdict>,
    /// Verdict per seed.
    pub verdicts: Vec<Verdict>,
    /// Whether the expectation was met.
    pub met: bool,
    /// Smallest lost-signal margin seen (ms).
    pub lost_margin_ms: Option<f64>,
    /// Overlapping hold pairs over all seeds.
    pub overlaps: u64,
    /// Broken exclusions (overlaps or leases the servers no longer held) that no fault
    /// touching the hold explains, over all seeds: a cell with any is not met, whatever
    /// its verdict.
    pub unexcused: u64,
    /// Lock keys the linearizability check left unchecked (its search outgrew its
    /// budget), over all seeds: a cell with any is not met, whatever its verdict, since
    /// part of what it ran was never judged (a scenario whose faults pile up more
    /// concurrent calls than the search can order must be made smaller, not passed).
    pub unchecked: u64,
    /// Stale writes the fenced resource rejected over all seeds.
    pub stale_rejected: u64,
    /// Acquisitions over all seeds.
    pub acquisitions: u64,
    /// The first seed that produced the worst verdict.
    pub worst_seed: Option<u64>,
}

/// Runs `scenario` for `strategy` on seeds `0..seeds`.
pub fn run_cell(
    scenario: &Scenario,
    strategy: Strategy,
    seeds: u64,
) -> Result<Cell, crate::world::SimError> {
    let expected = scenario.expect(strategy);
    let mut cell = Cell {
        scenario: scenario.name,
        strategy,
        expected,
        worst: None,
        verdicts: Vec::new(),
        met: true,
        lost_margin_ms: None,
        overlaps: 0,
        unexcused: 0,
        unchecked: 0,
        stale_rejected: 0,
        acquisitions: 0,
        worst_seed: None,
    };
    if matches!(expected, Expect::Pending(_)) {
        return Ok(cell);
    }
    for seed in 0..seeds {
        let result = crate::scenario::run::run(&scenario.spec(strategy, seed))?;
        let verdict = result.verdict();
        cell.verdicts.push(verdict);
        if cell.worst.is_none_or(|w| verdict > w) {
            cell.worst = Some(verdict);
            cell.worst_seed = Some(seed);
        }
        let f = &result.findings;
        cell.overlaps += f.overlap_count;
        cell.unexcused += f
            .problems
            .iter()
            .filter(|p| p.kind.verdict() == Verdict::ExclusionBroken && !p.excused)
            .count() as u64;
        cell.unchecked += f.linear_reach.unchecked;
        cell.stale_rejected += f.stale_rejected;
        cell.acquisitions += f.acquisitions;
        if let Some(m) = f.lost_margin_ms {
            cell.lost_margin_ms = Some(cell.lost_margin_ms.map_or(m, |c: f64| c.min(m)));
        }
    }
    cell.met = cell.meets();
    Ok(cell)
}

impl Cell {
    /// Whether the cell met its expectation: its worst verdict is what was expected, no
    /// broken exclusion went unexcused, and every lock key was judged.
    fn meets(&self) -> bool {
        self.unexcused == 0
            && self.unchecked == 0
            && self.worst.is_some_and(|w| self.expected.met_by(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safe cell expected safe meets it only while every key was judged and no broken
    /// exclusion went unexcused.
    #[test]
    fn a_cell_with_an_unchecked_key_or_an_unexcused_break_is_not_met() {
        let cell = Cell {
            scenario: "s",
            strategy: Strategy::Spin,
            expected: Expect::Exactly(Verdict::Safe),
            worst: Some(Verdict::Safe),
            verdicts: vec![Verdict::Safe],
            met: false,
            lost_margin_ms: None,
            overlaps: 0,
            unexcused: 0,
            unchecked: 0,
            stale_rejected: 0,
            acquisitions: 1,
            worst_seed: Some(0),
        };
        assert!(cell.meets());
        assert!(
            !Cell {
                unchecked: 1,
                ..cell.clone()
            }
            .meets()
        );
        assert!(
            !Cell {
                unexcused: 1,
                ..cell.clone()
            }
            .meets()
        );
        assert!(
            !Cell {
                worst: Some(Verdict::Starvation),
                ..cell
            }
            .meets()
        );
    }
}
