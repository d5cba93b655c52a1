//! A mixed-strategy read-write lock against a real Redis node: a Spin writer that finds the
//! fair line, and a FairQueue reader held back by that writer's intent, each count
//! `leasehold_mixed_strategy_total` (the two block each other at a free lock). One test, so
//! the global recorder is this process's alone under `cargo test` too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::metrics::MIXED_STRATEGY;
use leasehold::{LockKeys, WaitStrategy};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use common::{client, eventually, node, query};

/// The mixed-strategy count in one snapshot of the handles labelled `label`, added to
/// `seen` (a debugging snapshot hands out what changed since the previous one).
fn count(snapshotter: &Snapshotter, seen: &mut [u64; 2], labels: [&str; 2]) {
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        for (i, label) in labels.iter().enumerate() {
            let ours = key
                .labels()
                .any(|l| l.key() == "label" && l.value() == *label);
            if let (true, MIXED_STRATEGY, DebugValue::Counter(n)) = (ours, key.name(), &value) {
                seen[i] += n;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spin_writer_and_the_fair_line_are_counted_as_mixed() {
    const NAME: &str = "rw-mixed";
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::set_global_recorder(recorder).expect("the only recorder of this process");
    let node = node().await;
    let (fair, spin) = (client(&node).await, client(&node).await);
    let line = LockKeys::rwlock(NAME).unwrap().queue;
    let line_len = || async { query::<i64>(&node, redis::cmd("LLEN").arg(&line)).await };

    // A fair writer holds; a fair reader queues behind it.
    let writing = fair.rwlock(NAME).write().await.unwrap();
    let reader = fair.rwlock(NAME);
    let first = tokio::spawn(async move { reader.read_within(Duration::from_secs(10)).await });
    assert!(
        eventually(Duration::from_secs(3), || async { line_len().await == 1 }).await,
        "the fair reader never queued"
    );
    // A Spin writer finds the line: counted.
    let spinner = spin
        .rwlock(NAME)
        .wait(WaitStrategy::spin())
        .metrics_label("spin-writer");
    let writer = tokio::spawn(async move { spinner.write_within(Duration::from_secs(5)).await });
    let mut seen = [0, 0];
    let labels = ["spin-writer", "fair-reader"];
    let writer_counted = eventually(Duration::from_secs(3), || {
        count(&snapshotter, &mut seen, labels);
        std::future::ready(seen[0] > 0)
    })
    .await;
    assert!(
        writer_counted,
        "the Spin writer that found the fair line was not counted"
    );

    // The release hands the lock to the queued reader; the Spin writer's intent now holds
    // back a second fair reader, which stands at the head of the line: the two block each
    // other. The reader's attempt is counted.
    writing.unlock().await.unwrap();
    let reading = first.await.unwrap().unwrap();
    let second = fair.rwlock(NAME).metrics_label("fair-reader");
    let blocked = second.read_within(Duration::from_millis(800)).await;
    count(&snapshotter, &mut seen, labels);
    assert!(
        seen[1] > 0,
        "the fair reader held back by a Spin writer's intent was not counted ({blocked:?})"
    );
    reading.unlock().await.unwrap();
    writer.await.unwrap().unwrap().unlock().await.unwrap();
}
