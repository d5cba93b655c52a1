//! Runs the real-fault catalogue: per scenario one topology (`infra`), per subject
//! (Leasehold's strategies, then the rslock peer, then the classic designs) one cell (`cell`) of seeded tries, each of
//! [`CLIENTS`] workers (4 for the read-write lock and the semaphore) against a fenced
//! resource with the fault injected mid-run (`inject`), each history judged by the
//! simulator's checker (`judge`) and the cell set beside the simulator's (`agreement`).
//!
//! Invariant: one topology at a time — a scenario's containers are started before its first
//! cell, replaced only when a strategy needs another topology, and removed before the next
//! scenario's start, so the small machine never runs two.

use std::path::PathBuf;
use std::time::Instant;

use leasehold_sim::report::designs;
use leasehold_sim::workload::designs::Design;
use leasehold_sim::workload::{LockKind, Strategy};

use crate::error::Result;
use crate::safety::agreement::compare_with_sim;
use crate::safety::cell::{self, CellPlan};
use crate::safety::infra::Infra;
use crate::safety::report::{CellReport, SafetyReport};
use crate::safety::scenario::{CLIENTS, RealFault, SafetyScenario, TTL, Topology};
use crate::safety::subject::Subject;

/// Seeds per simulator cell unless told otherwise: enough to show the simulator's verdict
/// beside the real one while keeping the table's simulator share to seconds.
pub const DEFAULT_SIM_SEEDS: u64 = 2;

/// Seeded tries per real cell unless told otherwise: the "at least 3", so a race
/// the fault opens has three chances to show.
pub const DEFAULT_TRIES: u64 = 3;

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Scenarios, in order.
    pub scenarios: Vec<&'static SafetyScenario>,
    /// Only these strategies (empty: each scenario's own list).
    pub strategies: Vec<Strategy>,
    /// Seeds per simulator cell (0: do not run the simulator, show its expectation only).
    pub sim_seeds: u64,
    /// Seeded tries per real cell (seeds `0..tries`).
    pub tries: u64,
    /// Include rslock's rows where a scenario has them.
    pub peers: bool,
    /// The classic designs whose rows to include where a scenario has a design-matrix
    /// column ([`Plan::design_rows`]); empty: none.
    pub designs: Vec<Design>,
    /// The harness binary, for worker processes (holder-freeze); without it those cells
    /// are skipped.
    pub worker_exe: Option<PathBuf>,
}

impl Plan {
    /// The subjects `scenario` runs for under this plan, in table order.
    pub fn subjects(&self, scenario: &SafetyScenario) -> Vec<Subject> {
        if scenario.fault_needs_process() && self.worker_exe.is_none() {
            return Vec::new();
        }
        let strategies: Vec<Strategy> = scenario
            .strategies
            .iter()
            .copied()
            .filter(|s| self.strategies.is_empty() || self.strategies.contains(s))
            .collect();
        let mut subjects: Vec<Subject> =
            strategies.iter().map(|&s| Subject::Leasehold(s)).collect();
        if self.peers && scenario.rslock {
            if strategies.iter().any(|&s| s != Strategy::RedLock) {
                subjects.push(Subject::Rslock { redlock: false });
            }
            if strategies.contains(&Strategy::RedLock) {
                subjects.push(Subject::Rslock { redlock: true });
            }
        }
        if Self::design_rows(scenario) {
            // RedLock's design first, beside rslock's RedLock on the same masters, then
            // the single-node designs: one change of topology.
            let mut designs: Vec<Design> = self
                .designs
                .iter()
                .copied()
                .filter(|d| strategies.contains(&d.strategy()))
                .collect();
            designs.sort_by_key(|d| d.strategy() != Strategy::RedLock);
            subjects.extend(designs.into_iter().map(Subject::Design));
        }
        subjects
    }

    /// Whether `scenario` has design rows: a mutex scenario whose simulator scenario is a
    /// column of the design matrix, on one node or the masters (the designs have no
    /// Sentinel client), whose fault stops the holder's whole process if it stops the
    /// holder (a task pause would leave a design's own renewal task running, which the
    /// simulator's paused process does not).
    pub fn design_rows(scenario: &SafetyScenario) -> bool {
        scenario.kind == LockKind::Mutex
            && scenario
                .sim
                .is_some_and(|sim| designs::class_of_scenario(sim).is_some())
            && !matches!(
                scenario.topology,
                Topology::Sentinel | Topology::ClockedSentinel
            )
            && !matches!(scenario.fault, RealFault::HolderPause(_))
    }

    /// How many cells the plan runs.
    pub fn cell_count(&self) -> usize {
        self.scenarios.iter().map(|s| self.subjects(s).len()).sum()
    }
}

/// Progress events of a safety run, for the CLI.
#[derive(Debug)]
pub enum SafetyProgress<'a> {
    /// Starting containers.
    Setup(String),
    /// A cell is about to run.
    CellStarted(&'static str, Subject),
    /// A cell finished.
    CellFinished(&'a CellReport),
}

/// Runs `plan`, reporting progress; containers are started per scenario and removed after.
pub async fn run(
    plan: &Plan,
    on_progress: &mut dyn FnMut(SafetyProgress<'_>),
) -> Result<SafetyReport> {
    let started = Instant::now();
    let seeds: Vec<u64> = (0..plan.tries.max(1)).collect();
    let mut cells = Vec::new();
    for scenario in &plan.scenarios {
        let mut infra: Option<Infra> = None;
        for subject in plan.subjects(scenario) {
            let wants_masters = subject.strategy() == Strategy::RedLock;
            if infra
                .as_ref()
                .is_none_or(|i| i.is_masters() != wants_masters)
            {
                // Drop the old topology first: the machine is small.
                drop(infra.take());
                on_progress(SafetyProgress::Setup(format!(
                    "{}: starting containers for {}",
                    scenario.name,
                    subject.label()
                )));
                infra = Some(Infra::start(scenario.topology, subject.strategy()).await?);
            }
            let Some(current) = infra.as_ref() else {
                continue;
            };
            on_progress(SafetyProgress::CellStarted(scenario.name, subject));
            let cell_plan = CellPlan {
                infra: current,
                scenario,
                subject,
                seeds: &seeds,
                worker_exe: plan.worker_exe.as_deref(),
            };
            let mut cell = cell::run(&cell_plan).await?;
            compare_with_sim(&mut cell, scenario, plan.sim_seeds).await;
            on_progress(SafetyProgress::CellFinished(&cell));
            cells.push(cell);
        }
    }
    Ok(SafetyReport {
        elapsed_s: started.elapsed().as_secs_f64(),
        sim_seeds: plan.sim_seeds,
        tries: seeds.len() as u64,
        ttl_ms: u64::try_from(TTL.as_millis()).unwrap_or(u64::MAX),
        clients: CLIENTS,
        cells,
    })
}
