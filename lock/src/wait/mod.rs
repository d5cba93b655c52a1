//! How an acquirer waits while the lock is busy: one strategy per lock, chosen by the caller.
//!
//! Every strategy makes its first attempt without subscribing or queueing (one round trip
//! when uncontended) and every wait is bounded by the acquire deadline, so no strategy can
//! overshoot the caller's timeout or silently cap it at the lease TTL.

mod fair_queue;
mod mixed;
mod pubsub;
mod spin;

pub(crate) use mixed::{Mix, found_mixed};

use std::sync::Arc;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::lease::{MAX_TTL, MIN_TTL};
use crate::notify::Notifier;
use crate::protocol::HandOff;
use crate::runtime::Runtime;

/// Default entry timeout of a fair-queue waiter: how long a crashed waiter can stall the
/// line at most. Long enough that a live waiter, refreshing three times per period, is
/// never dropped by one slow round trip; short enough that a crash costs seconds, not a
/// lease TTL.
pub const DEFAULT_QUEUE_ENTRY_TIMEOUT: Duration = Duration::from_secs(5);

/// A fair-queue waiter refreshes its entry this many times per entry timeout.
pub const QUEUE_REFRESHES_PER_TIMEOUT: u32 = 3;

/// How a waiting acquirer learns that it may retry. The default ([`Self::fair_queue`]) is
/// what every lock kind uses when its caller chooses none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStrategy {
    /// Re-poll after a jittered exponential backoff, each delay capped by the holder's
    /// remaining lease (reported by the acquire script). No subscription; most round trips.
    Spin(Backoff),
    /// Wake on the release message of the lock, over the client's one shared subscription.
    /// A lost message costs at most the holder's remaining lease: the waiter re-polls then.
    /// Every release wakes every waiting client (a herd: about one round trip per waiter
    /// per acquisition under contention).
    PubSub,
    /// First come, first served: the waiter joins a queue in Redis, and the release script
    /// hands the lock directly to the queue's head and wakes only that waiter. Entries
    /// expire `entry_timeout` after the waiter's last refresh (by server time), so a
    /// crashed waiter stalls the line at most that long.
    FairQueue {
        /// Lifetime of a queue entry without refresh.
        entry_timeout: Duration,
    },
}

impl Default for WaitStrategy {
    fn default() -> Self {
        Self::fair_queue()
    }
}

impl WaitStrategy {
    /// [`WaitStrategy::Spin`] with [`Backoff::SPIN`].
    pub const fn spin() -> Self {
        Self::Spin(Backoff::SPIN)
    }

    /// [`WaitStrategy::FairQueue`] with [`DEFAULT_QUEUE_ENTRY_TIMEOUT`].
    pub const fn fair_queue() -> Self {
        Self::FairQueue {
            entry_timeout: DEFAULT_QUEUE_ENTRY_TIMEOUT,
        }
    }

    /// The `strategy` label of the metrics.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Spin(_) => "spin",
            Self::PubSub => "pubsub",
            Self::FairQueue { .. } => "fair_queue",
        }
    }

    pub(crate) fn validate(&self, name: &str) -> Result<()> {
        let reason = match *self {
            Self::Spin(b) if b.initial.is_zero() || b.max < b.initial => {
                format!("spin backoff needs 0 < initial <= max, got {b:?}")
            }
            Self::FairQueue { entry_timeout } if !(MIN_TTL..=MAX_TTL).contains(&entry_timeout) => {
                format!("queue entry timeout {entry_timeout:?} outside {MIN_TTL:?}..={MAX_TTL:?}")
            }
            _ => return Ok(()),
        };
        Err(Error::InvalidConfig {
            name: name.to_owned(),
            reason,
        })
    }
}

/// What a waiter needs to know about its acquire call.
pub(crate) struct WaitContext {
    pub(crate) runtime: Runtime,
    pub(crate) notifier: Arc<Notifier>,
    /// The lock's `released` channel.
    pub(crate) released: String,
    /// The acquire call's hold id (its fair-queue entry).
    pub(crate) hold: String,
    /// The acquirer's lease TTL (PubSub's fallback when the holder's is unknown).
    pub(crate) ttl: Duration,
}

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// The delay ran out (or the budget did): poll again.
    Timer,
    /// A message came: retry now.
    Notified,
    /// A fair hand-off granted the lock to this hold.
    Granted(HandOff),
}

/// The waiting state of one acquire call.
pub(crate) enum Waiter {
    Spin(spin::SpinWait),
    PubSub(pubsub::PubSubWait),
    FairQueue(fair_queue::FairWait),
}

impl Waiter {
    pub(crate) fn new(strategy: WaitStrategy, context: WaitContext) -> Self {
        match strategy {
            WaitStrategy::Spin(backoff) => Self::Spin(spin::SpinWait::new(backoff, context)),
            WaitStrategy::PubSub => Self::PubSub(pubsub::PubSubWait::new(context)),
            WaitStrategy::FairQueue { entry_timeout } => {
                Self::FairQueue(fair_queue::FairWait::new(entry_timeout, context))
            }
        }
    }

    /// The queue entry timeout to pass to the acquire script (fair waiters past their first
    /// attempt), or `None` to not queue.
    pub(crate) fn queue_entry(&self) -> Option<Duration> {
        match self {
            Self::FairQueue(w) => w.queue_entry(),
            Self::Spin(_) | Self::PubSub(_) => None,
        }
    }

    /// Whether this waiter's attempts should ask for the lock's released message (PubSub,
    /// once it listens).
    pub(crate) fn listens(&self) -> bool {
        match self {
            Self::PubSub(w) => w.listens(),
            Self::Spin(_) | Self::FairQueue(_) => false,
        }
    }

    /// Called before each acquire attempt: (re)subscribes if this waiter listens.
    pub(crate) async fn prepare(&mut self) {
        match self {
            Self::Spin(_) => {}
            Self::PubSub(w) => w.prepare().await,
            Self::FairQueue(w) => w.prepare().await,
        }
    }

    /// Waits after a busy attempt; `busy` is how long until the lock may change hands when
    /// known (the holder's remaining lease, or a free lock's live queue head's remaining
    /// entry time: see `protocol::Acquire::Busy`), and `budget` the time left
    /// until the acquire deadline.
    pub(crate) async fn wait(&mut self, busy: Option<Duration>, budget: Option<Duration>) -> Woken {
        match self {
            Self::Spin(w) => {
                w.wait(busy, budget).await;
                Woken::Timer
            }
            Self::PubSub(w) => {
                w.wait(busy, budget).await;
                Woken::Timer
            }
            Self::FairQueue(w) => w.wait(busy, budget).await,
        }
    }
}

/// Sleeps `delay`, cut short by `budget`.
async fn sleep_within(runtime: &Runtime, delay: Duration, budget: Option<Duration>) {
    let delay = budget.map_or(delay, |b| delay.min(b));
    runtime.clock.sleep(delay).await;
}

/// Waits for `notified` or for `delay` (cut short by `budget`), whichever comes first;
/// `Some` (with what it resolved to) if notified.
async fn notified_within<T>(
    runtime: &Runtime,
    notified: impl std::future::Future<Output = T>,
    delay: Duration,
    budget: Option<Duration>,
) -> Option<T> {
    runtime
        .timeout(budget.map_or(delay, |b| delay.min(b)), notified)
        .await
}
