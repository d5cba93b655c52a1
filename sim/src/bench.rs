//! Simulator throughput: lock operations and seeds per wall-clock time.
//!
//! Invariant: the benchmark runs the same swarm specs as `explore` (fault mixes
//! included), so its numbers predict what a CI exploration budget buys.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::explore::{ExploreOptions, swarm_spec};
use crate::parallel;
use crate::run::run;
use crate::world::SimError;

/// Benchmark results.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Seeds run.
    pub seeds: u64,
    /// Worker threads.
    pub jobs: usize,
    /// Virtual time per seed.
    pub virtual_secs_per_seed: f64,
    /// Wall-clock seconds in total.
    pub wall_secs: f64,
    /// Successful acquisitions over all seeds.
    pub acquisitions: u64,
    /// Redis commands processed over all seeds.
    pub commands: u64,
    /// Executor polls over all seeds.
    pub polls: u64,
    /// Acquisitions per wall-clock second.
    pub lock_ops_per_sec: f64,
    /// Redis commands per wall-clock second.
    pub commands_per_sec: f64,
    /// Seeds per wall-clock minute.
    pub seeds_per_min: f64,
    /// Virtual seconds simulated per wall second.
    pub speedup: f64,
    /// Build profile the numbers come from.
    pub profile: &'static str,
}

/// Benchmarks the simulator: `seeds` swarm seeds of `virtual_secs` each on `jobs` threads.
pub fn bench(
    seeds: u64,
    virtual_secs: u64,
    jobs: usize,
    tick: impl Fn() + Sync,
) -> Result<BenchReport, SimError> {
    let horizon = Duration::from_secs(virtual_secs);
    let options = ExploreOptions {
        horizon,
        ..ExploreOptions::default()
    };
    let items: Vec<u64> = (0..seeds).collect();
    let started = Instant::now();
    let results = parallel::map(&items, jobs, |&seed| run(&swarm_spec(seed, &options)), tick);
    let wall = started.elapsed().as_secs_f64().max(1e-9);
    let mut report = BenchReport {
        seeds,
        jobs,
        virtual_secs_per_seed: horizon.as_secs_f64(),
        wall_secs: wall,
        acquisitions: 0,
        commands: 0,
        polls: 0,
        lock_ops_per_sec: 0.0,
        commands_per_sec: 0.0,
        seeds_per_min: 0.0,
        speedup: 0.0,
        profile: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
    };
    for result in results {
        let result = result?;
        report.acquisitions += result.stats.acquisitions;
        report.commands += result.stats.commands;
        report.polls += result.stats.polls;
    }
    report.lock_ops_per_sec = report.acquisitions as f64 / wall;
    report.commands_per_sec = report.commands as f64 / wall;
    report.seeds_per_min = seeds as f64 * 60.0 / wall;
    report.speedup = seeds as f64 * horizon.as_secs_f64() / wall;
    Ok(report)
}

/// The report in markdown.
pub fn markdown(r: &BenchReport) -> String {
    format!(
        "# Simulator benchmark\n\n{} swarm seeds × {:.0} s virtual time, {} thread(s), {} build: {:.1} s wall.\n\n\
         | metric | value |\n|---|---|\n\
         | lock acquisitions / wall s | {:.0} |\n| Redis commands / wall s | {:.0} |\n\
         | seeds / wall min | {:.0} |\n| virtual s / wall s | {:.0} |\n",
        r.seeds,
        r.virtual_secs_per_seed,
        r.jobs,
        r.profile,
        r.wall_secs,
        r.lock_ops_per_sec,
        r.commands_per_sec,
        r.seeds_per_min,
        r.speedup
    )
}
