//! The node-outage scenarios (`node-pause`, `node-partition`, `crash-restart-aof-always`)
//! are judged by `scenarios.rs`; this file shows, from the traces of their runs, that the
//! fault each is about actually landed while a lease was held: a stalled node worked
//! through requests that reached it while frozen, holders' lost signals fired during the
//! outage, and a node with `appendfsync always` came back with the holder's lease.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_sim::run;
use leasehold_sim::scenario::{self, DEFAULT_SEEDS};
use leasehold_sim::workload::Strategy;

/// Seeds whose traces are searched for evidence: those the scenario table judges.
const SEEDS: u64 = DEFAULT_SEEDS;

/// The outage of the node scenarios, in trace seconds.
const OUTAGE: (f64, f64) = (2.0, 4.0);

/// The traces of `name` × `strategy` on seeds `0..SEEDS`.
fn traces(name: &str, strategy: Strategy) -> Vec<String> {
    (0..SEEDS)
        .map(|seed| {
            let mut spec = scenario::find(name).unwrap().spec(strategy, seed);
            spec.trace = true;
            run::run(&spec).unwrap().trace
        })
        .collect()
}

/// Seconds of the trace line (its first field).
fn at(line: &str) -> f64 {
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// Lost signals that fired inside `[from, to]` seconds.
fn lost_between(trace: &str, (from, to): (f64, f64)) -> usize {
    trace
        .lines()
        .filter(|l| l.ends_with(" Lost") && (from..=to).contains(&at(l)))
        .count()
}

/// Requests a node held while stalled and ran when it woke.
fn held_at_wake(trace: &str) -> usize {
    trace
        .lines()
        .filter_map(|l| l.split(" wakes (").nth(1))
        .map(|rest| rest.split(' ').next().unwrap().parse::<usize>().unwrap())
        .sum()
}

#[test]
fn a_stalled_node_runs_what_reached_it_and_holders_learn_in_time() {
    for strategy in Strategy::ALL {
        let traces = traces("node-pause", strategy);
        let held: usize = traces.iter().map(|t| held_at_wake(t)).sum();
        let lost: usize = traces.iter().map(|t| lost_between(t, OUTAGE)).sum();
        assert!(
            held >= 1,
            "{strategy:?}: no request reached the stalled node"
        );
        assert!(
            lost >= 1,
            "{strategy:?}: no lease was lost during the stall"
        );
    }
}

#[test]
fn a_cut_off_node_costs_its_holders_their_leases() {
    for strategy in Strategy::ALL {
        let traces = traces("node-partition", strategy);
        let cuts = traces
            .iter()
            .filter(|t| t.contains("cut off") && t.contains("reconnected"))
            .count();
        let lost: usize = traces.iter().map(|t| lost_between(t, OUTAGE)).sum();
        assert_eq!(cuts as u64, SEEDS, "{strategy:?}: the cut did not land");
        assert!(lost >= 1, "{strategy:?}: no lease was lost during the cut");
    }
}

#[test]
fn an_aof_always_node_comes_back_with_the_holders_lease() {
    for strategy in Strategy::ALL {
        let spanning = traces("crash-restart-aof-always", strategy)
            .iter()
            .filter(|t| holds_spanning_restart(t) >= 1)
            .count() as u64;
        // Holds are 0.5-1.5 s, so on most seeds whoever holds at the crash still holds
        // when the node is back, and the oracle looks its lease up there.
        assert!(
            spanning * 2 >= SEEDS,
            "{strategy:?}: a hold spanned the restart on only {spanning} of {SEEDS} seeds"
        );
    }
}

/// Holds granted before node n0 crashed and released (not lost) after it was back.
fn holds_spanning_restart(trace: &str) -> usize {
    let moment = |what: &str| trace.lines().find(|l| l.contains(what)).map(at);
    let (Some(crash), Some(back)) = (moment("node n0 crashes"), moment("node n0 restarts")) else {
        return 0;
    };
    let mut open: Vec<(&str, f64)> = Vec::new();
    let mut spanning = 0;
    for line in trace.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [_, who, _lock, kind, ..] = words.as_slice() else {
            continue;
        };
        if kind.starts_with("Acquired") {
            open.push((who, at(line)));
        } else if let Some(i) = open.iter().position(|(w, _)| w == who)
            && (*kind == "Released" || *kind == "Lost")
        {
            let (_, since) = open.swap_remove(i);
            if *kind == "Released" && since < crash && at(line) > back {
                spanning += 1;
            }
        }
    }
    spanning
}
