//! Fence keys against a real Redis node: an idle lock name keeps no key longer than its
//! last lease and the fence margin, and tokens still grow when the key expired or a restart
//! lost it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::{Client, DEFAULT_FENCE_MARGIN, DEFAULT_TTL, LockKeys};

use common::{exists, node, pttl, query};

/// A short margin and lease so that the key's expiry happens within the test.
const MARGIN: Duration = Duration::from_millis(300);
const LEASE: Duration = Duration::from_millis(200);

/// Lock and unlock 1,000 distinct names (one per order): every key they leave expires
/// within the lease and the margin, and the report gives the bytes an idle name costs
/// meanwhile.
#[tokio::test]
async fn distinct_names_leave_keys_for_at_most_the_lease_and_the_margin() {
    const NAMES: usize = 1_000;
    let node = node().await;
    let client = common::client(&node).await;
    for i in 0..NAMES {
        let guard = client.mutex(format!("order:{i}")).lock().await.unwrap();
        guard.unlock().await.unwrap();
    }
    let keys: i64 = query(&node, &redis::cmd("DBSIZE")).await;
    let mut bytes = 0i64;
    let mut longest = 0i64;
    for i in 0..NAMES {
        let fence = LockKeys::new(&format!("order:{i}")).unwrap().fence;
        bytes += query::<Option<i64>>(&node, redis::cmd("MEMORY").arg("USAGE").arg(&fence))
            .await
            .unwrap_or(0);
        longest = longest.max(pttl(&node, &fence).await);
    }
    eprintln!(
        "{NAMES} idle names: {keys} keys, {:.0} bytes per name, longest PTTL {longest} ms",
        bytes as f64 / NAMES as f64
    );
    assert!(
        keys <= NAMES as i64,
        "only the fence key may stay: {keys} keys"
    );
    // Released early, a lone hold leaves its fence key the expiry its grant gave it: the
    // lease + the margin.
    assert!(
        longest <= (DEFAULT_TTL + DEFAULT_FENCE_MARGIN).as_millis() as i64,
        "a fence key outlives its idle lock's lease by more than the margin: {longest} ms"
    );
}

/// With a short margin the fence key expires between holds; the next token still grows.
#[tokio::test]
async fn tokens_grow_after_the_fence_key_expired() {
    let node = node().await;
    let keys = LockKeys::new("expiring").unwrap();
    let client = Client::builder()
        .fence_margin(MARGIN)
        .connect(&node.url())
        .await
        .unwrap();
    let mutex = client.mutex("expiring").ttl(LEASE).watchdog(false);
    let mut last = None;
    for round in 0..4 {
        let guard = mutex.lock().await.unwrap();
        let token = guard.fencing_token();
        assert!(Some(token) > last, "round {round}: {token} after {last:?}");
        last = Some(token);
        guard.unlock().await.unwrap();
        let left = pttl(&node, &keys.fence).await;
        assert!(
            (1..=(LEASE + MARGIN).as_millis() as i64).contains(&left),
            "an idle fence key lives {left} ms, the lease and margin are {LEASE:?} + {MARGIN:?}"
        );
        tokio::time::sleep(LEASE + MARGIN + Duration::from_millis(100)).await;
        assert!(
            !exists(&node, &keys.fence).await,
            "the fence key outlived the margin"
        );
    }
}

/// A restart without persistence loses the fence key like an expiry: tokens still grow.
#[tokio::test]
async fn tokens_grow_across_a_restart_that_lost_the_fence_key() {
    let node = node().await;
    let client = common::client(&node).await;
    let before = {
        let guard = client.mutex("restarted").lock().await.unwrap();
        let token = guard.fencing_token();
        guard.unlock().await.unwrap();
        token
    };
    node.node().restart().await.unwrap();
    let keys: i64 = query(&node, &redis::cmd("DBSIZE")).await;
    assert_eq!(keys, 0, "the restart should have lost every key");
    let after = common::eventually(Duration::from_secs(10), || async {
        client.mutex("restarted").try_lock().await.is_ok()
    })
    .await;
    assert!(after, "the restarted node never granted the lock");
    let guard = client.mutex("restarted").lock().await.unwrap();
    assert!(
        guard.fencing_token() > before,
        "{} after the restart, {before} before",
        guard.fencing_token()
    );
}
