//! Who competes in a benchmark cell: Leasehold's wait strategies (on the mutex, and on the
//! read-write lock), the rslock peer profiles, the Python peers and the classic designs
//! ([`peer_design`](crate::bench::peer_design)), one enum arm each, plus
//! the per-client handle that drives them through one acquire/release shape. RedLock
//! contenders run on [`REDLOCK_MASTERS`] independent masters; a Python peer's client is a
//! process of its own ([`python_peer`](crate::bench::python_peer)).

use std::time::Duration;

use leasehold_sim::workload::Strategy;
use leasehold_sim::workload::designs::Design;
use serde::{Deserialize, Serialize};

use crate::bench::access::{self, Access};
use crate::bench::leasehold_client::{self, LeaseholdClient, LeaseholdHeld};
use crate::bench::peer_design::{self, DesignClient, DesignHeld};
use crate::bench::peer_rslock::{self, RslockClient, RslockHeld};
use crate::bench::python_peer::client::{PythonClient, PythonHeld};
use crate::bench::python_peer::library::PythonLib;
use crate::bench::wait_kind::WaitKind;
use crate::error::{Error, Result};

/// Lease TTL for every contender: 10 s is three orders of magnitude above the longest critical
/// section (10 ms), so no lease expires mid-benchmark; expiry is the safety suite's subject.
pub const LEASE_TTL: Duration = Duration::from_secs(10);

/// Masters of the RedLock contenders: five, the deployment the RedLock spec describes and the
/// one docs/DESIGN.md §2 and the safety suite use.
pub const REDLOCK_MASTERS: usize = 5;

/// The retry delay of the tuned rslock profile (docs/DESIGN.md §4's "rslock (10 ms retry)").
pub const RSLOCK_TUNED_RETRY: Duration = Duration::from_millis(10);

/// One benchmarked lock implementation and configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Contender {
    /// A Leasehold mutex on one node with the given wait strategy.
    Leasehold(WaitKind),
    /// A Leasehold read-write lock on one node with the given wait strategy; its cells draw
    /// reads and writes by their read share.
    RwLock(WaitKind),
    /// Leasehold's RedLock on [`REDLOCK_MASTERS`] independent masters (retries with its
    /// default random delay until acquired).
    RedLock,
    /// rslock 0.10 (default retry) on the same [`REDLOCK_MASTERS`] masters: the RedLock peer.
    RslockRedLock,
    /// rslock 0.10 with its default retry (3 attempts per `lock()`, delay `0..200 ms`).
    RslockDefault,
    /// rslock 0.10 with the retry delay tuned to `0..10 ms`.
    RslockTuned,
    /// A Python lock library on one node, each client a `python3` process of its own.
    Python(PythonLib),
    /// A classic lock design (`reports/designs.md`), its client the simulator's design code
    /// over real connections; on one node, or RedLock's masters for `redlock-no-drift`. Its
    /// cells are the hot lock's only ([`crate::bench::grid`]).
    Design(Design),
}

/// Which topology a contender runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopologyNeed {
    /// One Redis node.
    SingleNode,
    /// This many independent masters (RedLock).
    IndependentMasters(usize),
}

impl Contender {
    /// Every mutual-exclusion contender the benchmark knows, Leasehold first, peers last.
    pub const ALL: [Contender; 9] = [
        Contender::Leasehold(WaitKind::Spin),
        Contender::Leasehold(WaitKind::PubSub),
        Contender::Leasehold(WaitKind::FairQueue),
        Contender::RedLock,
        Contender::RslockDefault,
        Contender::RslockTuned,
        Contender::RslockRedLock,
        Contender::Python(PythonLib::RedisPy),
        Contender::Python(PythonLib::PythonRedisLock),
    ];

    /// The Python peers (also in [`Contender::ALL`]).
    pub const PYTHON: [Contender; 2] = [
        Contender::Python(PythonLib::RedisPy),
        Contender::Python(PythonLib::PythonRedisLock),
    ];

    /// The classic mutex designs the benchmark runs (the read-write designs draw each
    /// acquisition's mode themselves, so their cells would not be the read-write grid's).
    pub const DESIGNS: [Contender; 7] = [
        Contender::Design(Design::SetnxThenExpire),
        Contender::Design(Design::SetnxGetset),
        Contender::Design(Design::SetNxPxDel),
        Contender::Design(Design::SetNxPxCad),
        Contender::Design(Design::HashWatchdog),
        Contender::Design(Design::ZsetQueue),
        Contender::Design(Design::RedlockNoDrift),
    ];

    /// The read-write lock contenders: the FIFO line against the current default, PubSub
    /// (rslock has no read-write lock to compare with).
    pub const RWLOCK: [Contender; 2] = [
        Contender::RwLock(WaitKind::FairQueue),
        Contender::RwLock(WaitKind::PubSub),
    ];

    /// Human label used in tables and legends.
    pub fn label(self) -> &'static str {
        match self {
            Contender::Leasehold(WaitKind::Spin) => "leasehold Spin",
            Contender::Leasehold(WaitKind::PubSub) => "leasehold PubSub",
            Contender::Leasehold(WaitKind::FairQueue) => "leasehold FairQueue",
            Contender::RwLock(WaitKind::Spin) => "leasehold rwlock Spin",
            Contender::RwLock(WaitKind::PubSub) => "leasehold rwlock PubSub",
            Contender::RwLock(WaitKind::FairQueue) => "leasehold rwlock FairQueue",
            Contender::RedLock => "leasehold RedLock (5 masters)",
            Contender::RslockDefault => "rslock (default retry)",
            Contender::RslockTuned => "rslock (10 ms retry)",
            Contender::RslockRedLock => "rslock RedLock (5 masters)",
            Contender::Python(PythonLib::RedisPy) => "redis-py Lock (0.1 s sleep)",
            Contender::Python(PythonLib::PythonRedisLock) => "python-redis-lock (BLPOP hand-off)",
            Contender::Design(design) => design.name(),
        }
    }

    /// Peers are the comparison baseline, not the product.
    pub fn is_peer(self) -> bool {
        matches!(
            self,
            Contender::RslockDefault
                | Contender::RslockTuned
                | Contender::RslockRedLock
                | Contender::Python(_)
                | Contender::Design(_)
        )
    }

    /// A read-write lock: its cells have readers and writers, and their own report section.
    pub fn is_rwlock(self) -> bool {
        matches!(self, Contender::RwLock(_))
    }

    /// The peer a contender is compared with: rslock's RedLock for RedLock, the read-write
    /// lock's default strategy (PubSub) for the read-write lock, rslock's default profile on
    /// one node for everything else (itself for that profile).
    pub fn peer(self) -> Contender {
        match self {
            Contender::RedLock
            | Contender::RslockRedLock
            | Contender::Design(Design::RedlockNoDrift) => Contender::RslockRedLock,
            Contender::RwLock(_) => Contender::RwLock(WaitKind::PubSub),
            _ => Contender::RslockDefault,
        }
    }

    /// The peer a contender is compared with at (about) equal fairness: rslock with its 10 ms
    /// retry, whose Jain's index is near FairQueue's where the default profile barges, for the
    /// single-node strategies; rslock's RedLock (its only profile here) for RedLock; the
    /// read-write lock's PubSub for the read-write lock, as in [`Contender::peer`].
    pub fn fair_peer(self) -> Contender {
        match self {
            Contender::RedLock
            | Contender::RslockRedLock
            | Contender::Design(Design::RedlockNoDrift) => Contender::RslockRedLock,
            Contender::RwLock(_) => Contender::RwLock(WaitKind::PubSub),
            _ => Contender::RslockTuned,
        }
    }

    /// The topology the contender's cells run on.
    pub fn topology(self) -> TopologyNeed {
        match self {
            Contender::Leasehold(_)
            | Contender::RwLock(_)
            | Contender::RslockDefault
            | Contender::RslockTuned
            | Contender::Python(_) => TopologyNeed::SingleNode,
            Contender::RedLock | Contender::RslockRedLock => {
                TopologyNeed::IndependentMasters(REDLOCK_MASTERS)
            }
            Contender::Design(design) => match design.strategy() {
                Strategy::RedLock => TopologyNeed::IndependentMasters(REDLOCK_MASTERS),
                _ => TopologyNeed::SingleNode,
            },
        }
    }

    /// Plain (script-callable) commands this contender's client sends itself; see
    /// [`crate::bench::commandstats`] for how round trips are attributed.
    pub fn direct_commands(self) -> &'static [&'static str] {
        match self {
            Contender::Leasehold(_) | Contender::RwLock(_) | Contender::RedLock => {
                leasehold_client::DIRECT_COMMANDS
            }
            Contender::RslockDefault | Contender::RslockTuned | Contender::RslockRedLock => {
                peer_rslock::DIRECT_COMMANDS
            }
            Contender::Python(lib) => lib.direct_commands(),
            Contender::Design(design) => peer_design::direct_commands(design),
        }
    }

    /// Those of [`Self::direct_commands`] that the contender's scripts also call, once per
    /// script call (see [`crate::bench::commandstats`]).
    pub fn scripted_commands(self) -> &'static [&'static str] {
        match self {
            Contender::Python(lib) => lib.scripted_commands(),
            _ => &[],
        }
    }
}

/// One client of a contender, with its own connection(s), as a separate process would have.
#[derive(Debug)]
pub enum ContenderClient {
    /// A Leasehold client.
    Leasehold(LeaseholdClient),
    /// An rslock lock manager.
    Rslock(RslockClient),
    /// A Python worker process (boxed: its pipes make it the largest arm by far).
    Python(Box<PythonClient>),
    /// A classic design's client.
    Design(DesignClient),
}

/// A lock held through a [`ContenderClient`].
#[derive(Debug)]
pub enum ContenderHeld {
    /// Held through Leasehold.
    Leasehold(LeaseholdHeld),
    /// Held through rslock.
    Rslock(RslockHeld),
    /// Held through a Python worker.
    Python(PythonHeld),
    /// Held through a design's client.
    Design(DesignHeld),
}

impl ContenderClient {
    /// Connects one client of `contender` to the servers at `urls`.
    pub async fn connect(contender: Contender, urls: &[String]) -> Result<Self> {
        Ok(match contender {
            Contender::Leasehold(kind) => {
                ContenderClient::Leasehold(LeaseholdClient::connect(urls, kind).await?)
            }
            Contender::RwLock(kind) => {
                ContenderClient::Leasehold(LeaseholdClient::connect_rwlock(urls, kind).await?)
            }
            Contender::RedLock => {
                ContenderClient::Leasehold(LeaseholdClient::connect_redlock(urls).await?)
            }
            Contender::RslockDefault | Contender::RslockRedLock => {
                ContenderClient::Rslock(RslockClient::new(urls, None)?)
            }
            Contender::RslockTuned => {
                ContenderClient::Rslock(RslockClient::new(urls, Some(RSLOCK_TUNED_RETRY))?)
            }
            Contender::Python(lib) => {
                ContenderClient::Python(Box::new(PythonClient::connect(lib, urls).await?))
            }
            Contender::Design(design) => {
                ContenderClient::Design(DesignClient::connect(urls, design, LEASE_TTL).await?)
            }
        })
    }

    /// Waits until the lock `name` is held with `access` (a read only where the lock has
    /// read holds: the read-write lock).
    pub async fn acquire(&self, name: &str, access: Access) -> Result<ContenderHeld> {
        match (self, access) {
            (ContenderClient::Leasehold(client), _) => client
                .acquire(name, LEASE_TTL, access)
                .await
                .map(ContenderHeld::Leasehold),
            (ContenderClient::Rslock(client), Access::Write) => client
                .acquire(name, LEASE_TTL)
                .await
                .map(ContenderHeld::Rslock),
            (ContenderClient::Python(client), Access::Write) => client
                .acquire(name, LEASE_TTL)
                .await
                .map(ContenderHeld::Python),
            (ContenderClient::Design(client), Access::Write) => {
                client.acquire(name).await.map(ContenderHeld::Design)
            }
            (
                ContenderClient::Rslock(_)
                | ContenderClient::Python(_)
                | ContenderClient::Design(_),
                Access::Read,
            ) => Err(access::no_read_hold(name)),
        }
    }

    /// Releases a lock this client holds.
    pub async fn release(&self, held: ContenderHeld) -> Result<()> {
        match (self, held) {
            (ContenderClient::Leasehold(client), ContenderHeld::Leasehold(held)) => {
                client.release(held).await
            }
            (ContenderClient::Rslock(client), ContenderHeld::Rslock(held)) => {
                client.release(held).await;
                Ok(())
            }
            (ContenderClient::Python(client), ContenderHeld::Python(held)) => {
                client.release(held).await
            }
            (ContenderClient::Design(client), ContenderHeld::Design(held)) => {
                client.release(held).await;
                Ok(())
            }
            (_, _) => Err(Error::Lock {
                name: "(bench)".to_owned(),
                reason: "a guard was released through another contender's client".to_owned(),
            }),
        }
    }

    /// CPU time the client's own process has used so far: a Python peer's worker; zero for
    /// the clients that live in the bench process, whose CPU the bench's own count holds.
    pub async fn own_process_cpu(&self) -> Result<Duration> {
        match self {
            ContenderClient::Python(client) => client.cpu().await,
            ContenderClient::Leasehold(_)
            | ContenderClient::Rslock(_)
            | ContenderClient::Design(_) => Ok(Duration::ZERO),
        }
    }
}
