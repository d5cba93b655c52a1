//! What a client shares with every lock handle, hold, guard and background task it makes:
//! the backend, the runtime and its watchdog, the client id, its one shared subscription and
//! its lease event listener.
//!
//! It sits below the lock kinds so that they can all use it without knowing the
//! [`Client`](crate::Client) facade that builds it.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::backend::Backend;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::events::Listener;
use crate::notify::Notifier;
use crate::owner::{self, ClientId, Owner};
use crate::runtime::Runtime;
use crate::watchdog::Watchdog;

/// State shared by a client, its lock handles, guards and background tasks.
pub(crate) struct ClientState {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) runtime: Runtime,
    /// Renews the leases of this client's guards (one schedule and one task for them all).
    pub(crate) watchdog: Watchdog,
    pub(crate) id: ClientId,
    /// The client's name ([`ClientBuilder::name`](crate::ClientBuilder::name)), carried in
    /// its owner ids; validated when the client was built.
    pub(crate) name: Option<String>,
    pub(crate) notifier: Arc<Notifier>,
    /// Counter for per-acquire owner ids.
    pub(crate) owners: AtomicU64,
    /// Told about every lease event of this client's guards (RedLock: of the first
    /// master's client); see [`ClientBuilder::on_lease_event`](crate::ClientBuilder::on_lease_event).
    pub(crate) lease_listener: Option<Listener>,
}

impl ClientState {
    /// The owner of one acquire call on lock `name` under `config`: the caller-chosen id,
    /// or a fresh one.
    pub(crate) fn owner_for(&self, name: &str, config: &Config) -> Result<Owner> {
        let Some(id) = &config.owner else {
            return Ok(Owner::fresh(&self.id, self.name.as_deref(), &self.owners));
        };
        match owner::refusal(id) {
            Some(reason) => Err(Error::InvalidConfig {
                name: name.to_owned(),
                reason,
            }),
            None => Ok(Owner::chosen(&self.id, self.name.as_deref(), id)),
        }
    }
}
