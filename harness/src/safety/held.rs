//! The locks a safety worker takes, behind one shape: connect to the cell's Redis, acquire,
//! read the fencing token and the access kind, watch for the lease's loss, unlock. Covers
//! Leasehold's mutex, read-write lock, semaphore and RedLock, the rslock peer, and the
//! classic designs' clients (`leasehold_sim::workload::designs::DesignLock`, the code the
//! simulator runs, here over [`leasehold::RedisBackend`], tokio's runtime and the wall
//! clock, [`crate::design_client`]).
//!
//! Invariant: each lock is built from its library's public API only, as the simulator's
//! `leasehold_sim::workload::family` builds Leasehold's, so a real history means what a simulated one
//! does. rslock issues no fencing token, so its holds are recorded as one permit of one (the
//! checker then judges overlaps only) and never write to the fenced resource; so are a
//! design's (a read-write design's as shared or exclusive with token 0), which never write
//! either.

use std::sync::Arc;
use std::time::Duration;

use leasehold::runtime::Runtime;
use leasehold::{Client, Guard, Permit, ReadGuard, RedLock, RedLockGuard, WriteGuard};
use leasehold_sim::workload::LockKind;
use leasehold_sim::workload::designs::{self, DesignLock, Grant, Lease};
use leasehold_sim::world::history::Access;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::design_client::{self, design_runtime};
use crate::error::{Error, Result};
use crate::safety::behaviour::{Behaviour, RedisTarget};
use crate::safety::subject::Subject;

/// rslock attempts per `lock()` call when its holder extends: its own default
/// (`DEFAULT_RETRY_COUNT` in rslock 0.10 `src/lock.rs`).
const RSLOCK_RETRY_COUNT: u32 = 3;
/// rslock's default retry delay (`DEFAULT_RETRY_DELAY` in rslock 0.10).
const RSLOCK_RETRY_DELAY: Duration = Duration::from_millis(200);
/// An rslock holder extends its lease every third of the TTL, as Leasehold's watchdog does:
/// rslock has no watchdog, so its user must.
const RSLOCK_EXTEND_EVERY: u32 = 3;

/// Replicas a `wait_replicas` acquire waits for: the Sentinel topology's one.
const WAIT_REPLICAS: u32 = 1;
/// How long such an acquire waits for them: replication on the local bridge takes well
/// under a millisecond, so 100 ms only runs out when the replica really lacks the write.
const WAIT_REPLICAS_TIMEOUT: Duration = Duration::from_millis(100);

/// A connected lock of one worker.
pub(super) enum Lock {
    /// Leasehold's mutex, read-write lock or semaphore on one node (or via Sentinel).
    Single(leasehold::Client, LockKind),
    /// Leasehold's RedLock over one client per master.
    RedLock(RedLock),
    /// rslock's manager over one node or the masters.
    Rslock(rslock::LockManager),
    /// A design's client over one node or the masters, and its runtime's clock.
    Design(Arc<Mutex<DesignLock>>, Runtime),
}

/// One hold, whichever lock granted it.
pub(super) enum Held {
    Mutex(Guard),
    RedLock(RedLockGuard),
    Read(ReadGuard),
    Write(WriteGuard),
    Permit(Permit, u32),
    /// An rslock lock, the manager that extends it, and when its current validity ends.
    Rslock(rslock::Lock, rslock::LockManager, Instant),
    /// A design's grant, the client that releases it, the lock's name and the runtime.
    Design(Grant, Arc<Mutex<DesignLock>>, String, Runtime),
}

fn lock_error(name: &str, what: &str, err: impl std::fmt::Display) -> Error {
    Error::Lock {
        name: name.to_owned(),
        reason: format!("{what}: {err}"),
    }
}

impl Lock {
    /// Connects to `target` as `behaviour` says.
    pub(super) async fn connect(target: &RedisTarget, name: &str, b: &Behaviour) -> Result<Self> {
        let builder = || {
            Client::builder()
                .ttl(b.ttl)
                .wait(b.subject.strategy().wait(b.queue_entry))
                .watchdog(b.watchdog)
        };
        if let Subject::Design(design) = b.subject {
            return connect_design(target, name, design, b).await;
        }
        if let Subject::Rslock { .. } = b.subject {
            let urls = match target {
                RedisTarget::Single(url) => std::slice::from_ref(url),
                RedisTarget::Masters(urls) => urls.as_slice(),
                RedisTarget::Sentinel(..) => {
                    return Err(lock_error(name, "rslock", "has no Sentinel support"));
                }
            };
            let clients = urls
                .iter()
                .map(|url| redis::Client::open(url.as_str()).map_err(|e| Error::redis(url, e)))
                .collect::<Result<Vec<_>>>()?;
            let mut manager = rslock::LockManager::from_clients(clients);
            manager.set_retry(RSLOCK_RETRY_COUNT, RSLOCK_RETRY_DELAY);
            return Ok(Lock::Rslock(manager));
        }
        Ok(match target {
            RedisTarget::Single(url) => Lock::Single(
                builder()
                    .connect(url)
                    .await
                    .map_err(|e| lock_error(name, "connect", e))?,
                b.kind,
            ),
            RedisTarget::Sentinel(urls, service) => Lock::Single(
                builder()
                    .sentinel(urls, service)
                    .await
                    .map_err(|e| lock_error(name, "connect via Sentinel", e))?,
                b.kind,
            ),
            RedisTarget::Masters(urls) => {
                let mut clients = Vec::with_capacity(urls.len());
                for url in urls {
                    clients.push(
                        builder()
                            .connect(url)
                            .await
                            .map_err(|e| lock_error(name, "connect to a master", e))?,
                    );
                }
                Lock::RedLock(
                    RedLock::new(clients, name)
                        .ttl(b.ttl)
                        .watchdog(b.watchdog)
                        .acquire_timeout(b.acquire_timeout),
                )
            }
        })
    }

    /// Acquires `name` (a read-write lock reads when `read`), within `b`'s acquire timeout.
    pub(super) async fn lock(&self, name: &str, b: &Behaviour, read: bool) -> Result<Held> {
        let failed = |e: leasehold::Error| lock_error(name, "lock", e);
        match self {
            Lock::Single(client, LockKind::Mutex) => {
                let mutex = client.mutex(name).acquire_timeout(b.acquire_timeout);
                let mutex = if b.wait_replicas {
                    mutex.wait_replicas(WAIT_REPLICAS, WAIT_REPLICAS_TIMEOUT)
                } else {
                    mutex
                };
                mutex.lock().await.map(Held::Mutex).map_err(failed)
            }
            Lock::Single(client, LockKind::ReadWrite { .. }) => {
                let rw = client.rwlock(name).acquire_timeout(b.acquire_timeout);
                if read {
                    rw.read().await.map(Held::Read).map_err(failed)
                } else {
                    rw.write().await.map(Held::Write).map_err(failed)
                }
            }
            Lock::Single(client, LockKind::Semaphore { permits }) => client
                .semaphore(name, *permits)
                .acquire_timeout(b.acquire_timeout)
                .acquire()
                .await
                .map(|p| Held::Permit(p, *permits))
                .map_err(failed),
            Lock::RedLock(redlock) => redlock.lock().await.map(Held::RedLock).map_err(failed),
            Lock::Design(client, rt) => {
                let grant = client
                    .lock()
                    .await
                    .acquire(name, Some(b.acquire_timeout))
                    .await;
                grant
                    .map(|g| Held::Design(g, Arc::clone(client), name.to_owned(), rt.clone()))
                    .ok_or_else(|| lock_error(name, "design acquire", "timed out"))
            }
            Lock::Rslock(manager) => {
                let acquire = manager.acquire_no_guard(name.as_bytes(), b.ttl);
                match tokio::time::timeout(b.acquire_timeout, acquire).await {
                    Ok(Ok(lock)) => {
                        let valid_until = validity_end(&lock);
                        Ok(Held::Rslock(lock, manager.clone(), valid_until))
                    }
                    Ok(Err(err)) => Err(lock_error(name, "rslock acquire", err)),
                    Err(_) => Err(lock_error(name, "rslock acquire", "timed out")),
                }
            }
        }
    }
}

/// A design's client on `target`'s node or masters (its own connections, as each worker's).
async fn connect_design(
    target: &RedisTarget,
    name: &str,
    design: designs::Design,
    b: &Behaviour,
) -> Result<Lock> {
    let urls = match target {
        RedisTarget::Single(url) => std::slice::from_ref(url),
        RedisTarget::Masters(urls) => urls.as_slice(),
        RedisTarget::Sentinel(..) => {
            return Err(lock_error(name, design.name(), "has no Sentinel client"));
        }
    };
    let rt = design_runtime();
    let lease = Lease {
        ttl: b.ttl,
        entry_timeout: b.queue_entry,
    };
    let client = design_client::connect(design, lease, urls, &rt, name).await?;
    Ok(Lock::Design(Arc::new(Mutex::new(client)), rt))
}

/// When an rslock lock's validity (as rslock computed it at the grant) runs out.
fn validity_end(lock: &rslock::Lock) -> Instant {
    Instant::now() + Duration::from_millis(u64::try_from(lock.validity_time).unwrap_or(0))
}

impl Held {
    /// The fencing token of the hold's epoch (a read hold's last write's; none for a permit
    /// or an rslock lock).
    pub(super) fn token(&self) -> u64 {
        match self {
            Held::Mutex(g) => g.fencing_token().get(),
            Held::RedLock(g) => g.fencing_token().get(),
            Held::Write(g) => g.fencing_token().get(),
            Held::Read(g) => g.write_token().get(),
            Held::Permit(..) | Held::Rslock(..) | Held::Design(..) => 0,
        }
    }

    /// Whom the hold excludes.
    pub(super) fn access(&self) -> Access {
        match self {
            Held::Mutex(_) | Held::RedLock(_) | Held::Write(_) => Access::Exclusive,
            Held::Read(_) => Access::Shared,
            Held::Permit(_, permits) => Access::Permit { permits: *permits },
            // No token: one permit of one, so the checker judges overlaps only.
            Held::Rslock(..) => Access::Permit { permits: 1 },
            Held::Design(grant, ..) => grant.access(),
        }
    }

    /// Whether the hold writes to the fenced resource: exclusive holds with a token
    /// (readers read, permit holders share the resource by design, and a design's holds
    /// have no token to write with).
    pub(super) fn writes(&self) -> bool {
        self.access() == Access::Exclusive && !matches!(self, Held::Design(..))
    }

    /// How many replicas acknowledged the grant (a `wait_replicas` mutex's only).
    pub(super) fn replicas_acked(&self) -> Option<u32> {
        match self {
            Held::Mutex(g) => g.replicas_acked(),
            _ => None,
        }
    }

    /// Resolves when the lease is lost: Leasehold's `lost()`; for rslock, the first
    /// extension (every third of `ttl`) that fails or does not answer before the current
    /// validity ends.
    pub(super) async fn lost(&self, ttl: Duration) {
        match self {
            Held::Mutex(g) => g.lost().await,
            Held::RedLock(g) => g.lost().await,
            Held::Read(g) => g.lost().await,
            Held::Write(g) => g.lost().await,
            Held::Permit(p, _) => p.lost().await,
            Held::Rslock(lock, manager, valid_until) => {
                let mut valid_until = *valid_until;
                loop {
                    tokio::time::sleep(ttl / RSLOCK_EXTEND_EVERY).await;
                    let extend = manager.extend(lock, ttl);
                    match tokio::time::timeout_at(valid_until, extend).await {
                        Ok(Ok(extended)) => valid_until = validity_end(&extended),
                        Ok(Err(_)) | Err(_) => return,
                    }
                }
            }
            // A design's own signal: the end of its validity estimate, where it keeps one
            // (`redlock-no-drift`); the others believe until they release.
            Held::Design(grant, _, _, rt) => match grant.valid_until() {
                Some(until) => rt.clock.sleep(until.saturating_sub(rt.clock.now())).await,
                None => std::future::pending().await,
            },
        }
    }

    /// Releases the hold.
    pub(super) async fn unlock(self) -> std::result::Result<(), String> {
        let done = match self {
            Held::Mutex(g) => g.unlock().await,
            Held::RedLock(g) => g.unlock().await,
            Held::Read(g) => g.unlock().await,
            Held::Write(g) => g.unlock().await,
            Held::Permit(p, _) => p.release().await,
            Held::Rslock(lock, manager, _) => {
                // Best effort by rslock's design: no outcome to report.
                manager.unlock(&lock).await;
                Ok(())
            }
            Held::Design(grant, client, name, _) => {
                // The designs' releases are not looked at by their clients either.
                client.lock().await.release(&name, grant).await;
                Ok(())
            }
        };
        done.map_err(|e| e.to_string())
    }
}
