//! `client.semaphore(name, permits)`: at most `permits` concurrent holders, each permit a
//! lease of its own, with the size stored on the server.
//!
//! Invariants: the permits are a server-side sorted set of hold ids scored by lease deadline
//! (server time), purged inside every script, so a crashed holder's permit comes back after
//! its TTL; fair waiters get freed permits handed over in queue order. Acquire loop, guard,
//! watchdog and `lost()` are the mutex's (see [`crate::acquire`]).
//!
//! The size: the first acquire of a semaphore stores its number of permits in the string
//! `leasehold:{name}:sem:size`; every later acquire with another number fails with
//! [`Error::PermitsMismatch`](crate::Error::PermitsMismatch) before taking or queueing
//! anything, and [`Semaphore::resize`] changes the number on purpose. The size key expires
//! with the semaphore's other keys (every script sets its TTL to the longest of theirs), so
//! no key outlives a lease or queue entry, and an idle semaphore (no holders, no waiters)
//! forgets its size: the next acquire stores its own.
//!
//! Why no more than the stored size hold a permit once the size settles (the argument
//! rests on each script running atomically):
//! - Admission compares the count of live permits with the *stored* size inside the same
//!   script that adds the permit, and every path that admits (a fresh grant, a hand-off to a
//!   queue head, in acquire, release or resize) checks `ZCARD < size` first. Two first users
//!   with different numbers cannot both store theirs: the first script to run stores it,
//!   the second sees a stored size and is refused.
//! - A resize runs between two scripts, never inside one: an acquire or release sees the
//!   old size or the new one, whole. Growing it hands the freed permits to queue heads at
//!   once (and announces a free permit to the others); shrinking it takes no permit away.
//!   Holders granted under the old size keep theirs until they release or their lease
//!   ends, so for that while up to the old size hold permits; new holders are admitted
//!   only once fewer than the new size hold one.
//! - A retried acquire whose hold already owns a permit keeps it whatever the size is now
//!   (it was admitted under the size of its time), so a lost reply never turns a granted
//!   permit into an error while the permit is still held.
//! - Release never fails on the size: it gives the permit back and hands free permits out
//!   by the stored size (the caller's number stands in only when none is stored).
//! - An idle semaphore has no size, so the first acquire after it went idle stores its
//!   number, whatever was stored before: deployments that disagree are caught while the
//!   semaphore is in use, and a deployment alone with an idle semaphore sets the size.

use crate::acquire::{Mode, acquire_variants};
use crate::config::lock_options;
use crate::error::{self, Result};
use crate::guard::{Guard, lease_accessors};
use crate::handle::Handle;
use crate::hold::HoldKind;
use crate::inspect::SemState;
use crate::keys::LockKeys;
use crate::protocol::{self, CallError, LockRef};
use crate::scoped::{self, Ran, scoped_guard};

/// The most permits a semaphore may have. Each permit is a member of one sorted set and
/// usually a watchdog task on some client; past a million, the number is almost certainly a
/// bug (a byte count, a negative number cast), and it stays exact in Lua's numbers.
pub const MAX_PERMITS: u32 = 1 << 20;

/// A named counting semaphore with its settings. Cheap to clone.
///
/// Every user of one semaphore name must pass the same number of permits: the first
/// acquire stores it on the server, and an acquire with another number fails with
/// [`Error::PermitsMismatch`](crate::Error::PermitsMismatch) until
/// [`resize`](Self::resize) changes it or the semaphore goes idle (no holders and no
/// waiters), which forgets it. Defaults come from the [`ClientBuilder`](crate::ClientBuilder)
/// (TTL, watchdog, wait strategy); [`WaitStrategy::FairQueue`](crate::WaitStrategy::FairQueue) hands freed permits to the
/// waiters in arrival order.
#[derive(Clone)]
pub struct Semaphore {
    handle: Handle,
    permits: u32,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.handle
            .debug(f, "Semaphore")
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}

impl Semaphore {
    pub(crate) fn new(mut handle: Handle, permits: u32) -> Self {
        // Permits are not re-entrant: every acquire gets an owner of its own.
        handle.config.owner = None;
        Self { handle, permits }
    }

    /// The number of permits this handle asks for (and stores at first use).
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// Changes the semaphore's stored size to `permits` on purpose, and this handle's
    /// number with it (clones made before keep theirs, and get
    /// [`Error::PermitsMismatch`](crate::Error::PermitsMismatch) from then on).
    ///
    /// On a live semaphore (holders or waiters) it returns `true`: growing it hands the
    /// new permits to fair waiters at once; shrinking it takes no permit away, and new
    /// holders wait until fewer than `permits` hold one. On an idle semaphore it stores
    /// nothing (an idle semaphore has no size) and returns `false`: the next acquire's
    /// number becomes the size, so acquire through this handle.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for 0 or more than
    /// [`MAX_PERMITS`] (nothing is sent); [`Error::InvalidName`](crate::Error::InvalidName);
    /// [`Error::WrongType`](crate::Error::WrongType) when something else uses the keys;
    /// [`Error::Backend`](crate::Error::Backend) when the call failed or its reply was
    /// lost (resizing is idempotent: call it again).
    pub async fn resize(&mut self, permits: u32) -> Result<bool> {
        self.validate(permits)?;
        let lock = LockRef {
            keys: LockKeys::semaphore(&self.handle.name)?,
            name: self.handle.name.clone(),
        };
        let backend = self.handle.client.backend.as_ref();
        let live = match protocol::permits_resize(backend, &lock, permits).await {
            Ok(live) => live,
            Err(CallError::Failed(err)) => return Err(err),
            Err(CallError::Transport(err)) => return Err(error::from_backend(&lock.name, err)),
        };
        tracing::info!(name = %lock.name, permits, live, "semaphore resized");
        self.permits = permits;
        Ok(live)
    }

    fn validate(&self, permits: u32) -> Result<()> {
        if permits == 0 {
            return Err(self.handle.invalid("a semaphore needs at least one permit"));
        }
        if permits > MAX_PERMITS {
            return Err(self.handle.invalid(format!(
                "{permits} permits is more than MAX_PERMITS ({MAX_PERMITS})"
            )));
        }
        Ok(())
    }

    lock_options!((handle.config): ttl, wait, watchdog, acquire_timeout, metrics_label);

    acquire_variants!("a permit" -> Permit, (handle.config): acquire, acquire_within, try_acquire by take);

    /// Scoped work under a permit: waits as [`acquire`](Self::acquire) does, runs `work`
    /// with the permit, then releases it in line and returns the work's value in a [`Ran`]
    /// beside what the release found (see [`Mutex::run`](crate::Mutex::run) for the race
    /// against a lost lease and the three outcomes).
    ///
    /// `work` is an async closure, `async |permit| { .. }`: the tokio-style
    /// `|permit| async move { .. }` fails with `error[E0282]: type annotations needed`, and
    /// with the type named, `lifetime may not live long enough` (the future borrows the
    /// permit; see "The closure form" under [`Mutex::run`](crate::Mutex::run)).
    ///
    /// # Errors
    ///
    /// The errors of [`acquire`](Self::acquire), and
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) when the lease was lost before the
    /// work finished (the work was dropped). The errors of [`Permit::release`] after it
    /// finished are in [`Ran::lease`].
    pub async fn run<T>(&self, work: impl AsyncFnOnce(&Permit) -> T) -> Result<Ran<T>> {
        scoped::run(self.acquire().await?, work).await
    }

    /// The semaphore's state on the server, read in one transaction without changing it:
    /// the permits in use with their leases left, and the fair queue's waiters, head
    /// first. See [`crate::inspect`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a name no lock can have;
    /// [`Error::WrongType`](crate::Error::WrongType) when something else uses the keys;
    /// [`Error::Backend`](crate::Error::Backend) when the read failed (or the backend
    /// cannot send pipelines, as the simulator's).
    pub async fn inspect(&self) -> Result<SemState> {
        Ok(self.handle.inspect().await?.sem)
    }

    async fn take(&self, mode: Mode) -> Result<Permit> {
        self.validate(self.permits)?;
        let keys = LockKeys::semaphore(&self.handle.name);
        let permits = self.permits;
        let hold = self.handle.hold(keys, HoldKind::Permit { permits })?;
        let inner = Guard::acquire(hold, mode).await?;
        Ok(Permit { inner })
    }
}

/// One held permit of a [`Semaphore`]. Dropping it gives the permit back in the background;
/// see [`Guard`] for the lease rules, which are the same.
#[must_use = "dropping the permit releases it"]
#[derive(Debug)]
pub struct Permit {
    inner: Guard,
}

impl Permit {
    lease_accessors!();

    /// Gives the permit back and waits for the server's answer (see [`Guard::unlock`]).
    pub async fn release(self) -> Result<()> {
        self.inner.unlock().await
    }
}

scoped_guard!(Permit, release);
