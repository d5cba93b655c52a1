//! The operation scenarios (`try-lock-lossy`, `acquire-cancel`, `acquire-cancel-stranded`,
//! `reentry-lost-inner-release`) are judged by `scenarios.rs`; this file shows, from the
//! trace of each run, that the operation each is about actually happened: single attempts
//! found the lock taken, acquires were dropped mid-flight, and releases landed late.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use leasehold_sim::scenario::run;
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

/// The inner TTL of `reentry-lost-inner-release` (a tenth of the lease), in seconds.
const INNER_TTL_S: f64 = 0.1;

/// `reentry-lost-inner-release`: on the judged seeds, inner releases are sent into a cut,
/// which holds them until it heals (TCP retransmits them), for every single-node strategy.
/// Each is answered more than the inner TTL after its send: its client's unlock, which
/// waits that long, has given it up, and it lands after its hold's deadline, so the inner
/// hold stayed in the lock hash past its deadline for the scripts to drop on their own.
#[test]
fn inner_releases_land_late() {
    let release = leasehold::script::scripts().release.sha().to_owned();
    let at = |line: &str| -> f64 { line.split_whitespace().next().unwrap().parse().unwrap() };
    let id = |line: &str| -> Option<String> {
        line.split_whitespace()
            .find(|w| w.starts_with('#'))
            .map(str::to_owned)
    };
    for strategy in [Strategy::Spin, Strategy::PubSub, Strategy::FairQueue] {
        let mut late = 0;
        for seed in 0..DEFAULT_SEEDS {
            let trace = trace("reentry-lost-inner-release", strategy, seed);
            let sent: BTreeMap<String, f64> = trace
                .lines()
                .filter(|l| l.contains(&release))
                .filter_map(|l| Some((id(l)?, at(l))))
                .collect();
            late += trace
                .lines()
                .filter(|l| l.contains(" <- #"))
                .filter(|l| {
                    id(l)
                        .and_then(|id| sent.get(&id))
                        .is_some_and(|&sent| at(l) - sent > INNER_TTL_S)
                })
                .count();
        }
        assert!(late >= 3, "{strategy:?}: only {late} late releases");
    }
}
