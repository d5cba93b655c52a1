//! The members of the lock family a simulated client drives, behind one shape: build the
//! lock from the process's backends, acquire it, read the fencing token, watch `lost()`,
//! unlock.
//!
//! Invariant: each member is built only from the public `leasehold` API — a `Mutex` on the
//! process's single backend, or a `RedLock` over one `Client` per independent master (each
//! with its own backend connection) — so the workload loop judges the production code.

use leasehold::{Client, Guard, HoldId, LockKeys, RedLock, RedLockGuard};

use crate::history::Access;
use crate::process::ProcessCtx;
use crate::truth::{Claim, Member};
use crate::workload::{Strategy, Workload};

/// RedLock attempts are bounded by the workload's acquire timeout, like the single-node
/// waits, not by the library's default retry count (which gives up after ~0.5 s).
const REDLOCK_RETRIES: u32 = u32::MAX;

/// The owner id every hold of a re-entry workload takes (scoped to the process's client),
/// so the process's holds of one lock re-enter each other.
pub const REENTRY_OWNER: &str = "job";

/// A process's lock factory for one workload.
pub enum Locker {
    /// One client on the process's single backend.
    Mutex(Client),
    /// One client per independent master, in master order.
    RedLock(Vec<Client>),
}

/// A hold, whichever member granted it.
pub enum Held {
    /// A single-node mutex guard.
    Mutex(Guard),
    /// A RedLock guard.
    RedLock(RedLockGuard),
}

impl Locker {
    /// Builds the clients for `work` from `ctx`'s backends (the process's seams throughout).
    pub fn build(work: &Workload, ctx: &ProcessCtx) -> leasehold::Result<Self> {
        let client = |backend| {
            let mut builder = Client::builder()
                .backend(backend)
                .runtime(ctx.runtime.clone())
                .ttl(work.ttl)
                .wait(work.strategy.wait())
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
                Ok(Self::Mutex(client(backend)?))
            }
        }
    }

    /// Acquires `name` as `work` says (TTL, watchdog, acquire timeout; with a re-entry
    /// workload, as the process's one [`REENTRY_OWNER`]).
    pub async fn lock(
        &self,
        name: &str,
        work: &Workload,
        ctx: &ProcessCtx,
    ) -> leasehold::Result<Held> {
        match self {
            Self::Mutex(client) => {
                let mut mutex = client.mutex(name);
                if work.reentry.is_some() {
                    mutex = mutex.owner(REENTRY_OWNER);
                }
                if let Some(timeout) = work.acquire_timeout {
                    mutex = mutex.acquire_timeout(timeout);
                }
                mutex.lock().await.map(Held::Mutex)
            }
            Self::RedLock(clients) => {
                let mut redlock = RedLock::new(clients.iter().cloned(), name)
                    .ttl(work.ttl)
                    .watchdog(work.watchdog)
                    .retry_count(REDLOCK_RETRIES)
                    .runtime(ctx.runtime.clone());
                if let Some(timeout) = work.acquire_timeout {
                    redlock = redlock.acquire_timeout(timeout);
                }
                redlock.lock().await.map(Held::RedLock)
            }
        }
    }

    /// A second hold of `name` as [`REENTRY_OWNER`] with `ttl`: one attempt (`wait` false,
    /// a nested re-entry never waits) or a wait bounded by the acquire timeout. RedLock
    /// does not re-enter, so it refuses.
    pub async fn lock_again(
        &self,
        name: &str,
        work: &Workload,
        ttl: std::time::Duration,
        wait: bool,
    ) -> leasehold::Result<Held> {
        let Self::Mutex(client) = self else {
            return Err(leasehold::Error::InvalidConfig {
                name: name.to_owned(),
                reason: "RedLock does not re-enter".to_owned(),
            });
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

impl Held {
    /// Whom the hold excludes.
    pub fn access(&self) -> Access {
        Access::Exclusive
    }

    /// Where the servers keep this hold of `name`, for the server-truth oracle: the
    /// mutex's `#<hold id>` field on the one target, or each master's own hold id on a
    /// majority of RedLock's masters.
    pub fn claim(&self, name: &str) -> Claim {
        let key = LockKeys::new(name)
            .map(|keys| keys.lock.into_bytes())
            .unwrap_or_default();
        let field = |id: &HoldId| Member::HashField(format!("#{}", id.as_str()).into_bytes());
        match self {
            Self::Mutex(guard) => Claim {
                key,
                members: vec![(0, field(guard.hold_id()))],
                quorum: 1,
            },
            Self::RedLock(guard) => {
                let members: Vec<(usize, Member)> =
                    guard.hold_ids().map(field).enumerate().collect();
                Claim {
                    key,
                    quorum: u32::try_from(members.len() / 2 + 1).unwrap_or(u32::MAX),
                    members,
                }
            }
        }
    }

    /// The fencing token the hold presents to the resource.
    pub fn token(&self) -> u64 {
        match self {
            Self::Mutex(guard) => guard.fencing_token().get(),
            Self::RedLock(guard) => guard.fencing_token().get(),
        }
    }

    /// Resolves when the library reports the lease lost.
    pub async fn lost(&self) {
        match self {
            Self::Mutex(guard) => guard.lost().await,
            Self::RedLock(guard) => guard.lost().await,
        }
    }

    /// Releases the hold in line.
    pub async fn unlock(self) -> leasehold::Result<()> {
        match self {
            Self::Mutex(guard) => guard.unlock().await,
            Self::RedLock(guard) => guard.unlock().await,
        }
    }
}
