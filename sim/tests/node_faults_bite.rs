//! The node-outage scenarios (`node-pause`, `node-partition`, `crash-restart-aof-always`,
//! `failover-zombie-master`) are judged by `scenarios.rs`; this file shows, from the traces
//! of their runs, that the fault each is about actually landed while a lease was held: a
//! stalled node worked through requests that reached it while frozen, holders' lost
//! signals fired during the outage, a node with `appendfsync always` came back with the
//! holder's lease, and a zombie master served its client after a replica was promoted.
//! The node clock drift scenarios are shown to act through the clock: the within-margin
//! runs break at three times their drift, and without the drift the others overlap nowhere
//! (single node) or keep fencing. A failover's stale epoch breaks fencing only for an owner
//! that re-enters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod traces;

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario;
use leasehold_sim::scenario::run;
use leasehold_sim::workload::Strategy;
use leasehold_sim::world::faults::Fault;
use traces::{SEEDS, at, lost_between, traces};

/// The outage of the node scenarios, in trace seconds.
const OUTAGE: (f64, f64) = (2.0, 4.0);

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

#[test]
fn a_zombie_master_serves_its_client_after_the_promotion() {
    for strategy in Strategy::ALL {
        for trace in traces("failover-zombie-master", strategy) {
            let moment = |what: &str| trace.lines().find(|l| l.contains(what)).map(at);
            let promoted = moment("n1 promoted").or(moment("n5 promoted")).unwrap();
            let healed = moment("rejoins as a replica").unwrap();
            // The client left with the old master (n0) names it in its requests.
            let near = trace
                .lines()
                .find_map(|l| l.split("(but for ").nth(1))
                .map(|rest| rest.trim_end_matches(')').to_owned())
                .unwrap();
            let served = trace
                .lines()
                .filter(|l| {
                    l.contains(&format!("{near} -> Node(0) "))
                        && (promoted..healed).contains(&at(l))
                })
                .count();
            assert!(served >= 1, "{strategy:?}: the zombie served nothing");
        }
    }
}

/// Runs `name` × `strategy` on the judged seeds with its node clock drifts set to `ppm`
/// (removed for 0): overlapping holds, and the worst verdict.
fn drift_runs(name: &str, strategy: Strategy, ppm: Option<i64>) -> (u64, Verdict) {
    let mut out = (0, Verdict::Safe);
    for seed in 0..SEEDS {
        let mut spec = scenario::find(name).unwrap().spec(strategy, seed);
        if let Some(rate) = ppm {
            spec.faults
                .retain(|f| rate != 0 || !matches!(f.fault, Fault::NodeClockDrift { .. }));
            for f in &mut spec.faults {
                if let Fault::NodeClockDrift { ppm, .. } = &mut f.fault {
                    *ppm = rate;
                }
            }
        }
        let result = run::run(&spec).unwrap();
        out.0 += result.findings.overlap_count;
        out.1 = out.1.max(result.verdict());
    }
    out
}

#[test]
fn a_fast_node_clock_ends_leases_early() {
    for strategy in Strategy::ALL {
        // Within the margin the runs are safe only by it: three times the drift breaks
        // them (keys gone while believed held, as the oracle sees).
        let (_, within) = drift_runs("node-clock-drift-within-margin", strategy, None);
        let (_, beyond) = drift_runs("node-clock-drift-within-margin", strategy, Some(27_000));
        assert!(
            within <= Verdict::SafeWithFencing,
            "{strategy:?}: {within:?}"
        );
        assert_eq!(beyond, Verdict::ExclusionBroken, "{strategy:?}");
        let (overlaps, _) = drift_runs("node-clock-drift", strategy, None);
        let (steady_overlaps, _) = drift_runs("node-clock-drift", strategy, Some(0));
        assert!(
            overlaps >= 1,
            "{strategy:?}: a 30% fast node let no holds overlap"
        );
        if strategy != Strategy::RedLock {
            assert_eq!(
                steady_overlaps, 0,
                "{strategy:?}: holds overlapped without the drift"
            );
        }
    }
}

#[test]
fn a_drifting_replica_clock_is_what_breaks_fencing_after_a_failover() {
    for strategy in [Strategy::Spin, Strategy::PubSub] {
        let (_, drifted) = drift_runs("failover-replica-clock-drift", strategy, None);
        let (_, steady) = drift_runs("failover-replica-clock-drift", strategy, Some(0));
        assert_eq!(drifted, Verdict::Violation, "{strategy:?}");
        assert!(
            steady < Verdict::Violation,
            "{strategy:?}: {steady:?} without the drift"
        );
    }
}

#[test]
fn a_failover_brings_back_a_released_epoch_only_for_its_re_entrant_owner() {
    for strategy in [Strategy::Spin, Strategy::PubSub, Strategy::FairQueue] {
        let worst = |reentry: bool| {
            (0..SEEDS)
                .map(|seed| {
                    let mut spec = scenario::find("failover-reentry-stale-epoch")
                        .unwrap()
                        .spec(strategy, seed);
                    if !reentry {
                        spec.workload.reentry = None;
                    }
                    run::run(&spec).unwrap().verdict()
                })
                .max()
                .unwrap()
        };
        assert_eq!(worst(true), Verdict::Violation, "{strategy:?}");
        let without = worst(false);
        assert!(
            without < Verdict::Violation,
            "{strategy:?}: {without:?} without re-entry"
        );
    }
}

/// In a RedLock trace: replies that granted an acquire (`[:1,…]`) after the client's call
/// had already returned `Acquired`, and replies that released a hold (a count ≥ 0) after
/// the client's `Released`: masters whose answer the call did not wait for.
fn late_answers(trace: &str) -> (usize, usize) {
    let mut sent: Vec<(&str, &str, f64, bool)> = Vec::new();
    let mut returned: Vec<(&str, &str, f64)> = Vec::new();
    let (mut grants, mut releases) = (0, 0);
    for line in trace.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [_, client, "->", node, id, "EVALSHA", ..] if node.starts_with("Node(") => {
                sent.push((id, client, at(line), line.contains(":released ")));
            }
            [_, who, _lock, kind, ..] if *kind == "Acquired" || *kind == "Released" => {
                let client = who.split('.').next().unwrap();
                returned.push((client, kind, at(line)));
            }
            [_, "<-", id, reply, ..] => {
                let Some(&(_, client, since, release)) = sent.iter().find(|s| s.0 == *id) else {
                    continue;
                };
                let (wanted, answered) = if release {
                    (
                        "Released",
                        !reply.starts_with(":-") && reply.starts_with(':'),
                    )
                } else {
                    ("Acquired", reply.starts_with("[:1,"))
                };
                let before = returned.iter().any(|(c, kind, t)| {
                    *c == client && *kind == wanted && (since..at(line)).contains(t)
                });
                if answered && before {
                    *(if release { &mut releases } else { &mut grants }) += 1;
                }
            }
            _ => {}
        }
    }
    (grants, releases)
}

#[test]
fn a_redlock_call_returns_on_its_quorum_and_the_stragglers_land_after() {
    let (mut grants, mut releases) = (0, 0);
    for trace in traces("straggler-masters", Strategy::RedLock) {
        let (g, r) = late_answers(&trace);
        grants += g;
        releases += r;
    }
    assert!(
        grants >= 1,
        "no master granted after its acquire had returned"
    );
    assert!(
        releases >= 1,
        "no master released after its unlock had returned"
    );
}
