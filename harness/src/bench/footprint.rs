//! Bytes a lock costs the server (DESIGN section 3's server cost): the keyspace a held lock
//! occupies, and what each queued waiter adds. Measured from the outside, through the
//! contender's own acquire and release and `MEMORY USAGE` of every key, so it needs nothing
//! from any contender's key layout or scripts.
//!
//! The probe runs on a flushed server: one client takes the lock, [`WAITERS`] more ask for it
//! while it is held, and the keyspace is summed before, while held and while they wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::join_all;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

use crate::bench::access::Access;
use crate::bench::contender::{Contender, ContenderClient};
use crate::bench::server_counters::admin_connections;
use crate::error::{Error, Result};

/// Waiters queued behind the holder: enough that per-waiter bytes are an average, not one
/// entry's rounding.
pub const WAITERS: usize = 4;
/// Time the waiters get to start waiting (and enqueue, where the contender queues) before the
/// keyspace is sampled: many round trips on any network the bench runs on.
const SETTLE: Duration = Duration::from_millis(200);
/// After the release the waiters take the lock in turn; each holds it for nothing.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);
/// Keys per SCAN step.
const SCAN_COUNT: usize = 1_000;

/// What a lock costs the keyspace of the server(s), summed over every server of the topology.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Footprint {
    /// Bytes the keyspace grew by when the lock was taken (all servers: a RedLock holds it on
    /// every master).
    pub held_lock_bytes: i64,
    /// Keys the keyspace grew by when the lock was taken.
    pub held_lock_keys: i64,
    /// Bytes the keyspace grew by per waiter while [`Self::waiters`] waited (0 for a lock
    /// whose waiters keep nothing on the server).
    pub waiter_bytes: f64,
    /// Clients that were inside acquire, and had not returned, when the keyspace was sampled:
    /// the evidence that the waiter figure measured waiting.
    pub waiters: usize,
}

/// Runs the probe for `contender` on the servers at `urls` (flushed first).
pub async fn measure(contender: Contender, urls: &[String], run_tag: &str) -> Result<Footprint> {
    let mut admins = admin_connections(urls).await?;
    for (conn, url) in admins.iter_mut().zip(urls) {
        let _: () = redis::cmd("FLUSHALL")
            .query_async(conn)
            .await
            .map_err(|err| Error::redis(url, err))?;
    }
    let name = format!("bench:{run_tag}:footprint");
    let holder = ContenderClient::connect(contender, urls).await?;
    let mut waiters = Vec::with_capacity(WAITERS);
    for _ in 0..WAITERS {
        waiters.push(ContenderClient::connect(contender, urls).await?);
    }

    let (keys_empty, empty) = keyspace(&mut admins, urls).await?;
    let held = holder.acquire(&name, Access::Write).await?;
    let (keys_held, with_held) = keyspace(&mut admins, urls).await?;
    let waiting = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = waiters
        .into_iter()
        .map(|client| {
            let (name, waiting) = (name.clone(), waiting.clone());
            tokio::spawn(async move {
                waiting.fetch_add(1, Ordering::SeqCst);
                let held = client.acquire(&name, Access::Write).await;
                waiting.fetch_sub(1, Ordering::SeqCst);
                client.release(held?).await
            })
        })
        .collect();
    tokio::time::sleep(SETTLE).await;
    let (_, with_waiters) = keyspace(&mut admins, urls).await?;
    let waiters_seen = waiting.load(Ordering::SeqCst);
    holder.release(held).await?;
    let drained = tokio::time::timeout(DRAIN_LIMIT, join_all(tasks)).await;
    let failed = match drained {
        Ok(results) => results.into_iter().any(|r| !matches!(r, Ok(Ok(())))),
        Err(_) => true,
    };
    if failed {
        return Err(Error::Lock {
            name,
            reason: format!(
                "{} footprint probe: a waiter failed or did not get the lock within {DRAIN_LIMIT:?}",
                contender.label()
            ),
        });
    }
    Ok(Footprint {
        held_lock_bytes: with_held - empty,
        held_lock_keys: keys_held - keys_empty,
        waiter_bytes: if waiters_seen == 0 {
            0.0
        } else {
            (with_waiters - with_held) as f64 / waiters_seen as f64
        },
        waiters: waiters_seen,
    })
}

/// `(keys, bytes)` of the whole keyspace of every server: `MEMORY USAGE … SAMPLES 0` (every
/// element counted, no estimate) of each key `SCAN` finds.
async fn keyspace(conns: &mut [MultiplexedConnection], urls: &[String]) -> Result<(i64, i64)> {
    let (mut keys, mut bytes) = (0i64, 0i64);
    for (conn, url) in conns.iter_mut().zip(urls) {
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(conn)
                .await
                .map_err(|err| Error::redis(url, err))?;
            for key in batch {
                // Nil when the key expired between SCAN and MEMORY USAGE: it costs nothing now.
                let usage: Option<i64> = redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(&key)
                    .arg("SAMPLES")
                    .arg(0)
                    .query_async(conn)
                    .await
                    .map_err(|err| Error::redis(url, err))?;
                if let Some(usage) = usage {
                    keys += 1;
                    bytes += usage;
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok((keys, bytes))
}
