//! Simulator throughput: lock operations and seeds per wall-clock time.
//!
//! Invariant: the benchmark runs the same swarm specs as `explore` (fault mixes
//! included), so its numbers predict what a CI exploration budget buys. Wall-clock rates
//! move with whatever else the machine runs, so the report also gives the process's own
//! CPU time and the load average around the run: seeds per CPU minute is the figure to
//! compare across runs, the wall rates only within one.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::explore::parallel;
use crate::explore::{ExploreOptions, swarm_spec};
use crate::scenario::run::run;
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
    /// CPU seconds the process spent (user + system, every thread) during the run, if the
    /// platform reports it.
    pub cpu_secs: Option<f64>,
    /// Seeds per CPU minute: the rate that load from other processes moves least.
    pub seeds_per_cpu_min: Option<f64>,
    /// The 1-minute load average at the start and at the end, if the platform reports it.
    pub load: Option<(f64, f64)>,
    /// Build profile the numbers come from.
    pub profile: &'static str,
}

/// Clock ticks per second of `/proc/self/stat`'s CPU times: Linux reports them in
/// `USER_HZ`, which its ABI fixes at 100 on every architecture it exports it to user space.
const USER_HZ: f64 = 100.0;

/// The process's CPU seconds so far (user + system, all threads), from `/proc/self/stat`.
fn process_cpu_secs() -> Option<f64> {
    cpu_secs_of_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// The user + system CPU seconds in a `/proc/<pid>/stat` line.
fn cpu_secs_of_stat(stat: &str) -> Option<f64> {
    // The command name (field 2) may hold spaces; every field after its closing
    // parenthesis is numeric. utime and stime are fields 14 and 15, so the 12th and 13th
    // after the parenthesis.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let user: f64 = fields.next()?.parse().ok()?;
    let system: f64 = fields.next()?.parse().ok()?;
    Some((user + system) / USER_HZ)
}

/// The 1-minute load average, from `/proc/loadavg`.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
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
    let load_before = load_average();
    let cpu_before = process_cpu_secs();
    let started = Instant::now();
    let results = parallel::map(&items, jobs, |&seed| run(&swarm_spec(seed, &options)), tick);
    let wall = started.elapsed().as_secs_f64().max(1e-9);
    let cpu_secs = cpu_before
        .zip(process_cpu_secs())
        .map(|(before, after)| after - before);
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
        cpu_secs,
        seeds_per_cpu_min: cpu_secs
            .filter(|&cpu| cpu > 0.0)
            .map(|cpu| seeds as f64 * 60.0 / cpu),
        load: load_before.zip(load_average()),
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
    let unknown = || "not reported".to_owned();
    let cpu = r.cpu_secs.map_or_else(unknown, |cpu| format!("{cpu:.1} s"));
    let per_cpu_min = r
        .seeds_per_cpu_min
        .map_or_else(unknown, |rate| format!("{rate:.0}"));
    let load = r.load.map_or_else(unknown, |(before, after)| {
        format!("{before:.2} before, {after:.2} after")
    });
    format!(
        "# Simulator benchmark\n\n{} swarm seeds × {:.0} s virtual time, {} thread(s), {} build: {:.1} s wall, \
         {cpu} of process CPU; 1-minute load average {load}.\n\n\
         Wall rates move with other work on the machine; seeds per CPU minute moves least, \
         so compare it across runs and the wall rates only within one.\n\n\
         | metric | value |\n|---|---|\n\
         | seeds / CPU min | {per_cpu_min} |\n\
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

#[cfg(test)]
mod tests {
    use super::cpu_secs_of_stat;

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime ...
        let stat = "4242 (sim (a b)) R 1 2 3 4 5 6 7 8 9 10 250 125 0 0 20 0 2";
        assert_eq!(cpu_secs_of_stat(stat), Some(3.75));
        assert_eq!(cpu_secs_of_stat("4242 (sim) R 1 2"), None);
    }
}
