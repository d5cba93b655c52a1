//! Lease renewal and the lost-lease signal against a real Redis node.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::{Error, LockKeys};
use tokio::time::Instant;

use common::{client, exists, gone_within, lock_unrenewed, node, pttl, two_clients};

/// How late a timer may fire on a loaded 2-core CI machine.
const SCHEDULING_SLACK: Duration = Duration::from_millis(50);

#[tokio::test]
async fn watchdog_holds_the_lock_past_three_ttls_then_stops() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    let ttl = Duration::from_millis(400);
    let keys = LockKeys::new("dog").unwrap();
    let guard = a.mutex("dog").ttl(ttl).lock().await.unwrap();
    let end = Instant::now() + ttl * 7 / 2;
    while Instant::now() < end {
        assert!(matches!(
            b.mutex("dog").try_lock().await,
            Err(Error::WouldBlock { .. })
        ));
        assert!(!guard.is_lost());
        tokio::time::sleep(ttl / 4).await;
    }
    guard.unlock().await.unwrap();
    assert!(!exists(&node, &keys.lock).await);
}

#[tokio::test]
async fn a_released_holds_watchdog_no_longer_renews() {
    let node = node().await;
    let client = client(&node).await;
    let ttl = Duration::from_millis(200);
    let keys = LockKeys::new("dog-stop").unwrap();
    let renewed = client.mutex("dog-stop").owner("o").ttl(ttl);
    let guarded = renewed.lock().await.unwrap();
    // A second hold of the same owner without a watchdog keeps the key alive...
    let unrenewed = renewed.clone().watchdog(false).lock().await.unwrap();
    // ...until the renewing hold is released: then nothing refreshes the TTL any more.
    guarded.unlock().await.unwrap();
    tokio::time::sleep(ttl / 2).await;
    assert!(pttl(&node, &keys.lock).await < (ttl / 2).as_millis() as i64 + 20);
    tokio::time::sleep(ttl).await;
    assert!(!exists(&node, &keys.lock).await, "something kept renewing");
    assert!(unrenewed.is_lost());
    assert!(matches!(
        unrenewed.unlock().await,
        Err(Error::LeaseLost { .. })
    ));
}

#[tokio::test]
async fn dropping_a_guard_releases_in_the_background() {
    let node = node().await;
    let client = client(&node).await;
    let keys = LockKeys::new("drop").unwrap();
    let guard = client.mutex("drop").lock().await.unwrap();
    drop(guard);
    assert!(gone_within(&node, &keys.lock, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn extend_moves_the_deadline() {
    let node = node().await;
    let client = client(&node).await;
    let ttl = Duration::from_millis(300);
    let guard = lock_unrenewed(&client, "extend", ttl).await;
    for _ in 0..4 {
        tokio::time::sleep(ttl / 2).await;
        guard.extend().await.unwrap();
    }
    assert!(!guard.is_lost());
    assert!(guard.remaining() > ttl / 2);
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn lost_fires_at_the_local_deadline_without_a_watchdog() {
    let node = node().await;
    let client = client(&node).await;
    let ttl = Duration::from_millis(250);
    let start = Instant::now();
    let guard = lock_unrenewed(&client, "deadline", ttl).await;
    let granted = Instant::now();
    // The local deadline: send time + TTL - drift margin (1 % + 2 ms), so strictly before
    // the server's expiry.
    let margin = ttl / 100 + Duration::from_millis(2);
    assert!(guard.remaining() <= ttl - margin);
    guard.lost().await;
    let fired = start.elapsed();
    assert!(fired >= ttl - margin, "fired too early: {fired:?}");
    // Timers may wake late on a loaded machine; the deadline itself was checked above. The
    // send time lies between `start` and the grant, so the deadline is at most TTL - margin
    // after the grant: counting from the grant keeps the acquire's own round trip (slow
    // while other tests start containers) out of what this bounds.
    let after_grant = granted.elapsed();
    assert!(
        after_grant < ttl + SCHEDULING_SLACK,
        "fired far too late: {after_grant:?} after the grant"
    );
    assert!(guard.is_lost());
}

/// Scenario 7 (partition, here a frozen server): the watchdog cannot renew, and `lost()`
/// fires before the lease could have ended on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_before_expiry_when_the_node_freezes() {
    let node = node().await;
    let client = client(&node).await;
    let ttl = Duration::from_millis(600);
    let guard = client.mutex("frozen").ttl(ttl).lock().await.unwrap();
    // Let one renewal succeed, then freeze the server right after it.
    tokio::time::sleep(ttl / 3 + ttl / 10).await;
    node.node().pause().await.unwrap();
    let paused_at = Instant::now();
    let fired = tokio::time::timeout(ttl * 2, guard.lost()).await;
    node.node().unpause().await.unwrap();
    assert!(fired.is_ok(), "lost() never fired");
    // The last confirmed renewal was sent before the pause, so the server's key lives at
    // least ttl past the pause: lost() must fire within ttl of it (plus timer lateness).
    let fired = paused_at.elapsed();
    eprintln!("lost() fired {fired:?} after the pause (TTL {ttl:?})");
    assert!(fired < ttl + SCHEDULING_SLACK, "{fired:?}");
    assert!(guard.is_lost());
    assert!(matches!(guard.extend().await, Err(Error::LeaseLost { .. })));
}
