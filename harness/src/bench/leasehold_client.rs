//! Leasehold driven by the benchmark: one set of `leasehold::Client`s (each its own command
//! connection and subscription) per benchmark client — one client for a single-node mutex or
//! read-write lock with the wait strategy under test, one per master for RedLock — with the
//! library defaults otherwise (watchdog on, writer intent timeout), guard released explicitly.

use std::time::Duration;

use leasehold::{Guard, ReadGuard, RedLock, RedLockGuard, WaitStrategy, WriteGuard};

use crate::bench::access::{Access, no_read_hold};
use crate::bench::wait_kind::WaitKind;
use crate::error::{Error, Result};

/// Plain commands Leasehold's client sends outside its scripts: none. Acquire, release and
/// renewal are EVALSHA (EVAL on NOSCRIPT), waiting is SUBSCRIBE/UNSUBSCRIBE — all `noscript`;
/// PUBLISH, HSET, PEXPIRE … only ever run inside the scripts.
pub const DIRECT_COMMANDS: &[&str] = &[];

/// One benchmark client backed by Leasehold.
#[derive(Debug)]
pub enum LeaseholdClient {
    /// A mutex on one node with a wait strategy.
    Mutex {
        /// The client of the node.
        client: leasehold::Client,
        /// The wait strategy under test.
        strategy: WaitStrategy,
    },
    /// A read-write lock on one node with a wait strategy.
    RwLock {
        /// The client of the node.
        client: leasehold::Client,
        /// The wait strategy under test.
        strategy: WaitStrategy,
    },
    /// RedLock over independent masters, one client each.
    RedLock(Vec<leasehold::Client>),
}

/// A held Leasehold guard.
#[derive(Debug)]
pub enum LeaseholdHeld {
    /// A single-node mutex guard.
    Mutex(Guard),
    /// A RedLock guard.
    RedLock(RedLockGuard),
    /// A read-write lock's read hold.
    Read(ReadGuard),
    /// A read-write lock's write hold.
    Write(WriteGuard),
}

impl LeaseholdClient {
    /// Connects to the node at `urls[0]` with the library's default strategy parameters.
    pub async fn connect(urls: &[String], kind: WaitKind) -> Result<Self> {
        Ok(Self::Mutex {
            client: connect(first(urls)?).await?,
            strategy: kind.strategy(),
        })
    }

    /// Connects to the node at `urls[0]` for the read-write lock, like [`Self::connect`].
    pub async fn connect_rwlock(urls: &[String], kind: WaitKind) -> Result<Self> {
        Ok(Self::RwLock {
            client: connect(first(urls)?).await?,
            strategy: kind.strategy(),
        })
    }

    /// Connects one client to every master in `urls`, for RedLock.
    pub async fn connect_redlock(urls: &[String]) -> Result<Self> {
        let mut masters = Vec::with_capacity(urls.len());
        for url in urls {
            masters.push(connect(url).await?);
        }
        Ok(Self::RedLock(masters))
    }

    /// Waits until `name` is held with `access` (RedLock retries without a retry limit);
    /// only the read-write lock has read holds.
    pub async fn acquire(
        &self,
        name: &str,
        ttl: Duration,
        access: Access,
    ) -> Result<LeaseholdHeld> {
        let acquired = match (self, access) {
            (Self::RwLock { client, strategy }, Access::Read) => client
                .rwlock(name)
                .ttl(ttl)
                .wait(*strategy)
                .read()
                .await
                .map(LeaseholdHeld::Read),
            (Self::RwLock { client, strategy }, Access::Write) => client
                .rwlock(name)
                .ttl(ttl)
                .wait(*strategy)
                .write()
                .await
                .map(LeaseholdHeld::Write),
            (Self::Mutex { .. } | Self::RedLock(_), Access::Read) => {
                return Err(no_read_hold(name));
            }
            (Self::Mutex { client, strategy }, Access::Write) => client
                .mutex(name)
                .ttl(ttl)
                .wait(*strategy)
                .lock()
                .await
                .map(LeaseholdHeld::Mutex),
            (Self::RedLock(masters), Access::Write) => RedLock::new(masters.iter().cloned(), name)
                .ttl(ttl)
                .lock()
                .await
                .map(LeaseholdHeld::RedLock),
        };
        acquired.map_err(|err| Error::Lock {
            name: name.to_owned(),
            reason: format!("leasehold acquire: {err}"),
        })
    }

    /// Releases the guard in line (not through drop, which releases in the background).
    pub async fn release(&self, held: LeaseholdHeld) -> Result<()> {
        let (name, released) = match held {
            LeaseholdHeld::Mutex(guard) => (guard.name().to_owned(), guard.unlock().await),
            LeaseholdHeld::RedLock(guard) => (guard.name().to_owned(), guard.unlock().await),
            LeaseholdHeld::Read(guard) => (guard.name().to_owned(), guard.unlock().await),
            LeaseholdHeld::Write(guard) => (guard.name().to_owned(), guard.unlock().await),
        };
        released.map_err(|err| Error::Lock {
            name,
            reason: format!("leasehold unlock: {err}"),
        })
    }
}

fn first(urls: &[String]) -> Result<&str> {
    urls.first().map(String::as_str).ok_or_else(|| Error::Lock {
        name: "(bench)".to_owned(),
        reason: "no Redis URL to connect to".to_owned(),
    })
}

async fn connect(url: &str) -> Result<leasehold::Client> {
    leasehold::Client::connect(url)
        .await
        .map_err(|err| Error::Lock {
            name: "(connect)".to_owned(),
            reason: format!("leasehold connect to {url}: {err}"),
        })
}
