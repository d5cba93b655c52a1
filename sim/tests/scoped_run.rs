//! Scoped work (`Mutex::run`) as the swarm draws it: from each run's history, work that
//! outlived its lease while the watchdog renewed it finished, work that panicked ended its
//! belief and its hold was released at once (the next grant came well within the lease),
//! and, with the watchdog off, work that outlived its lease was dropped as lost; each run
//! judged safe.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario::{self, run};
use leasehold_sim::workload::Strategy;
use leasehold_sim::world::history::{HistEvent, HistKind};

/// What the holds of `history` came to: (finished after more than two leases, panicked and
/// released within half a lease, lost).
fn endings(history: &[HistEvent], ttl_ns: u64) -> (u64, u64, u64) {
    // Per (process, token): resource writes received.
    let mut writes: BTreeMap<(usize, u64), u64> = BTreeMap::new();
    for ev in history {
        if let HistKind::Write { token, .. } = ev.kind {
            *writes.entry((ev.proc, token)).or_default() += 1;
        }
    }
    let grants: Vec<u64> = history
        .iter()
        .filter(|ev| matches!(ev.kind, HistKind::Acquired { .. }))
        .map(|ev| ev.at)
        .collect();
    let mut open: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    let (mut outlived, mut panicked, mut lost) = (0, 0, 0);
    for ev in history {
        match ev.kind {
            HistKind::Acquired { token, .. } => {
                open.insert(ev.proc, (token, ev.at));
            }
            HistKind::Released => {
                let Some((token, from)) = open.remove(&ev.proc) else {
                    continue;
                };
                match writes.get(&(ev.proc, token)).copied().unwrap_or(0) {
                    // One write, the first: the work stopped before its last one (a panic).
                    1 if grants
                        .iter()
                        .any(|&at| at > ev.at && at < ev.at + ttl_ns / 2) =>
                    {
                        panicked += 1;
                    }
                    2 if ev.at - from > 2 * ttl_ns => outlived += 1,
                    _ => {}
                }
            }
            HistKind::Lost => {
                lost += u64::from(open.remove(&ev.proc).is_some());
            }
            _ => {}
        }
    }
    (outlived, panicked, lost)
}

#[test]
fn scoped_work_finishes_past_its_lease_panics_and_is_dropped_when_its_lease_is_lost() {
    for strategy in [Strategy::Spin, Strategy::PubSub, Strategy::FairQueue] {
        for watchdog in [true, false] {
            let mut spec = scenario::find("script-flush").unwrap().spec(strategy, 0);
            spec.faults.clear();
            spec.workload.run_percent = 100;
            spec.workload.watchdog = watchdog;
            let ttl_ns = u64::try_from(spec.workload.ttl.as_nanos()).unwrap();
            let result = run::run(&spec).unwrap();
            let what = format!("{strategy:?}, watchdog {watchdog}");
            assert_eq!(result.verdict(), Verdict::Safe, "{what}");
            let (outlived, panicked, lost) = endings(&result.history, ttl_ns);
            assert!(
                panicked > 0,
                "{what}: no panicked work was released at once"
            );
            if watchdog {
                assert!(outlived > 0, "{what}: no work finished past its lease");
            } else {
                assert!(lost > 0, "{what}: no work outliving its lease was dropped");
            }
        }
    }
}
