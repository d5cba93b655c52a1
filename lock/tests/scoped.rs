//! Scoped work (`Mutex::run`, `RwLock::run_read`/`run_write`, `Semaphore::run`) against a
//! real Redis node: the work runs under the lease and the lock is free right after; a lease
//! that goes first ends the call with `LeaseLost` and drops the work; work that finished
//! keeps its value, and an unlock that finds the hold gone is reported beside it.
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
    let ran = a
        .mutex("scoped-done")
        .run(async |guard| {
            assert!(exists(node_ref, &keys.lock).await, "held during the work");
            (42, guard.fencing_token())
        })
        .await
        .unwrap();
    let (value, token) = ran.value;
    assert_eq!(value, 42);
    assert!(ran.lease.valid_at_finish(), "{:?}", ran.lease);
    assert!(ran.lease.released(), "{:?}", ran.lease);
    assert!(ran.lease.unlock().is_ok(), "{:?}", ran.lease);
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

/// Work that would finish, but only after its unrenewed lease ran out, is dropped before it
/// returns: `LeaseLost`, and nothing after its sleep ran (outcome 1 of issue 47's three).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_outlasting_its_lease_is_dropped_before_it_returns() {
    let node = common::node().await;
    let client = client(&node).await;
    let after_sleep = AtomicBool::new(false);
    let outcome = client
        .mutex("scoped-outlasted")
        .ttl(SHORT_TTL)
        .watchdog(false)
        .run(async |_| {
            tokio::time::sleep(SHORT_TTL * 3).await;
            after_sleep.store(true, Ordering::SeqCst);
            "charged"
        })
        .await;
    assert!(
        matches!(&outcome, Err(Error::LeaseLost { name }) if name == "scoped-outlasted"),
        "{outcome:?}"
    );
    assert!(
        !after_sleep.load(Ordering::SeqCst),
        "the work went on past its lease"
    );
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

/// Issue 47: work that finished while its lease was valid keeps its value when the unlock
/// then finds the hold gone (here the work deletes the key itself just before returning);
/// the unlock's finding is reported beside the value. It used to replace the value with
/// `NotHeld`, so a caller could not tell work done from work dropped half-way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_done_before_the_hold_vanished_keeps_its_value() {
    let node = common::node().await;
    let client = client(&node).await;
    let keys = LockKeys::new("scoped-unlock").unwrap();
    let node_ref = &node;
    let ran = client
        .mutex("scoped-unlock")
        .watchdog(false)
        .run(async |_| {
            let deleted: i64 = query(node_ref, redis::cmd("DEL").arg(&keys.lock)).await;
            assert_eq!(deleted, 1, "the work found its own hold");
            "charged"
        })
        .await
        .expect("the work finished: its value comes back");
    assert_eq!(ran.value, "charged");
    assert!(ran.lease.valid_at_finish(), "{:?}", ran.lease);
    assert!(!ran.lease.released(), "{:?}", ran.lease);
    assert!(
        matches!(ran.lease.unlock(), Err(Error::NotHeld { name }) if name == "scoped-unlock"),
        "{:?}",
        ran.lease
    );
}

/// As above for the write hold of a read-write lock: the value comes back, and the
/// unlock's `NotHeld` beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_work_done_before_the_hold_vanished_keeps_its_value() {
    let node = common::node().await;
    let client = client(&node).await;
    let keys = LockKeys::rwlock("scoped-unlock-write").unwrap();
    let node_ref = &node;
    let ran = client
        .rwlock("scoped-unlock-write")
        .watchdog(false)
        .run_write(async |guard| {
            let _: i64 = query(node_ref, redis::cmd("DEL").arg(&keys.lock)).await;
            guard.fencing_token()
        })
        .await
        .expect("the work finished: its value comes back");
    assert!(ran.value.get() > 0);
    assert!(ran.lease.valid_at_finish(), "{:?}", ran.lease);
    assert!(
        matches!(ran.lease.unlock(), Err(Error::NotHeld { .. })),
        "{:?}",
        ran.lease
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_and_permit_work_run_in_spawned_tasks_and_release() {
    let node = common::node().await;
    let client = client(&node).await;
    let rw = client.rwlock("scoped-read");
    let read = tokio::spawn(async move { rw.run_read(async |guard| guard.write_token()).await });
    let read = read.await.unwrap().unwrap();
    assert!(read.lease.released(), "{:?}", read.lease);
    let semaphore = client.semaphore("scoped-permit", 1);
    let permit = tokio::spawn(async move {
        semaphore
            .run(async |permit| {
                tokio::time::sleep(Duration::from_millis(10)).await;
                permit.name().to_owned()
            })
            .await
    });
    let permit = permit.await.unwrap().unwrap();
    assert!(permit.lease.released(), "{:?}", permit.lease);
    assert_eq!(permit.value, "scoped-permit");
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
