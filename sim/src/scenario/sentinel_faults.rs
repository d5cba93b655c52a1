//! Scenarios of faults between the clients and the Sentinels (docs/DESIGN.md §5 item 6):
//! a failover the clients cannot follow because their lookups go unanswered, and one a
//! lagging Sentinel hides from them by naming the old master.
//!
//! Invariant: each scenario's fault lands in every run it judges: the runs' evidence
//! counts lookups sent across the cut and stale answers given (checked by the tests
//! below), so a verdict of safe is never one of a fault that did not happen.

use super::shape::{Expect, Scenario, all, at, base, long_holds};
use crate::checker::Verdict;
use crate::scenario::run::{Deployment, RunSpec};
use crate::workload::Strategy;
use crate::world::faults::{Fault, ProcSel};

/// The scenarios of this group, in table order.
pub(super) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "sentinel-cut",
        design_item: 6,
        summary: "Every client is cut from the Sentinels (not from the nodes) from 2 s to 4 s, and the master fails over at 2.5 s (the replica promoted at once, the old master back as a replica at 4.5 s). Each client drops its master at its first failure there and asks the Sentinels: its lookups are held across the cut and time out, so nobody reaches the new master before 4 s, by when every lease granted before the failover (1 s, renewals stopped at the crash) has ended on the promoted replica too: no second holder. The clients cut off are impaired for the cut, so their waits are not starvation (= safe). RedLock (n0 replicated): n0's group is lost for the cut, the other four masters keep a quorum.",
        build: |s, seed| {
            let mut spec = failover_at(s, seed, 2_500, 2_000);
            spec.faults.extend((0..spec.clients).map(|client| {
                at(
                    2_000,
                    Fault::SentinelCut {
                        who: ProcSel::Id(client),
                        ms: 2_000,
                    },
                )
            }));
            spec.faults.sort_by_key(|f| f.at_ms);
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "sentinel-stale",
        design_item: 6,
        summary: "The master fails over at 3 s (the replica promoted at once, the old master back as a replica at 4 s), and the Sentinel every client asks first lags 3 s behind until 7 s, as one that hears of the promotion late: until 6 s it names the old master, dead until 4 s (the connect fails) and then a replica again (it connects, and the lock scripts answer READONLY, on which the production backend drops it and asks again). Nobody reaches the new master before 6 s, when every lease granted before the failover has ended there: no second holder; each client told a stale master is impaired until the Sentinel catches up (= safe). RedLock (n0 replicated): n0's group is misrouted, the other four masters keep a quorum.",
        build: |s, seed| {
            let mut spec = failover_at(s, seed, 3_000, 1_000);
            spec.faults.push(at(
                3_000,
                Fault::SentinelStale {
                    group: 0,
                    lag_ms: 3_000,
                    ms: 4_000,
                },
            ));
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
];

/// Long holds on a master with one replica (RedLock: master 0 replicated), reached through
/// the Sentinels, whose master crashes at `at_ms` and is replaced by its replica at once,
/// coming back as a replica `restart_after_ms` later.
fn failover_at(s: Strategy, seed: u64, at_ms: u64, restart_after_ms: u64) -> RunSpec {
    let mut spec = long_holds(base(s, seed));
    spec.deployment = Deployment::replicated_for(s, 1);
    spec.faults = vec![at(
        at_ms,
        Fault::Failover {
            group: 0,
            restart_after_ms: Some(restart_after_ms),
            split: None,
            promote_after_ms: None,
        },
    )];
    spec
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Each scenario's fault lands in each run: lookups across the cut, stale answers.
    #[test]
    fn every_run_shows_its_sentinel_fault_landed() {
        for strategy in Strategy::ALL {
            for seed in 0..2 {
                let [cut, stale] = [0, 1].map(|i| SCENARIOS[i].spec(strategy, seed));
                let cut = crate::scenario::run::run(&cut).unwrap().stats.sentinel;
                assert!(cut.cut_lookups > 0, "{strategy:?} seed {seed}: {cut:?}");
                let stale = crate::scenario::run::run(&stale).unwrap().stats.sentinel;
                assert!(
                    stale.stale_answers > 0,
                    "{strategy:?} seed {seed}: {stale:?}"
                );
            }
        }
    }
}
