//! Locks on a real Redis Cluster (3 masters, 3 replicas): every lock family on a name of
//! every shard, pub/sub wake-ups and fair hand-offs published on other nodes than the one
//! subscribed to, and a `MOVED` redirect after a slot changes owner under a live client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::{Client, WaitStrategy};
use leasehold_harness::{ClusterTopology, Node};

/// The hash slot of `key`, as the cluster computes it.
async fn slot(node: &Node, key: &str) -> u16 {
    node.query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
        .await
        .unwrap()
}

/// One lock name per master, each hashing into that master's slot range.
async fn name_per_shard(cluster: &ClusterTopology) -> Vec<(String, u16)> {
    let node = &cluster.masters()[0];
    let mut names = Vec::new();
    for index in 0..cluster.masters().len() {
        let (low, high) = cluster.slot_range(index);
        let mut candidate = 0;
        loop {
            let name = format!("shard-{index}-{candidate}");
            let slot = slot(node, &format!("leasehold:{{{name}}}")).await;
            if (low..=high).contains(&slot) {
                names.push((name, slot));
                break;
            }
            candidate += 1;
        }
    }
    names
}

/// A fresh cluster, and one lock name per master with the slot it hashes into.
async fn sharded_cluster() -> (ClusterTopology, Vec<(String, u16)>) {
    common::init_tracing();
    let cluster = ClusterTopology::start().await.expect("start the cluster");
    let names = name_per_shard(&cluster).await;
    (cluster, names)
}

async fn cluster_client(cluster: &ClusterTopology, wait: WaitStrategy) -> Client {
    Client::builder()
        .ttl(Duration::from_secs(10))
        .wait(wait)
        .cluster(&cluster.urls())
        .await
        .expect("connect to the cluster")
}

/// `b` waits while `a` holds; `a`'s release (published on the shard's master) must wake
/// `b` well before the 10 s TTL fallback would.
async fn hand_over(a: &Client, b: &Client, name: &str, wait: WaitStrategy) {
    let held = a.mutex(name).lock().await.unwrap();
    let waiter = {
        let mutex = b.mutex(name).wait(wait);
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let guard = mutex.lock_within(Duration::from_secs(5)).await.unwrap();
            (started.elapsed(), guard)
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let token = held.fencing_token();
    held.unlock().await.unwrap();
    let (waited, guard) = waiter.await.unwrap();
    assert!(
        waited < Duration::from_secs(2),
        "{name}: woken after {waited:?}, not by the release message"
    );
    assert!(guard.fencing_token() > token);
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_family_works_on_every_shard() {
    let (cluster, names) = sharded_cluster().await;
    let fair = common::strategies()[2];
    let a = cluster_client(&cluster, WaitStrategy::PubSub).await;
    let b = cluster_client(&cluster, WaitStrategy::PubSub).await;
    for (name, _) in &names {
        hand_over(&a, &b, name, WaitStrategy::PubSub).await;
        hand_over(&a, &b, name, fair).await;

        let write = a.rwlock(name.as_str()).write().await.unwrap();
        let read = write.downgrade().await.unwrap();
        let shared = b.rwlock(name.as_str()).try_read().await.unwrap();
        assert!(b.rwlock(name.as_str()).try_write().await.is_err());
        shared.unlock().await.unwrap();
        read.unlock().await.unwrap();

        let semaphore = b.semaphore(name.as_str(), 2);
        let one = semaphore.acquire().await.unwrap();
        let two = semaphore.acquire().await.unwrap();
        assert!(semaphore.try_acquire().await.is_err());
        one.release().await.unwrap();
        two.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_moved_after_a_slot_changes_owner() {
    let (cluster, names) = sharded_cluster().await;
    let (name, slot) = names[1].clone();
    let client = cluster_client(&cluster, WaitStrategy::PubSub).await;
    common::lock_and_unlock(&client.mutex(name.as_str())).await;

    // Empty the slot (the fencing key outlives the lock) and move it from master 1 to
    // master 0 behind the client's back.
    let source = &cluster.masters()[1];
    let keys: Vec<String> = source
        .query(
            redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100),
        )
        .await
        .unwrap();
    for key in keys {
        let _: i64 = source.query(redis::cmd("DEL").arg(key)).await.unwrap();
    }
    let target: String = cluster.masters()[0]
        .query(redis::cmd("CLUSTER").arg("MYID"))
        .await
        .unwrap();
    for node in cluster.masters() {
        let _: () = node
            .query(
                redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg("NODE")
                    .arg(&target),
            )
            .await
            .unwrap();
    }
    // The client's slot map still names master 1, which now answers MOVED.
    let guard = client.mutex(name.as_str()).lock().await.unwrap();
    let held: i64 = cluster.masters()[0]
        .query(redis::cmd("EXISTS").arg(format!("leasehold:{{{name}}}")))
        .await
        .unwrap();
    assert_eq!(held, 1, "the lock lives on the slot's new owner");
    guard.unlock().await.unwrap();
}
