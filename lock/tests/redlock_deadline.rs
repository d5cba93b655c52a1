//! RedLock's waits end at their deadline, not after a fixed number of retries, against
//! three real, independent masters: with default settings, `lock_within(t)` and `lock()`
//! outlast a holder that lets go well after the old three-retry budget (~0.5 s) would have
//! given up, and `lock_within(t)` on a lock that stays held fails with `Timeout` no earlier
//! than `t`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use leasehold::{Error, LockKeys, RedLock};
use leasehold_harness::IndependentMasters;

use common::masters::process;

const MASTERS: usize = 3;

/// How long the holder keeps the lock: three times what three retries of at most
/// `DEFAULT_RETRY_DELAY` (200 ms) each add up to, so a wait bounded by the retry count
/// cannot outlast it.
const HOLD: Duration = Duration::from_millis(1_500);

/// A deadline far past [`HOLD`].
const PATIENT: Duration = Duration::from_secs(5);

/// How much sooner than [`HOLD`] a waiter may get the lock: the holder's sleep starts a
/// moment before the waiter's clock does.
const SLACK: Duration = Duration::from_millis(100);

/// A short deadline against a holder that keeps the lock.
const BRIEF: Duration = Duration::from_millis(300);

async fn masters() -> IndependentMasters {
    common::masters::start(MASTERS).await
}

/// How many masters hold a key of the lock `name`.
async fn holding(masters: &IndependentMasters, name: &str) -> usize {
    let key = LockKeys::new(name).unwrap().lock;
    let mut held = 0;
    for node in masters.nodes() {
        let exists: i64 = node.query(redis::cmd("EXISTS").arg(&key)).await.unwrap();
        held += usize::try_from(exists).unwrap();
    }
    held
}

/// Holds `name` on a quorum of the masters, every one when they all answer in time (a
/// RedLock of its own process), and lets go after [`HOLD`].
async fn hold_then_release(
    masters: &IndependentMasters,
    name: &str,
) -> tokio::task::JoinHandle<()> {
    // A per-master timeout far above the default 50 ms, and a first round that opens the
    // connections and loads the scripts: on a loaded machine no master should miss the
    // hold that counts (the waiter, with defaults, is what the test is about).
    let holder = RedLock::new(process(masters).await, name).node_timeout(Duration::from_secs(1));
    holder.lock().await.unwrap().unlock().await.unwrap();
    // The unlock answers on its quorum; a master still releasing would refuse the next grant.
    let settle = Duration::from_secs(2);
    let free = common::eventually(settle, || async { holding(masters, name).await == 0 }).await;
    assert!(free, "the first round was never released everywhere");
    let guard = holder.lock().await.unwrap();
    // The acquire answers on its quorum, and a master that had not answered by then may
    // never grant: a quorum is what keeps the waiter out.
    let held = holding(masters, name).await;
    println!("the holder holds {held} of {MASTERS} masters");
    assert!(held >= holder.quorum(), "held on {held} masters only");
    tokio::spawn(async move {
        tokio::time::sleep(HOLD).await;
        guard.unlock().await.unwrap();
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_within_waits_past_the_retry_budget_until_the_holder_lets_go() {
    let masters = masters().await;
    let waiter = RedLock::new(process(&masters).await, "rl-deadline-within");
    let released = hold_then_release(&masters, "rl-deadline-within").await;
    let start = Instant::now();
    let acquired = waiter.lock_within(PATIENT).await;
    let waited = start.elapsed();
    println!(
        "RedLock::lock_within({PATIENT:?}) against a {HOLD:?} holder: {acquired:?} after {waited:?}"
    );
    let guard = acquired.unwrap();
    assert!(
        waited >= HOLD - SLACK,
        "not kept out by the holder: {waited:?}"
    );
    assert!(waited < PATIENT, "{waited:?}");
    released.await.unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_without_a_deadline_waits_until_acquired() {
    let masters = masters().await;
    let waiter = RedLock::new(process(&masters).await, "rl-deadline-lock");
    let released = hold_then_release(&masters, "rl-deadline-lock").await;
    let start = Instant::now();
    // `lock()` has no deadline here; the outer timeout only keeps a hang from stalling CI.
    let acquired = tokio::time::timeout(PATIENT, waiter.lock()).await;
    let waited = start.elapsed();
    println!("RedLock::lock() against a {HOLD:?} holder: {acquired:?} after {waited:?}");
    let guard = acquired.expect("lock() still waiting").unwrap();
    assert!(
        waited >= HOLD - SLACK,
        "not kept out by the holder: {waited:?}"
    );
    released.await.unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_within_on_a_kept_lock_times_out_at_its_deadline() {
    let masters = masters().await;
    let holder = RedLock::new(process(&masters).await, "rl-deadline-kept");
    let guard = holder.lock().await.unwrap();
    let waiter = RedLock::new(process(&masters).await, "rl-deadline-kept");
    let start = Instant::now();
    let busy = waiter.lock_within(BRIEF).await;
    let waited = start.elapsed();
    println!("RedLock::lock_within({BRIEF:?}) on a kept lock: {busy:?} after {waited:?}");
    assert!(matches!(busy, Err(Error::Timeout { .. })), "{busy:?}");
    assert!(waited >= BRIEF, "gave up early: {waited:?}");
    assert!(
        waited < BRIEF + Duration::from_secs(1),
        "overshot: {waited:?}"
    );
    guard.unlock().await.unwrap();
}
