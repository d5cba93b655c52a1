//! `semaphore-resize` is judged by `scenarios.rs`; this file shows, from each run's
//! history, that its sizes really moved: holders' resizes landed on a live semaphore both
//! growing and shrinking it, clients asking for another number than the stored one were
//! refused as mismatched, and permits were granted after a shrink landed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario::{self, run};
use leasehold_sim::workload::Strategy;
use leasehold_sim::world::history::HistKind;

/// The largest number a client of `semaphore-resize` asks for (2 permits, spread 2).
const MOST_ASKED: u32 = 3;

#[test]
fn resizes_grow_and_shrink_a_held_semaphore_and_mismatched_counts_are_refused() {
    for strategy in [Strategy::Spin, Strategy::PubSub, Strategy::FairQueue] {
        let spec = scenario::find("semaphore-resize")
            .unwrap()
            .spec(strategy, 0);
        let result = run::run(&spec).unwrap();
        assert_eq!(result.verdict(), Verdict::Safe, "{strategy:?}");
        let history = &result.history;
        let asked: Vec<(u64, u32)> = history
            .iter()
            .filter_map(|ev| match ev.kind {
                HistKind::Resize { id, permits } => Some((id, permits)),
                _ => None,
            })
            .collect();
        // Each resize answered live, with its size, in answer order.
        let landed: Vec<(u64, u32)> = history
            .iter()
            .filter_map(|ev| match ev.kind {
                HistKind::Resized { id, live: true } => asked
                    .iter()
                    .find(|(asked_id, _)| *asked_id == id)
                    .map(|&(_, permits)| (ev.at, permits)),
                _ => None,
            })
            .collect();
        // Below every number a client asks for: a shrink, whatever was stored.
        let shrinks: Vec<u64> = landed
            .iter()
            .filter(|&&(_, permits)| permits < 2)
            .map(|&(at, _)| at)
            .collect();
        // Above every number asked for, landed where no resize had set it: a grow.
        let grows = landed.iter().enumerate().filter(|&(i, &(_, permits))| {
            permits > MOST_ASKED && landed[..i].iter().all(|&(_, p)| p != permits)
        });
        assert!(!shrinks.is_empty(), "{strategy:?}: no shrink landed");
        assert!(grows.count() > 0, "{strategy:?}: no grow landed");
        let granted_after_shrink = history.iter().any(|ev| {
            matches!(ev.kind, HistKind::Acquired { .. }) && shrinks.iter().any(|&at| ev.at > at)
        });
        assert!(
            granted_after_shrink,
            "{strategy:?}: nothing granted after a shrink"
        );
        let mismatched = history.iter().any(|ev| {
            matches!(&ev.kind, HistKind::AcquireFailed { error } if error.contains("this handle asks for"))
        });
        assert!(mismatched, "{strategy:?}: no mismatched count was refused");
    }
}
