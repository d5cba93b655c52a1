//! Metrics and lease events against a real Redis node: what an operator sees after a lock
//! and unlock, a timeout, a fair hand-off, and a renewal failure that loses the lease.
//!
//! One recorder is installed for the whole test binary (a recorder is process-global);
//! the tests take turns ([`serial`]) and each starts by draining it, so each sees only
//! its own metrics under any test runner.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use leasehold::metrics::{
    ACQUIRE_TIMEOUTS, ACQUIRE_WAIT_SECONDS, ACQUISITIONS, HANDOFFS, LEASES_LOST, RENEWAL_FAILURES,
    RENEWALS,
};
use leasehold::{
    Client, Error, HoldId, LeaseEvent, LeaseEvents, LockKeys, LostReason, RedLock, WaitStrategy,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use common::faulty::Faulty;
use common::{eventually, node, query};

/// Short enough that a lost lease is declared within a test's patience.
const SHORT_TTL: Duration = Duration::from_millis(300);

/// Longer than a short lease can survive without renewals.
const PATIENCE: Duration = Duration::from_secs(5);

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Takes this test's turn and drains what earlier tests recorded.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    let turn = SERIAL.lock().await;
    recorded();
    turn
}

/// This test's turn (see [`serial`]) and a fresh Redis node.
async fn serial_node() -> (
    tokio::sync::MutexGuard<'static, ()>,
    leasehold_harness::SingleNode,
) {
    let turn = serial().await;
    (turn, node().await)
}

fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        leasehold::metrics::describe();
        snapshotter
    })
}

/// Everything recorded since the last call: (name, labels `k=v`, value). Counters and
/// histograms drain on read.
fn recorded() -> Vec<(String, Vec<String>, DebugValue)> {
    snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            (key.name().to_owned(), labels, value)
        })
        .collect()
}

/// Sum of the counter `name` over the series carrying every label of `with`.
fn counter(all: &[(String, Vec<String>, DebugValue)], name: &str, with: &[&str]) -> u64 {
    all.iter()
        .filter(|(n, labels, _)| n == name && with.iter().all(|w| labels.iter().any(|l| l == w)))
        .map(|(_, _, value)| match value {
            DebugValue::Counter(n) => *n,
            other => panic!("{name} is not a counter: {other:?}"),
        })
        .sum()
}

/// The samples of the histogram `name` over the series carrying every label of `with`.
fn samples(all: &[(String, Vec<String>, DebugValue)], name: &str, with: &[&str]) -> Vec<f64> {
    all.iter()
        .filter(|(n, labels, _)| n == name && with.iter().all(|w| labels.iter().any(|l| l == w)))
        .flat_map(|(_, _, value)| match value {
            DebugValue::Histogram(values) => {
                values.iter().map(|v| v.into_inner()).collect::<Vec<f64>>()
            }
            other => panic!("{name} is not a histogram: {other:?}"),
        })
        .collect()
}

/// The kinds of events a reader saw, until its stream ended or `PATIENCE` ran out.
async fn drain(mut events: LeaseEvents) -> Vec<LeaseEvent> {
    let mut seen = Vec::new();
    let read = async {
        while let Some(event) = events.next().await {
            seen.push(event);
        }
    };
    let _ = tokio::time::timeout(PATIENCE, read).await;
    seen
}

/// One or more renewal failures, then `Lost { Expired }`, and nothing after.
fn failures_then_lost(events: &[LeaseEvent]) -> bool {
    let Some((LeaseEvent::Lost { reason }, before)) = events.split_last() else {
        return false;
    };
    *reason == LostReason::Expired
        && !before.is_empty()
        && before
            .iter()
            .all(|e| matches!(e, LeaseEvent::RenewalFailed { .. }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_and_unlock_count_one_acquisition_with_its_wait() {
    let (_turn, node) = serial_node().await;
    let client = Client::connect(&node.url()).await.unwrap();
    let guard = client.mutex("obs-plain").lock().await.unwrap();
    guard.extend().await.unwrap();
    guard.unlock().await.unwrap();
    let permit = client
        .semaphore("obs-sem", 2)
        .wait(WaitStrategy::spin())
        .try_acquire()
        .await
        .unwrap();
    permit.release().await.unwrap();

    let all = recorded();
    let mutex = ["strategy=fair_queue", "kind=mutex"];
    assert_eq!(counter(&all, ACQUISITIONS, &mutex), 1, "{all:?}");
    assert_eq!(counter(&all, RENEWALS, &mutex), 1, "extend");
    let waits = samples(&all, ACQUIRE_WAIT_SECONDS, &mutex);
    assert_eq!(waits.len(), 1);
    assert!((0.0..1.0).contains(&waits[0]), "{waits:?}");
    let permit = ["strategy=spin", "kind=permit"];
    assert_eq!(counter(&all, ACQUISITIONS, &permit), 1);
    assert!(
        samples(&all, ACQUIRE_WAIT_SECONDS, &permit).is_empty(),
        "a try has no wait"
    );
    assert_eq!(counter(&all, LEASES_LOST, &[]), 0);
    assert_eq!(counter(&all, ACQUIRE_TIMEOUTS, &[]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_acquire_is_counted() {
    let (_turn, node) = serial_node().await;
    let client = Client::connect(&node.url()).await.unwrap();
    let held = client.rwlock("obs-timeout").write().await.unwrap();
    let waited = client
        .rwlock("obs-timeout")
        .read_within(Duration::from_millis(100))
        .await;
    assert!(matches!(waited, Err(Error::Timeout { .. })), "{waited:?}");
    held.unlock().await.unwrap();

    let all = recorded();
    assert_eq!(
        counter(
            &all,
            ACQUIRE_TIMEOUTS,
            &["kind=read", "strategy=fair_queue"]
        ),
        1
    );
    assert_eq!(counter(&all, ACQUISITIONS, &["kind=write"]), 1);
    assert_eq!(counter(&all, ACQUISITIONS, &["kind=read"]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_queue_grant_after_a_hand_off_message_is_counted() {
    let (_turn, node) = serial_node().await;
    let keys = LockKeys::new("obs-fair").unwrap();
    let fair = WaitStrategy::FairQueue {
        entry_timeout: Duration::from_secs(5),
    };
    let holder = Client::builder()
        .wait(fair)
        .connect(&node.url())
        .await
        .unwrap();
    let waiter = Client::builder()
        .wait(fair)
        .connect(&node.url())
        .await
        .unwrap();
    let held = holder.mutex("obs-fair").lock().await.unwrap();
    let waiting = tokio::spawn(async move { waiter.mutex("obs-fair").lock().await });
    let queued = eventually(Duration::from_secs(2), || async {
        query::<i64>(&node, redis::cmd("LLEN").arg(&keys.queue)).await == 1
    })
    .await;
    assert!(
        queued,
        "the waiter never queued: the hand-off could not be tested"
    );
    held.unlock().await.unwrap();
    let granted = waiting.await.unwrap().unwrap();
    granted.unlock().await.unwrap();

    let all = recorded();
    let fair = ["strategy=fair_queue", "kind=mutex"];
    assert_eq!(counter(&all, ACQUISITIONS, &fair), 2);
    assert_eq!(counter(&all, HANDOFFS, &fair), 1, "{all:?}");
    let waits = samples(&all, ACQUIRE_WAIT_SECONDS, &fair);
    assert_eq!(waits.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_failures_lose_the_lease_and_are_reported_in_order() {
    let (_turn, node) = serial_node().await;
    let faulty = Faulty::connect(&node.url()).await;
    let notices: Arc<Mutex<Vec<(String, HoldId, LeaseEvent)>>> = Arc::default();
    let log = Arc::clone(&notices);
    let client = Client::builder()
        .backend(Arc::clone(&faulty) as _)
        .ttl(SHORT_TTL)
        .on_lease_event(move |notice| {
            let entry = (
                notice.name.to_owned(),
                notice.hold.clone(),
                notice.event.clone(),
            );
            log.lock().unwrap().push(entry);
        })
        .build()
        .unwrap();
    let guard = client.mutex("obs-lost").lock().await.unwrap();
    let events = guard.events();
    faulty.down.store(true, Ordering::SeqCst);
    let lost = tokio::time::timeout(PATIENCE, guard.lost()).await;
    assert!(lost.is_ok(), "the lease was never declared lost");
    let seen = drain(events).await;
    assert!(failures_then_lost(&seen), "{seen:?}");

    let notices = notices.lock().unwrap().clone();
    assert!(
        notices
            .iter()
            .all(|(name, hold, _)| name == "obs-lost" && hold == guard.hold_id())
    );
    let events: Vec<LeaseEvent> = notices.into_iter().map(|(_, _, e)| e).collect();
    assert!(failures_then_lost(&events), "{events:?}");

    let all = recorded();
    let mutex = ["strategy=fair_queue", "kind=mutex"];
    let failures = counter(&all, RENEWAL_FAILURES, &mutex);
    assert_eq!(
        failures as usize,
        events.len() - 1,
        "one count per reported failure"
    );
    assert!(counter(&all, RENEWAL_FAILURES, &["reason=transport"]) >= 1);
    assert_eq!(counter(&all, LEASES_LOST, &["reason=expired"]), 1);
    faulty.down.store(false, Ordering::SeqCst);
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_guards_permits_and_redlock_guards_report_loss_too() {
    let (_turn, node) = serial_node().await;
    let faulty = Faulty::connect(&node.url()).await;
    let client = faulty.client(SHORT_TTL, true);
    let read = client.rwlock("obs-rw").read().await.unwrap();
    let permit = client.semaphore("obs-permit", 1).acquire().await.unwrap();
    let redlock = RedLock::new([client.clone()], "obs-redlock")
        .lock()
        .await
        .unwrap();
    let readers = [read.events(), permit.events(), redlock.events()];
    faulty.down.store(true, Ordering::SeqCst);
    for events in readers {
        let seen = drain(events).await;
        assert!(failures_then_lost(&seen), "{seen:?}");
    }
    let all = recorded();
    for kind in [
        ["strategy=fair_queue", "kind=read"],
        ["strategy=fair_queue", "kind=permit"],
        ["strategy=redlock", "kind=mutex"],
    ] {
        assert_eq!(counter(&all, LEASES_LOST, &kind), 1, "{kind:?}");
        assert_eq!(counter(&all, ACQUISITIONS, &kind), 1, "{kind:?}");
    }
    faulty.down.store(false, Ordering::SeqCst);
}
