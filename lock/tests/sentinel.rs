//! Locks through Sentinel (master, one replica, three Sentinels): after the master is killed
//! and a replica promoted, the same client re-resolves the master, new locks work, and
//! waiters are woken again through a re-established subscription. `WAIT` reports replicas.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::{Client, LockKeys, WaitStrategy};
use leasehold_harness::SentinelTopology;

/// Bound for Sentinel to notice the dead master (1 s down-after) and promote the replica.
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_failover() {
    common::init_tracing();
    let topology = SentinelTopology::start().await.expect("start Sentinel");
    let connect = || async {
        Client::builder()
            .ttl(Duration::from_secs(10))
            .wait(WaitStrategy::PubSub)
            .sentinel(&topology.sentinel_urls(), topology.master_name())
            .await
            .expect("connect through Sentinel")
    };
    let a = connect().await;
    let b = connect().await;

    let guard = a
        .mutex("sentinel-before")
        .wait_replicas(1, Duration::from_secs(1))
        .lock()
        .await
        .unwrap();
    assert_eq!(
        guard.replicas_acked(),
        Some(1),
        "the replica acknowledged the lock"
    );
    guard.unlock().await.unwrap();

    let old = topology.master().addr();
    topology.master().kill().await.unwrap();
    let new = topology
        .wait_for_new_master(old, FAILOVER_LIMIT)
        .await
        .expect("Sentinel promoted the replica");

    // The same clients find the new master on their own.
    let guard = a
        .mutex("sentinel-after")
        .lock_within(Duration::from_secs(15))
        .await
        .unwrap();
    let key = LockKeys::new("sentinel-after").unwrap().lock;
    let exists: i64 = topology
        .node_at(new)
        .unwrap()
        .query(redis::cmd("EXISTS").arg(&key))
        .await
        .unwrap();
    assert_eq!(exists, 1, "the lock lives on the new master");

    // A waiter is woken by the release message over a fresh subscription.
    let waiter = {
        let mutex = b.mutex("sentinel-after");
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let guard = mutex.lock_within(Duration::from_secs(15)).await.unwrap();
            (started.elapsed(), guard)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    guard.unlock().await.unwrap();
    let (waited, guard) = waiter.await.unwrap();
    assert!(
        waited < Duration::from_secs(5),
        "waiter woken after {waited:?}"
    );
    guard.unlock().await.unwrap();
}
