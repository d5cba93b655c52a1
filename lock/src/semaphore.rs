//! `client.semaphore(name, permits)`: at most `permits` concurrent holders, each permit a
//! lease of its own.
//!
//! Invariants: the permits are a server-side sorted set of hold ids scored by lease deadline
//! (server time), purged inside every script, so the count never exceeds `permits` and a
//! crashed holder's permit comes back after its TTL; fair waiters get freed permits handed
//! over in queue order by the release script. Acquire loop, guard, watchdog and `lost()`
//! are the mutex's (see [`crate::acquire`]).

use crate::acquire::{Mode, acquire_variants};
use crate::config::lock_options;
use crate::error::Result;
use crate::guard::{Guard, lease_accessors};
use crate::handle::Handle;
use crate::hold::HoldKind;
use crate::inspect::SemState;
use crate::keys::LockKeys;
use crate::scoped::{self, scoped_guard};

/// A named counting semaphore with its settings. Cheap to clone.
///
/// Every user of one semaphore name must pass the same number of permits: the scripts
/// trust the caller's number. Defaults come from the [`ClientBuilder`](crate::ClientBuilder)
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

    /// The number of permits.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    lock_options!((handle.config): ttl, wait, watchdog, acquire_timeout, metrics_label);

    acquire_variants!("a permit" -> Permit, (handle.config): acquire, acquire_within, try_acquire by take);

    /// Scoped work under a permit: waits as [`acquire`](Self::acquire) does, runs `work`
    /// with the permit, then releases it in line (see [`Mutex::run`](crate::Mutex::run) for
    /// the race against a lost lease).
    ///
    /// # Errors
    ///
    /// The errors of [`acquire`](Self::acquire);
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) when the lease was lost before the
    /// work finished (the work was dropped); and the errors of [`Permit::release`] after it
    /// finished.
    pub async fn run<T>(&self, work: impl AsyncFnOnce(&Permit) -> T) -> Result<T> {
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
        if self.permits == 0 {
            return Err(self.handle.invalid("a semaphore needs at least one permit"));
        }
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
