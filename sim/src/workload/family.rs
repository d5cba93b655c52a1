//! The members of the lock family a simulated client drives, behind one shape: build the
//! lock from the process's backends, acquire it, read the fencing token, watch `lost()`,
//! unlock.
//!
//! Invariant: each member is built only from the public `leasehold` API — a `Mutex`,
//! `RwLock` or `Semaphore` on the process's single backend, or a `RedLock` over one
//! `Client` per independent master (each with its own backend connection) — so the
//! workload loop judges the production code.

use leasehold::{
    Client, Guard, HoldId, LockKeys, Mutex, Permit, ReadGuard, ReaderKeys, RedLock, RedLockGuard,
    RwLock, WriteGuard,
};

use crate::workload::sizing::Sizing;
use crate::workload::{LockKind, Strategy, Workload};
use crate::world::calls::id_of;
use crate::world::history::Access;
use crate::world::process::ProcessCtx;
use crate::world::truth::{Claim, Member};

/// The owner id every hold of a re-entry workload takes (scoped to the process's client),
/// so the process's holds of one lock re-enter each other.
pub const REENTRY_OWNER: &str = "job";

/// A process's lock factory for one workload.
pub enum Locker {
    /// One client on the process's single backend (mutex, read-write lock or semaphore),
    /// with the process's semaphore numbers.
    Single(Client, Sizing),
    /// One client per independent master, in master order.
    RedLock(Vec<Client>),
}

/// A hold, whichever member granted it.
pub enum Held {
    /// A single-node mutex guard.
    Mutex(Guard),
    /// A RedLock guard.
    RedLock(RedLockGuard),
    /// A shared hold of a read-write lock.
    Read(ReadGuard),
    /// The exclusive hold of a read-write lock.
    Write(WriteGuard),
    /// One permit of a semaphore with `permits` permits.
    Permit(Permit, u32),
}

impl Locker {
    /// Builds the clients for `work` from `ctx`'s backends (the process's seams throughout).
    pub fn build(work: &Workload, ctx: &ProcessCtx) -> leasehold::Result<Self> {
        let client = |backend| {
            let mut builder = Client::builder()
                .backend(backend)
                .runtime(ctx.runtime.clone())
                .ttl(work.ttl)
                .wait(work.strategy.wait(work.entry_timeout))
                .watchdog(work.watchdog);
            if let Some(margin) = work.fence_margin {
                builder = builder.fence_margin(margin);
            }
            builder.build()
        };
        match work.strategy {
            Strategy::RedLock => Ok(Self::RedLock(
                ctx.backends
                    .iter()
                    .cloned()
                    .map(client)
                    .collect::<leasehold::Result<_>>()?,
            )),
            Strategy::Spin | Strategy::PubSub | Strategy::FairQueue => {
                let backend = ctx.backends.first().cloned().ok_or_else(|| {
                    leasehold::Error::InvalidConfig {
                        name: String::new(),
                        reason: "the deployment gives this process no backend".to_owned(),
                    }
                })?;
                Ok(Self::Single(client(backend)?, Sizing::new(work, ctx)))
            }
        }
    }

    /// Acquires `name` as `work` says (lock kind, TTL, watchdog, acquire timeout, `WAIT`
    /// for replicas; with a re-entry workload, as the process's one [`REENTRY_OWNER`]),
    /// waiting for it or, with `once`, in one attempt (`try_*`). A read-write workload
    /// reads or writes at random, in its proportion.
    pub async fn lock(
        &self,
        name: &str,
        work: &Workload,
        ctx: &ProcessCtx,
        once: bool,
    ) -> leasehold::Result<Held> {
        match (self, work.kind) {
            (Self::Single(client, _), LockKind::ReadWrite { read_percent }) => {
                let mut rw = client.rwlock(name);
                if work.reentry.is_some() {
                    rw = rw.owner(REENTRY_OWNER);
                }
                let read = ctx.runtime.entropy.next_u64() % 100 < u64::from(read_percent);
                rw_hold(rw, work, !read, once).await
            }
            (Self::Single(client, sizing), LockKind::Semaphore { .. }) => {
                let permits = sizing.count(name);
                let mut semaphore = client.semaphore(name, permits);
                if let Some(timeout) = work.acquire_timeout {
                    semaphore = semaphore.acquire_timeout(timeout);
                }
                let permit = if once {
                    semaphore.try_acquire().await
                } else {
                    semaphore.acquire().await
                };
                permit.map(|permit| Held::Permit(permit, permits))
            }
            (Self::Single(client, _), LockKind::Mutex) => {
                let mutex = mutex_of(client, name, work);
                if once {
                    mutex.try_lock().await.map(Held::Mutex)
                } else {
                    mutex.lock().await.map(Held::Mutex)
                }
            }
            (Self::RedLock(clients), _) => {
                let mut redlock = RedLock::new(clients.iter().cloned(), name)
                    .ttl(work.ttl)
                    .watchdog(work.watchdog)
                    .runtime(ctx.runtime.clone());
                if let Some(timeout) = work.acquire_timeout {
                    redlock = redlock.acquire_timeout(timeout);
                }
                let within = work
                    .deadlines
                    .filter(|d| ctx.runtime.entropy.next_u64() % 100 < u64::from(d.percent))
                    .map(|d| ctx.runtime.jitter(d.longest));
                match (once, within) {
                    (true, _) => redlock.try_lock().await,
                    (false, Some(deadline)) => redlock.lock_within(deadline).await,
                    (false, None) => redlock.lock().await,
                }
                .map(Held::RedLock)
            }
        }
    }

    /// The single-node mutex `name` as `work` takes it, for scoped use (`None` for the
    /// other members).
    pub fn mutex(&self, name: &str, work: &Workload) -> Option<Mutex> {
        match (self, work.kind) {
            (Self::Single(client, _), LockKind::Mutex) => Some(mutex_of(client, name, work)),
            _ => None,
        }
    }

    /// Resizes semaphore `name` if `work` resizes during this hold (see
    /// [`Sizing::resize_to`]): `None` when it does not, else whether the semaphore was live.
    pub async fn resize(
        &self,
        name: &str,
        work: &Workload,
        ctx: &ProcessCtx,
    ) -> Option<leasehold::Result<bool>> {
        let Self::Single(client, sizing) = self else {
            return None;
        };
        let to = sizing.resize_to(work, ctx)?;
        Some(sizing.resize(client, name, to).await)
    }

    /// A second hold of `name` as [`REENTRY_OWNER`] with `ttl`: one attempt (`wait` false,
    /// a nested re-entry never waits) or a wait bounded by the acquire timeout. A
    /// read-write lock's is a write hold for `access` exclusive, else a read hold (an
    /// owner re-enters the way it holds: an owner holding only reads may not write).
    /// RedLock and the semaphore do not re-enter, so they refuse.
    pub async fn lock_again(
        &self,
        name: &str,
        work: &Workload,
        ttl: std::time::Duration,
        wait: bool,
        access: Access,
    ) -> leasehold::Result<Held> {
        let client = match (self, work.kind) {
            (Self::Single(client, _), LockKind::Mutex) => client,
            (Self::Single(client, _), LockKind::ReadWrite { .. }) => {
                let rw = client.rwlock(name).owner(REENTRY_OWNER).ttl(ttl);
                let write = access == Access::Exclusive;
                return rw_hold(rw, work, write, !wait).await;
            }
            _ => {
                return Err(leasehold::Error::InvalidConfig {
                    name: name.to_owned(),
                    reason: "the simulated re-entry workloads drive the single-node mutex and \
                             read-write lock only"
                        .to_owned(),
                });
            }
        };
        let mut mutex = client.mutex(name).owner(REENTRY_OWNER).ttl(ttl);
        if let Some(timeout) = work.acquire_timeout {
            mutex = mutex.acquire_timeout(timeout);
        }
        if wait {
            mutex.lock().await.map(Held::Mutex)
        } else {
            mutex.try_lock().await.map(Held::Mutex)
        }
    }
}

/// The single-node mutex `name` as `work` takes it: as the process's one owner in a
/// re-entry workload, under its acquire timeout, waiting for replicas if it does.
fn mutex_of(client: &Client, name: &str, work: &Workload) -> Mutex {
    let mut mutex = client.mutex(name);
    if work.reentry.is_some() {
        mutex = mutex.owner(REENTRY_OWNER);
    }
    if let Some(timeout) = work.acquire_timeout {
        mutex = mutex.acquire_timeout(timeout);
    }
    if let Some(wait) = work.wait_replicas {
        mutex = mutex.wait_replicas(wait.replicas, wait.timeout);
    }
    mutex
}

/// Where the server keeps a mutex hold of `name`: its `#<hold id>` field of the lock hash.
pub fn mutex_claim(name: &str, guard: &Guard) -> Claim {
    single_claim(
        LockKeys::new(name).ok().map(|k| k.lock),
        hold_field(guard.hold_id()),
    )
}

/// A hold kept as one member of `key` on the one target (no key: a name no lock has).
fn single_claim(key: Option<String>, member: Member) -> Claim {
    Claim {
        key: key.unwrap_or_default().into_bytes(),
        members: vec![(0, member)],
        quorum: 1,
    }
}

/// A hold's member of a lock hash: its `#<hold id>` field.
fn hold_field(id: &HoldId) -> Member {
    Member::HashField(format!("#{}", id.as_str()).into_bytes())
}

/// A write hold (`write`) or a read hold of `rw`, under `work`'s acquire timeout, waited for
/// or, with `once`, in one attempt (`try_*`).
async fn rw_hold(
    mut rw: RwLock,
    work: &Workload,
    write: bool,
    once: bool,
) -> leasehold::Result<Held> {
    if let Some(timeout) = work.acquire_timeout {
        rw = rw.acquire_timeout(timeout);
    }
    match (write, once) {
        (false, false) => rw.read().await.map(Held::Read),
        (false, true) => rw.try_read().await.map(Held::Read),
        (true, false) => rw.write().await.map(Held::Write),
        (true, true) => rw.try_write().await.map(Held::Write),
    }
}

impl Held {
    /// Whom the hold excludes.
    pub fn access(&self) -> Access {
        match self {
            Self::Mutex(_) | Self::RedLock(_) | Self::Write(_) => Access::Exclusive,
            Self::Read(_) => Access::Shared,
            Self::Permit(_, permits) => Access::Permit { permits: *permits },
        }
    }

    /// Where the servers keep this hold of `name`, for the server-truth oracle: the
    /// mutex's (or the write hash's) `#<hold id>` field on the one target, a read hold's or
    /// a permit's member of its sorted set (scored by its lease deadline), or each master's
    /// own hold id on a majority of RedLock's masters.
    pub fn claim(&self, name: &str) -> Claim {
        let deadline = |id: &HoldId| Member::Deadline(id.as_str().as_bytes().to_vec());
        let single = single_claim;
        let rw = || LockKeys::rwlock(name).ok();
        match self {
            Self::Mutex(guard) => mutex_claim(name, guard),
            Self::Write(guard) => single(rw().map(|k| k.lock), hold_field(guard.hold_id())),
            Self::Read(guard) => single(
                rw().map(|k| ReaderKeys::of(&k).readers),
                deadline(guard.hold_id()),
            ),
            Self::Permit(permit, _) => single(
                LockKeys::semaphore(name).ok().map(|k| k.lock),
                deadline(permit.hold_id()),
            ),
            Self::RedLock(guard) => {
                let members: Vec<(usize, Member)> =
                    guard.hold_ids().map(hold_field).enumerate().collect();
                Claim {
                    key: LockKeys::new(name)
                        .map(|keys| keys.lock.into_bytes())
                        .unwrap_or_default(),
                    quorum: u32::try_from(members.len() / 2 + 1).unwrap_or(u32::MAX),
                    members,
                }
            }
        }
    }

    /// The hold's id as its calls name it ([`id_of`] of `ARGV[1]`); a RedLock guard's,
    /// its first master's (the re-entry workloads, which record it, drive the single-node
    /// families only).
    pub fn hold_id(&self) -> u64 {
        let id = match self {
            Self::Mutex(guard) => guard.hold_id(),
            Self::RedLock(guard) => match guard.hold_ids().next() {
                Some(id) => id,
                None => return 0,
            },
            Self::Read(guard) => guard.hold_id(),
            Self::Write(guard) => guard.hold_id(),
            Self::Permit(permit, _) => permit.hold_id(),
        };
        id_of(id.as_str().as_bytes())
    }

    /// The fencing token of the hold's epoch: an exclusive hold's own, a read hold's last
    /// write epoch's (what it reads), and none for a permit (the semaphore issues none).
    pub fn token(&self) -> u64 {
        match self {
            Self::Mutex(guard) => guard.fencing_token().get(),
            Self::RedLock(guard) => guard.fencing_token().get(),
            Self::Write(guard) => guard.fencing_token().get(),
            Self::Read(guard) => guard.write_token().get(),
            Self::Permit(..) => 0,
        }
    }

    /// Whether the hold writes to the fenced resource (exclusive holds only: readers
    /// read, and permit holders share the resource by design).
    pub fn writes(&self) -> bool {
        self.access() == Access::Exclusive
    }

    /// Resolves when the library reports the lease lost.
    pub async fn lost(&self) {
        match self {
            Self::Mutex(guard) => guard.lost().await,
            Self::RedLock(guard) => guard.lost().await,
            Self::Read(guard) => guard.lost().await,
            Self::Write(guard) => guard.lost().await,
            Self::Permit(permit, _) => permit.lost().await,
        }
    }

    /// Renews the lease for another TTL from now (`extend()` of the guard).
    pub async fn extend(&self) -> leasehold::Result<()> {
        match self {
            Self::Mutex(guard) => guard.extend().await,
            Self::RedLock(guard) => guard.extend().await,
            Self::Read(guard) => guard.extend().await,
            Self::Write(guard) => guard.extend().await,
            Self::Permit(permit, _) => permit.extend().await,
        }
    }

    /// Releases the hold in line.
    pub async fn unlock(self) -> leasehold::Result<()> {
        match self {
            Self::Mutex(guard) => guard.unlock().await,
            Self::RedLock(guard) => guard.unlock().await,
            Self::Read(guard) => guard.unlock().await,
            Self::Write(guard) => guard.unlock().await,
            Self::Permit(permit, _) => permit.release().await,
        }
    }
}
