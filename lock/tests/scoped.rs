//! Scoped work (`Mutex::run`, `RwLock::run_read`/`run_write`, `Semaphore::run`) against a
//! real Redis node: the work runs under the lease and the lock is free right after; a lease
//! that goes first ends the call with `LeaseLost` and drops the work; an unlock that finds
//! the hold gone replaces the work's value with its error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use leasehold::{Error, LockKeys};

use common::{client, exists, query, two_clients};

/// A lease short enough that a lapse comes quickly.
const SHORT_TTL: Duration = Duration::from_millis(400);

/// Sets its flag when dropped: evidence that the work's future was dropped, not leaked.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Work that records that it started and then never finishes on its own.
async fn endless(started: &AtomicBool, dropped: Arc<AtomicBool>) {
    let _flag = DropFlag(dropped);
    started.store(true, Ordering::SeqCst);
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutex_work_completes_and_the_lock_is_free_right_after() {
    let node = common::node().await;
    let (a, b) = two_clients(&node).await;
    let keys = LockKeys::new("scoped-done").unwrap();
    let node_ref = &node;
    let (value, token) = a
        .mutex("scoped-done")
        .run(async |guard| {
            assert!(exists(node_ref, &keys.lock).await, "held during the work");
            (42, guard.fencing_token())
        })
        .await
        .unwrap();
    assert_eq!(value, 42);
    assert!(!exists(&node, &keys.lock).await, "released in line");
    let next = b.mutex("scoped-done").try_lock().await.unwrap();
    assert!(next.fencing_token() > token);
    next.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lease_ends_the_work_with_lease_lost() {
    let node = common::node().await;
    let client = client(&node).await;
    let (started, dropped) = (AtomicBool::new(false), Arc::new(AtomicBool::new(false)));
    let begun = Instant::now();
    let outcome = tokio::time::timeout(
        SHORT_TTL * 10,
        client
            .mutex("scoped-lapse")
            .ttl(SHORT_TTL)
            .watchdog(false)
            .run(async |_| endless(&started, Arc::clone(&dropped)).await),
    )
    .await
    .expect("the lost lease ends the call");
    assert!(started.load(Ordering::SeqCst), "the work ran");
    assert!(
        matches!(&outcome, Err(Error::LeaseLost { name }) if name == "scoped-lapse"),
        "{outcome:?}"
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the work's future was dropped"
    );
    assert!(begun.elapsed() <= SHORT_TTL * 2, "{:?}", begun.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_hold_deleted_under_the_work_ends_it_with_lease_lost() {
    let node = common::node().await;
    let client = client(&node).await;
    let keys = LockKeys::rwlock("scoped-deleted").unwrap();
    let (started, dropped) = (AtomicBool::new(false), Arc::new(AtomicBool::new(false)));
    let node_ref = &node;
    let outcome = tokio::time::timeout(
        SHORT_TTL * 10,
        client
            .rwlock("scoped-deleted")
            .ttl(SHORT_TTL)
            .run_write(async |_| {
                let _: i64 = query(node_ref, redis::cmd("DEL").arg(&keys.lock)).await;
                endless(&started, Arc::clone(&dropped)).await
            }),
    )
    .await
    .expect("the watchdog's finding ends the call");
    assert!(started.load(Ordering::SeqCst), "the work ran");
    assert!(
        matches!(outcome, Err(Error::LeaseLost { .. })),
        "{outcome:?}"
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the work's future was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_that_finds_the_hold_gone_replaces_the_value() {
    let node = common::node().await;
    let client = client(&node).await;
    let keys = LockKeys::new("scoped-unlock").unwrap();
    let node_ref = &node;
    let outcome = client
        .mutex("scoped-unlock")
        .watchdog(false)
        .run(async |_| {
            let _: i64 = query(node_ref, redis::cmd("DEL").arg(&keys.lock)).await;
            "done"
        })
        .await;
    assert!(matches!(outcome, Err(Error::NotHeld { .. })), "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_and_permit_work_run_in_spawned_tasks_and_release() {
    let node = common::node().await;
    let client = client(&node).await;
    let rw = client.rwlock("scoped-read");
    let read = tokio::spawn(async move { rw.run_read(async |guard| guard.write_token()).await });
    read.await.unwrap().unwrap();
    let semaphore = client.semaphore("scoped-permit", 1);
    let permit = tokio::spawn(async move {
        semaphore
            .run(async |permit| {
                tokio::time::sleep(Duration::from_millis(10)).await;
                permit.name().to_owned()
            })
            .await
    });
    assert_eq!(permit.await.unwrap().unwrap(), "scoped-permit");
    let again = client.semaphore("scoped-permit", 1).try_acquire().await;
    again.unwrap().release().await.unwrap();
    client
        .rwlock("scoped-read")
        .try_write()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}
