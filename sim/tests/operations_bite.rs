//! The operation scenarios (`try-lock-lossy`, `acquire-cancel`, `acquire-cancel-stranded`,
//! `reentry-lost-inner-release`) are judged by `scenarios.rs`; this file shows, from the
//! trace of each run, that the operation each is about actually happened: single attempts
//! found the lock taken, acquires were dropped mid-flight, and releases went unanswered.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_sim::run;
use leasehold_sim::scenario::{self, DEFAULT_SEEDS};
use leasehold_sim::workload::Strategy;

/// The trace of `name` × `strategy` on `seed`.
fn trace(name: &str, strategy: Strategy, seed: u64) -> String {
    let mut spec = scenario::find(name).unwrap().spec(strategy, seed);
    spec.trace = true;
    run::run(&spec).unwrap().trace
}

/// How many trace lines of `name` × `strategy` on seed 0 contain `needle`.
fn count(name: &str, strategy: Strategy, needle: &str) -> usize {
    let trace = trace(name, strategy, 0);
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
    for name in ["acquire-cancel", "acquire-cancel-stranded"] {
        for strategy in Strategy::ALL {
            let dropped = count(name, strategy, "dropped mid-flight");
            assert!(
                dropped >= 3,
                "{name} × {strategy:?}: only {dropped} dropped acquires"
            );
        }
    }
}

/// `reentry-lost-inner-release`: on the judged seeds, release calls go unanswered for good
/// (sent into a cut, they time out; a reset connection's release is retried) for every
/// single-node strategy, so inner holds are left in the lock hash for the scripts to drop
/// at their own deadline.
#[test]
fn inner_releases_are_lost() {
    let release = leasehold::script::scripts().release.sha().to_owned();
    for strategy in [Strategy::Spin, Strategy::PubSub, Strategy::FairQueue] {
        let mut unanswered = 0;
        for seed in 0..DEFAULT_SEEDS {
            let trace = trace("reentry-lost-inner-release", strategy, seed);
            let sent: Vec<&str> = trace
                .lines()
                .filter(|l| l.contains(&release))
                .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('#')))
                .collect();
            unanswered += trace
                .lines()
                .filter(|l| l.ends_with(" timed out"))
                .filter(|l| {
                    l.split_whitespace()
                        .find(|w| w.starts_with('#'))
                        .is_some_and(|id| sent.contains(&id))
                })
                .count();
        }
        assert!(
            unanswered >= 3,
            "{strategy:?}: only {unanswered} unanswered releases"
        );
    }
}
