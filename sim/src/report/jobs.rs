//! The simulator's jobs as every front end runs them: the scenario verdict table, swarm
//! exploration and the simulator benchmark, each spread over worker threads and written
//! as reports (`leasehold-sim` and `leasehold-harness all` both call these).
//!
//! Invariant: a front end only draws progress (through `tick`) and prints; what runs, the
//! verdicts and the files written are the same whoever asks.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::explore::drawn::{ApiDraws, DrawnTally};
use crate::explore::lineage::RunId;
use crate::explore::parallel;
use crate::explore::steer::{self, Budget, DEFAULT_STEER_SHARE, Explored, SteerReport};
use crate::explore::{DEFAULT_HORIZON_SECS, DEFAULT_MAX_CLIENTS, ExploreOptions, FailureReport};
use crate::model::coverage::Coverage;
use crate::report::bench::{self, BenchReport};
use crate::report::branches;
use crate::report::judged::Judged;
use crate::report::picture::{self, Scene};
use crate::report::scopes;
use crate::report::{self, ExploreSummary};
use crate::scenario::run::{self, RunResult, RunSpec};
use crate::scenario::{self, Cell, Scenario, scenarios};
use crate::workload::Strategy;
use crate::workload::client_marks;
use crate::world::SimError;

/// The `--faults` value that selects every fault kind.
pub const ALL_FAULTS: &str = "all";

/// Seeds of the simulator benchmark unless told otherwise: about 10 s of a 2-core machine.
pub const DEFAULT_BENCH_SEEDS: u64 = 200;

/// Virtual seconds per benchmark seed unless told otherwise: long enough that world set-up
/// is a small part of the measured time.
pub const DEFAULT_BENCH_VIRTUAL_SECS: u64 = 120;

/// Directory (under the report directory) of shrunk failures, one RunSpec JSON per run.
pub const FAILURES_DIR: &str = "sim-failures";

/// Worker threads when the caller names none: one per available core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The line a front end prints after a job wrote `paths`: "wrote A and B".
pub fn wrote_line(paths: &[PathBuf]) -> String {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    format!("wrote {}", names.join(" and "))
}

/// Which scenario × strategy cells to run, and over how many seeds each.
#[derive(Debug, Clone)]
pub struct ScenarioPlan {
    cells: Vec<(&'static Scenario, Strategy)>,
    /// Seeds per cell.
    pub seeds: u64,
}

impl ScenarioPlan {
    /// The named scenarios (all when `names` is empty) for `strategies` (all when empty).
    pub fn new(names: &[String], strategies: &[Strategy], seeds: u64) -> Result<Self, SimError> {
        let chosen: Vec<&'static Scenario> = if names.is_empty() {
            scenarios().collect()
        } else {
            names
                .iter()
                .map(|n| scenario::find(n).ok_or_else(|| SimError::UnknownScenario(n.clone())))
                .collect::<Result<_, _>>()?
        };
        let strategies = if strategies.is_empty() {
            Strategy::ALL.to_vec()
        } else {
            strategies.to_vec()
        };
        let cells = chosen
            .iter()
            .flat_map(|sc| strategies.iter().map(move |s| (*sc, *s)))
            .collect();
        Ok(Self { cells, seeds })
    }

    /// Cells to run (each one tick of progress).
    pub fn cell_count(&self) -> usize {
        self.cells.len()
    }
}

/// The verdict table: one cell per scenario × strategy.
#[derive(Debug, Clone)]
pub struct ScenarioTable {
    /// Seeds per cell.
    pub seeds: u64,
    /// Cells in plan order.
    pub cells: Vec<Cell>,
}

impl ScenarioTable {
    /// The table in markdown (`sim-scenarios.md`).
    pub fn markdown(&self) -> String {
        report::verdict_table(&self.cells, self.seeds)
    }

    /// Cells whose expectation was not met, as `scenario × strategy`.
    pub fn unmet(&self) -> Vec<String> {
        self.cells
            .iter()
            .filter(|c| !c.met)
            .map(|c| format!("{} × {}", c.scenario, c.strategy.name()))
            .collect()
    }

    /// Writes `sim-scenarios.md` and `sim-scenarios.json` into `dir`; returns their paths.
    pub fn write(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        Ok(vec![
            report::write_text(dir, "sim-scenarios.md", &self.markdown())?,
            report::write_json(dir, "sim-scenarios.json", &self.cells)?,
        ])
    }
}

/// Runs every cell of `plan` on `jobs` threads; `tick` after each cell.
pub fn run_scenarios(
    plan: &ScenarioPlan,
    jobs: usize,
    tick: impl Fn() + Sync,
) -> Result<ScenarioTable, SimError> {
    let cells = parallel::map(
        &plan.cells,
        jobs,
        |(sc, s)| scenario::run_cell(sc, *s, plan.seeds),
        tick,
    );
    Ok(ScenarioTable {
        seeds: plan.seeds,
        cells: cells.into_iter().collect::<Result<_, _>>()?,
    })
}

/// What a swarm draws from, as the CLI spells it, so that a failure's replay command
/// repeats exactly the flags the exploration ran with (a shard keeps them for `merge`).
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
pub struct SwarmArgs {
    /// Strategies to draw from.
    #[arg(long, value_delimiter = ',')]
    pub strategy: Vec<Strategy>,
    /// Fault kinds to draw from (pause, crash, partition, delay, client-drift, client-jump,
    /// node-jump, node-crash, failover, script-flush, loss), or `all`.
    #[arg(long, value_delimiter = ',', default_value = ALL_FAULTS)]
    pub faults: Vec<String>,
    /// Virtual seconds per run.
    #[arg(long, default_value_t = DEFAULT_HORIZON_SECS)]
    pub horizon_secs: u64,
    /// Most clients per run.
    #[arg(long, default_value_t = DEFAULT_MAX_CLIENTS)]
    pub max_clients: usize,
}

impl Default for SwarmArgs {
    fn default() -> Self {
        Self {
            strategy: Vec::new(),
            faults: vec![ALL_FAULTS.to_owned()],
            horizon_secs: DEFAULT_HORIZON_SECS,
            max_clients: DEFAULT_MAX_CLIENTS,
        }
    }
}

impl SwarmArgs {
    /// The exploration options these flags stand for.
    pub fn options(&self) -> Result<ExploreOptions, SimError> {
        let strategies = if self.strategy.is_empty() {
            Strategy::ALL.to_vec()
        } else {
            self.strategy.clone()
        };
        let all = ExploreOptions::default();
        let faults = if self.faults.iter().any(|f| f == ALL_FAULTS) {
            all.faults
        } else {
            if let Some(unknown) = self.faults.iter().find(|f| !all.faults.contains(f)) {
                return Err(SimError::UnknownFault(unknown.clone()));
            }
            self.faults.clone()
        };
        Ok(ExploreOptions {
            strategies,
            faults,
            max_clients: self.max_clients,
            horizon: Duration::from_secs(self.horizon_secs),
            ..all
        })
    }

    /// The `leasehold-sim replay` command that re-runs `run` (a plain seed or a steered
    /// run) under these flags.
    pub fn replay_command(&self, run: &RunId) -> String {
        let mut cmd = format!("cargo run --release -p leasehold-sim -- replay {run}");
        if !self.strategy.is_empty() {
            let names: Vec<String> = self
                .strategy
                .iter()
                .filter_map(|s| s.to_possible_value().map(|v| v.get_name().to_owned()))
                .collect();
            cmd += &format!(" --strategy {}", names.join(","));
        }
        cmd += &format!(
            " --faults {} --horizon-secs {} --max-clients {}",
            self.faults.join(","),
            self.horizon_secs,
            self.max_clients
        );
        cmd
    }
}

/// Explores `seeds` runs from seed `start` on `jobs` threads, the default share of them
/// steered ([`DEFAULT_STEER_SHARE`]); `tick` after each run.
pub fn run_explore(
    start: u64,
    seeds: u64,
    swarm: &SwarmArgs,
    shrink_failures: bool,
    jobs: usize,
    tick: impl Fn() + Sync,
) -> Result<ExploreSummary, SimError> {
    let budget = Budget::new(seeds, DEFAULT_STEER_SHARE)?;
    run_explore_steered(start, budget, swarm, shrink_failures, jobs, tick)
}

/// Explores plain seeds `start..start + budget.plain` and then `budget.steered` steered
/// runs ([`steer`]) on `jobs` threads; `tick` after each run.
pub fn run_explore_steered(
    start: u64,
    budget: Budget,
    swarm: &SwarmArgs,
    shrink_failures: bool,
    jobs: usize,
    tick: impl Fn() + Sync,
) -> Result<ExploreSummary, SimError> {
    let options = swarm.options()?;
    let started = Instant::now();
    let (explored, steering) =
        steer::explore(start, budget, &options, shrink_failures, jobs, tick)?;
    let wall_secs = started.elapsed().as_secs_f64();
    Ok(summarize(start, options, explored, steering, wall_secs))
}

/// The summary of an exploration from seed `start` under `options`: its runs `explored`
/// in run order, what steering did, and the wall-clock seconds it took.
pub fn summarize(
    start: u64,
    options: ExploreOptions,
    explored: Vec<Explored>,
    steering: SteerReport,
    wall_secs: f64,
) -> ExploreSummary {
    let mut summary = ExploreSummary {
        start,
        seeds: steering.plain + steering.steered,
        options,
        verdicts: [0; 5],
        failures: Vec::new(),
        wall_secs,
        coverage: Vec::new(),
        branches: branches::tally(explored.iter().map(|r| (&r.id, &r.outcome.coverage))),
        client_marks: Vec::new(),
        steering,
        judged: Judged::of(
            explored
                .iter()
                .map(|r| (&r.outcome.problem_counts[..], r.outcome.linear_reach)),
        ),
        scopes: scopes::tally(
            explored
                .iter()
                .filter(|r| r.id.steps.is_empty())
                .map(|r| &r.outcome.scopes[..]),
        ),
        drawn: DrawnTally::of(explored.iter().map(|r| &r.outcome.drawn)),
        api_draws: ApiDraws::of(explored.iter().filter(|r| r.id.is_plain()).map(|r| {
            let o = &r.outcome;
            (&o.drawn, &o.coverage, &o.client_marks)
        })),
    };
    let mut reached = Coverage::default();
    let mut marks = Vec::with_capacity(explored.len());
    for run in explored {
        let outcome = run.outcome;
        summary.verdicts[outcome.verdict as usize] += 1;
        summary.failures.extend(outcome.failure);
        reached.merge(&outcome.coverage);
        marks.push(outcome.client_marks);
    }
    summary.coverage = reached.by_script();
    summary.client_marks = client_marks::tally(&marks);
    summary
}

/// The exploration report in markdown (`sim-explore.md`), with replay commands for `swarm`
/// and, for each shrunk failure, a link to its picture.
pub fn explore_markdown(summary: &ExploreSummary, swarm: &SwarmArgs) -> String {
    report::explore_markdown(summary, &|run| swarm.replay_command(run), &|f| {
        picture_name(f).map(|name| format!("{FAILURES_DIR}/{name}"))
    })
}

/// The file name of a failure's picture under [`FAILURES_DIR`]; only a shrunk failure has
/// one (`explore --no-shrink`, the mutation gate's, only needs to know which seeds fail,
/// and drawing each would run it again).
fn picture_name(failure: &FailureReport) -> Option<String> {
    (failure.shrink_runs > 0).then(|| format!("seed-{}.svg", failure.run_id().file_stem()))
}

/// Writes the picture of `result`, a run of `spec`, headed `title`, as `dir/name`
/// ([`picture`]); returns its path.
pub fn write_picture(
    dir: &Path,
    name: &str,
    title: &str,
    spec: &RunSpec,
    result: &RunResult,
) -> io::Result<PathBuf> {
    let svg = picture::render(&Scene::of_run(title, spec, result));
    report::write_text(dir, name, &svg)
}

/// Runs a shrunk failure's spec again and writes its picture under `dir`.
fn write_failure_picture(dir: &Path, failure: &FailureReport, name: &str) -> io::Result<PathBuf> {
    let result = run::run(&failure.shrunk).map_err(io::Error::other)?;
    let title = format!(
        "seed {} ({}, shrunk): {}",
        failure.run_id(),
        failure.strategy.name(),
        result.verdict()
    );
    write_picture(dir, name, &title, &failure.shrunk, &result)
}

/// The files an exploration wrote.
#[derive(Debug, Clone)]
pub struct ExploreFiles {
    /// `sim-explore.md` and `sim-explore.json`.
    pub reports: Vec<PathBuf>,
    /// Per failing run, its shrunk RunSpec under [`FAILURES_DIR`].
    pub failures: Vec<(RunId, PathBuf)>,
    /// Per shrunk failure, its picture beside its spec.
    pub pictures: Vec<PathBuf>,
}

impl ExploreFiles {
    /// Every path, reports first.
    pub fn all(&self) -> Vec<PathBuf> {
        let failures = self.failures.iter().map(|(_, p)| p.clone());
        let pictures = self.pictures.iter().cloned();
        self.reports
            .iter()
            .cloned()
            .chain(failures)
            .chain(pictures)
            .collect()
    }
}

/// Writes `sim-explore.md`, `sim-explore.json`, each failure's shrunk spec and each shrunk
/// failure's picture into `dir`.
pub fn write_explore(
    summary: &ExploreSummary,
    swarm: &SwarmArgs,
    dir: &Path,
) -> io::Result<ExploreFiles> {
    let reports = write_explore_reports(summary, swarm, summary, dir)?;
    write_failures(summary, reports, dir)
}

/// Writes `sim-explore.md` for `summary` and `json` (the summary, or a shard's summary with
/// its record) as `sim-explore.json` into `dir`; returns their paths.
pub fn write_explore_reports(
    summary: &ExploreSummary,
    swarm: &SwarmArgs,
    json: &impl Serialize,
    dir: &Path,
) -> io::Result<Vec<PathBuf>> {
    Ok(vec![
        report::write_text(dir, "sim-explore.md", &explore_markdown(summary, swarm))?,
        report::write_json(dir, "sim-explore.json", json)?,
    ])
}

/// Writes each failure's shrunk spec and each shrunk failure's picture under `dir`; returns
/// them with `reports`, the reports already written.
pub fn write_failures(
    summary: &ExploreSummary,
    reports: Vec<PathBuf>,
    dir: &Path,
) -> io::Result<ExploreFiles> {
    let failures = summary
        .failures
        .iter()
        .map(|f| {
            let run = f.run_id();
            let name = format!("seed-{}.json", run.file_stem());
            report::write_json(&dir.join(FAILURES_DIR), &name, &f.shrunk).map(|p| (run, p))
        })
        .collect::<io::Result<_>>()?;
    let pictures = summary
        .failures
        .iter()
        .filter_map(|f| picture_name(f).map(|name| (f, name)))
        .map(|(f, name)| write_failure_picture(&dir.join(FAILURES_DIR), f, &name))
        .collect::<io::Result<_>>()?;
    Ok(ExploreFiles {
        reports,
        failures,
        pictures,
    })
}

/// The benchmark job, under the name the other jobs' `run_*` pattern gives it.
pub use crate::report::bench::bench as run_bench;

/// Writes `sim-bench.md` and `sim-bench.json` into `dir`; returns their paths.
pub fn write_bench(report: &BenchReport, dir: &Path) -> io::Result<Vec<PathBuf>> {
    Ok(vec![
        report::write_text(dir, "sim-bench.md", &bench::markdown(report))?,
        report::write_json(dir, "sim-bench.json", report)?,
    ])
}
