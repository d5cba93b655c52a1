//! The lease mutex against a real Redis node: exclusion, re-entry, expiry, fencing, errors,
//! script flushes and cancellation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use leasehold::{Client, Error, LockKeys, MAX_NAME_LEN, MAX_TTL, MIN_TTL, WaitStrategy};

use common::tasks::{distinct_tokens, join_all};
use common::{
    client, client_with, eventually, exists, gone_within, lock_unrenewed, node, query, strategies,
    two_clients,
};

/// Clients x tasks x rounds, each doing an unprotected read-modify-write under the lock.
async fn exclusion(strategy: WaitStrategy, name: &str) {
    const CLIENTS: usize = 3;
    const TASKS: usize = 4;
    const ROUNDS: u64 = 8;
    let node = node().await;
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = client_with(&node, Duration::from_secs(5), strategy).await;
        for _ in 0..TASKS {
            let mutex = client.mutex(name);
            let (counter, inside) = (Arc::clone(&counter), Arc::clone(&inside));
            tasks.push(tokio::spawn(async move {
                let mut tokens = Vec::new();
                for _ in 0..ROUNDS {
                    let guard = mutex.lock_within(Duration::from_secs(30)).await.unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    let seen = counter.load(Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    inside.store(false, Ordering::SeqCst);
                    tokens.push(guard.fencing_token());
                    guard.unlock().await.unwrap();
                }
                tokens
            }));
        }
    }
    let distinct = distinct_tokens(tasks).await as u64;
    let total = (CLIENTS * TASKS) as u64 * ROUNDS;
    assert_eq!(counter.load(Ordering::SeqCst), total);
    assert_eq!(distinct, total, "every holding epoch has its own token");
    let keys = LockKeys::new(name).unwrap();
    assert!(!exists(&node, &keys.lock).await, "lock left held");
    assert!(!exists(&node, &keys.queue).await, "queue left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_spin() {
    exclusion(WaitStrategy::spin(), "excl-spin").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_pubsub() {
    exclusion(WaitStrategy::PubSub, "excl-pubsub").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_fair_queue() {
    exclusion(common::strategies()[2], "excl-fair").await;
}

#[tokio::test]
async fn reentry_counts_holds_and_keeps_the_token() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    let keys = LockKeys::new("reentry").unwrap();
    let mine = a.mutex("reentry").owner("job-1");
    let first = mine.lock().await.unwrap();
    let second = mine.lock().await.unwrap();
    let third = first.reenter().await.unwrap();
    assert_eq!(first.fencing_token(), second.fencing_token());
    assert_eq!(first.fencing_token(), third.fencing_token());
    let count = common::hold_count(&node, &keys, first.owner().as_str()).await;
    assert_eq!(count, Some(3));
    // Another client's owner with the same chosen id is a different owner.
    let theirs = b.mutex("reentry").owner("job-1");
    assert!(matches!(
        theirs.try_lock().await,
        Err(Error::WouldBlock { .. })
    ));
    // Without a chosen owner, each acquire is its own owner: no re-entry.
    assert!(matches!(
        a.mutex("reentry").try_lock().await,
        Err(Error::WouldBlock { .. })
    ));
    first.unlock().await.unwrap();
    third.unlock().await.unwrap();
    assert!(matches!(
        theirs.try_lock().await,
        Err(Error::WouldBlock { .. })
    ));
    second.unlock().await.unwrap();
    assert!(!exists(&node, &keys.lock).await);
    theirs.try_lock().await.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn reentry_refreshes_the_ttl() {
    let node = node().await;
    let keys = LockKeys::new("reentry-ttl").unwrap();
    let mutex = client(&node)
        .await
        .mutex("reentry-ttl")
        .owner("o")
        .watchdog(false)
        .ttl(Duration::from_millis(800));
    let _first = mutex.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(common::pttl(&node, &keys.lock).await < 500);
    let _second = mutex.lock().await.unwrap();
    assert!(common::pttl(&node, &keys.lock).await > 700);
}

#[tokio::test]
async fn expired_lease_frees_the_lock_and_unlock_reports_it() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    let ttl = Duration::from_millis(200);
    let guard = lock_unrenewed(&a, "expiry", ttl).await;
    assert!(!guard.is_lost());
    tokio::time::sleep(ttl + Duration::from_millis(50)).await;
    assert!(guard.is_lost());
    let other = b.mutex("expiry").try_lock().await.unwrap();
    assert!(other.fencing_token() > guard.fencing_token());
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost { .. })));
    assert!(matches!(other.extend().await, Ok(())));
    other.unlock().await.unwrap();
}

#[tokio::test]
async fn fencing_tokens_grow_across_expiry_and_token_key_loss() {
    let node = node().await;
    let client = client(&node).await;
    let keys = LockKeys::new("fence").unwrap();
    let ttl = Duration::from_millis(200);
    let mutex = client.mutex("fence").ttl(ttl).watchdog(false);
    let mut last = None;
    for round in 0..6 {
        let guard = mutex.lock().await.unwrap();
        let token = guard.fencing_token();
        assert!(Some(token) > last, "round {round}: {token} after {last:?}");
        last = Some(token);
        match round % 3 {
            0 => guard.unlock().await.unwrap(),
            // Let the lease expire instead of releasing it.
            1 => {
                std::mem::forget(guard);
                tokio::time::sleep(ttl + Duration::from_millis(50)).await;
            }
            // Lose the token key itself (as after its long expiry).
            _ => {
                guard.unlock().await.unwrap();
                let _: i64 = query(&node, redis::cmd("DEL").arg(&keys.fence)).await;
            }
        }
    }
    let guard = mutex.lock().await.unwrap();
    assert!(Some(guard.fencing_token()) > last);
    let held = common::pttl(&node, &keys.fence).await;
    let most = (ttl + leasehold::DEFAULT_FENCE_MARGIN).as_millis() as i64;
    assert!(
        held > 0 && held <= most,
        "while held, the token key lives the lease plus the margin: {held}"
    );
    guard.unlock().await.unwrap();
    let idle = common::pttl(&node, &keys.fence).await;
    assert!(
        idle > 0 && idle <= most,
        "once free, the token key lives at most the released lease plus the margin: {idle}"
    );
}

#[tokio::test]
async fn try_lock_reports_the_holder_and_lock_within_is_not_capped_at_the_ttl() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    // Short enough that the waits below outlast it several times; long enough that the
    // watchdog keeps it on a loaded CI machine.
    let ttl = Duration::from_millis(250);
    let held = a.mutex("busy").ttl(ttl).lock().await.unwrap();
    match b.mutex("busy").try_lock().await {
        Err(Error::WouldBlock { retry_after, .. }) => {
            assert!(retry_after.is_some_and(|d| d <= ttl));
        }
        other => panic!("expected WouldBlock, got {other:?}"),
    }
    for strategy in strategies() {
        let start = tokio::time::Instant::now();
        let waited = b
            .mutex("busy")
            .wait(strategy)
            .ttl(ttl)
            .lock_within(ttl * 3)
            .await;
        assert!(
            matches!(waited, Err(Error::Timeout { .. })),
            "{strategy:?}: {waited:?}"
        );
        assert!(start.elapsed() >= ttl * 3, "{strategy:?}");
        assert!(
            start.elapsed() < ttl * 3 + Duration::from_secs(1),
            "{strategy:?}"
        );
    }
    let keys = LockKeys::new("busy").unwrap();
    assert!(
        !exists(&node, &keys.queue).await,
        "timed-out waiters left the queue"
    );
    assert!(!held.is_lost(), "the watchdog kept the lease");
    held.unlock().await.unwrap();
}

#[tokio::test]
async fn invalid_names_ttls_and_settings_are_rejected_before_any_io() {
    let node = node().await;
    let client = client(&node).await;
    for name in ["", "a{b", "b}", &"x".repeat(MAX_NAME_LEN + 1)] {
        let result = client.mutex(name).try_lock().await;
        assert!(matches!(result, Err(Error::InvalidName { .. })), "{name:?}");
    }
    for ttl in [Duration::ZERO, MIN_TTL / 2, MAX_TTL * 2] {
        let result = client.mutex("ok").ttl(ttl).try_lock().await;
        assert!(matches!(result, Err(Error::InvalidTtl { .. })), "{ttl:?}");
    }
    let zero_entry = WaitStrategy::FairQueue {
        entry_timeout: Duration::ZERO,
    };
    let result = client.mutex("ok").wait(zero_entry).lock().await;
    assert!(matches!(result, Err(Error::InvalidConfig { .. })));
    let result = client.mutex("ok").owner("").lock().await;
    assert!(matches!(result, Err(Error::InvalidConfig { .. })));
    let message = client.mutex("b}").lock().await.unwrap_err().to_string();
    assert!(message.contains("b}"), "{message}");
    let _ = Client::builder().build().unwrap_err();
}

#[tokio::test]
async fn a_foreign_key_under_the_lock_name_is_a_typed_error() {
    let node = node().await;
    let client = client(&node).await;
    let keys = LockKeys::new("taken").unwrap();
    let _: () = query(&node, redis::cmd("SET").arg(&keys.lock).arg("not a lock")).await;
    for strategy in strategies() {
        let result = client.mutex("taken").wait(strategy).try_lock().await;
        assert!(matches!(result, Err(Error::WrongType { .. })), "{result:?}");
    }
    let _: () = query(&node, redis::cmd("DEL").arg(&keys.lock)).await;
    let _: () = query(&node, redis::cmd("HSET").arg(&keys.fence).arg("f").arg(1)).await;
    let result = client.mutex("taken").try_lock().await;
    assert!(matches!(result, Err(Error::WrongType { .. })), "{result:?}");
    assert!(
        !exists(&node, &keys.lock).await,
        "a failed acquire left a lock"
    );
}

#[tokio::test]
async fn script_flush_is_transparent() {
    let node = node().await;
    let client = client(&node).await;
    let mutex = client.mutex("flush");
    let guard = mutex.lock().await.unwrap();
    let _: () = query(&node, &redis::cmd("SCRIPT").arg("FLUSH").to_owned()).await;
    guard.extend().await.unwrap();
    let _: () = query(&node, &redis::cmd("SCRIPT").arg("FLUSH").to_owned()).await;
    guard.unlock().await.unwrap();
    let _: () = query(&node, &redis::cmd("SCRIPT").arg("FLUSH").to_owned()).await;
    mutex.try_lock().await.unwrap().unlock().await.unwrap();
}

/// Acquire futures dropped at arbitrary points leave nothing held or queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_the_lock_free() {
    let node = node().await;
    let holder = client(&node).await;
    for (i, strategy) in strategies().into_iter().enumerate() {
        let name = format!("cancel-{i}");
        let keys = LockKeys::new(&name).unwrap();
        let waiters = client_with(&node, Duration::from_secs(10), strategy).await;
        // Uncontended acquires cut at random points (before, during or after the script).
        for cut_us in (0..2_000).step_by(97) {
            let mutex = waiters.mutex(&name);
            let _ = tokio::time::timeout(Duration::from_micros(cut_us), mutex.lock()).await;
        }
        // Contended acquires (queued, subscribed) cut while waiting, some right at hand-off.
        let held = holder.mutex(&name).lock().await.unwrap();
        let mut cut = Vec::new();
        for k in 0..8u64 {
            let mutex = waiters.mutex(&name);
            cut.push(tokio::spawn(async move {
                let attempt = mutex.lock();
                let _ = tokio::time::timeout(Duration::from_millis(20 + 15 * k), attempt).await;
            }));
        }
        tokio::time::sleep(Duration::from_millis(80)).await;
        held.unlock().await.unwrap();
        join_all(cut).await;
        let free = eventually(Duration::from_secs(3), || async {
            !exists(&node, &keys.lock).await && !exists(&node, &keys.queue).await
        })
        .await;
        assert!(free, "{strategy:?}: lock or queue left behind");
        holder
            .mutex(&name)
            .try_lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
    }
}

/// Scenario 9 (ambiguous-acquire): the node freezes while an acquire is in flight; the
/// client reports Ambiguous (or Timeout) and nothing stays held after the node thaws.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_acquire_is_reported_and_cleaned_up() {
    let node = node().await;
    let client = client(&node).await;
    let keys = LockKeys::new("ambiguous").unwrap();
    let mutex = client
        .mutex("ambiguous")
        .ttl(Duration::from_secs(20))
        .wait(WaitStrategy::spin());
    mutex.try_lock().await.unwrap().unlock().await.unwrap(); // scripts loaded
    node.node().pause().await.unwrap();
    let result = mutex.lock_within(Duration::from_millis(1200)).await;
    assert!(
        matches!(result, Err(Error::Ambiguous { .. } | Error::Timeout { .. })),
        "{result:?}"
    );
    node.node().unpause().await.unwrap();
    // The frozen acquire runs on thaw; the background cleanup must undo it long before the
    // 20 s TTL would.
    let freed = gone_within(&node, &keys.lock, Duration::from_secs(5)).await;
    assert!(freed, "the ambiguous acquire left the lock held");
}

/// PubSub waiters on several clients are woken by each release, not by the fallback re-poll:
/// with a 30 s lease (the fallback waits for the holder's remaining lease) a chain of eight
/// short holds finishes in seconds only if every release wakes the waiters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_waiters_are_woken_by_releases_not_by_the_fallback() {
    let node = node().await;
    let ttl = Duration::from_secs(30);
    let holder = client_with(&node, ttl, WaitStrategy::PubSub).await;
    let first = holder.mutex("woken").lock().await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..8 {
        let client = client_with(&node, ttl, WaitStrategy::PubSub).await;
        waiters.push(tokio::spawn(async move {
            let guard = client.mutex("woken").lock().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            guard.unlock().await.unwrap();
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // every waiter is subscribed
    first.unlock().await.unwrap();
    let all = tokio::time::timeout(Duration::from_secs(10), join_all(waiters)).await;
    assert!(
        all.is_ok(),
        "waiters were left to the 30 s fallback instead of being woken by releases"
    );
}
