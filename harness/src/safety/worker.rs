//! One client process of a safety run: its own `leasehold::Client` (own connections) in a
//! lock loop that records what it *believes* — the same loop as the simulator's workload,
//! so the two histories mean the same thing.
//!
//! Invariant: a hold is believed from `lock()` returning until the worker calls `unlock()`
//! or observes `lost()`; the first and last write of every hold go to the shared fenced
//! resource, and a "paused" hold (holder-pause) ignores `lost()` and writes after the pause,
//! as a process frozen by GC would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::{Either, select};
use leasehold::{Client, Guard, RedLock, RedLockGuard};
use leasehold_sim::history::{Access, HistKind};
use leasehold_sim::net::ProcId;
use leasehold_sim::workload::Strategy;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::safety::resource::Resource;
use crate::safety::run_history::RunHistory;

/// Pause after a failed acquire before the next attempt, so a worker facing a dead node
/// retries a few times per TTL instead of spinning on connection errors.
const FAILED_ACQUIRE_BACKOFF: Duration = Duration::from_millis(50);

/// Where a worker's Redis lives.
#[derive(Debug, Clone)]
pub enum RedisTarget {
    /// One node (possibly through a [`Link`](crate::safety::link::Link)).
    Single(String),
    /// A Sentinel-monitored master: Sentinel URLs and the service name.
    Sentinel(Vec<String>, String),
    /// Independent masters (RedLock), one URL each.
    Masters(Vec<String>),
}

/// How a worker uses its lock.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// Wait strategy (RedLock for the multi-master target).
    pub strategy: Strategy,
    /// Lease TTL.
    pub ttl: Duration,
    /// Whether the watchdog renews the lease.
    pub watchdog: bool,
    /// Hold time range (uniform).
    pub hold: (Duration, Duration),
    /// Pause between operations (uniform).
    pub think: (Duration, Duration),
    /// Deadline of each `lock()`.
    pub acquire_timeout: Duration,
    /// Holder-pause: on the first hold that starts after `after` (run time), freeze for
    /// `pause` without looking at `lost()`, then write and release.
    pub pause: Option<PausePlan>,
    /// Whether each acquire `WAIT`s for [`WAIT_REPLICAS`] (the count goes to the [`Board`]).
    pub wait_replicas: bool,
}

/// Replicas a `wait_replicas` acquire waits for: the Sentinel topology's one.
pub const WAIT_REPLICAS: u32 = 1;
/// How long such an acquire waits for them: replication on the local bridge takes well
/// under a millisecond, so 100 ms only runs out when the replica really lacks the write.
const WAIT_REPLICAS_TIMEOUT: Duration = Duration::from_millis(100);

/// When and how long a worker's process "freezes" while holding.
#[derive(Debug, Clone, Copy)]
pub struct PausePlan {
    /// Run time from which the next hold is paused.
    pub after: Duration,
    /// Length of the freeze.
    pub pause: Duration,
}

/// RunContext view of who holds the lock now, for fault injectors that target the holder.
#[derive(Debug, Default)]
pub struct Board {
    holder: AtomicUsize,
    paused: AtomicBool,
    /// Replicas that acknowledged the latest grant, +1 (0: not asked).
    acked: AtomicUsize,
}

/// Board value for "nobody".
const NOBODY: usize = 0;

impl Board {
    /// The process that believes it holds the lock, if any.
    pub fn holder(&self) -> Option<ProcId> {
        match self.holder.load(Ordering::SeqCst) {
            NOBODY => None,
            n => Some(n - 1),
        }
    }

    /// Whether a planned holder pause has happened.
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// How many replicas acknowledged the latest grant (`None` without `wait_replicas`).
    pub fn replicas_acked(&self) -> Option<u32> {
        match self.acked.load(Ordering::SeqCst) {
            0 => None,
            n => u32::try_from(n - 1).ok(),
        }
    }

    fn set(&self, proc: Option<ProcId>) {
        self.holder
            .store(proc.map_or(NOBODY, |p| p + 1), Ordering::SeqCst);
    }
}

/// The lock of one worker.
#[derive(Debug)]
enum Lock {
    Mutex(leasehold::Mutex),
    RedLock(RedLock),
}

enum HeldLock {
    Mutex(Guard),
    RedLock(RedLockGuard),
}

impl HeldLock {
    fn token(&self) -> u64 {
        match self {
            HeldLock::Mutex(g) => g.fencing_token().get(),
            HeldLock::RedLock(g) => g.fencing_token().get(),
        }
    }

    fn replicas_acked(&self) -> Option<u32> {
        match self {
            HeldLock::Mutex(g) => g.replicas_acked(),
            HeldLock::RedLock(_) => None,
        }
    }

    async fn lost(&self) {
        match self {
            HeldLock::Mutex(g) => g.lost().await,
            HeldLock::RedLock(g) => g.lost().await,
        }
    }

    async fn unlock(self) -> leasehold::Result<()> {
        match self {
            HeldLock::Mutex(g) => g.unlock().await,
            HeldLock::RedLock(g) => g.unlock().await,
        }
    }
}

impl Lock {
    async fn lock(&self) -> leasehold::Result<HeldLock> {
        match self {
            Lock::Mutex(m) => m.lock().await.map(HeldLock::Mutex),
            Lock::RedLock(r) => r.lock().await.map(HeldLock::RedLock),
        }
    }
}

/// What every worker of a run shares.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The history.
    pub history: Arc<RunHistory>,
    /// The protected resource.
    pub resource: Arc<Resource>,
    /// Who holds.
    pub board: Arc<Board>,
    /// Flips to true when the run's horizon is reached.
    pub stop: watch::Receiver<bool>,
}

/// A connected worker, ready to run.
#[derive(Debug)]
pub struct Worker {
    proc: ProcId,
    name: String,
    lock: Lock,
    behaviour: Behaviour,
}

fn lock_error(name: &str, what: &str, err: leasehold::Error) -> Error {
    Error::Lock {
        name: name.to_owned(),
        reason: format!("{what}: {err}"),
    }
}

impl Worker {
    /// Connects process `proc` to `target` (its own client, hence its own connections).
    pub async fn connect(
        proc: ProcId,
        target: &RedisTarget,
        name: &str,
        behaviour: Behaviour,
    ) -> Result<Self> {
        let builder = || {
            Client::builder()
                .ttl(behaviour.ttl)
                .wait(behaviour.strategy.wait())
                .watchdog(behaviour.watchdog)
        };
        let mutex = |client: Client| {
            let mutex = client
                .mutex(name)
                .acquire_timeout(behaviour.acquire_timeout);
            Lock::Mutex(if behaviour.wait_replicas {
                mutex.wait_replicas(WAIT_REPLICAS, WAIT_REPLICAS_TIMEOUT)
            } else {
                mutex
            })
        };
        let lock = match target {
            RedisTarget::Single(url) => mutex(
                builder()
                    .connect(url)
                    .await
                    .map_err(|e| lock_error(name, "connect", e))?,
            ),
            RedisTarget::Sentinel(urls, service) => mutex(
                builder()
                    .sentinel(urls, service)
                    .await
                    .map_err(|e| lock_error(name, "connect via Sentinel", e))?,
            ),
            RedisTarget::Masters(urls) => {
                let mut clients = Vec::with_capacity(urls.len());
                for url in urls {
                    clients.push(
                        builder()
                            .connect(url)
                            .await
                            .map_err(|e| lock_error(name, "connect to a master", e))?,
                    );
                }
                Lock::RedLock(
                    RedLock::new(clients, name)
                        .ttl(behaviour.ttl)
                        .watchdog(behaviour.watchdog)
                        .acquire_timeout(behaviour.acquire_timeout),
                )
            }
        };
        Ok(Self {
            proc,
            name: name.to_owned(),
            lock,
            behaviour,
        })
    }

    /// Runs the lock loop until the stop signal.
    pub async fn run(self, context: RunContext) {
        let Worker {
            proc,
            name,
            lock,
            behaviour,
        } = self;
        let history = &context.history;
        let mut stop = context.stop.clone();
        let mut pause = behaviour.pause;
        while !*stop.borrow() {
            tokio::time::sleep(uniform(behaviour.think)).await;
            history.record(proc, &name, HistKind::WaitStart);
            let attempt = tokio::select! {
                held = lock.lock() => held,
                _ = stop.wait_for(|s| *s) => {
                    // Dropping the acquire future is cancellation-safe (docs/DESIGN.md §2).
                    history.record(proc, &name, HistKind::AcquireFailed { error: "run ended".into() });
                    break;
                }
            };
            let held = match attempt {
                Ok(held) => held,
                Err(err) => {
                    history.record(
                        proc,
                        &name,
                        HistKind::AcquireFailed {
                            error: err.to_string(),
                        },
                    );
                    tokio::time::sleep(FAILED_ACQUIRE_BACKOFF).await;
                    continue;
                }
            };
            let token = held.token();
            history.record(
                proc,
                &name,
                HistKind::Acquired {
                    token,
                    access: Access::Exclusive,
                },
            );
            let acked = held.replicas_acked().map_or(0, |n| n as usize + 1);
            context.board.acked.store(acked, Ordering::SeqCst);
            context.board.set(Some(proc));
            context.resource.write(proc, &name, token);
            let now = Duration::from_nanos(history.now_ns());
            if let Some(plan) = pause.filter(|p| now >= p.after) {
                pause = None;
                context.board.paused.store(true, Ordering::SeqCst);
                tracing::debug!(proc, token, "holder pauses");
                // The frozen process neither renews (its watchdog is off) nor looks at lost().
                tokio::time::sleep(plan.pause).await;
                context.resource.write(proc, &name, token);
                history.record(proc, &name, HistKind::Released);
            } else {
                let hold = tokio::time::sleep(uniform(behaviour.hold));
                match select(Box::pin(hold), Box::pin(held.lost())).await {
                    Either::Left(_) => {
                        context.resource.write(proc, &name, token);
                        history.record(proc, &name, HistKind::Released);
                    }
                    Either::Right(_) => {
                        history.record(proc, &name, HistKind::Lost);
                    }
                }
            }
            if context.board.holder() == Some(proc) {
                context.board.set(None);
            }
            // LeaseLost / NotHeld / Ambiguous are the client's business; the checker judges
            // the history.
            if let Err(err) = held.unlock().await {
                tracing::debug!(proc, %err, "unlock");
            }
        }
    }
}

fn uniform((lo, hi): (Duration, Duration)) -> Duration {
    if hi <= lo {
        return lo;
    }
    let span = u64::try_from((hi - lo).as_nanos()).unwrap_or(u64::MAX);
    lo + Duration::from_nanos(rand::random::<u64>() % span.max(1))
}
