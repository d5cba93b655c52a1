//! A fast subset of the real-fault catalogue against containers, each asserting the verdict
//! the design promises (and, where the simulator has the scenario, agreement with its
//! expectation). The whole table is `leasehold-harness safety`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_harness::safety::report::{Agreement, CellReport};
use leasehold_harness::safety::run::{Plan, run};
use leasehold_harness::safety::scenario::find;
use leasehold_sim::checker::Verdict;
use leasehold_sim::workload::Strategy;

async fn cell(scenario: &str, strategy: Strategy) -> CellReport {
    let plan = Plan {
        scenarios: vec![find(scenario).unwrap()],
        strategies: vec![strategy],
        // Expectations only: the simulator's own tests run its cells.
        sim_seeds: 0,
    };
    let report = run(&plan, &mut |_| {}).await.unwrap();
    assert_eq!(report.cells.len(), 1);
    report.cells.into_iter().next().unwrap()
}

/// Errors other than the run's own end.
fn real_errors(cell: &CellReport) -> Vec<&(String, u64)> {
    cell.errors
        .iter()
        .filter(|(e, _)| e != "run ended")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_pause_stale_write_is_rejected_by_fencing() {
    let c = cell("holder-pause", Strategy::PubSub).await;
    // The frozen holder's hold overlapped the next grants (exclusion broken: a real run
    // has no fault log to excuse it with) and its late write was stale, so the fence
    // rejected it and the tokens stayed sound.
    assert!(c.overlaps >= 1, "{c:#?}");
    assert!(c.stale_rejected >= 1, "{c:#?}");
    assert!(c.token_problems.is_empty(), "{c:#?}");
    assert_eq!(c.real, Verdict::ExclusionBroken, "{c:#?}");
    assert_eq!(c.agreement, Agreement::Agree, "{c:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pause_past_ttl_is_safe_and_lost_fires_before_ttl_end() {
    let c = cell("node-pause", Strategy::Spin).await;
    assert_eq!(c.overlaps, 0, "{c:#?}");
    assert_eq!(c.real, Verdict::Safe, "{c:#?}");
    if let Some(margin) = c.lost_before_ttl_end_ms {
        assert!(
            margin > 0.0,
            "lost() fired {margin} ms before the TTL end: {c:#?}"
        );
    }
    assert!(
        c.recovery_ms.is_some(),
        "no grant after the node came back: {c:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_restart_without_persistence_keeps_fencing_sound() {
    let c = cell("crash-restart-no-persistence", Strategy::PubSub).await;
    // Holds may overlap (the lock vanished with the node: exclusion broken), but tokens
    // come from server time, so they still grow and no stale write gets through the fence.
    assert!(c.token_problems.is_empty(), "{c:#?}");
    assert!(c.real <= Verdict::ExclusionBroken, "{c:#?}");
    assert!(c.recovery_ms.is_some(), "{c:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_is_transparent() {
    let c = cell("script-flush", Strategy::Spin).await;
    assert!(real_errors(&c).is_empty(), "{:?}", c.errors);
    assert!(c.acquisitions >= 10, "{c:#?}");
    assert_eq!(c.real, Verdict::Safe, "{c:#?}");
}
