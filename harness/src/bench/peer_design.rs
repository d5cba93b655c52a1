//! The classic lock designs in the benchmark (`reports/designs.md`'s rows): each benchmark
//! client runs the simulator's own design client
//! ([`leasehold_sim::workload::designs::DesignLock`]) over connections of its own
//! ([`leasehold::RedisBackend`], one per node or master), tokio's runtime and the wall clock
//! ([`crate::design_client`]), so the code
//! measured here is the code the simulator and the safety table judge.
//!
//! Invariant: a design client waits as its design says (its spin, its pub/sub wake, its
//! queue) and never past [`ACQUIRE_LIMIT`], so a design that stops making progress fails
//! its cell with an error instead of hanging the benchmark. Only the mutex designs run
//! here ([`crate::bench::contender::Contender::DESIGNS`]).

use std::time::Duration;

use leasehold_sim::workload::designs::{Design, DesignLock, Grant, Lease};
use tokio::sync::Mutex;

use crate::design_client::{self, design_runtime};
use crate::error::{Error, Result};

/// The longest one acquisition may wait: far past any wait of a cell that progresses (the
/// longest critical section is 10 ms, the most clients 128).
pub const ACQUIRE_LIMIT: Duration = Duration::from_secs(60);

/// Plain commands a design's client sends itself, outside its scripts (its scripts' own
/// calls are `noscript`-attributed as EVAL).
pub fn direct_commands(design: Design) -> &'static [&'static str] {
    match design {
        Design::SetnxThenExpire => &["setnx", "pexpire", "del"],
        Design::SetnxGetset => &["setnx", "get", "getset", "del"],
        Design::SetNxPxDel => &["set", "del"],
        Design::SetNxPxCad | Design::RedlockNoDrift => &["set"],
        Design::ZsetQueue => &["zrem"],
        Design::HashWatchdog | Design::RwTwoKeys | Design::RwHash => &[],
    }
}

/// One benchmark client running a design.
pub struct DesignClient {
    design: Design,
    lock: Mutex<DesignLock>,
}

impl std::fmt::Debug for DesignClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DesignClient")
            .field("design", &self.design)
            .finish_non_exhaustive()
    }
}

/// A lock held through a [`DesignClient`].
#[derive(Debug)]
pub struct DesignHeld {
    grant: Grant,
    name: String,
}

impl DesignClient {
    /// A client of `design` on the servers at `urls` (one node, or RedLock's masters), its
    /// holds asking for `ttl`.
    pub async fn connect(urls: &[String], design: Design, ttl: Duration) -> Result<Self> {
        let lease = Lease {
            ttl,
            entry_timeout: None,
        };
        let lock =
            design_client::connect(design, lease, urls, &design_runtime(), "(bench)").await?;
        Ok(Self {
            design,
            lock: Mutex::new(lock),
        })
    }

    /// Waits until `name` is held, at most [`ACQUIRE_LIMIT`].
    pub async fn acquire(&self, name: &str) -> Result<DesignHeld> {
        let grant = self
            .lock
            .lock()
            .await
            .acquire(name, Some(ACQUIRE_LIMIT))
            .await;
        grant
            .map(|grant| DesignHeld {
                grant,
                name: name.to_owned(),
            })
            .ok_or_else(|| Error::Lock {
                name: name.to_owned(),
                reason: format!(
                    "{} acquire: not granted within {} s",
                    self.design.name(),
                    ACQUIRE_LIMIT.as_secs()
                ),
            })
    }

    /// Releases a held lock as the design does (its reply is not looked at).
    pub async fn release(&self, held: DesignHeld) {
        self.lock.lock().await.release(&held.name, held.grant).await;
    }
}
