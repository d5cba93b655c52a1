//! The operation scenarios (`try-lock-lossy`, `acquire-cancel`) are judged by
//! `scenarios.rs`; this file shows, from the trace of each run, that the operation each is
//! about actually happened: single attempts found the lock taken, and acquires were
//! dropped mid-flight.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_sim::run;
use leasehold_sim::scenario;
use leasehold_sim::workload::Strategy;

/// How many trace lines of `name` × `strategy` on seed 0 contain `needle`.
fn count(name: &str, strategy: Strategy, needle: &str) -> usize {
    let mut spec = scenario::find(name).unwrap().spec(strategy, 0);
    spec.trace = true;
    let trace = run::run(&spec).unwrap().trace;
    trace.lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn single_attempts_find_the_lock_taken() {
    for strategy in Strategy::ALL {
        let refused = count("try-lock-lossy", strategy, "is held by another owner");
        assert!(
            refused >= 3,
            "{strategy:?}: only {refused} refused attempts"
        );
    }
}

#[test]
fn acquires_are_dropped_mid_flight() {
    for strategy in Strategy::ALL {
        let dropped = count("acquire-cancel", strategy, "dropped mid-flight");
        assert!(
            dropped >= 3,
            "{strategy:?}: only {dropped} dropped acquires"
        );
    }
}
