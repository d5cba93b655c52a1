//! A mixed-strategy deployment against a real Redis node: a PubSub acquire that finds
//! fair-queue waiters on its lock counts `leasehold_mixed_strategy_total`, and one on a
//! lock nobody queues for does not. One test, so the global recorder is this process's
//! alone under `cargo test` too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::WaitStrategy;
use leasehold::metrics::MIXED_STRATEGY;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use common::{client, eventually, exists, node};

/// The mixed-strategy count so far of the handles labelled `label` (a debugging snapshot
/// hands out what changed since the previous one, so the caller sums).
fn counted(snapshotter: &Snapshotter, label: &str) -> u64 {
    let mut total = 0;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let ours = key
            .labels()
            .any(|l| l.key() == "label" && l.value() == label)
            && key
                .labels()
                .any(|l| l.key() == "strategy" && l.value() == "pubsub");
        if let (true, MIXED_STRATEGY, DebugValue::Counter(n)) = (ours, key.name(), value) {
            total += n;
        }
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pubsub_acquire_behind_fair_waiters_is_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::set_global_recorder(recorder).expect("the only recorder of this process");
    let node = node().await;
    let (fair, pubsub) = (client(&node).await, client(&node).await);

    // A PubSub waiter on a lock nobody queues for: nothing counted.
    let held = fair.mutex("plain").lock().await.unwrap();
    let plain = pubsub
        .mutex("plain")
        .wait(WaitStrategy::PubSub)
        .metrics_label("plain");
    let waiting = tokio::spawn(async move { plain.lock_within(Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    held.unlock().await.unwrap();
    waiting.await.unwrap().unwrap().unlock().await.unwrap();
    assert_eq!(counted(&snapshotter, "plain"), 0, "counted without a queue");

    // The same behind a FairQueue waiter (the client default): counted.
    let held = fair.mutex("mixed").lock().await.unwrap();
    let queued = fair.mutex("mixed");
    let in_line = tokio::spawn(async move { queued.lock_within(Duration::from_secs(10)).await });
    assert!(
        eventually(Duration::from_secs(3), || exists(
            &node,
            "leasehold:{mixed}:queue"
        ))
        .await,
        "the fair waiter never queued"
    );
    let mixed = pubsub
        .mutex("mixed")
        .wait(WaitStrategy::PubSub)
        .metrics_label("mixed");
    let behind = tokio::spawn(async move { mixed.lock_within(Duration::from_secs(10)).await });
    let mut seen = 0;
    let found = eventually(Duration::from_secs(3), || {
        seen += counted(&snapshotter, "mixed");
        std::future::ready(seen > 0)
    })
    .await;
    assert!(
        found,
        "a PubSub attempt behind a fair waiter was not counted"
    );
    held.unlock().await.unwrap();
    in_line.await.unwrap().unwrap().unlock().await.unwrap();
    behind.await.unwrap().unwrap().unlock().await.unwrap();
}
