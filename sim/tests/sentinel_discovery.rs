//! Replicated deployments run the production `SentinelBackend` over the simulated
//! Sentinels, so following the master across a failover is the library's own policy, seen
//! in the trace: a client asks the Sentinels, keeps the master it found while nothing fails
//! there (the near client of a split keeps the zombie), and asks again after a timeout, a
//! reset or a `READONLY` reply.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use leasehold_sim::scenario;
use leasehold_sim::scenario::run::run;
use leasehold_sim::workload::Strategy;

/// One line of a trace that sends or answers a request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Process `proc` sent request `req` to `to` (`Node(1)`, `Sentinel`, ...).
    Sent { proc: usize, to: String },
    /// The reply to a request of `proc` arrived.
    Answered { proc: usize, reply: String },
    /// Any other line (faults, failovers).
    Other(String),
}

/// The trace's lines as steps, replies attributed to the process that sent the request.
fn steps(trace: &str) -> Vec<Step> {
    let mut sender = BTreeMap::new();
    trace
        .lines()
        .map(|line| {
            let body = line
                .trim_start()
                .split_once(' ')
                .map_or("", |(_, b)| b.trim_start());
            if let Some((who, rest)) = body.split_once(" -> ")
                && let Some(proc) = who.strip_prefix('c').and_then(|p| p.parse().ok())
                && let Some((to, rest)) = rest.split_once(" #")
            {
                let req = rest.split_once(' ').map_or(rest, |(r, _)| r).to_owned();
                sender.insert(req, proc);
                return Step::Sent {
                    proc,
                    to: to.to_owned(),
                };
            }
            if let Some(rest) = body.strip_prefix("<- #")
                && let Some((req, reply)) = rest.split_once(' ')
                && let Some(&proc) = sender.get(req)
            {
                return Step::Answered {
                    proc,
                    reply: reply.to_owned(),
                };
            }
            Step::Other(body.to_owned())
        })
        .collect()
}

fn position(steps: &[Step], what: &str) -> usize {
    steps
        .iter()
        .position(|s| matches!(s, Step::Other(line) if line.contains(what)))
        .unwrap_or_else(|| panic!("no {what:?} in the trace"))
}

/// The single-node strategies, whose one master is the replicated group's.
const SINGLE_NODE: [Strategy; 3] = [Strategy::Spin, Strategy::PubSub, Strategy::FairQueue];

/// Scenario `name`'s run for `strategy` (seed 0), traced: its client count and its steps.
fn traced(name: &str, strategy: Strategy) -> (usize, Vec<Step>) {
    let mut spec = scenario::find(name).unwrap().spec(strategy, 0);
    spec.trace = true;
    let result = run(&spec).unwrap();
    (spec.clients, steps(&result.trace))
}

fn sent(step: &Step, who: usize, node: &str) -> bool {
    matches!(step, Step::Sent { proc, to } if *proc == who && to == node)
}

fn asked_sentinel(step: &Step, who: usize) -> bool {
    sent(step, who, "Sentinel")
}

#[test]
fn the_near_client_of_a_split_keeps_the_zombie_until_it_is_refused() {
    for strategy in SINGLE_NODE {
        let (clients, steps) = traced("failover-zombie-master", strategy);
        let cut = position(&steps, "node n0 cut off (but for c");
        let Step::Other(line) = &steps[cut] else {
            unreachable!()
        };
        let near: usize = line
            .rsplit_once("(but for c")
            .and_then(|(_, p)| p.trim_end_matches(')').parse().ok())
            .unwrap();
        let promoted = position(&steps, "failover of group 0: n1 promoted");
        let healed = position(&steps, "n0 rejoins as a replica of n1");
        let split = &steps[promoted..healed];
        assert!(
            split.iter().any(|s| sent(s, near, "Node(0)")),
            "{strategy:?}: the near client c{near} kept using the zombie n0"
        );
        assert!(
            !split.iter().any(|s| asked_sentinel(s, near)),
            "{strategy:?}: nothing failed on the zombie, so c{near} never asked the Sentinels"
        );
        for other in (0..clients).filter(|p| *p != near) {
            let asked = split
                .iter()
                .position(|s| asked_sentinel(s, other))
                .unwrap_or_else(|| panic!("{strategy:?}: c{other} re-resolved after its timeout"));
            assert!(
                split[asked..].iter().any(|s| sent(s, other, "Node(1)")),
                "{strategy:?}: c{other} moved to the new master n1"
            );
        }
        let after = &steps[healed..];
        let refused = after
            .iter()
            .position(
                |s| matches!(s, Step::Answered { proc, reply } if *proc == near && reply.starts_with("-READONLY")),
            )
            .unwrap_or_else(|| panic!("{strategy:?}: the demoted n0 refused c{near}'s write"));
        let asked = refused
            + after[refused..]
                .iter()
                .position(|s| asked_sentinel(s, near))
                .unwrap_or_else(|| panic!("{strategy:?}: c{near} asked the Sentinels again"));
        assert!(
            after[asked..].iter().any(|s| sent(s, near, "Node(1)")),
            "{strategy:?}: c{near} moved to n1"
        );
    }
}

#[test]
fn after_a_crash_failover_every_client_finds_the_new_master_through_the_sentinels() {
    for strategy in SINGLE_NODE {
        let (clients, steps) = traced("failover-async-replication", strategy);
        let crashed = position(&steps, "node n0 crashes");
        let after = &steps[crashed..];
        for proc in 0..clients {
            // Its cached master is the dead n0 until a request there fails.
            let Some(asked) = after.iter().position(|s| asked_sentinel(s, proc)) else {
                assert!(
                    !after.iter().any(|s| sent(s, proc, "Node(1)")),
                    "{strategy:?}: c{proc} used n1 without asking the Sentinels"
                );
                continue;
            };
            assert!(
                after[..asked].iter().any(|s| sent(s, proc, "Node(0)")),
                "{strategy:?}: c{proc} asked again only after a request to n0 failed"
            );
            assert!(
                !after[asked..].iter().any(|s| sent(s, proc, "Node(0)")),
                "{strategy:?}: c{proc} left the dead n0 once the Sentinels named n1"
            );
        }
        assert!(
            after
                .iter()
                .any(|s| matches!(s, Step::Sent { to, .. } if to == "Node(1)")),
            "{strategy:?}: the clients went on with n1"
        );
    }
}
