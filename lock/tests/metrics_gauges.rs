//! The `leasehold_held` and `leasehold_waiting` gauges and the `leasehold_hold_seconds`
//! histogram against a real Redis node, through a global `metrics` debugging recorder: each
//! gauge is seen up while a guard lives or a call waits, and back to zero after an unlock,
//! a drop, a cancelled wait and a lost lease. One test, so the global recorder is this
//! process's alone under `cargo test` too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::metrics::{HELD, HOLD_SECONDS, WAITING};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use common::client;

const LABEL: &str = "billing";

/// Running totals of what the recorder saw. A debugging snapshot hands out what changed
/// since the previous one (gauges and counters swap to zero, histograms drain), so the
/// gauges' values are the sums of every look.
struct Totals {
    snapshotter: Snapshotter,
    held: f64,
    waiting: f64,
    holds: usize,
}

impl Totals {
    /// Takes a look and returns `(held, waiting, hold times recorded)` so far, counting
    /// only metrics labelled `label=billing`.
    fn look(&mut self) -> (f64, f64, usize) {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let key = key.key();
            if !key
                .labels()
                .any(|l| l.key() == "label" && l.value() == LABEL)
            {
                continue;
            }
            match (key.name(), value) {
                (HELD, DebugValue::Gauge(g)) => self.held += g.into_inner(),
                (WAITING, DebugValue::Gauge(g)) => self.waiting += g.into_inner(),
                (HOLD_SECONDS, DebugValue::Histogram(values)) => self.holds += values.len(),
                _ => {}
            }
        }
        (self.held, self.waiting, self.holds)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gauges_come_back_to_zero_on_unlock_drop_cancel_and_loss() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::set_global_recorder(recorder).expect("the only recorder of this process");
    let mut seen = Totals {
        snapshotter,
        held: 0.0,
        waiting: 0.0,
        holds: 0,
    };
    let node = common::node().await;
    let (a, b) = (client(&node).await, client(&node).await);

    // Unlock, with a waiter seen waiting and then cancelled meanwhile.
    let guard = a.mutex("gauge").metrics_label(LABEL).lock().await.unwrap();
    assert_eq!(seen.look(), (1.0, 0.0, 0));
    let waiter = b.mutex("gauge").metrics_label(LABEL);
    let waiting = tokio::spawn(async move { waiter.lock().await });
    let mut queued = false;
    for _ in 0..500 {
        if seen.look().1 == 1.0 {
            queued = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(queued, "the waiter never showed in the gauge");
    waiting.abort();
    let _ = waiting.await;
    assert_eq!(seen.look().1, 0.0, "a cancelled wait gives it back");
    guard.unlock().await.unwrap();
    assert_eq!(seen.look(), (0.0, 0.0, 1));

    // Drop.
    let guard = a
        .mutex("gauge-drop")
        .metrics_label(LABEL)
        .lock()
        .await
        .unwrap();
    assert_eq!(seen.look().0, 1.0);
    drop(guard);
    assert_eq!(seen.look(), (0.0, 0.0, 2));

    // Loss: the lease lapses (no watchdog), then the guard goes.
    let guard = a
        .mutex("gauge-lost")
        .metrics_label(LABEL)
        .ttl(Duration::from_millis(300))
        .watchdog(false)
        .lock()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("the lease lapses");
    assert_eq!(seen.look().0, 1.0, "a lost guard still lives");
    // The server may still have the hold (the local bound ends first): either verdict.
    let _ = guard.unlock().await;
    assert_eq!(seen.look(), (0.0, 0.0, 3));
}
