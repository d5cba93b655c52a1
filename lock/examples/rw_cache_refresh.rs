//! A shared cache refreshed under a read-write lock: many readers at once, one refresher
//! that excludes them while it rewrites the value, and a downgrade so the refresher keeps
//! reading what it wrote without blocking other readers.
//!
//! 1. The refresher takes the write lock, stores version 1, and downgrades to a read lock.
//! 2. Three readers read concurrently alongside it; all see version 1.
//! 3. A second refresh takes the write lock; a reader arriving meanwhile waits (writer
//!    preference) and, once the writer is done, sees version 2, never a half-done refresh.
//!
//! `cargo run -p leasehold --example rw_cache_refresh [-- redis://127.0.0.1:6379]`

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use leasehold::{Client, RwLock};
use redis::aio::MultiplexedConnection;

use support::Result;

/// Where Redis is when neither an argument nor `LEASEHOLD_URL` says otherwise.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Concurrent readers in step 2.
const READERS: usize = 3;

/// How long each reader holds its read lock, so that they overlap.
const READ_TIME: Duration = Duration::from_millis(200);

/// How long the second refresh takes while holding the write lock.
const REFRESH_TIME: Duration = Duration::from_millis(300);

/// Bound on any wait for the lock.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the cached value lives.
const CACHE_KEY: &str = "leasehold-example:cache:value";

fn main() -> ExitCode {
    support::run("rw_cache_refresh", &[DEFAULT_URL], rw_cache_refresh)
}

async fn rw_cache_refresh(urls: Vec<String>) -> Result<()> {
    let url = urls[0].clone();
    let name = "leasehold-example:cache";
    let redis = redis::Client::open(url.as_str())?;
    let mut cache = redis.get_multiplexed_async_connection().await?;
    let refresher = Client::connect(&url).await?;

    // 1. Refresh, then downgrade: from here on other readers may join.
    let write = refresher.rwlock(name).write_within(ACQUIRE_TIMEOUT).await?;
    set(&mut cache, "version 1").await?;
    let read = write.downgrade().await?;
    println!(
        "refresher stored version 1 under the write lock and downgraded; it reads {:?}",
        get(&mut cache).await?
    );

    // 2. Readers share the lock with the downgraded refresher and with each other.
    let inside = Arc::new(AtomicUsize::new(1)); // the refresher's read hold
    let peak = Arc::new(AtomicUsize::new(1));
    let mut readers = Vec::new();
    for reader in 1..=READERS {
        let lock = Client::connect(&url).await?.rwlock(name);
        let mut cache = redis.get_multiplexed_async_connection().await?;
        let (inside, peak) = (Arc::clone(&inside), Arc::clone(&peak));
        readers.push(tokio::spawn(async move {
            let guard = lock.read_within(ACQUIRE_TIMEOUT).await?;
            peak.fetch_max(inside.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            let value = get(&mut cache).await?;
            println!("reader {reader} reads {value:?}");
            tokio::time::sleep(READ_TIME).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            guard.unlock().await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(value)
        }));
    }
    for reader in readers {
        let value = reader.await??;
        if value != "version 1" {
            return Err(format!("a reader saw {value:?}, expected version 1").into());
        }
    }
    let peak = peak.load(Ordering::SeqCst);
    println!("up to {peak} read holds were held at once");
    if peak < 2 {
        return Err("the read holds never overlapped".into());
    }
    read.unlock().await?;

    // 3. A refresh excludes readers: one arriving mid-refresh waits and sees the result.
    let write = refresher.rwlock(name).write_within(ACQUIRE_TIMEOUT).await?;
    let late = late_reader(Client::connect(&url).await?.rwlock(name), &redis).await?;
    tokio::time::sleep(REFRESH_TIME).await;
    set(&mut cache, "version 2").await?;
    write.unlock().await?;
    let seen = late.await??;
    println!("a reader that arrived during the refresh waited and read {seen:?}");
    if seen != "version 2" {
        return Err(format!("the late reader saw {seen:?}, expected version 2").into());
    }
    Ok(())
}

/// Starts a reader now; it can only get its read lock after the current writer is done.
async fn late_reader(
    lock: RwLock,
    redis: &redis::Client,
) -> Result<tokio::task::JoinHandle<Result<String>>> {
    let mut cache = redis.get_multiplexed_async_connection().await?;
    Ok(tokio::spawn(async move {
        let guard = lock.read_within(ACQUIRE_TIMEOUT).await?;
        let value = get(&mut cache).await?;
        guard.unlock().await?;
        Ok(value)
    }))
}

async fn set(cache: &mut MultiplexedConnection, value: &str) -> Result<()> {
    redis::cmd("SET")
        .arg(CACHE_KEY)
        .arg(value)
        .query_async::<()>(cache)
        .await?;
    Ok(())
}

async fn get(cache: &mut MultiplexedConnection) -> Result<String> {
    let value: Option<String> = redis::cmd("GET").arg(CACHE_KEY).query_async(cache).await?;
    value.ok_or_else(|| "the cache is empty".into())
}
