//! Scheduling hiccups (buggify): client processes stopped for a moment after their polls.
//! They land (a process that hiccups for tens of ms after every poll gets far fewer
//! locks), replay deterministically, and a millisecond at most breaks nothing: the lock's safety
//! does not rest on no time passing between two awaits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario;
use leasehold_sim::scenario::run::{RunSpec, run};
use leasehold_sim::workload::Strategy;

fn hiccuping(strategy: Strategy, seed: u64, chance: f64, max: Duration) -> RunSpec {
    let mut spec = scenario::base(strategy, seed);
    spec.net.hiccup_chance = chance;
    spec.net.hiccup_max = max;
    spec
}

#[test]
fn hiccups_land_replay_and_break_nothing() {
    let ms = Duration::from_millis;
    for strategy in Strategy::ALL {
        let (mut steady, mut stalled) = (0, 0);
        for seed in 0..4 {
            steady += run(&hiccuping(strategy, seed, 0.0, ms(0)))
                .unwrap()
                .stats
                .acquisitions;
            // Long hiccups after every poll, to show they land: far fewer grants.
            let long = hiccuping(strategy, seed, 1.0, ms(50));
            stalled += run(&long).unwrap().stats.acquisitions;
            // Millisecond ones, as the swarm draws them: safe, and replayed exactly.
            let mut spec = hiccuping(strategy, seed, 1.0, ms(1));
            spec.trace = true;
            let result = run(&spec).unwrap();
            assert_eq!(result.verdict(), Verdict::Safe, "{strategy:?} seed {seed}");
            assert_eq!(
                result.trace,
                run(&spec).unwrap().trace,
                "{strategy:?} seed {seed}"
            );
        }
        assert!(
            stalled * 10 < steady * 8,
            "{strategy:?}: {stalled} grants with 50 ms hiccups after every poll, {steady} without"
        );
    }
}
