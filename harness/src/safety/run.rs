//! Runs the real-fault catalogue: per scenario one topology (`infra`), per strategy one cell
//! (`cell`) of [`CLIENTS`] workers against a fenced resource with the fault injected mid-run
//! (`inject`), the history judged by the simulator's checker and set beside the simulator's
//! cell (`judge`).
//!
//! Invariant: one topology at a time — a scenario's containers are started before its first
//! cell, replaced only when a strategy needs another topology, and removed before the next
//! scenario's start, so the small machine never runs two.

use std::time::Instant;

use leasehold_sim::workload::Strategy;

use crate::error::Result;
use crate::safety::cell;
use crate::safety::infra::Infra;
use crate::safety::judge::compare_with_sim;
use crate::safety::report::{CellReport, SafetyReport};
use crate::safety::scenario::{CLIENTS, SafetyScenario, TTL};

/// Seeds per simulator cell unless told otherwise: enough to show the simulator's verdict
/// beside the real one while keeping the table's simulator share to seconds.
pub const DEFAULT_SIM_SEEDS: u64 = 2;

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Scenarios, in order.
    pub scenarios: Vec<&'static SafetyScenario>,
    /// Only these strategies (empty: each scenario's own list).
    pub strategies: Vec<Strategy>,
    /// Seeds per simulator cell (0: do not run the simulator, show its expectation only).
    pub sim_seeds: u64,
}

/// Progress events of a safety run, for the CLI.
#[derive(Debug)]
pub enum SafetyProgress<'a> {
    /// Starting containers.
    Setup(String),
    /// A cell is about to run.
    CellStarted(&'static str, Strategy),
    /// A cell finished.
    CellFinished(&'a CellReport),
}

/// Runs `plan`, reporting progress; containers are started per scenario and removed after.
pub async fn run(
    plan: &Plan,
    on_progress: &mut dyn FnMut(SafetyProgress<'_>),
) -> Result<SafetyReport> {
    let started = Instant::now();
    let mut cells = Vec::new();
    for scenario in &plan.scenarios {
        let strategies: Vec<Strategy> = scenario
            .strategies
            .iter()
            .copied()
            .filter(|s| plan.strategies.is_empty() || plan.strategies.contains(s))
            .collect();
        let mut infra: Option<Infra> = None;
        for strategy in strategies {
            let wants_masters = strategy == Strategy::RedLock;
            if infra
                .as_ref()
                .is_none_or(|i| i.is_masters() != wants_masters)
            {
                // Drop the old topology first: the machine is small.
                drop(infra.take());
                on_progress(SafetyProgress::Setup(format!(
                    "{}: starting containers for {}",
                    scenario.name,
                    strategy.name()
                )));
                infra = Some(Infra::start(scenario.topology, strategy).await?);
            }
            let Some(current) = infra.as_ref() else {
                continue;
            };
            on_progress(SafetyProgress::CellStarted(scenario.name, strategy));
            let mut cell = cell::run(current, scenario, strategy).await?;
            compare_with_sim(&mut cell, scenario, strategy, plan.sim_seeds).await;
            on_progress(SafetyProgress::CellFinished(&cell));
            cells.push(cell);
        }
    }
    Ok(SafetyReport {
        elapsed_s: started.elapsed().as_secs_f64(),
        sim_seeds: plan.sim_seeds,
        ttl_ms: u64::try_from(TTL.as_millis()).unwrap_or(u64::MAX),
        clients: CLIENTS,
        cells,
    })
}
