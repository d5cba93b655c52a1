//! Leasehold driven by the benchmark: one set of `leasehold::Client`s (each its own command
//! connection and subscription) per benchmark client — one client for a single-node mutex
//! with the wait strategy under test, one per master for RedLock — with the library
//! defaults otherwise (watchdog on), guard released explicitly.

use std::time::Duration;

use leasehold::{Guard, RedLock, RedLockGuard, WaitStrategy};

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
}

impl LeaseholdClient {
    /// Connects to the node at `urls[0]` with the library's default strategy parameters.
    pub async fn connect(urls: &[String], kind: WaitKind) -> Result<Self> {
        let url = urls.first().ok_or_else(|| Error::Lock {
            name: "(bench)".to_owned(),
            reason: "no Redis URL to connect to".to_owned(),
        })?;
        Ok(Self::Mutex {
            client: connect(url).await?,
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

    /// Waits until `name` is held (RedLock retries without a retry limit).
    pub async fn acquire(&self, name: &str, ttl: Duration) -> Result<LeaseholdHeld> {
        let acquired = match self {
            Self::Mutex { client, strategy } => client
                .mutex(name)
                .ttl(ttl)
                .wait(*strategy)
                .lock()
                .await
                .map(LeaseholdHeld::Mutex),
            Self::RedLock(masters) => RedLock::new(masters.iter().cloned(), name)
                .ttl(ttl)
                .retry_count(u32::MAX)
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
        };
        released.map_err(|err| Error::Lock {
            name,
            reason: format!("leasehold unlock: {err}"),
        })
    }
}

async fn connect(url: &str) -> Result<leasehold::Client> {
    leasehold::Client::connect(url)
        .await
        .map_err(|err| Error::Lock {
            name: "(connect)".to_owned(),
            reason: format!("leasehold connect to {url}: {err}"),
        })
}
