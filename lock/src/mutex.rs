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
use crate::scoped::{self, Ran};

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
    ///
    /// A report only: a guard comes back even when fewer replicas (or none) acknowledged.
    /// To refuse such a grant instead, use [`require_replicas`](Self::require_replicas).
    /// Default: no `WAIT`. The later of `wait_replicas` and `require_replicas` wins.
    pub fn wait_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.handle.config.replication = Some(Replication {
            replicas,
            timeout,
            required: false,
        });
        self
    }

    /// As [`wait_replicas`](Self::wait_replicas), but a grant that fewer than `replicas`
    /// replicas acknowledged within `timeout` (cut to what is left of the acquire deadline
    /// and of the lease, as there) is released in line and the acquire fails with
    /// [`Error::ReplicasShort`](crate::Error::ReplicasShort): the acquire never hands back
    /// a lock that only the master has. This is Redisson's default for its `WAIT`. A `WAIT`
    /// that fails or does not answer counts as no replica, so a deployment without
    /// replicas (or with `replicas` larger than it has) never acquires.
    ///
    /// It narrows the failover window no further than `wait_replicas` does (an
    /// acknowledging replica may not be the one promoted), and it costs one `WAIT` round
    /// trip per acquire, re-entries included. Default: off. The later of `wait_replicas`
    /// and `require_replicas` wins.
    ///
    /// ```no_run
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// use std::time::Duration;
    ///
    /// let mutex = client
    ///     .mutex("ledger")
    ///     .require_replicas(1, Duration::from_millis(50));
    /// match mutex.lock().await {
    ///     Ok(guard) => guard.unlock().await?,
    ///     Err(leasehold::Error::ReplicasShort { acknowledged, .. }) => {
    ///         // Nothing is held: the grant was released.
    ///         eprintln!("only {acknowledged} replicas acknowledged; try later");
    ///     }
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn require_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.handle.config.replication = Some(Replication {
            replicas,
            timeout,
            required: true,
        });
        self
    }

    acquire_variants!("the lock" -> Guard, (handle.config): lock, lock_within, try_lock by acquire);

    /// Scoped work: waits for the lock as [`lock`](Self::lock) does, runs `work` with the
    /// guard (read its [`fencing_token`](Guard::fencing_token) for every write), then unlocks
    /// in line and returns the work's value in a [`Ran`], beside what became of the lease.
    ///
    /// The work races the lease: if [`Guard::lost`] fires first, the work's future is
    /// dropped at its next await point, the hold is released in the background, and the
    /// call fails with [`Error::LeaseLost`](crate::Error::LeaseLost). Work that must not stop
    /// half-way should write through a fenced resource, which refuses it once a later holder
    /// exists. The three outcomes:
    ///
    /// - `Err(LeaseLost)`: the lease was lost before the work finished; the work was
    ///   dropped (nothing after its last completed await point ran).
    /// - `Ok(ran)` with [`ran.lease.released()`](crate::LeaseAtEnd::released): the work
    ///   finished and the unlock found the hold live and released it.
    /// - `Ok(ran)` with [`ran.lease.unlock()`](crate::LeaseAtEnd::unlock) an error
    ///   (`NotHeld`, `LeaseLost`, `Ambiguous`): the work finished — its value is
    ///   `ran.value`, do not redo it — but the unlock found the lease gone or could not
    ///   tell; [`ran.lease.valid_at_finish()`](crate::LeaseAtEnd::valid_at_finish) says
    ///   whether the lease was still valid (by local reckoning) when the work finished.
    ///
    /// ```no_run
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// let ran = client
    ///     .mutex("invoices:nightly")
    ///     .run(async |guard| {
    ///         // Pass the token to every write to the protected resource.
    ///         send_invoices(guard.fencing_token().get()).await
    ///     })
    ///     .await?; // LeaseLost here: the work was dropped before it finished
    /// let sent = ran.value; // the work finished: never send these again
    /// if let Err(err) = ran.lease.unlock() {
    ///     let valid = ran.lease.valid_at_finish();
    ///     eprintln!("sent {sent}; lease gone at unlock ({err}); valid at finish: {valid}");
    /// }
    /// # Ok(())
    /// # }
    /// # async fn send_invoices(_token: u64) -> usize { 0 }
    /// ```
    ///
    /// # The closure form
    ///
    /// `work` is an async closure, `async |guard| { .. }` (or `async move |guard| { .. }`
    /// to move captured values in): its future borrows the guard, which only an async
    /// closure can express. The tokio-style closure returning an async block does not
    /// compile, and no signature can accept it soundly while the work borrows the guard.
    /// `|guard| async move { .. }` fails with
    /// `error[E0282]: type annotations needed` (on `guard`); naming the type,
    /// `|guard: &Guard| async move { .. }`, then fails with `lifetime may not live long
    /// enough` ("returning this value requires that `'1` must outlive `'2`"). Write
    /// `async |guard| { .. }` instead; the same holds for
    /// [`RwLock::run_read`](crate::RwLock::run_read),
    /// [`RwLock::run_write`](crate::RwLock::run_write) and
    /// [`Semaphore::run`](crate::Semaphore::run).
    ///
    /// ```compile_fail,E0282
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// // error[E0282]: type annotations needed
    /// let ran = client
    ///     .mutex("invoices:nightly")
    ///     .run(|guard| async move { guard.fencing_token().get() })
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// ```compile_fail
    /// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
    /// // error: lifetime may not live long enough
    /// let ran = client
    ///     .mutex("invoices:nightly")
    ///     .run(|guard: &leasehold::Guard| async move { guard.fencing_token().get() })
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of [`lock`](Self::lock), and
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) when the lease was lost before the
    /// work finished (the work was dropped). Once the work finished the call no longer
    /// fails: the unlock's error is in [`Ran::lease`].
    pub async fn run<T>(&self, work: impl AsyncFnOnce(&Guard) -> T) -> Result<Ran<T>> {
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
