//! The simulator's parts of the main job: the scenario table, the swarm exploration, the
//! verdict matrix of lock designs and the simulator benchmark, each run through
//! [`leasehold_sim::report::jobs`] (as `leasehold-sim` runs them) and settled into an
//! [`index`](crate::index) part.
//!
//! Invariant: the simulator's jobs are CPU-bound on their own threads; a caller on an async
//! runtime runs these in `block_in_place`.

use std::path::Path;

use indicatif::ProgressBar;
use leasehold_sim::report::designs::{self, DEFAULT_DESIGN_SEEDS, FAULT_CLASSES, Row};
use leasehold_sim::report::jobs::{self as sim_jobs, ScenarioPlan, SwarmArgs};

use crate::index::Part;
use crate::{Error, Result};

/// The simulator's scenario table (every scenario × strategy, default seeds).
pub fn scenarios(
    out: &Path,
    jobs: usize,
    progress_bar: impl Fn(u64) -> ProgressBar,
) -> Result<Part> {
    let plan = ScenarioPlan::new(&[], &[], leasehold_sim::scenario::DEFAULT_SEEDS)?;
    let bar = progress_bar(plan.cell_count() as u64);
    bar.set_message("sim scenarios");
    let table = sim_jobs::run_scenarios(&plan, jobs, || bar.inc(1));
    bar.finish_and_clear();
    let table = table?;
    let files = table
        .write(out)
        .map_err(|err| Error::io("writing the sim scenario table", err))?;
    println!("sim scenarios: {}", sim_jobs::wrote_line(&files));
    Ok(Part::sim_scenarios(&table, files))
}

/// The simulator's swarm exploration over seeds `0..seeds` with the default fault mix.
pub fn explore(
    out: &Path,
    seeds: u64,
    jobs: usize,
    progress_bar: impl Fn(u64) -> ProgressBar,
) -> Result<Part> {
    let swarm = SwarmArgs::default();
    let bar = progress_bar(seeds);
    bar.set_message("sim explore");
    let summary = sim_jobs::run_explore(0, seeds, &swarm, true, jobs, || bar.inc(1));
    bar.finish_and_clear();
    let summary = summary?;
    let files = sim_jobs::write_explore(&summary, &swarm, out)
        .map_err(|err| Error::io("writing the sim exploration", err))?;
    println!(
        "sim explore: {}, and {} shrunk failure(s) under {}",
        sim_jobs::wrote_line(&files.reports),
        files.failures.len(),
        out.join(sim_jobs::FAILURES_DIR).display()
    );
    Ok(Part::sim_explore(&summary, files.all()))
}

/// The simulator benchmark at its default size.
pub fn bench(out: &Path, jobs: usize, progress_bar: impl Fn(u64) -> ProgressBar) -> Result<Part> {
    let seeds = sim_jobs::DEFAULT_BENCH_SEEDS;
    let bar = progress_bar(seeds);
    bar.set_message("sim bench");
    let report = sim_jobs::run_bench(seeds, sim_jobs::DEFAULT_BENCH_VIRTUAL_SECS, jobs, || {
        bar.inc(1)
    });
    bar.finish_and_clear();
    let report = report?;
    let files = sim_jobs::write_bench(&report, out)
        .map_err(|err| Error::io("writing the sim benchmark", err))?;
    println!("sim bench: {}", sim_jobs::wrote_line(&files));
    Ok(Part::sim_bench(&report, files))
}

/// The verdict matrix of lock designs (Leasehold's strategies and the classic designs)
/// under every fault class, with a picture per failing cell.
pub fn designs(out: &Path, jobs: usize, progress_bar: impl Fn(u64) -> ProgressBar) -> Result<Part> {
    let rows = Row::all();
    let bar = progress_bar(rows.len() as u64 * FAULT_CLASSES.len() as u64 * DEFAULT_DESIGN_SEEDS);
    bar.set_message("sim designs");
    let matrix = designs::run_matrix(&rows, DEFAULT_DESIGN_SEEDS, jobs, || bar.inc(1));
    bar.finish_and_clear();
    let mut matrix = matrix?;
    let files = matrix
        .write(out)
        .map_err(|err| Error::io("writing the design matrix", err))?;
    println!("sim designs: {}", sim_jobs::wrote_line(&files));
    Ok(Part::sim_designs(&matrix, files))
}
