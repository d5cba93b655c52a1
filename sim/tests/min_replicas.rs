//! `min-replicas-to-write` as the swarm draws it: a master whose only replica is cut off
//! past the lag refuses writes with `NOREPLICAS`; from each run's history and client marks,
//! the refusals happened, the waiters waited them out (no acquire failed for them, and
//! grants came again once the link healed), and the run is judged safe, in every
//! single-node strategy (RedLock is not drawn so: see `explore::groups::min_replicas`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use leasehold_sim::checker::Verdict;
use leasehold_sim::model::node::MinReplicas;
use leasehold_sim::scenario::{self, run};
use leasehold_sim::workload::Strategy;
use leasehold_sim::world::calls::LockReply;
use leasehold_sim::world::faults::{Fault, ScheduledFault};
use leasehold_sim::world::history::HistKind;

/// When the replication link is cut, and for how long, ms: past a 1 s lag by seconds.
const CUT: (u64, u64) = (3_000, 5_000);

#[test]
fn a_master_short_of_replicas_refuses_writes_and_its_waiters_wait_it_out() {
    for strategy in [Strategy::Spin, Strategy::PubSub, Strategy::FairQueue] {
        let mut spec = scenario::find("failover-async-replication")
            .unwrap()
            .spec(strategy, 0);
        let replica = spec.deployment.first_replica().unwrap();
        spec.faults = vec![ScheduledFault {
            at_ms: CUT.0,
            fault: Fault::ReplicaCut { replica, ms: CUT.1 },
        }];
        let master = spec.deployment.nodes[replica].replica_of.unwrap();
        for node in [master, replica] {
            spec.deployment.nodes[node].min_replicas = Some(MinReplicas {
                to_write: 1,
                max_lag: Duration::from_secs(1),
            });
        }
        spec.horizon = Duration::from_secs(20);
        let result = run::run_covered(&spec).unwrap();
        let what = format!("{strategy:?}");
        assert_eq!(
            result.verdict(),
            Verdict::Safe,
            "{what}: {:#?} bound {:?}",
            result
                .findings
                .problems
                .iter()
                .map(|p| p.detail.clone())
                .collect::<Vec<_>>(),
            spec.check.liveness_bound
        );
        let refused = result
            .history
            .iter()
            .filter(|ev| {
                matches!(
                    ev.kind,
                    HistKind::Return {
                        reply: LockReply::NotRun,
                        ..
                    }
                )
            })
            .count();
        assert!(refused > 0, "{what}: no call was refused");
        assert!(
            result
                .client_marks
                .contains("leasehold_refusals_total{reason=noreplicas}"),
            "{what}: {:?}",
            result.client_marks
        );
        let healed_ns = (CUT.0 + CUT.1) * 1_000_000;
        let granted_after = result
            .history
            .iter()
            .any(|ev| ev.at > healed_ns && matches!(ev.kind, HistKind::Acquired { .. }));
        assert!(granted_after, "{what}: no grant after the link healed");
        let failed_by_refusal = result.history.iter().find(|ev| {
            matches!(&ev.kind, HistKind::AcquireFailed { error } if error.contains("NOREPLICAS"))
        });
        assert!(
            failed_by_refusal.is_none(),
            "{what}: an acquire failed for the refusal: {failed_by_refusal:?}"
        );
    }
}
