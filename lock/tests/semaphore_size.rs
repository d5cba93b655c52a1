//! The semaphore's stored size against a real Redis node: the first acquire stores it, an
//! acquire with another number is refused with a message that says how to change it, a
//! resize up admits waiters and a resize down stops new admissions, and an idle semaphore
//! forgets it (no key outlives the semaphore's other keys).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::{Error, MAX_PERMITS, WaitStrategy};

use common::{client, client_with, exists, node, pttl, query, two_clients};

fn size_key(name: &str) -> String {
    format!("leasehold:{{{name}}}:sem:size")
}

async fn stored(node: &leasehold_harness::SingleNode, name: &str) -> Option<String> {
    query(node, redis::cmd("GET").arg(size_key(name))).await
}

#[tokio::test]
async fn the_first_acquire_stores_the_size_for_as_long_as_the_permits_live() {
    let node = node().await;
    let a = client(&node).await;
    let permit = a.semaphore("size-first", 3).acquire().await.unwrap();
    assert_eq!(stored(&node, "size-first").await.as_deref(), Some("3"));
    // The permits' TTL first: read after it, the size's is no longer when both end together.
    let permits = pttl(&node, "leasehold:{size-first}:sem").await;
    let size = pttl(&node, &size_key("size-first")).await;
    assert!(size > 0, "the size key has no expiry: {size}");
    assert!(
        size <= permits,
        "size lives {size} ms, permits {permits} ms"
    );
    permit.release().await.unwrap();
}

#[tokio::test]
async fn another_number_is_refused_with_both_numbers_and_the_way_out() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    let held = a.semaphore("size-mismatch", 3).acquire().await.unwrap();
    let fair = WaitStrategy::FairQueue {
        entry_timeout: Duration::from_secs(5),
    };
    let other = b.semaphore("size-mismatch", 5).wait(fair);
    let started = tokio::time::Instant::now();
    let err = other
        .acquire_within(Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused only after waiting"
    );
    let Error::PermitsMismatch {
        ref name,
        stored,
        requested,
    } = err
    else {
        panic!("expected PermitsMismatch, got {err:?}");
    };
    assert_eq!((name.as_str(), stored, requested), ("size-mismatch", 3, 5));
    let message = err.to_string();
    for part in ["size-mismatch", "3 permits", "5", "resize"] {
        assert!(message.contains(part), "{part} missing from: {message}");
    }
    // Refused before queueing: nothing of the caller's is left on the server.
    assert!(!exists(&node, "leasehold:{size-mismatch}:sem:queue").await);
    assert!(matches!(
        other.try_acquire().await,
        Err(Error::PermitsMismatch { .. })
    ));
    assert!(!held.is_lost());
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_first_users_with_different_numbers_one_wins() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    for round in 0..10 {
        let name = format!("size-race-{round}");
        let (two, four) = (a.semaphore(&name, 2), b.semaphore(&name, 4));
        let (x, y) = tokio::join!(two.try_acquire(), four.try_acquire());
        let refused = [x.is_err(), y.is_err()];
        assert_eq!(refused.iter().filter(|r| **r).count(), 1, "round {round}");
        let (won, lost) = match (x, y) {
            (Ok(p), Err(e)) => ((p, "2"), e),
            (Err(e), Ok(p)) => ((p, "4"), e),
            _ => unreachable!("checked above"),
        };
        assert!(matches!(lost, Error::PermitsMismatch { .. }), "{lost:?}");
        assert_eq!(stored(&node, &name).await.as_deref(), Some(won.1));
        won.0.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resizing_up_admits_a_waiter_at_once() {
    let node = node().await;
    let fair = WaitStrategy::FairQueue {
        entry_timeout: Duration::from_secs(5),
    };
    let (a, b) = (
        client_with(&node, Duration::from_secs(5), fair).await,
        client_with(&node, Duration::from_secs(5), fair).await,
    );
    let held = a.semaphore("size-up", 1).acquire().await.unwrap();
    let waiter = b.semaphore("size-up", 1);
    let waiting = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let permit = waiter
            .acquire_within(Duration::from_secs(10))
            .await
            .unwrap();
        (started.elapsed(), permit)
    });
    assert!(
        common::eventually(Duration::from_secs(2), || async {
            exists(&node, "leasehold:{size-up}:sem:queue").await
        })
        .await,
        "the waiter never queued"
    );
    let mut sem = a.semaphore("size-up", 1);
    assert!(sem.resize(2).await.unwrap(), "a live semaphore");
    assert_eq!(sem.permits(), 2);
    let (waited, permit) = waiting.await.unwrap();
    assert!(waited < Duration::from_secs(3), "admitted after {waited:?}");
    assert_eq!(stored(&node, "size-up").await.as_deref(), Some("2"));
    assert!(!held.is_lost());
    // Full at the new size; the old number is refused now.
    assert!(matches!(
        sem.try_acquire().await,
        Err(Error::WouldBlock { .. })
    ));
    assert!(matches!(
        a.semaphore("size-up", 1).try_acquire().await,
        Err(Error::PermitsMismatch { stored: 2, .. })
    ));
    held.release().await.unwrap();
    permit.release().await.unwrap();
}

#[tokio::test]
async fn resizing_down_keeps_holders_and_stops_new_admissions() {
    let node = node().await;
    let a = client(&node).await;
    let mut sem = a.semaphore("size-down", 3);
    let first = sem.acquire().await.unwrap();
    let second = sem.acquire().await.unwrap();
    assert!(sem.resize(1).await.unwrap());
    assert!(
        !first.is_lost() && !second.is_lost(),
        "resize took a permit"
    );
    assert!(matches!(
        sem.try_acquire().await,
        Err(Error::WouldBlock { .. })
    ));
    first.release().await.unwrap();
    // One holder left, and the size is one: still full.
    assert!(matches!(
        sem.try_acquire().await,
        Err(Error::WouldBlock { .. })
    ));
    second.release().await.unwrap();
    let third = sem.try_acquire().await.unwrap();
    assert!(matches!(
        sem.try_acquire().await,
        Err(Error::WouldBlock { .. })
    ));
    third.release().await.unwrap();
}

#[tokio::test]
async fn an_idle_semaphore_forgets_its_size() {
    let node = node().await;
    let a = client(&node).await;
    a.semaphore("size-idle", 3)
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    assert!(
        !exists(&node, &size_key("size-idle")).await,
        "size outlived the semaphore"
    );
    // Resizing an idle semaphore stores nothing; the next acquire's number is the size.
    let mut sem = a.semaphore("size-idle", 3);
    assert!(!sem.resize(4).await.unwrap());
    assert!(!exists(&node, &size_key("size-idle")).await);
    let permit = a.semaphore("size-idle", 5).acquire().await.unwrap();
    assert_eq!(stored(&node, "size-idle").await.as_deref(), Some("5"));
    permit.release().await.unwrap();

    // A crashed holder's permit expires, and the size with it.
    let ttl = Duration::from_millis(300);
    let crashed = a.semaphore("size-idle", 2).ttl(ttl).watchdog(false);
    std::mem::forget(crashed.acquire().await.unwrap());
    assert!(
        common::gone_within(&node, &size_key("size-idle"), ttl * 5).await,
        "the size key outlived the crashed holder's permit"
    );
}

#[tokio::test]
async fn bad_sizes_are_typed_errors_and_send_nothing() {
    let node = node().await;
    let a = client(&node).await;
    let mut sem = a.semaphore("size-bad", 2);
    for bad in [0, MAX_PERMITS + 1, u32::MAX] {
        assert!(
            matches!(sem.resize(bad).await, Err(Error::InvalidConfig { .. })),
            "resize({bad})"
        );
        assert!(
            matches!(
                a.semaphore("size-bad", bad).try_acquire().await,
                Err(Error::InvalidConfig { .. })
            ),
            "acquire with {bad}"
        );
    }
    assert_eq!(sem.permits(), 2, "a refused resize changed the handle");
    assert!(!exists(&node, &size_key("size-bad")).await);
}
