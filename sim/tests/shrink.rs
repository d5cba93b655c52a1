//! A failing run shrinks to a smaller one that fails the same way and replays exactly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_sim::checker;
use leasehold_sim::explore::{self, Failure};
use leasehold_sim::scenario;
use leasehold_sim::workload::Strategy;
use leasehold_sim::world::faults::{Fault, ScheduledFault};

#[test]
fn violation_shrinks_and_replays() {
    let sc = scenario::find("failover-replica-clock-behind").unwrap();
    let mut spec = sc.spec(Strategy::Spin, 0);
    spec.clients = 4;
    // Noise the shrinker should remove.
    spec.faults.push(ScheduledFault {
        at_ms: 1_000,
        fault: Fault::ScriptFlush { node: 0 },
    });
    spec.faults.push(ScheduledFault {
        at_ms: 6_000,
        fault: Fault::ScriptFlush { node: 0 },
    });
    // Spin's token regression there is a documented limitation, caused by the scenario's
    // own faults (not by the noise): the promoted replica, behind, issues it.
    let target = (Failure::Violation, Some(checker::OTHER_NODE.to_owned()));
    let (_, findings) = explore::run_and_classify(&spec).unwrap();
    assert_eq!(explore::target_of(&findings), Some(target.clone()));
    let (shrunk, runs) = explore::shrink(&spec, target.clone(), explore::SHRINK_BUDGET).unwrap();
    assert!(runs > 0);
    assert!(
        shrunk.faults.len() < spec.faults.len(),
        "{:?}",
        shrunk.faults
    );
    assert!(shrunk.clients <= spec.clients);
    // The shrunk spec is plain data: through JSON and back it fails identically.
    let json = serde_json::to_string(&shrunk).unwrap();
    let replayed: leasehold_sim::scenario::run::RunSpec = serde_json::from_str(&json).unwrap();
    let (a, fa) = explore::run_and_classify(&shrunk).unwrap();
    let (b, fb) = explore::run_and_classify(&replayed).unwrap();
    assert_eq!(explore::target_of(&fa), Some(target));
    assert_eq!(fa, fb);
    assert_eq!(a.findings, b.findings);
}
