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
use crate::keys::LockKeys;
use crate::replication::Replication;

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

    lock_options!((handle.config): ttl, wait, watchdog, acquire_timeout, owner, fence_margin);

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

    async fn acquire(&self, mode: Mode) -> Result<Guard> {
        let keys = LockKeys::new(&self.handle.name);
        let hold = self.handle.hold(keys, HoldKind::Mutex)?;
        Guard::acquire(hold, mode).await
    }
}
