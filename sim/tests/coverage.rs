//! Script call-site coverage: a run records the lines of the lock scripts that called
//! Redis, recording changes nothing about the run, and a branch shows up exactly when a
//! run takes it (the fair hand-off's grant only under a fair queue).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold::script::scripts;
use leasehold_sim::run::{run, run_covered};
use leasehold_sim::scenario;
use leasehold_sim::workload::Strategy;

/// The 1-based line of the first line of `script` (a file stem) that contains `code`.
fn line_of(script: &str, code: &str) -> u32 {
    let script = scripts()
        .all()
        .into_iter()
        .find(|s| s.name() == script)
        .unwrap();
    let index = script
        .source()
        .lines()
        .position(|line| line.contains(code))
        .unwrap();
    u32::try_from(index + 1).unwrap()
}

#[test]
fn the_hand_off_grant_is_reached_only_under_a_fair_queue() {
    let clock = line_of("acquire", "redis.call('TIME')");
    let grant = line_of("release", "redis.call('PUBLISH', ARGV[4]");
    for strategy in Strategy::ALL {
        let mut spec = scenario::base(strategy, 1);
        spec.trace = true;
        let covered = run_covered(&spec).unwrap();
        let plain = run(&spec).unwrap();
        assert_eq!(covered.trace, plain.trace, "{strategy:?}");
        assert!(!plain.coverage.reached("acquire", clock), "{strategy:?}");
        let sites = covered.coverage;
        assert!(sites.reached("acquire", clock), "{strategy:?}");
        let fair = matches!(strategy, Strategy::FairQueue);
        assert_eq!(sites.reached("release", grant), fair, "{strategy:?}");
    }
}
