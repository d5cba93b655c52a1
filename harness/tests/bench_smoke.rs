//! The benchmark machinery against a real container: a short contended cell per contender
//! family must acquire, see no exclusion violation and attribute round trips sensibly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use leasehold_harness::SingleNode;
use leasehold_harness::bench::contender::Contender;
use leasehold_harness::bench::wait_kind::WaitKind;
use leasehold_harness::bench::workload::{CellSpec, run_cell};
use leasehold_harness::report::results::RepMetrics;

/// Long enough for a few hundred contended acquisitions, short enough for CI.
const CELL: Duration = Duration::from_secs(1);

/// Jain's index a FIFO queue must reach over one cell: 4 clients served in turn give 1.0;
/// 0.9 leaves room for the cell ending mid-round.
const FAIR: f64 = 0.9;

async fn measure(node: &SingleNode, contender: Contender, tag: &str) -> RepMetrics {
    let spec = CellSpec {
        contender,
        clients: 4,
        critical_section_us: 1_000,
        locks: 1,
    };
    let m = run_cell(spec, &[node.url()], CELL, tag).await.unwrap();
    RepMetrics::from_measurement(&spec, &m)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_cells_are_exclusive_and_counted() {
    let node = SingleNode::start().await.unwrap();
    for (i, contender) in [
        Contender::RslockDefault,
        Contender::Leasehold(WaitKind::FairQueue),
    ]
    .into_iter()
    .enumerate()
    {
        let m = measure(&node, contender, &format!("smoke{i}")).await;
        assert!(m.acquisitions > 10, "{contender:?}: {m:?}");
        assert_eq!(m.violations, 0, "{contender:?}");
        assert_eq!(m.errors, 0, "{contender:?}");
        // Every acquisition costs at least an acquire and a release sent by the client.
        let rt = m.client_round_trips_per_acq.unwrap();
        assert!(rt >= 2.0, "{contender:?}: {rt} client round trips/acq");
        assert!(
            m.all_commands_per_acq.unwrap() > rt,
            "scripts ran commands too"
        );
        assert!(
            m.jain > 0.0 && m.jain <= 1.0,
            "{contender:?}: Jain {}",
            m.jain
        );
        // Fairness is FairQueue's promise; a barging peer's Jain over one short cell on a
        // loaded machine can be anything, so only FairQueue's is held to it.
        if contender == Contender::Leasehold(WaitKind::FairQueue) {
            assert!(m.jain > FAIR, "{contender:?}: Jain {}", m.jain);
        }
    }
}
