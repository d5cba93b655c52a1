//! Shared fixtures of the integration tests: a Redis node in a container (harness), clients
//! on it, and a few helpers. Every test uses its own lock names.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod faulty;
pub mod masters;
pub mod scripts;
pub mod tasks;

use std::time::Duration;

use leasehold::{Client, Guard, LockKeys, Mutex, WaitStrategy};
use leasehold_harness::SingleNode;

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A fresh single node.
pub async fn node() -> SingleNode {
    init_tracing();
    SingleNode::start().await.expect("start a Redis container")
}

pub async fn client(node: &SingleNode) -> Client {
    Client::connect(&node.url()).await.expect("connect")
}

/// Two clients on `node`: two processes, as the lock sees them.
pub async fn two_clients(node: &SingleNode) -> (Client, Client) {
    (client(node).await, client(node).await)
}

/// A client on `node` whose locks lease for `ttl` and wait with `wait` unless told otherwise.
pub async fn client_with(node: &SingleNode, ttl: Duration, wait: WaitStrategy) -> Client {
    Client::builder()
        .ttl(ttl)
        .wait(wait)
        .connect(&node.url())
        .await
        .expect("connect")
}

/// Holds the mutex `name` for `ttl` with no watchdog: the lease ends at its TTL unless
/// extended.
pub async fn lock_unrenewed(client: &Client, name: &str, ttl: Duration) -> Guard {
    client
        .mutex(name)
        .ttl(ttl)
        .watchdog(false)
        .lock()
        .await
        .unwrap()
}

/// Takes `mutex` and releases it at once (loads the scripts; proves the lock can be had).
pub async fn lock_and_unlock(mutex: &Mutex) {
    mutex.lock().await.unwrap().unlock().await.unwrap();
}

/// The three wait strategies, with short fair-queue entries so tests stay fast.
pub fn strategies() -> [WaitStrategy; 3] {
    [
        WaitStrategy::spin(),
        WaitStrategy::PubSub,
        WaitStrategy::FairQueue {
            entry_timeout: Duration::from_millis(600),
        },
    ]
}

pub async fn query<T: redis::FromRedisValue>(node: &SingleNode, cmd: &redis::Cmd) -> T {
    node.node().query(cmd).await.expect("query")
}

pub async fn exists(node: &SingleNode, key: &str) -> bool {
    query::<i64>(node, redis::cmd("EXISTS").arg(key)).await == 1
}

/// How many holds `owner` has in the mutex `keys`, whichever form its lock key is in: a
/// lone hold's string (`<16 hex>:<owner>`: one hold of its owner) or the lock hash (the
/// owner's count field). `None` when the owner holds nothing.
pub async fn hold_count(node: &SingleNode, keys: &LockKeys, owner: &str) -> Option<u64> {
    let lone: Vec<Option<String>> = query(node, redis::cmd("MGET").arg(&keys.lock)).await;
    if let Some(Some(hold)) = lone.first() {
        return (hold.split_once(':').map(|(_, of)| of) == Some(owner)).then_some(1);
    }
    query(node, redis::cmd("HGET").arg(&keys.lock).arg(owner)).await
}

pub async fn pttl(node: &SingleNode, key: &str) -> i64 {
    query(node, redis::cmd("PTTL").arg(key)).await
}

/// Whether `key` is gone from `node` within `within` (polled, see [`eventually`]).
pub async fn gone_within(node: &SingleNode, key: &str, within: Duration) -> bool {
    eventually(within, || async { !exists(node, key).await }).await
}

/// Polls `condition` every 10 ms for up to `within`.
pub async fn eventually<F, Fut>(within: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = tokio::time::Instant::now() + within;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
