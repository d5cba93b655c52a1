//! RedLock: one lease held on a quorum (N/2 + 1) of N independent Redis masters.
//!
//! Invariants: the guard exists only while `start + ttl − drift` (by the acquiring process's
//! clock, `start` taken before the first request) is still ahead and a quorum granted; a
//! down master is a "no" vote, never an error; every failed attempt is released on every
//! master, and the next attempt takes fresh hold ids so that release (possibly late, or
//! retried in the background) never deletes a later grant; each master runs the mutex's
//! own scripts through its own [`Client`]; and a waiting call ends only granted, at its
//! deadline (if any), or at a retry cap the caller set, never after a default count.
//!
//! A call answers as soon as its outcome is decided, not when the slowest master answers:
//! an acquire once a quorum granted (or so many refused that none can), an unlock once a
//! quorum confirmed the release (or so many had no record of the hold that none did).
//! The rest of the masters finish in the background. Why that is safe:
//! - The validity counts from `start`, taken before the first request, so a grant that
//!   lands later only starts a later lease on that master: the bound stays conservative.
//! - A grant the call did not wait for is the same hold (same hold id) as the quorum's:
//!   it is renewed and released with the others, and counts for nobody else. Its release
//!   follows it on the master's one multiplexed connection, which Redis serves in order,
//!   so the grant runs first and the release finds it. Only if the connection breaks in
//!   between can a grant run after its release (the old connection's request read late);
//!   that hold then ends with its lease, as a crashed client's would: a liveness cost on
//!   one master, never a second holder, since the quorum is what grants exclusion and a
//!   stale hold can only refuse others.
//! - An unlock that answers on its quorum leaves at most N − quorum masters still to
//!   release; another client needs a quorum of free masters, so it may meet a refusal
//!   there and retry, never a lock still held by the old owner on a quorum.
//!
//! What RedLock does *not* promise (docs/DESIGN.md §5): a master that restarts without persistence
//! before the TTL, or whose clock jumps, can hand a second quorum out (Kleppmann's
//! critique); waiting `ttl` before restarting a master, or `appendfsync always`, closes the
//! first hole, nothing closes the second. Fencing tokens are per master; see
//! [`RedLockGuard::fencing_token`].

mod guard;
mod quorum;

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::acquire::{self, Mode, acquire_variants};
use crate::client::Client;
use crate::config::{Config, lock_options};
use crate::error::{Error, Result};
use crate::fencing::FencingToken;
use crate::hold::{Hold, HoldKind};
use crate::lease::{CLOCK_DRIFT_DIVISOR, CLOCK_DRIFT_FLOOR, Lease, validate_ttl};
use crate::metrics::Labels;
use crate::pending::PendingRelease;
use crate::protocol::LockRef;
use crate::runtime::Runtime;
use crate::watchdog::Watchdog;

pub use guard::RedLockGuard;
use quorum::Quorum;

/// Cap on the retries after the first attempt of a waiting call: none. `lock()` retries
/// until it acquires (or until the acquire timeout, if set) and `lock_within(t)` until its
/// deadline, as every other lock kind waits. A fixed count (redlock-rs' 3, node-redlock's
/// 10) would end a wait after about `count × DEFAULT_RETRY_DELAY / 2` whatever deadline
/// the caller gave; [`RedLock::retry_count`] sets one explicitly. `try_lock` never retries:
/// it answers [`Error::WouldBlock`] when a master said the lock is held, and
/// [`Error::NoQuorum`] when too few granted in time and none said so.
pub const DEFAULT_RETRY_COUNT: Option<u32> = None;

/// Ceiling of the random pause between attempts (full jitter in `[0, delay]`): the 200 ms of
/// redlock-rs and node-redlock, so competing clients desynchronise instead of splitting votes.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(200);

/// Per-master request timeout. The RedLock spec suggests 5–50 ms for a 10 s TTL: small
/// against the TTL so a dead master cannot eat the validity. Whatever is configured
/// ([`RedLock::node_timeout`]), the timeout used never exceeds a tenth of the TTL.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);

/// The per-master timeout never exceeds `ttl / 10`, whatever was configured, so that even a
/// quorum of slow masters leaves most of the TTL as validity.
pub const NODE_TIMEOUT_TTL_DIVISOR: u32 = 10;

/// The shortest per-master timeout accepted: below a millisecond no master can answer, so
/// every attempt would fail without telling the caller why.
pub const MIN_NODE_TIMEOUT: Duration = Duration::from_millis(1);

/// A lock named `name` on N independent masters, one [`Client`] (and so one backend) per
/// master. Cheap to clone.
///
/// Defaults: TTL, watchdog and acquire timeout from the first client's
/// [`ClientBuilder`](crate::ClientBuilder); runtime (clock, timers, randomness) of the
/// first client; [`DEFAULT_RETRY_COUNT`], [`DEFAULT_RETRY_DELAY`], [`DEFAULT_NODE_TIMEOUT`];
/// drift `ttl / CLOCK_DRIFT_DIVISOR + CLOCK_DRIFT_FLOOR` (the spec's `ttl·0.01 + 2 ms`).
/// Not re-entrant.
#[derive(Clone)]
pub struct RedLock {
    masters: Vec<Client>,
    name: String,
    config: Config,
    /// A runtime of its own and the watchdog on it (shared by this lock's clones), if set;
    /// otherwise the first client's.
    runtime: Option<(Runtime, Watchdog)>,
    /// The cap on a waiting call's retries, if the caller set one.
    retry_count: Option<u32>,
    retry_delay: Duration,
    node_timeout: Duration,
    drift: Option<Duration>,
}

impl std::fmt::Debug for RedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLock")
            .field("name", &self.name)
            .field("masters", &self.masters.len())
            .field("config", &self.config)
            .field("retry_count", &self.retry_count)
            .field("retry_delay", &self.retry_delay)
            .field("node_timeout", &self.node_timeout)
            .field("drift", &self.drift)
            .finish_non_exhaustive()
    }
}

impl RedLock {
    /// The lock `name` over `masters`, one client per independent master.
    pub fn new(masters: impl IntoIterator<Item = Client>, name: impl Into<String>) -> Self {
        let masters: Vec<Client> = masters.into_iter().collect();
        let config = masters
            .first()
            .map(|client| Config {
                owner: None,
                ..client.defaults().clone()
            })
            .unwrap_or_default();
        Self {
            masters,
            name: name.into(),
            config,
            runtime: None,
            retry_count: DEFAULT_RETRY_COUNT,
            retry_delay: DEFAULT_RETRY_DELAY,
            node_timeout: DEFAULT_NODE_TIMEOUT,
            drift: None,
        }
    }

    lock_options!((config): ttl, watchdog, acquire_timeout, fence_margin);

    /// Caps a waiting call at `retries` attempts after the first one: it then fails with
    /// [`Error::Timeout`] even before its deadline. Without a cap
    /// ([`DEFAULT_RETRY_COUNT`]) `lock()` and `lock_within(t)` retry until acquired or their
    /// deadline; `try_lock` makes one attempt either way.
    pub fn retry_count(mut self, retries: u32) -> Self {
        self.retry_count = Some(retries);
        self
    }

    /// Ceiling of the random pause between attempts.
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// Per-master request timeout (capped at `ttl / NODE_TIMEOUT_TTL_DIVISOR`).
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// Clock drift allowance subtracted from the validity (must be below the TTL).
    pub fn drift(mut self, drift: Duration) -> Self {
        self.drift = Some(drift);
        self
    }

    /// The process whose clock measures validity and whose entropy draws retry delays.
    pub fn runtime(mut self, runtime: Runtime) -> Self {
        let watchdog = Watchdog::new(runtime.clone());
        self.runtime = Some((runtime, watchdog));
        self
    }

    /// Masters that must grant the lock: N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.masters.len() / 2 + 1
    }

    // A waiting call retries until acquired or its deadline (or the retry cap, if set).
    acquire_variants!("the lock on a quorum of masters" -> RedLockGuard, (config): lock, lock_within, try_lock by acquire);

    fn invalid(&self, reason: impl Into<String>) -> Error {
        Error::InvalidConfig {
            name: self.name.clone(),
            reason: reason.into(),
        }
    }

    async fn acquire(&self, mode: Mode) -> Result<RedLockGuard> {
        let lock = Arc::new(LockRef::new(&self.name)?);
        let ttl = self.config.ttl;
        validate_ttl(&self.name, ttl)?;
        self.config.validate_fence_margin(&self.name)?;
        if self.node_timeout < MIN_NODE_TIMEOUT {
            return Err(self.invalid(format!(
                "node timeout {:?} must be at least {MIN_NODE_TIMEOUT:?}: every master would time out",
                self.node_timeout
            )));
        }
        let Some(first) = self.masters.first() else {
            return Err(self.invalid("a RedLock needs at least one master"));
        };
        let drift = self
            .drift
            .unwrap_or(ttl / CLOCK_DRIFT_DIVISOR + CLOCK_DRIFT_FLOOR);
        if drift >= ttl {
            return Err(self.invalid(format!("drift {drift:?} must be below the TTL {ttl:?}")));
        }
        let (runtime, watchdog) = self.runtime.clone().unwrap_or_else(|| {
            let state = first.state();
            (state.runtime.clone(), state.watchdog.clone())
        });
        let config = Arc::new(self.config.clone());
        let mut holds = Vec::with_capacity(self.masters.len());
        for client in &self.masters {
            let owner = client.state().owner_for(&self.name, &config)?;
            holds.push(Hold::new(
                Arc::clone(client.state()),
                Arc::clone(&lock),
                owner,
                Arc::clone(&config),
                HoldKind::Mutex,
            ));
        }
        let span = tracing::info_span!(
            "redlock",
            name = %self.name,
            masters = holds.len(),
            owner = %holds.first().map(|h| h.owner.as_str()).unwrap_or_default(),
        );
        let quorum = Quorum {
            holds,
            runtime,
            watchdog,
            node_timeout: self.node_timeout.min(ttl / NODE_TIMEOUT_TTL_DIVISOR),
            span: span.clone(),
        };
        let clock = Arc::clone(&quorum.runtime.clock);
        let attempts = self.attempts(quorum, mode, drift).instrument(span);
        acquire::measured(clock.as_ref(), Labels::REDLOCK, mode, attempts, |_| false).await
    }

    async fn attempts(
        &self,
        mut quorum: Quorum,
        mode: Mode,
        drift: Duration,
    ) -> Result<RedLockGuard> {
        let (retries, timeout) = match mode {
            // RedLock guards do not re-enter; a `Reenter` would be one attempt, as a try.
            Mode::Try | Mode::Reenter => (Some(0), None),
            Mode::Wait(timeout) => (self.retry_count, timeout),
        };
        let clock = Arc::clone(&quorum.runtime.clock);
        let ttl = self.config.ttl;
        let begin = clock.now();
        let deadline = timeout.map(|t| begin.saturating_add(t));
        let mut attempt: u32 = 0;
        loop {
            attempt = attempt.saturating_add(1);
            // Armed from the first send until this attempt's holds are accounted for:
            // dropping the future mid-attempt releases every master.
            let mut pending: Vec<PendingRelease> = quorum
                .holds
                .iter()
                .map(|hold| PendingRelease::new(Arc::clone(hold), ttl))
                .collect();
            pending.iter_mut().for_each(PendingRelease::arm);
            let start = clock.now();
            let round = quorum.acquire().await;
            let valid_until = start + ttl - drift;
            let now = clock.now();
            if round.granted.len() >= quorum.size() && now < valid_until {
                pending.iter_mut().for_each(PendingRelease::disarm);
                let token = round.granted.iter().map(|(_, t)| *t).max();
                let lease = Lease::with_margin(Arc::clone(&clock), ttl, drift, start, ttl);
                return Ok(RedLockGuard::new(
                    Arc::new(quorum),
                    token.unwrap_or(FencingToken::new(0)),
                    round.granted.len(),
                    lease,
                ));
            }
            tracing::debug!(
                granted = round.granted.len(),
                busy = round.busy,
                needed = quorum.size(),
                attempt,
                "no quorum with validity left; releasing every master"
            );
            quorum.release(ttl).await;
            pending.iter_mut().for_each(PendingRelease::disarm);
            let now = clock.now();
            let out_of_time = deadline.is_some_and(|d| now >= d);
            let retries_spent = retries.is_some_and(|cap| attempt > cap);
            if retries_spent || out_of_time {
                return Err(match mode {
                    Mode::Wait(_) => Error::Timeout {
                        name: self.name.clone(),
                        waited: now - begin,
                    },
                    // A try is refused as held only when a master said so: masters that
                    // did not answer, or grants too late to trust, say nothing of a holder.
                    Mode::Try | Mode::Reenter if round.busy > 0 => Error::WouldBlock {
                        name: self.name.clone(),
                        retry_after: None,
                    },
                    Mode::Try | Mode::Reenter => Error::NoQuorum {
                        name: self.name.clone(),
                        granted: round.granted.len(),
                        needed: quorum.size(),
                    },
                });
            }
            let mut pause = quorum.runtime.jitter(self.retry_delay);
            if let Some(d) = deadline {
                pause = pause.min(d - now);
            }
            clock.sleep(pause).await;
            // This attempt's releases may still be in flight or retried in the background:
            // new hold ids keep them from deleting what the next attempt is granted.
            quorum = quorum.next_attempt();
        }
    }
}
