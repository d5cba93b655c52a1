//! Same seed, same trace — byte for byte — including under faults and across threads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_sim::explore::{ExploreOptions, swarm_spec};
use leasehold_sim::scenario;
use leasehold_sim::scenario::run::run;
use leasehold_sim::workload::Strategy;

fn trace_of(spec: &leasehold_sim::scenario::run::RunSpec) -> String {
    let mut spec = spec.clone();
    spec.trace = true;
    run(&spec).unwrap().trace
}

#[test]
fn same_seed_gives_identical_trace_bytes() {
    let sc = scenario::find("holder-pause").unwrap();
    for strategy in Strategy::ALL {
        let spec = sc.spec(strategy, 42);
        let a = trace_of(&spec);
        let b = trace_of(&spec);
        assert!(
            a.len() > 10_000,
            "trace suspiciously short: {} bytes",
            a.len()
        );
        assert_eq!(a, b, "{strategy:?}");
    }
}

#[test]
fn swarm_seeds_replay_identically_on_other_threads() {
    let options = ExploreOptions::default();
    for seed in 0..6 {
        let spec = swarm_spec(seed, &options);
        let here = trace_of(&spec);
        let there = std::thread::spawn(move || trace_of(&spec)).join().unwrap();
        assert_eq!(here, there, "seed {seed}");
    }
}

#[test]
fn different_seeds_explore_different_interleavings() {
    let sc = scenario::find("ambiguous-acquire").unwrap();
    let a = trace_of(&sc.spec(Strategy::PubSub, 1));
    let b = trace_of(&sc.spec(Strategy::PubSub, 2));
    assert_ne!(a, b);
}
