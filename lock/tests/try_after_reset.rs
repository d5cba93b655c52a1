//! A try call right after the server closed the client's connection, against a real Redis
//! node: a free lock is granted (mutex `try_lock`, read-write lock `try_write` and
//! `try_read`, semaphore `try_acquire`), and a held one still answers `WouldBlock`. The
//! first command after the reset meets the dead connection; a try must not read that as
//! "held". A connection that keeps losing the attempt makes the try `Ambiguous`, never
//! `WouldBlock`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use leasehold::backend::{Backend, BoxFuture, ReplicaWait, Subscription};
use leasehold::script::scripts;
use leasehold::{Client, Error, RedisBackend};
use leasehold_harness::SingleNode;
use redis::{Cmd, RedisResult, Value};

use common::{lock_and_unlock, node, query};

/// Closes every normal (non-pub/sub) client connection on `node` but the caller's own
/// (`SKIPME` defaults to yes), as a server restart or a proxy reset would: the client's
/// next command finds its connection gone. Asserts that something was closed, so a test
/// whose reset did not land cannot pass for the wrong reason.
async fn reset_connections(node: &SingleNode) {
    let killed: i64 = query(
        node,
        redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("normal"),
    )
    .await;
    assert!(killed >= 1, "no client connection was reset");
}

/// A client whose command connection exists: it has taken and released a lock.
async fn used_client(node: &SingleNode) -> Client {
    let client = common::client(node).await;
    lock_and_unlock(&client.mutex("reset-warmup")).await;
    client
}

#[tokio::test]
async fn try_lock_after_a_reset_takes_a_free_lock() {
    let node = node().await;
    let client = used_client(&node).await;
    reset_connections(&node).await;
    let tried = client.mutex("reset-mutex").try_lock().await;
    println!("try_lock on a free lock after a connection reset: {tried:?}");
    tried.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn try_write_and_try_read_after_a_reset_take_a_free_lock() {
    let node = node().await;
    let client = used_client(&node).await;
    reset_connections(&node).await;
    let written = client.rwlock("reset-rw").try_write().await;
    println!("try_write on a free lock after a connection reset: {written:?}");
    written.unwrap().unlock().await.unwrap();
    reset_connections(&node).await;
    let read = client.rwlock("reset-rw").try_read().await;
    println!("try_read on a free lock after a connection reset: {read:?}");
    read.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn try_acquire_after_a_reset_takes_a_free_permit() {
    let node = node().await;
    let client = used_client(&node).await;
    reset_connections(&node).await;
    let permit = client.semaphore("reset-sem", 2).try_acquire().await;
    println!("try_acquire on a free semaphore after a connection reset: {permit:?}");
    permit.unwrap().release().await.unwrap();
}

/// The other side: a lock another client holds is still reported held after a reset, so
/// the fix does not turn every reset into a grant or an error.
#[tokio::test]
async fn try_lock_after_a_reset_still_reports_a_held_lock() {
    let node = node().await;
    let holder = common::client(&node).await;
    let held = holder.mutex("reset-held").lock().await.unwrap();
    let client = used_client(&node).await;
    reset_connections(&node).await;
    let tried = client.mutex("reset-held").try_lock().await;
    println!("try_lock on a held lock after a connection reset: {tried:?}");
    // The holder's remaining lease comes from the server's busy reply: the answer was seen.
    assert!(
        matches!(
            tried,
            Err(Error::WouldBlock {
                retry_after: Some(_),
                ..
            })
        ),
        "{tried:?}"
    );
    drop(tried);
    // The holder's connection was reset too; its unlock reconnects.
    held.unlock().await.unwrap();
}

/// A real node whose next `lose` acquire script calls fail as a connection reset before
/// reaching the server; probes and everything else go through.
struct LosesAcquires {
    inner: RedisBackend,
    lose: AtomicU32,
}

impl Backend for LosesAcquires {
    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, RedisResult<Value>> {
        Box::pin(async move {
            let sha = scripts().acquire.sha().as_bytes();
            let acquire = cmd
                .args_iter()
                .any(|arg| matches!(arg, redis::Arg::Simple(bytes) if bytes == sha));
            let lost = acquire
                && self
                    .lose
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            if lost {
                let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "test: reset");
                return Err(reset.into());
            }
            self.inner.query(cmd).await
        })
    }

    fn wait_replicas<'a>(&'a self, wait: &'a ReplicaWait) -> BoxFuture<'a, RedisResult<Value>> {
        self.inner.wait_replicas(wait)
    }

    fn subscribe(&self) -> BoxFuture<'_, RedisResult<Subscription>> {
        self.inner.subscribe()
    }
}

/// One lost attempt is asked again and granted; two in a row leave the try unable to see
/// the lock, which it reports as `Ambiguous` (and the lock stays free for the next try).
#[tokio::test]
async fn a_try_that_keeps_losing_its_attempt_is_ambiguous_not_would_block() {
    let node = node().await;
    let backend = Arc::new(LosesAcquires {
        inner: RedisBackend::connect(&node.url()).await.unwrap(),
        lose: AtomicU32::new(0),
    });
    let client = Client::builder()
        .backend(Arc::clone(&backend) as Arc<dyn Backend>)
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    let mutex = client.mutex("reset-lossy");
    // Loads the scripts, so the calls below go by SHA, which the backend recognises.
    lock_and_unlock(&mutex).await;

    backend.lose.store(1, Ordering::SeqCst);
    let once = mutex.try_lock().await;
    println!("try_lock with one attempt lost: {once:?}");
    assert_eq!(
        backend.lose.load(Ordering::SeqCst),
        0,
        "no attempt was lost"
    );
    once.unwrap().unlock().await.unwrap();

    backend.lose.store(2, Ordering::SeqCst);
    let twice = mutex.try_lock().await;
    println!("try_lock with two attempts lost: {twice:?}");
    assert_eq!(
        backend.lose.load(Ordering::SeqCst),
        0,
        "not both attempts were lost"
    );
    assert!(
        matches!(
            twice,
            Err(Error::Ambiguous {
                operation: "acquire",
                ..
            })
        ),
        "{twice:?}"
    );
    mutex.try_lock().await.unwrap().unlock().await.unwrap();
}
