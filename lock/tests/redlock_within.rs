//! `RedLock::lock_within` bounds the wait by its own timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use leasehold::{Error, RedLock};

/// Long enough for an uncontended acquire on a local container.
const GENEROUS: Duration = Duration::from_secs(5);

/// Short enough to keep a contended wait brief.
const BRIEF: Duration = Duration::from_millis(200);

#[tokio::test]
async fn redlock_lock_within_gives_up_after_its_timeout() {
    let node = common::node().await;
    let client = common::client(&node).await;
    // RedLock runs the mutex's scripts on the mutex's keys: a mutex holder blocks it.
    let held = client.mutex("within-redlock").lock().await.unwrap();
    let redlock = RedLock::new([client.clone()], "within-redlock")
        .retry_count(u32::MAX)
        .retry_delay(Duration::from_millis(20));
    let start = Instant::now();
    let busy = redlock.lock_within(BRIEF).await;
    let waited = start.elapsed();
    println!("RedLock::lock_within({BRIEF:?}) on a held lock returned after {waited:?}");
    assert!(matches!(busy, Err(Error::Timeout { .. })), "{busy:?}");
    assert!(waited >= BRIEF && waited < GENEROUS, "{waited:?}");
    held.unlock().await.unwrap();
    let guard = redlock.lock_within(GENEROUS).await.unwrap();
    guard.unlock().await.unwrap();
}
