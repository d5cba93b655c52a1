//! The workload room: what the simulated clients are asked to do ([`Workload`]), the lock
//! loop that does it ([`client`]) through the production lock [`family`], and the client
//! paths a run took ([`client_marks`]).
//!
//! Room rule: the workload drives the production client through the world's seams and
//! never judges; the checker does not import it, so a verdict cannot depend on what a
//! client was told to do.
//!
//! What the simulated clients are asked to do: the lock algorithm under test and the
//! shape of the lock loop (TTL, hold and think times, timeouts, how many locks).
//!
//! A plain description with no behaviour, so the lock [`crate::workload::family`] that builds locks
//! from it and the [`crate::workload::client`] loop that runs it both sit above it.
//!
//! May import: engine, model, world.

pub mod client;
pub mod client_marks;
pub mod designs;
pub mod family;
pub mod scoped;
pub mod sizing;

use std::time::Duration;

use leasehold::WaitStrategy;
use serde::{Deserialize, Serialize};

/// The lock algorithms under test.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
pub enum Strategy {
    /// Single node, jittered exponential backoff polling.
    Spin,
    /// Single node, wake on the release message.
    PubSub,
    /// Single node, FIFO queue with server-side hand-off.
    FairQueue,
    /// N independent masters with a quorum (`leasehold::RedLock`, one client per master).
    RedLock,
}

impl Strategy {
    /// Every strategy, in table order.
    pub const ALL: [Strategy; 4] = [Self::Spin, Self::PubSub, Self::FairQueue, Self::RedLock];

    /// The table name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Spin => "Spin",
            Self::PubSub => "PubSub",
            Self::FairQueue => "FairQueue",
            Self::RedLock => "RedLock",
        }
    }

    /// The single-node wait strategy (RedLock retries with its own random delay; each of
    /// its per-master clients keeps the default), FairQueue with `entry_timeout` if given.
    pub fn wait(self, entry_timeout: Option<Duration>) -> WaitStrategy {
        match (self, entry_timeout) {
            (Self::Spin, _) => WaitStrategy::spin(),
            (Self::FairQueue, Some(entry_timeout)) => WaitStrategy::FairQueue { entry_timeout },
            (Self::FairQueue, None) => WaitStrategy::fair_queue(),
            (Self::PubSub | Self::RedLock, _) => WaitStrategy::PubSub,
        }
    }
}

/// One client's behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Wait strategy.
    pub strategy: Strategy,
    /// Lease TTL.
    #[serde(with = "crate::engine::duration_text")]
    pub ttl: Duration,
    /// Whether the watchdog renews the lease.
    pub watchdog: bool,
    /// Hold time range (uniform), in true-ish time (the client's own clock).
    #[serde(with = "crate::engine::duration_text::pair")]
    pub hold: (Duration, Duration),
    /// Pause between operations (uniform).
    #[serde(with = "crate::engine::duration_text::pair")]
    pub think: (Duration, Duration),
    /// Give up waiting after this long (none: wait forever).
    #[serde(default, with = "crate::engine::duration_text::option")]
    pub acquire_timeout: Option<Duration>,
    /// Operations per client incarnation (none: until the horizon).
    pub ops: Option<u64>,
    /// Number of distinct lock names clients pick from.
    pub locks: usize,
    /// A second hold of the same owner on each lock taken (single-node strategies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reentry: Option<Reentry>,
    /// How many holds a nested re-entry takes, each inside the last (the innermost is
    /// kept for the re-entry's `work`, then they are released innermost first); one when
    /// unset, as every spec written before it.
    #[serde(default = "one_level", skip_serializing_if = "is_one_level")]
    pub reentry_depth: u8,
    /// How long fence keys outlive their lock (the library's default when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(with = "crate::engine::duration_text::option")]
    pub fence_margin: Option<Duration>,
    /// Which member of the lock family the clients take (single-node strategies only for
    /// the read-write lock and the semaphore).
    #[serde(default)]
    pub kind: LockKind,
    /// The holder keeps its lease itself with `extend()` every half TTL of holding (the
    /// way a caller without the watchdog keeps a long hold), and stops believing when an
    /// extension fails.
    #[serde(default)]
    pub extend: bool,
    /// Percent of acquires made as one attempt (`try_lock`, `try_read`, `try_write`,
    /// `try_acquire`) that fails at once when the lock is taken.
    #[serde(default)]
    pub try_percent: u8,
    /// Acquires abandoned mid-flight: the acquire future is dropped after a random delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<Cancel>,
    /// Replicas each single-node mutex grant waits for (`wait_replicas`), on a replicated
    /// deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_replicas: Option<WaitReplicas>,
    /// FairQueue's entry timeout (the library's default when unset); a waiter refreshes
    /// its entry three times per timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(with = "crate::engine::duration_text::option")]
    pub entry_timeout: Option<Duration>,
    /// A semaphore's sizes beyond one shared count: counts that differ across the run's
    /// clients, and resizes made while permits are held (semaphore runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<SemaphoreSizes>,
    /// Percent of a read-write re-entry run's read holds whose holder first asks to write
    /// as the same owner (an upgrade, which the library refuses with `UpgradeRefused`)
    /// before it re-enters as a reader.
    #[serde(default)]
    pub upgrade_percent: u8,
    /// Percent of a read-write run's write holds whose holder turns them into read holds
    /// (`WriteGuard::downgrade`) before the work.
    #[serde(default)]
    pub downgrade_percent: u8,
    /// Waiting acquires with a deadline of their own (`lock_within`), RedLock runs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadlines: Option<Deadlines>,
    /// Percent of a single-node mutex run's acquires made as scoped work (`Mutex::run`),
    /// each finishing, outliving its lease or panicking, at random.
    #[serde(default)]
    pub run_percent: u8,
    /// Another lock design the clients run instead of Leasehold's (on the strategy's
    /// deployment; the fields above that only Leasehold's family has are ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<designs::Design>,
}

/// Which waiting acquires pass a deadline of their own (`lock_within(t)`), and how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deadlines {
    /// Percent of waiting acquires made with a deadline.
    pub percent: u8,
    /// Each such acquire's deadline is uniform in `[0, longest]` of the client's clock.
    #[serde(with = "crate::engine::duration_text")]
    pub longest: Duration,
}

/// How a semaphore run's clients size it, through the library's own API: the number each
/// passes to `Client::semaphore`, and `Semaphore::resize` while holding a permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SemaphoreSizes {
    /// Client `i` asks for the workload's permits plus `i % spread` (1: every client the
    /// same), so while one count is stored the others are refused as mismatched.
    pub spread: u32,
    /// Percent of held permits whose holder resizes the semaphore, to a size uniform in
    /// `[1, permits + spread]` (so both grows and shrinks), and asks for that size from
    /// then on, as the library's resized handle does.
    pub resize_percent: u8,
}

/// Which acquires are cancelled, and how soon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cancel {
    /// Percent of acquires cancelled.
    pub percent: u8,
    /// The acquire future is dropped after a delay uniform in `[0, within]` of the
    /// client's clock (if it has not finished by then).
    #[serde(with = "crate::engine::duration_text")]
    pub within: Duration,
}

/// `WAIT numreplicas timeout` after every grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitReplicas {
    /// Replicas to wait for.
    pub replicas: u32,
    /// How long `WAIT` blocks at most.
    #[serde(with = "crate::engine::duration_text")]
    pub timeout: Duration,
}

/// The member of the lock family a workload drives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockKind {
    /// The mutex (RedLock's, under [`Strategy::RedLock`]).
    #[default]
    Mutex,
    /// The read-write lock: each acquisition reads with this probability (percent), else
    /// writes. Single-node strategies only (FairQueue waits in its fair line).
    ReadWrite {
        /// Percent of acquisitions that read.
        read_percent: u8,
    },
    /// The semaphore with this many permits.
    Semaphore {
        /// Permits.
        permits: u32,
    },
}

/// How a client takes a second hold of the owner it holds a lock as: the re-entry paths
/// whose holds must share one epoch's lease and token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reentry {
    /// While holding, re-enter with this (shorter) TTL and release the inner hold after
    /// `work`: the outer hold's lease must not shrink to the inner one's.
    Nested {
        /// The inner hold's TTL.
        #[serde(with = "crate::engine::duration_text")]
        ttl: Duration,
        /// How long the inner hold is kept before its release (none by default).
        #[serde(default)]
        #[serde(with = "crate::engine::duration_text")]
        work: Duration,
    },
    /// A sibling acquire of the same owner waits beside the main one (with this TTL);
    /// whichever is granted second re-enters the first one's epoch, and must get its token.
    Sibling {
        /// The sibling's TTL.
        #[serde(with = "crate::engine::duration_text")]
        ttl: Duration,
    },
}

impl Workload {
    /// A contended default: 1 s leases, 20-200 ms holds, short think times, one lock.
    pub fn contended(strategy: Strategy) -> Self {
        Self {
            strategy,
            ttl: Duration::from_secs(1),
            watchdog: true,
            hold: (Duration::from_millis(20), Duration::from_millis(200)),
            think: (Duration::from_millis(0), Duration::from_millis(50)),
            acquire_timeout: Some(Duration::from_secs(10)),
            ops: None,
            locks: 1,
            reentry: None,
            reentry_depth: 1,
            fence_margin: None,
            kind: LockKind::Mutex,
            extend: false,
            try_percent: 0,
            cancel: None,
            wait_replicas: None,
            entry_timeout: None,
            sizes: None,
            upgrade_percent: 0,
            downgrade_percent: 0,
            deadlines: None,
            run_percent: 0,
            design: None,
        }
    }
}

/// A nested re-entry's depth unless a spec says otherwise: one hold inside the outer one.
fn one_level() -> u8 {
    1
}

/// Whether `depth` is the default, which specs leave out.
fn is_one_level(depth: &u8) -> bool {
    *depth == one_level()
}
