//! `client.mutex(name)`: a lease mutex handle with its settings, and the acquire loop.
//!
//! Invariants: every attempt of one acquire call reuses the same hold id (so a retry after a
//! lost reply never counts twice); an ambiguous reply is resolved by a read-only probe before
//! anything else; and from the first send until a guard exists, a [`PendingRelease`] stands
//! ready to release whatever the attempt left behind if the call ends any other way.

use std::sync::Arc;
use std::time::Duration;

use redis::RedisError;
use tracing::Instrument;

use crate::backoff::{Backoff, Retry};
use crate::client::Shared;
use crate::error::{Error, Result};
use crate::fencing::FencingToken;
use crate::guard::Guard;
use crate::hold::{Hold, PendingRelease};
use crate::lease::{Lease, validate_ttl};
use crate::owner::{MAX_OWNER_LEN, Owner};
use crate::protocol::{self, Acquire, CallError, LockRef, Probe};
use crate::replication::Replication;
use crate::wait::{WaitContext, WaitStrategy, Waiter};

/// Default lease TTL: 30 s, Redisson's `lockWatchdogTimeout`. Long enough to ride out GC
/// pauses and reconnects with the watchdog on; how long a crashed holder blocks others.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// The watchdog is on by default: a lease outlives its TTL while its guard lives, and
/// `lost()` reports a renewal failure.
pub const DEFAULT_WATCHDOG: bool = true;

/// Settings of one mutex handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Config {
    pub(crate) ttl: Duration,
    pub(crate) wait: WaitStrategy,
    pub(crate) watchdog: bool,
    /// Deadline of `lock()`; `None` waits until acquired.
    pub(crate) acquire_timeout: Option<Duration>,
    /// Caller-chosen owner id; `None` gives each acquire call its own owner.
    pub(crate) owner: Option<String>,
    /// `WAIT` for replicas after each acquire; `None` does not wait.
    pub(crate) replication: Option<Replication>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            ttl: DEFAULT_TTL,
            wait: WaitStrategy::default(),
            watchdog: DEFAULT_WATCHDOG,
            acquire_timeout: None,
            owner: None,
            replication: None,
        }
    }
}

/// How long an acquire call may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mode {
    /// One attempt; never queue.
    Try,
    /// Wait, until the deadline if any.
    Wait(Option<Duration>),
}

/// A named lease mutex with its settings. Cheap to clone; settings are builder methods.
///
/// Defaults come from the [`ClientBuilder`](crate::ClientBuilder): TTL [`DEFAULT_TTL`],
/// watchdog [`DEFAULT_WATCHDOG`], wait [`WaitStrategy::PubSub`], no acquire timeout, and a
/// fresh owner per acquire call (no re-entry except through [`Guard::reenter`]).
#[derive(Clone)]
pub struct Mutex {
    shared: Arc<Shared>,
    name: String,
    config: Config,
}

impl std::fmt::Debug for Mutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Mutex {
    pub(crate) fn new(shared: Arc<Shared>, name: String, config: Config) -> Self {
        Self {
            shared,
            name,
            config,
        }
    }

    /// Lease TTL, within [`MIN_TTL`](crate::MIN_TTL)..=[`MAX_TTL`](crate::MAX_TTL).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.config.ttl = ttl;
        self
    }

    /// How to wait while the lock is busy.
    pub fn wait(mut self, strategy: WaitStrategy) -> Self {
        self.config.wait = strategy;
        self
    }

    /// Renew the lease every TTL/3 while a guard lives.
    pub fn watchdog(mut self, enabled: bool) -> Self {
        self.config.watchdog = enabled;
        self
    }

    /// Deadline for [`Mutex::lock`] (default: wait until acquired).
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.config.acquire_timeout = Some(timeout);
        self
    }

    /// A caller-chosen owner id, scoped to this client: every acquire with the same owner
    /// re-enters the lock (hold count + 1, TTL refreshed, same fencing token) instead of
    /// waiting. Use one id per logical actor (a job, a request), not per thread.
    pub fn owner(mut self, id: impl Into<String>) -> Self {
        self.config.owner = Some(id.into());
        self
    }

    /// After each acquire, runs `WAIT replicas timeout` and reports on the guard how many
    /// replicas acknowledged ([`Guard::replicas_acked`]). This narrows, but does not close,
    /// the window in which a failover loses the lock (see the crate docs); `timeout` must be
    /// at least 1 ms. Works on any backend (on Cluster, the minimum over all masters).
    pub fn wait_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.config.replication = Some(Replication { replicas, timeout });
        self
    }

    /// Waits for the lock (until the acquire timeout, if set).
    pub async fn lock(&self) -> Result<Guard> {
        self.acquire(Mode::Wait(self.config.acquire_timeout)).await
    }

    /// Waits for the lock for at most `timeout`, then fails with [`Error::Timeout`]
    /// having left nothing held or queued.
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<Guard> {
        self.acquire(Mode::Wait(Some(timeout))).await
    }

    /// One attempt: the lock, or [`Error::WouldBlock`].
    pub async fn try_lock(&self) -> Result<Guard> {
        self.acquire(Mode::Try).await
    }

    async fn acquire(&self, mode: Mode) -> Result<Guard> {
        let lock = LockRef::new(&self.name)?;
        validate_ttl(&self.name, self.config.ttl)?;
        self.config.wait.validate(&self.name)?;
        let owner = owner_for(&self.shared, &self.name, &self.config)?;
        let hold = Hold::new(
            Arc::clone(&self.shared),
            Arc::new(lock),
            owner,
            Arc::new(self.config.clone()),
        );
        acquire(hold, mode).await
    }
}

/// The owner of one acquire call under `config`: the caller-chosen id, or a fresh one.
pub(crate) fn owner_for(shared: &Shared, name: &str, config: &Config) -> Result<Owner> {
    match &config.owner {
        Some(id) if id.is_empty() || id.len() > MAX_OWNER_LEN => Err(Error::InvalidConfig {
            name: name.to_owned(),
            reason: format!("owner id must be 1..={MAX_OWNER_LEN} bytes"),
        }),
        Some(id) => Ok(Owner::chosen(&shared.id, id)),
        None => Ok(Owner::fresh(&shared.id, &shared.owners)),
    }
}

/// Acquires `hold` (a fresh hold id for the owner) in `mode`.
pub(crate) async fn acquire(hold: Arc<Hold>, mode: Mode) -> Result<Guard> {
    let span = hold.span.clone();
    if let Some(replication) = hold.config.replication {
        replication.validate(&hold.lock.name)?;
    }
    let mut guard = attempt_loop(hold, mode).instrument(span.clone()).await?;
    if let Some(replication) = guard.hold().config.replication {
        let acked = replication
            .acknowledged(&guard.hold().shared)
            .instrument(span)
            .await;
        guard.set_replicas_acked(acked);
    }
    Ok(guard)
}

async fn attempt_loop(hold: Arc<Hold>, mode: Mode) -> Result<Guard> {
    let shared = &hold.shared;
    let clock = &shared.runtime.clock;
    let config = &hold.config;
    let name = &hold.lock.name;
    let start = clock.now();
    let deadline = match mode {
        Mode::Try => None,
        Mode::Wait(timeout) => timeout.map(|t| start.saturating_add(t)),
    };
    let entry_timeout = match config.wait {
        WaitStrategy::FairQueue { entry_timeout } => entry_timeout,
        WaitStrategy::Spin(_) | WaitStrategy::PubSub => Duration::ZERO,
    };
    let mut pending = PendingRelease::new(Arc::clone(&hold), config.ttl.max(entry_timeout));
    // A try never waits, so it neither listens nor queues.
    let waiting = matches!(mode, Mode::Wait(_));
    let mut waiter = waiting.then(|| {
        Waiter::new(
            config.wait,
            WaitContext {
                runtime: shared.runtime.clone(),
                notifier: Arc::clone(&shared.notifier),
                released: hold.lock.keys.released.clone(),
                hold: hold.id.as_str().to_owned(),
                ttl: config.ttl,
            },
        )
    });
    loop {
        if let Some(waiter) = &mut waiter {
            let prepare = waiter.prepare();
            if let Some(deadline) = deadline {
                // Past the deadline the attempt below runs without a confirmed subscription.
                let left = deadline.saturating_sub(clock.now());
                let _ = shared.runtime.timeout(left, prepare).await;
            } else {
                prepare.await;
            }
        }
        let queue_entry = waiter.as_ref().and_then(Waiter::queue_entry);
        pending.arm();
        let sent = clock.now();
        let attempt = hold.acquire_once(queue_entry, waiting);
        let reply = protocol::within(&shared.runtime, deadline, attempt).await;
        let busy = match reply {
            Ok(Acquire::Acquired(token)) => {
                let lease = Lease::new(Arc::clone(clock), config.ttl, sent, config.ttl);
                if !lease.is_lost() {
                    pending.disarm();
                    return Ok(Guard::new(hold, token, lease));
                }
                // The grant's reply came after its lease could be trusted (a command queued
                // through an outage and run when the node came back): a guard would be born
                // lost. Give the grant back and try again at once — with the same hold id
                // only if the release is confirmed, since a release still in flight could
                // delete a later grant.
                tracing::debug!("grant arrived too late to trust; releasing and retrying");
                if !pending.release_now().await {
                    return Err(Error::LeaseLost { name: name.clone() });
                }
                continue;
            }
            Ok(Acquire::Busy(pttl)) => {
                if queue_entry.is_none() && !hold.kind.leaves_intent(waiting) {
                    // A busy reply without queueing left nothing of ours on the server.
                    pending.disarm();
                }
                pttl
            }
            Err(CallError::Transport(err)) => match resolve(&hold, sent, deadline, err).await? {
                Some((token, lease)) => {
                    pending.disarm();
                    return Ok(Guard::new(hold, token, lease));
                }
                None => None,
            },
            Err(CallError::Failed(err)) => {
                if queue_entry.is_none() {
                    // A script that failed before queueing wrote nothing (see acquire.lua).
                    pending.disarm();
                }
                return Err(err);
            }
        };
        let now = clock.now();
        let Some(waiter) = &mut waiter else {
            pending.disarm();
            return Err(Error::WouldBlock {
                name: name.clone(),
                retry_after: busy,
            });
        };
        if deadline.is_some_and(|d| now >= d) {
            pending.release_now().await;
            return Err(Error::Timeout {
                name: name.clone(),
                waited: now - start,
            });
        }
        waiter.wait(busy, deadline.map(|d| d - now)).await;
    }
}

/// After a lost acquire reply: probes (read-only) whether the hold owns the lock, retrying
/// until the attempt's lease would have run out or the acquire deadline passes.
async fn resolve(
    hold: &Hold,
    sent: Duration,
    deadline: Option<Duration>,
    err: RedisError,
) -> Result<Option<(FencingToken, Lease)>> {
    let runtime = &hold.shared.runtime;
    let ttl = hold.config.ttl;
    let lease_end = sent.saturating_add(ttl);
    let give_up_at = deadline.map_or(lease_end, |d| d.min(lease_end));
    let mut retry = Retry::new(Backoff::RECONNECT);
    let mut last = err;
    loop {
        tracing::debug!(error = %last, "acquire outcome unknown; probing");
        let probe_sent = runtime.clock.now();
        match protocol::within(runtime, Some(give_up_at), hold.probe_once()).await {
            Ok(Probe::Held(token, pttl)) => {
                let lease = Lease::new(Arc::clone(&runtime.clock), ttl, probe_sent, pttl);
                return Ok(Some((token, lease)));
            }
            Ok(Probe::NotHeld) => return Ok(None),
            Err(CallError::Transport(err)) => last = err,
            Err(CallError::Failed(err)) => return Err(err),
        }
        let left = give_up_at.saturating_sub(runtime.clock.now());
        if left.is_zero() {
            return Err(Error::Ambiguous {
                name: hold.lock.name.clone(),
                operation: "acquire",
                source: last,
            });
        }
        runtime
            .clock
            .sleep(retry.next_delay(runtime, Some(left)))
            .await;
    }
}
