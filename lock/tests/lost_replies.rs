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
