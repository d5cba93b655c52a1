//! `wait_replicas` against a real Redis node without replicas, so every `WAIT` runs to its
//! timeout: the guard exists (watchdog running, release armed) before `WAIT` starts, `WAIT`
//! counts inside the acquire deadline and never outlasts the lease it reports on.
//! `require_replicas` refuses such a grant (releasing it at once) and accepts one a
//! replica acknowledged (a master with one replica).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::{Client, Error, LockKeys};
use leasehold_harness::ReplicaPair;
use tokio::time::Instant;

use common::{client, eventually, exists, gone_within, node, pttl, two_clients};

/// Longer than any test here runs: a hold left behind would still be on the server.
const LONG_TTL: Duration = Duration::from_secs(30);
/// A `WAIT` that no replica will ever end early.
const LONG_WAIT: Duration = Duration::from_secs(10);
/// Time a background release or a returning call gets on a loaded test machine.
const SLACK: Duration = Duration::from_millis(500);
/// A `WAIT` that a live replica answers well within, and a missing one times out quickly.
const SHORT_WAIT: Duration = Duration::from_millis(50);

/// Issue 34, defect 1: an acquire cancelled while it waits in `WAIT` releases its hold at
/// once; it used to leave the hold on the server for a whole TTL, with nobody to release it.
#[tokio::test]
async fn an_acquire_cancelled_during_wait_releases_its_hold() {
    let node = node().await;
    let client = client(&node).await;
    let name = "replication:cancelled";
    let keys = LockKeys::new(name).unwrap();
    let mutex = client.mutex(name).ttl(LONG_TTL).wait_replicas(1, LONG_WAIT);
    let acquire = tokio::spawn(async move { mutex.lock().await.map(drop) });
    let granted = eventually(LONG_WAIT, || exists(&node, &keys.lock)).await;
    assert!(granted, "the acquire was never granted");
    // Granted, yet the call goes on: it is waiting in `WAIT` for a replica that does not
    // exist. Cancel it there.
    tokio::time::sleep(SLACK).await;
    assert!(
        !acquire.is_finished(),
        "the acquire ended before WAIT could time out"
    );
    acquire.abort();
    assert!(acquire.await.unwrap_err().is_cancelled());
    assert!(
        gone_within(&node, &keys.lock, SLACK).await,
        "the cancelled acquire left its hold on the server (PTTL {} ms)",
        pttl(&node, &keys.lock).await
    );
}

/// Issue 34, defect 1: `lock_within(t)` returns within `t` even when `WAIT`'s timeout is
/// longer; it used to overrun `t` by the whole `WAIT` timeout.
#[tokio::test]
async fn lock_within_counts_wait_inside_its_deadline() {
    let node = node().await;
    let client = client(&node).await;
    let within = Duration::from_millis(800);
    let mutex = client
        .mutex("replication:deadline")
        .ttl(LONG_TTL)
        .wait_replicas(1, LONG_WAIT);
    let start = Instant::now();
    let guard = mutex.lock_within(within).await.unwrap();
    let took = start.elapsed();
    assert_eq!(guard.replicas_acked(), Some(0), "no replica exists");
    assert!(
        took <= within + SLACK,
        "lock_within({within:?}) took {took:?} (WAIT timeout {LONG_WAIT:?})"
    );
    guard.unlock().await.unwrap();
}

/// Issue 34, defect 1: a `WAIT` timeout longer than the lease is cut to the lease's
/// validity, so `lock()` never hands back a guard born lost (here without a watchdog, which
/// would otherwise renew the lease during the wait).
#[tokio::test]
async fn wait_never_outlasts_the_lease_it_reports_on() {
    let node = node().await;
    let client = client(&node).await;
    let ttl = Duration::from_secs(2);
    let mutex = client
        .mutex("replication:validity")
        .ttl(ttl)
        .watchdog(false)
        .wait_replicas(1, ttl + ttl / 2);
    let guard = mutex.lock().await.unwrap();
    assert_eq!(guard.replicas_acked(), Some(0), "no replica exists");
    assert!(
        !guard.is_lost(),
        "lock() returned a guard whose lease had already run out"
    );
    guard.unlock().await.unwrap();
}

/// Issue 47, item 7: `require_replicas(1, t)` on a node without replicas fails the acquire
/// with `ReplicasShort` (it used to be only `wait_replicas`, which hands back a guard that 0
/// of 1 replicas acknowledged), and releases the grant in line: another client takes the
/// lock at once.
#[tokio::test]
async fn require_replicas_refuses_a_grant_no_replica_acknowledged() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    let name = "replication:required";
    let keys = LockKeys::new(name).unwrap();
    let outcome = a
        .mutex(name)
        .ttl(LONG_TTL)
        .require_replicas(1, SHORT_WAIT)
        .lock()
        .await;
    match &outcome {
        Err(
            err @ Error::ReplicasShort {
                name: short,
                acknowledged: 0,
                required: 1,
            },
        ) if short == name => {
            let message = err.to_string();
            assert!(message.contains(name), "{message}");
            assert!(message.contains("0 of 1"), "{message}");
        }
        other => panic!("expected ReplicasShort, got {other:?}"),
    }
    assert!(
        !exists(&node, &keys.lock).await,
        "the refused grant was left held"
    );
    let next = b
        .mutex(name)
        .try_lock()
        .await
        .expect("the lock is free at once");
    next.unlock().await.unwrap();
}

/// Issue 47, item 7: with a replica online, `require_replicas(1, t)` acquires, and the
/// guard reports the acknowledgement.
#[tokio::test]
async fn require_replicas_acquires_when_a_replica_acknowledges() {
    common::init_tracing();
    let pair = ReplicaPair::start()
        .await
        .expect("start master and replica");
    let client = Client::connect(&pair.master().url())
        .await
        .expect("connect");
    let guard = client
        .mutex("replication:required-met")
        .require_replicas(1, Duration::from_secs(1))
        .lock()
        .await
        .expect("the replica acknowledged");
    assert_eq!(guard.replicas_acked(), Some(1));
    guard.unlock().await.unwrap();
}
