//! RedLock against five real, independent masters: mutual exclusion with one master killed,
//! refusal without a quorum (and nothing left held), validity accounting, calls that answer
//! on their quorum while stalled masters catch up, and `lost()` once a quorum denies the
//! hold.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use leasehold::{Error, LockKeys, RedLock};
use leasehold_harness::IndependentMasters;

use common::masters::process;
use common::tasks::distinct_tokens;

const MASTERS: usize = 5;

/// How long a test waits for the releases an unlock left to the background.
const RELEASE_SETTLES: Duration = Duration::from_secs(2);

async fn masters() -> IndependentMasters {
    common::masters::start(MASTERS).await
}

/// Asserts that the masters numbered `indices` hold no key of the lock `name` within
/// [`RELEASE_SETTLES`]: an unlock answers once a quorum confirmed, and the other masters'
/// releases finish in the background.
async fn assert_free_on(masters: &IndependentMasters, indices: Range<usize>, name: &str) {
    let key = LockKeys::new(name).unwrap().lock;
    let held_on = || async {
        let mut held = Vec::new();
        for index in indices.clone() {
            let exists: i64 = masters.nodes()[index]
                .query(redis::cmd("EXISTS").arg(&key))
                .await
                .unwrap();
            if exists != 0 {
                held.push(index);
            }
        }
        held
    };
    let free = common::eventually(RELEASE_SETTLES, || async { held_on().await.is_empty() }).await;
    assert!(free, "left held on {:?}", held_on().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_holds_with_one_master_down() {
    const PROCESSES: usize = 3;
    const TASKS: usize = 2;
    const ROUNDS: usize = 6;
    let masters = masters().await;
    let mut processes = Vec::new();
    for _ in 0..PROCESSES {
        processes.push(process(&masters).await);
    }
    masters.nodes()[0].kill().await.unwrap();

    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for clients in &processes {
        for _ in 0..TASKS {
            let lock = RedLock::new(clients.clone(), "rl-excl")
                .ttl(Duration::from_secs(2))
                .retry_count(u32::MAX)
                .retry_delay(Duration::from_millis(20))
                .acquire_timeout(Duration::from_secs(30));
            let inside = Arc::clone(&inside);
            tasks.push(tokio::spawn(async move {
                let mut tokens = Vec::new();
                for _ in 0..ROUNDS {
                    let guard = lock.lock().await.unwrap();
                    assert!(guard.granted() >= lock.quorum());
                    assert!(guard.granted() < MASTERS, "the killed master voted");
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.store(false, Ordering::SeqCst);
                    tokens.push(guard.fencing_token());
                    guard.unlock().await.unwrap();
                }
                tokens
            }));
        }
    }
    let total = PROCESSES * TASKS * ROUNDS;
    assert_eq!(
        distinct_tokens(tasks).await,
        total,
        "every holding epoch has its own token"
    );
    assert_free_on(&masters, 1..MASTERS, "rl-excl").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_without_a_quorum_and_leaves_nothing_held() {
    let masters = masters().await;
    let clients = process(&masters).await;
    let lock = RedLock::new(clients, "rl-noquorum")
        .ttl(Duration::from_secs(5))
        .retry_count(u32::MAX)
        .retry_delay(Duration::from_millis(50))
        .acquire_timeout(Duration::from_millis(800));
    // Healthy: validity is TTL minus drift minus the round trip, never more.
    let guard = lock.lock().await.unwrap();
    assert!(guard.granted() >= lock.quorum(), "{}", guard.granted());
    let drift = Duration::from_secs(5) / 100 + Duration::from_millis(2);
    assert!(guard.remaining() <= Duration::from_secs(5) - drift);
    assert!(guard.remaining() > Duration::from_secs(4));
    guard.unlock().await.unwrap();

    for node in &masters.nodes()[..3] {
        node.kill().await.unwrap();
    }
    let started = tokio::time::Instant::now();
    match lock.lock().await {
        Err(Error::Timeout { .. }) => {}
        other => panic!("expected a timeout without a quorum, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "acquire deadline overshot"
    );
    // Nobody holds it and no master says so: too few answer, which is not "held".
    match lock.try_lock().await {
        Err(Error::NoQuorum {
            granted, needed, ..
        }) => assert_eq!((granted, needed), (2, 3)),
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    // The two live masters granted every attempt; every attempt was released on them.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_free_on(&masters, 3..MASTERS, "rl-noquorum").await;
}

/// Two masters stall (`docker pause`) with a per-master timeout far longer than the test:
/// `lock` answers as soon as the three others granted, `unlock` as soon as they confirmed,
/// and when the stalled masters wake they run the grant and then the release that queued
/// behind it on the same connection, so nothing stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_answer_on_their_quorum_while_stalled_masters_catch_up() {
    let masters = masters().await;
    let clients = process(&masters).await;
    let ttl = Duration::from_secs(60);
    let lock = RedLock::new(clients, "rl-straggle")
        .ttl(ttl)
        .node_timeout(ttl / 10);
    for node in &masters.nodes()[3..] {
        node.pause().await.unwrap();
    }
    // Far below the node timeout: a call that waited for a stalled master would not make it.
    let within = ttl / 20;
    let guard = tokio::time::timeout(within, lock.lock())
        .await
        .expect("lock answered on its quorum")
        .unwrap();
    assert_eq!(guard.granted(), lock.quorum());
    tokio::time::timeout(within, guard.unlock())
        .await
        .expect("unlock answered on its quorum")
        .unwrap();
    assert_free_on(&masters, 0..3, "rl-straggle").await;
    for node in &masters.nodes()[3..] {
        node.unpause().await.unwrap();
    }
    assert_free_on(&masters, 0..MASTERS, "rl-straggle").await;
    lock.try_lock().await.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_renews_on_a_quorum_and_lost_fires_without_one() {
    let masters = masters().await;
    let a = process(&masters).await;
    let b = process(&masters).await;
    let ttl = Duration::from_millis(600);
    let lock = RedLock::new(a, "rl-watch").ttl(ttl);
    let guard = lock.lock().await.unwrap();
    tokio::time::sleep(ttl * 2).await;
    assert!(!guard.is_lost(), "the watchdog renews on the quorum");
    assert!(matches!(
        RedLock::new(b.clone(), "rl-watch").try_lock().await,
        Err(Error::WouldBlock { .. })
    ));
    // Three masters forget the lock (say, restarted without persistence): no quorum can
    // confirm a renewal any more, so the holder must learn it before its validity ends.
    let key = LockKeys::new("rl-watch").unwrap().lock;
    for node in &masters.nodes()[..3] {
        let _: i64 = node.query(redis::cmd("DEL").arg(&key)).await.unwrap();
    }
    tokio::time::timeout(ttl, guard.lost())
        .await
        .expect("lost() fires within one TTL");
    assert!(guard.is_lost());
    assert!(matches!(guard.unlock().await, Err(Error::LeaseLost { .. })));
    // And the lock is free for others again.
    let other = RedLock::new(b, "rl-watch").try_lock().await.unwrap();
    other.unlock().await.unwrap();
}

/// Configuration mistakes get a clear answer: a zero node timeout is refused up front, and
/// `lock()` with no retries reports a timeout (`WouldBlock` is `try_lock`'s answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_node_timeout_is_refused_and_no_retries_time_out() {
    let masters = masters().await;
    let a = process(&masters).await;
    let zero = RedLock::new(a.clone(), "config")
        .node_timeout(Duration::ZERO)
        .lock()
        .await;
    assert!(matches!(zero, Err(Error::InvalidConfig { .. })), "{zero:?}");
    let held = RedLock::new(a, "config").lock().await.unwrap();
    let b = process(&masters).await;
    let busy = RedLock::new(b.clone(), "config")
        .retry_count(0)
        .lock()
        .await;
    assert!(matches!(busy, Err(Error::Timeout { .. })), "{busy:?}");
    let tried = RedLock::new(b, "config").try_lock().await;
    assert!(matches!(tried, Err(Error::WouldBlock { .. })), "{tried:?}");
    held.unlock().await.unwrap();
}
