//! `client.mutex(name)`: a lease mutex handle with its settings.
//!
//! The handle only validates its settings and makes a hold; the acquire loop
//! ([`crate::acquire`]) and the [`Guard`] do the rest, as for every lock kind.

use std::time::Duration;

use crate::acquire::{Mode, acquire_variants};
use crate::config::lock_options;
use crate::error::Result;
use crate::guard::Guard;
use crate::handle::Handle;
use crate::hold::HoldKind;
use crate::inspect::MutexState;
use crate::keys::LockKeys;
use crate::replication::Replication;
use crate::scoped;

/// A named lease mutex with its settings. Cheap to clone; settings are builder methods.
///
/// Defaults come from the [`ClientBuilder`](crate::ClientBuilder): TTL
/// [`DEFAULT_TTL`](crate::DEFAULT_TTL), watchdog [`DEFAULT_WATCHDOG`](crate::DEFAULT_WATCHDOG),
/// wait [`WaitStrategy::fair_queue()`](crate::WaitStrategy::fair_queue) (FIFO hand-off),
/// no acquire timeout, and a
/// fresh owner per acquire call (no re-entry except through [`Guard::reenter`]).
#[derive(Clone)]
pub struct Mutex {
    handle: Handle,
}

impl std::fmt::Debug for Mutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.handle.debug(f, "Mutex").finish_non_exhaustive()
    }
}

impl Mutex {
    pub(crate) fn new(handle: Handle) -> Self {
        Self { handle }
    }

    lock_options!((handle.config): ttl, wait, watchdog, acquire_timeout, owner, fence_margin, metrics_label);

    /// After each acquire, runs `WAIT replicas timeout` and reports on the guard how many
    /// replicas acknowledged ([`Guard::replicas_acked`]). This narrows, but does not close,
    /// the window in which a failover loses the lock (see the crate docs); `timeout` must be
    /// at least 1 ms. Works on any backend; `WAIT` runs on a connection of its own (on
    /// Cluster, to the master of the lock's slot), so other locks' renewals never wait for it.
    pub fn wait_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.handle.config.replication = Some(Replication { replicas, timeout });
        self
    }

    acquire_variants!("the lock" -> Guard, (handle.config): lock, lock_within, try_lock by acquire);

    /// Scoped work: waits for the lock as [`lock`](Self::lock) does, runs `work` with the
    /// guard (read its [`fencing_token`](Guard::fencing_token) for every write), then unlocks
    /// in line and returns the work's value.
    ///
    /// The work races the lease: if [`Guard::lost`] fires first, the work's future is
    /// dropped at its next await point and the hold is released in the background. Work
    /// that must not stop half-way should write through a fenced resource, which refuses it
    /// once a later holder exists.
    ///
    /// ```no_run
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// let sent = client
    ///     .mutex("invoices:nightly")
    ///     .run(async |guard| {
    ///         // Pass the token to every write to the protected resource.
    ///         send_invoices(guard.fencing_token().get()).await
    ///     })
    ///     .await?;
    /// # let _ = sent;
    /// # Ok(())
    /// # }
    /// # async fn send_invoices(_token: u64) -> usize { 0 }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of [`lock`](Self::lock); [`Error::LeaseLost`](crate::Error::LeaseLost)
    /// when the lease was lost before the work finished (the work was dropped); and the
    /// errors of [`Guard::unlock`] after it finished (`LeaseLost`, `NotHeld`: the work
    /// ran, but maybe not alone; `Ambiguous`).
    pub async fn run<T>(&self, work: impl AsyncFnOnce(&Guard) -> T) -> Result<T> {
        scoped::run(self.lock().await?, work).await
    }

    /// The mutex's state on the server, read in one transaction without changing it: who
    /// holds it (owners and their holds, each with its lease left), the last fencing token,
    /// and the fair queue's waiters, head first. See [`crate::inspect`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a name no lock can have;
    /// [`Error::WrongType`](crate::Error::WrongType) when something else uses the keys;
    /// [`Error::Backend`](crate::Error::Backend) when the read failed (or the backend
    /// cannot send pipelines, as the simulator's).
    pub async fn inspect(&self) -> Result<MutexState> {
        Ok(self.handle.inspect().await?.mutex)
    }

    async fn acquire(&self, mode: Mode) -> Result<Guard> {
        let keys = LockKeys::new(&self.handle.name);
        let hold = self.handle.hold(keys, HoldKind::Mutex)?;
        Guard::acquire(hold, mode).await
    }
}
