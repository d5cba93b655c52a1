//! `client.semaphore(name, permits)`: at most `permits` concurrent holders, each permit a
//! lease of its own.
//!
//! Invariants: the permits are a server-side sorted set of hold ids scored by lease deadline
//! (server time), purged inside every script, so the count never exceeds `permits` and a
//! crashed holder's permit comes back after its TTL; fair waiters get freed permits handed
//! over in queue order by the release script. Acquire loop, guard, watchdog and `lost()`
//! are the mutex's (see [`crate::acquire`]).

use std::sync::Arc;
use std::time::Duration;

use crate::acquire::{self, Mode};
use crate::client_state::ClientState;
use crate::config::{Config, lock_options};
use crate::error::{Error, Result};
use crate::guard::{Guard, lease_accessors};
use crate::hold::{Hold, HoldKind};
use crate::keys::LockKeys;
use crate::lease::validate_ttl;
use crate::protocol::LockRef;

/// Key family suffix of semaphores (`leasehold:{name}:sem...`).
const FAMILY: &str = "sem";

/// A named counting semaphore with its settings. Cheap to clone.
///
/// Every user of one semaphore name must pass the same number of permits: the scripts
/// trust the caller's number. Defaults come from the [`ClientBuilder`](crate::ClientBuilder)
/// (TTL, watchdog, wait strategy); [`WaitStrategy::FairQueue`](crate::WaitStrategy::FairQueue) hands freed permits to the
/// waiters in arrival order.
#[derive(Clone)]
pub struct Semaphore {
    client: Arc<ClientState>,
    name: String,
    permits: u32,
    config: Config,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .field("permits", &self.permits)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Semaphore {
    pub(crate) fn new(
        client: Arc<ClientState>,
        name: String,
        permits: u32,
        config: Config,
    ) -> Self {
        Self {
            client,
            name,
            permits,
            // Permits are not re-entrant: every acquire gets an owner of its own.
            config: Config {
                owner: None,
                ..config
            },
        }
    }

    /// The number of permits.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    lock_options!(config: ttl, wait, watchdog, acquire_timeout);

    /// Waits for a permit (until the acquire timeout, if set).
    pub async fn acquire(&self) -> Result<Permit> {
        self.take(Mode::Wait(self.config.acquire_timeout)).await
    }

    /// Waits for a permit for at most `timeout` (overriding the acquire timeout), then
    /// fails with [`Error::Timeout`] having left nothing held or queued.
    pub async fn acquire_within(&self, timeout: Duration) -> Result<Permit> {
        self.take(Mode::Wait(Some(timeout))).await
    }

    /// One attempt: a permit, or [`Error::WouldBlock`].
    pub async fn try_acquire(&self) -> Result<Permit> {
        self.take(Mode::Try).await
    }

    async fn take(&self, mode: Mode) -> Result<Permit> {
        let lock = LockRef {
            keys: LockKeys::family(&self.name, FAMILY)?,
            name: self.name.clone(),
        };
        validate_ttl(&self.name, self.config.ttl)?;
        self.config.wait.validate(&self.name)?;
        if self.permits == 0 {
            return Err(Error::InvalidConfig {
                name: self.name.clone(),
                reason: "a semaphore needs at least one permit".into(),
            });
        }
        let owner = self.client.owner_for(&self.name, &self.config)?;
        let hold = Hold::new(
            Arc::clone(&self.client),
            Arc::new(lock),
            owner,
            Arc::new(self.config.clone()),
            HoldKind::Permit {
                permits: self.permits,
            },
        );
        let inner = Guard::new(acquire::acquire(hold, mode).await?);
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
