//! The `rslock` 0.10 peer, driven exactly like a user would: one `LockManager` (hence one
//! multiplexed connection) per client and `acquire()`, which loops over `lock()` attempts of
//! `SET NX PX` + unlock-script-on-failure with a random retry delay in `0..retry_delay`.

use std::time::Duration;

use crate::error::{Error, Result};

/// rslock's own default, `DEFAULT_RETRY_DELAY` in rslock 0.10 `src/lock.rs`; restated here
/// only for the report label, the default profile does not call `set_retry`.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(200);
/// rslock's `DEFAULT_RETRY_COUNT` (attempts per `lock()` call); kept when tuning the delay so
/// the tuned profile differs from the default in one knob only.
const DEFAULT_RETRY_COUNT: u32 = 3;

/// Plain commands rslock's client sends itself (its acquire is `SET key val NX PX ttl`); its
/// unlock script's GET and DEL are script-internal. EVALSHA/EVAL/SCRIPT LOAD are `noscript`.
pub const DIRECT_COMMANDS: &[&str] = &["set"];

/// One benchmark client backed by rslock.
#[derive(Debug)]
pub struct RslockClient {
    manager: rslock::LockManager,
}

/// A held rslock lock; must be released with [`RslockClient::release`] (rslock's guard does not
/// release on drop).
#[derive(Debug)]
pub struct RslockHeld(rslock::LockGuard);

impl RslockClient {
    /// A client on the given Redis servers (one for the single-node table, several for a
    /// RedLock quorum), with rslock's default retry or `retry_delay` instead.
    pub fn new(urls: &[String], retry_delay: Option<Duration>) -> Result<Self> {
        let clients = urls
            .iter()
            .map(|url| redis::Client::open(url.as_str()).map_err(|err| Error::redis(url, err)))
            .collect::<Result<Vec<_>>>()?;
        let mut manager = rslock::LockManager::from_clients(clients);
        if let Some(delay) = retry_delay {
            manager.set_retry(DEFAULT_RETRY_COUNT, delay);
        }
        Ok(Self { manager })
    }

    /// Waits until `name` is held (rslock's `acquire` never gives up on contention).
    pub async fn acquire(&self, name: &str, ttl: Duration) -> Result<RslockHeld> {
        self.manager
            .acquire(name.as_bytes(), ttl)
            .await
            .map(RslockHeld)
            .map_err(|err| Error::Lock {
                name: name.to_owned(),
                reason: format!("rslock acquire: {err}"),
            })
    }

    /// Releases a held lock (best effort, as rslock defines it).
    pub async fn release(&self, held: RslockHeld) {
        held.0.release().await;
    }
}
