//! What every lock handle on one client ([`Mutex`](crate::Mutex), [`RwLock`](crate::RwLock),
//! [`Semaphore`](crate::Semaphore)) holds — the client's state, the lock name and its
//! settings — and the one way a handle turns into a hold.
//!
//! The kinds differ only in their keys, their hold kind and checks of their own; validating
//! the shared settings and building the hold happen here, once, so the kinds cannot drift
//! apart in what they accept.

use std::fmt;
use std::sync::Arc;

use crate::client_state::ClientState;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::hold::{Hold, HoldKind};
use crate::inspect::{self, LockState};
use crate::keys::LockKeys;
use crate::lease::validate_ttl;
use crate::protocol::LockRef;

/// A lock name on one client, with its settings.
#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) client: Arc<ClientState>,
    pub(crate) name: String,
    pub(crate) config: Config,
}

impl Handle {
    pub(crate) fn new(client: Arc<ClientState>, name: String, config: Config) -> Self {
        Self {
            client,
            name,
            config,
        }
    }

    /// The `Debug` output every kind starts with: its name and settings.
    pub(crate) fn debug<'a, 'b>(
        &self,
        f: &'a mut fmt::Formatter<'b>,
        kind: &str,
    ) -> fmt::DebugStruct<'a, 'b> {
        let mut out = f.debug_struct(kind);
        out.field("name", &self.name).field("config", &self.config);
        out
    }

    /// A configuration error of this lock.
    pub(crate) fn invalid(&self, reason: impl Into<String>) -> Error {
        Error::InvalidConfig {
            name: self.name.clone(),
            reason: reason.into(),
        }
    }

    /// Validates the shared settings and makes a fresh hold of `kind` on `keys` (the
    /// kind's keys for this name, validated with it).
    pub(crate) fn hold(&self, keys: Result<LockKeys>, kind: HoldKind) -> Result<Arc<Hold>> {
        let lock = LockRef {
            keys: keys?,
            name: self.name.clone(),
        };
        validate_ttl(&self.name, self.config.ttl)?;
        if let Some(wait) = self.config.wait {
            wait.validate(&self.name)?;
        }
        let owner = self.client.owner_for(&self.name, &self.config)?;
        Ok(Hold::new(
            Arc::clone(&self.client),
            Arc::new(lock),
            owner,
            Arc::new(self.config.clone()),
            kind,
        ))
    }

    /// Reads every family's state of this lock name through the client's backend.
    pub(crate) async fn inspect(&self) -> Result<LockState> {
        inspect::read_through(self.client.backend.as_ref(), &self.name).await
    }
}
