//! Spurious error replies (buggify): nodes answer some script calls with `NOSCRIPT` or
//! `READONLY` without running them. They land (both kinds show in the trace, and a client
//! that met `NOSCRIPT` sends its script's source with `EVAL`), replay deterministically,
//! and break nothing: a refused call is one the lock already treats as not run or unknown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario;
use leasehold_sim::scenario::run::{RunSpec, run};
use leasehold_sim::workload::Strategy;

fn glitching(strategy: Strategy, seed: u64, chance: f64) -> RunSpec {
    let mut spec = scenario::base(strategy, seed);
    spec.net.glitch_chance = chance;
    spec.trace = true;
    spec
}

#[test]
fn glitches_land_replay_and_break_nothing() {
    for strategy in Strategy::ALL {
        let (mut noscript, mut readonly, mut evals) = (0, 0, 0);
        for seed in 0..4 {
            let spec = glitching(strategy, seed, 0.05);
            let result = run(&spec).unwrap();
            assert_eq!(result.verdict(), Verdict::Safe, "{strategy:?} seed {seed}");
            assert!(result.stats.acquisitions > 0, "{strategy:?} seed {seed}");
            noscript += result.trace.matches("glitch: -NOSCRIPT").count();
            readonly += result.trace.matches("glitch: -READONLY").count();
            evals += result.trace.matches(" EVAL ").count();
            assert_eq!(result.trace, run(&spec).unwrap().trace, "{strategy:?}");
        }
        assert!(
            noscript > 0 && readonly > 0,
            "{strategy:?}: {noscript} NOSCRIPT, {readonly} READONLY"
        );
        let quiet = run(&glitching(strategy, 0, 0.0)).unwrap();
        assert!(!quiet.trace.contains("glitch:"), "{strategy:?}");
        assert!(
            evals > quiet.trace.matches(" EVAL ").count(),
            "{strategy:?}: {evals} EVALs over 4 glitching seeds"
        );
    }
}
