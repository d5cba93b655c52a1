//! The semaphore against a real Redis node: never more holders than permits (every wait
//! strategy), a crashed holder's permit comes back after its TTL, per-permit `lost()`, and
//! fair waiters served in arrival order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use leasehold::{Error, WaitStrategy};

use common::tasks::join_all;
use common::{client, client_with, exists, node, strategies, two_clients};

async fn never_over_admits(strategy: WaitStrategy, name: &str) {
    const PERMITS: u32 = 3;
    const CLIENTS: usize = 3;
    const TASKS: usize = 4;
    const ROUNDS: usize = 5;
    let node = node().await;
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = client_with(&node, Duration::from_secs(5), strategy).await;
        for _ in 0..TASKS {
            let semaphore = client.semaphore(name, PERMITS);
            let (inside, most) = (Arc::clone(&inside), Arc::clone(&most));
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let permit = semaphore
                        .acquire_within(Duration::from_secs(30))
                        .await
                        .unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(
                        now <= PERMITS as usize,
                        "{now} holders of {PERMITS} permits"
                    );
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    permit.release().await.unwrap();
                }
            }));
        }
    }
    join_all(tasks).await;
    assert_eq!(
        most.load(Ordering::SeqCst),
        PERMITS as usize,
        "permits never all used"
    );
    let key = format!("leasehold:{{{name}}}:sem");
    assert!(!exists(&node, &key).await, "permits left taken");
    assert!(
        !exists(&node, &format!("{key}:queue")).await,
        "queue left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_over_admits_spin() {
    never_over_admits(strategies()[0], "sem-spin").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_over_admits_pubsub() {
    never_over_admits(strategies()[1], "sem-pubsub").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_over_admits_fair_queue() {
    never_over_admits(strategies()[2], "sem-fair").await;
}

#[tokio::test]
async fn leaked_permit_comes_back_after_its_ttl() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    let ttl = Duration::from_millis(300);
    let kept = a.semaphore("sem-leak", 2).ttl(ttl).acquire().await.unwrap();
    // A crashed holder: never released, never renewed.
    let crashed = a.semaphore("sem-leak", 2).ttl(ttl).watchdog(false);
    std::mem::forget(crashed.acquire().await.unwrap());
    let other = b.semaphore("sem-leak", 2);
    assert!(matches!(
        other.try_acquire().await,
        Err(Error::WouldBlock { .. })
    ));
    let started = tokio::time::Instant::now();
    let recovered = other.acquire_within(Duration::from_secs(3)).await.unwrap();
    let waited = started.elapsed();
    assert!(waited < ttl * 3, "leaked permit came back after {waited:?}");
    // The live holder's permit was not the one reclaimed.
    assert!(!kept.is_lost());
    assert!(matches!(
        other.try_acquire().await,
        Err(Error::WouldBlock { .. })
    ));
    kept.release().await.unwrap();
    recovered.release().await.unwrap();
}

#[tokio::test]
async fn watchdog_keeps_permits_and_lost_fires_per_permit() {
    let node = node().await;
    let a = client(&node).await;
    let ttl = Duration::from_millis(300);
    let semaphore = a.semaphore("sem-watch", 2).ttl(ttl);
    let first = semaphore.acquire().await.unwrap();
    let second = semaphore.acquire().await.unwrap();
    tokio::time::sleep(ttl * 3).await;
    assert!(
        !first.is_lost() && !second.is_lost(),
        "the watchdog renews permits"
    );
    // Take the first permit away behind its holder's back.
    let members: Vec<String> = common::query(
        &node,
        redis::cmd("ZRANGE")
            .arg("leasehold:{sem-watch}:sem")
            .arg(0)
            .arg(-1),
    )
    .await;
    assert_eq!(members.len(), 2);
    let _: i64 = common::query(
        &node,
        redis::cmd("ZREM")
            .arg("leasehold:{sem-watch}:sem")
            .arg(&members[0]),
    )
    .await;
    let which = tokio::time::timeout(ttl * 2, async {
        tokio::select! {
            biased;
            () = first.lost() => 0,
            () = second.lost() => 1,
        }
    })
    .await
    .expect("lost() fires for the permit that vanished");
    let (gone, kept) = if which == 0 {
        (first, second)
    } else {
        (second, first)
    };
    assert!(gone.is_lost());
    assert!(!kept.is_lost(), "the other permit is unaffected");
    assert!(gone.release().await.is_err());
    kept.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_waiters_are_served_in_arrival_order() {
    const WAITERS: usize = 4;
    let node = node().await;
    let holder = client(&node).await;
    let fair = strategies()[2];
    let permit = holder.semaphore("sem-order", 1).acquire().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for index in 0..WAITERS {
        let client = client(&node).await;
        let order = Arc::clone(&order);
        tasks.push(tokio::spawn(async move {
            let semaphore = client.semaphore("sem-order", 1).wait(fair);
            let permit = semaphore
                .acquire_within(Duration::from_secs(10))
                .await
                .unwrap();
            order.lock().unwrap().push(index);
            tokio::time::sleep(Duration::from_millis(10)).await;
            permit.release().await.unwrap();
        }));
        // Let each waiter join the queue before the next one arrives.
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    permit.release().await.unwrap();
    join_all(tasks).await;
    assert_eq!(*order.lock().unwrap(), (0..WAITERS).collect::<Vec<_>>());
}

/// A renewal never moves a permit's deadline earlier: a permit a release handed over keeps
/// its waiter's entry deadline until claimed, and a waiter whose claim went unanswered
/// learns that deadline from the probe and trusts it, so cutting it to now + TTL would end
/// the permit on the server while its holder still believes in it. A deadline closer than
/// now + TTL still moves out to it.
#[tokio::test]
async fn renewal_never_cuts_a_permit_short() {
    use leasehold::backend::Backend;
    use leasehold::script::scripts;

    let node = node().await;
    let raw = leasehold::RedisBackend::connect(&node.url()).await.unwrap();
    let backend: &dyn Backend = &raw;
    let keys = leasehold::LockKeys::semaphore("renew-cut").unwrap();
    let (handed, fresh) = ("0000000000000001:a:1", "0000000000000002:b:1");
    let time: (u64, u64) = common::query(&node, &redis::cmd("TIME")).await;
    let now_ms = time.0 * 1000 + time.1 / 1000;
    let mut add = redis::cmd("ZADD");
    add.arg(&keys.lock)
        .arg(now_ms + 60_000)
        .arg(handed)
        .arg(now_ms + 500)
        .arg(fresh);
    let _: i64 = common::query(&node, &add).await;

    for hold in [handed, fresh] {
        let reply = scripts()
            .semaphore_renew
            .run(
                backend,
                &[&keys.lock, &format!("{}:size", keys.lock)],
                &[hold.to_owned(), "10000".to_owned()],
            )
            .await
            .unwrap();
        assert_eq!(redis::from_redis_value::<i64>(reply).unwrap(), 1, "{hold}");
    }
    check_deadlines(&node, &keys.lock, [handed, fresh], now_ms, "renewal").await;
}

/// A claim never moves a permit's deadline earlier either: a waiter whose claim of a
/// handed permit went unanswered learns the entry deadline from the probe and trusts it, so
/// its retried claim (or any claim) must not cut the permit to now + TTL. A fresh permit
/// still runs the TTL from the claim.
#[tokio::test]
async fn claim_never_cuts_a_handed_permit_short() {
    use leasehold::backend::Backend;
    use leasehold::script::scripts;

    let node = node().await;
    let raw = leasehold::RedisBackend::connect(&node.url()).await.unwrap();
    let backend: &dyn Backend = &raw;
    let keys = leasehold::LockKeys::semaphore("claim-cut").unwrap();
    let size = format!("{}:size", keys.lock);
    let (handed, fresh) = ("0000000000000001:a:1", "0000000000000002:b:1");
    let time: (u64, u64) = common::query(&node, &redis::cmd("TIME")).await;
    let now_ms = time.0 * 1000 + time.1 / 1000;
    // The state a release leaves when it hands a permit to a waiter: the waiter's permit
    // carries its entry deadline, the size is stored.
    let mut add = redis::cmd("ZADD");
    add.arg(&keys.lock).arg(now_ms + 60_000).arg(handed);
    let _: i64 = common::query(&node, &add).await;
    let mut store = redis::cmd("SET");
    store.arg(&size).arg(2);
    let _: () = common::query(&node, &store).await;

    for hold in [handed, fresh] {
        let reply = scripts()
            .semaphore_acquire
            .run(
                backend,
                &[&keys.lock, &keys.queue, &keys.waiters, &size],
                &[
                    hold.to_owned(),
                    "2".to_owned(),
                    "10000".to_owned(),
                    "0".to_owned(),
                    "leasehold:inbox:".to_owned(),
                ],
            )
            .await
            .unwrap();
        let (granted, _): (i64, String) = redis::from_redis_value(reply).unwrap();
        assert_eq!(granted, 1, "{hold} owns a permit");
    }
    check_deadlines(&node, &keys.lock, [handed, fresh], now_ms, "claim").await;
}

/// After a `call` (renewal or claim) of both permits with a 10 s TTL at `now_ms`: the handed
/// permit keeps its deadline 60 s out, and the short one runs the TTL from the call.
async fn check_deadlines(
    node: &leasehold_harness::SingleNode,
    permits: &str,
    [handed, fresh]: [&str; 2],
    now_ms: u64,
    call: &str,
) {
    let deadline = |hold: &str| {
        let mut score = redis::cmd("ZSCORE");
        score.arg(permits).arg(hold);
        async move { common::query::<u64>(node, &score).await }
    };
    assert_eq!(
        deadline(handed).await,
        now_ms + 60_000,
        "the handed permit keeps its later deadline after the {call}"
    );
    let moved = deadline(fresh).await;
    assert!(
        (now_ms + 10_000..now_ms + 20_000).contains(&moved),
        "the short lease runs the TTL from the {call}: {moved} vs now {now_ms}"
    );
}
