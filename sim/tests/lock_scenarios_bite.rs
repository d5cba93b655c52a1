//! The lock-invariant scenarios (`fence-expiry-mid-stream`, `reentry-shorter-ttl`,
//! `reentry-sibling-handoff`) are judged by `scenarios.rs`; this file shows, from the trace
//! of one run each, that what they are about actually happened in the run: fence keys
//! outlived by idle gaps longer than the margin, and re-entries that joined a held epoch.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario;
use leasehold_sim::scenario::run;
use leasehold_sim::workload::Strategy;

/// The trace of `name` × `strategy` on `seed`, and its verdict.
fn traced(name: &str, strategy: Strategy, seed: u64) -> (String, Verdict) {
    let mut spec = scenario::find(name).unwrap().spec(strategy, seed);
    spec.trace = true;
    let result = run::run(&spec).unwrap();
    let verdict = result.verdict();
    (result.trace, verdict)
}

/// Seconds of the trace line (its first field).
fn at(line: &str) -> f64 {
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// How often a lock sat released for longer than `gap` seconds before its next grant.
fn idle_gaps_longer_than(trace: &str, gap: f64) -> usize {
    let mut released: HashMap<String, f64> = HashMap::new();
    let mut count = 0;
    for line in trace.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [_, _, lock, "Released", ..] => {
                released.insert((*lock).to_owned(), at(line));
            }
            [_, _, lock, "Acquired", ..] => {
                if let Some(since) = released.remove(*lock)
                    && at(line) - since > gap
                {
                    count += 1;
                }
            }
            _ => {}
        }
    }
    count
}

#[test]
fn fence_keys_expire_between_holds_and_tokens_still_grow() {
    for strategy in [Strategy::Spin, Strategy::FairQueue, Strategy::RedLock] {
        let (trace, verdict) = traced("fence-expiry-mid-stream", strategy, 0);
        // The scenario's fence margin is 200 ms: a longer idle gap means the fence key
        // expired before the next grant issued its token.
        let expired = idle_gaps_longer_than(&trace, 0.2);
        assert!(
            expired >= 3,
            "{strategy:?}: only {expired} idle gaps past the margin"
        );
        assert_eq!(verdict, Verdict::Safe, "{strategy:?}");
    }
}

#[test]
fn re_entries_happen_and_join_their_epoch() {
    for (name, strategy) in [
        ("reentry-shorter-ttl", Strategy::PubSub),
        ("reentry-sibling-handoff", Strategy::FairQueue),
    ] {
        let (trace, verdict) = traced(name, strategy, 0);
        let reentries = trace.lines().filter(|l| l.contains(" Reentered ")).count();
        assert!(reentries >= 3, "{name}: only {reentries} re-entries");
        assert!(verdict <= Verdict::SafeWithFencing, "{name}: {verdict:?}");
    }
}
