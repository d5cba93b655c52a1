//! Outcomes reported after a lost reply, against a real Redis node through a backend that
//! loses exactly one reply: a release retried after its first attempt ran is not reported
//! as a hold that was never there, and a re-entry whose attempt was lost is not reported as
//! a lost lease.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use leasehold::{Error, LockKeys};

use common::faulty::Faulty;
use common::{exists, lock_and_unlock, node};

/// Long enough that no lease in these tests runs out on its own.
const TTL: Duration = Duration::from_secs(10);

/// Issue 34, defect 5: a release whose reply is lost after it ran is retried with the same
/// hold id and answered "not held"; `unlock()` used to report `NotHeld` ("the critical
/// section may not have been exclusive") for a hold that was live and released normally.
#[tokio::test]
async fn a_retried_release_after_a_lost_reply_is_not_reported_as_not_held() {
    let node = node().await;
    let name = "lost-replies:release";
    let keys = LockKeys::new(name).unwrap();
    let faulty = Faulty::connect(&node.url()).await;
    let mutex = faulty.client(TTL, true).mutex(name);
    // Loads the scripts, so the release below goes by SHA and the switch can see it.
    lock_and_unlock(&mutex).await;
    let guard = mutex.lock().await.unwrap();
    assert!(!guard.is_lost());
    faulty.lose_release_reply.store(true, Ordering::SeqCst);
    let unlocked = guard.unlock().await;
    assert!(
        !faulty.lose_release_reply.load(Ordering::SeqCst),
        "no release reply was lost"
    );
    assert!(!exists(&node, &keys.lock).await, "the release did not run");
    assert!(
        matches!(
            unlocked,
            Err(Error::Ambiguous {
                operation: "release",
                ..
            })
        ),
        "a normal release whose reply was lost reported {unlocked:?}"
    );
}

/// Issue 34, defect 5: a re-entry whose attempt is lost in transit, and which the probe
/// then finds not granted, is reported as `Ambiguous`; it used to be `LeaseLost` while the
/// original guard still held the lock.
#[tokio::test]
async fn a_lost_reentry_is_ambiguous_not_a_lost_lease() {
    let node = node().await;
    let name = "lost-replies:reenter";
    let keys = LockKeys::new(name).unwrap();
    let faulty = Faulty::connect(&node.url()).await;
    let mutex = faulty.client(TTL, true).mutex(name).owner("reentrant");
    lock_and_unlock(&mutex).await;
    let guard = mutex.lock().await.unwrap();
    faulty.lose_acquire.store(true, Ordering::SeqCst);
    let reentered = guard.reenter().await;
    assert!(
        !faulty.lose_acquire.load(Ordering::SeqCst),
        "no acquire was lost"
    );
    assert!(
        matches!(
            reentered,
            Err(Error::Ambiguous {
                operation: "acquire",
                ..
            })
        ),
        "a re-entry lost in transit reported {reentered:?}"
    );
    // The original guard was fine all along: the server renews and releases its hold.
    assert!(!guard.is_lost());
    guard.extend().await.unwrap();
    guard.unlock().await.unwrap();
    assert!(
        !exists(&node, &keys.lock).await,
        "the release left the lock"
    );
}
