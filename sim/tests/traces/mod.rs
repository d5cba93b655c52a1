//! Reading the simulator's run traces in the bite tests: the traces of a scenario's judged
//! seeds, the time of a line, and the lost signals in a window.

#![allow(clippy::unwrap_used)]

use leasehold_sim::scenario::run;
use leasehold_sim::scenario::{self, DEFAULT_SEEDS};
use leasehold_sim::workload::Strategy;

/// Seeds whose traces are searched for evidence: those the scenario table judges.
pub const SEEDS: u64 = DEFAULT_SEEDS;

/// The traces of `name` × `strategy` on seeds `0..SEEDS`.
pub fn traces(name: &str, strategy: Strategy) -> Vec<String> {
    (0..SEEDS)
        .map(|seed| {
            let mut spec = scenario::find(name).unwrap().spec(strategy, seed);
            spec.trace = true;
            run::run(&spec).unwrap().trace
        })
        .collect()
}

/// Seconds of the trace line (its first field).
pub fn at(line: &str) -> f64 {
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// Lost signals that fired inside `[from, to]` seconds.
pub fn lost_between(trace: &str, (from, to): (f64, f64)) -> usize {
    trace
        .lines()
        .filter(|l| l.ends_with(" Lost") && (from..=to).contains(&at(l)))
        .count()
}
