//! One RedLock acquire call's holds, one per master, and the parallel calls over them.
//!
//! Invariants: every call to a master is bounded by the per-node timeout, so a dead or
//! paused master costs a "no" vote and never an error or a stall; any failure, timeout or
//! definite refusal is just a missing vote. One `Quorum` is one attempt: its holds serve
//! that attempt's acquire and release and, if it wins, the guard's renewals and release. A
//! retry takes fresh hold ids ([`Quorum::next_attempt`]): the failed attempt's release may
//! still be in flight or retried in the background, and must never hit a later grant.
//! Rounds answer once decided ([`Quorum::acquire`], [`Quorum::release`]); the module doc
//! of `redlock` argues why the masters left to answer cannot break exclusion.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::join_all;
use futures::stream::FuturesUnordered;
use redis::RedisError;
use tracing::Instrument;

use crate::backend::BoxFuture;
use crate::fencing::FencingToken;
use crate::hold::Hold;
use crate::protocol::{Acquire, CallError, WaitArgs};
use crate::runtime::Runtime;
use crate::watchdog::{Renewable, Watchdog};

/// The outcome of one acquire round.
#[derive(Debug)]
pub(crate) struct Round {
    /// Tokens of the masters that granted the lock, by master index.
    pub(crate) granted: Vec<(usize, FencingToken)>,
    /// Masters that definitely refused (held by another owner).
    pub(crate) busy: usize,
}

/// The per-master holds of one RedLock acquire call.
pub(crate) struct Quorum {
    pub(crate) holds: Vec<Arc<Hold>>,
    pub(crate) runtime: Runtime,
    /// Renews the guard's lease: the watchdog on `runtime`.
    pub(crate) watchdog: Watchdog,
    pub(crate) node_timeout: Duration,
    pub(crate) span: tracing::Span,
}

impl Quorum {
    /// N/2 + 1: any two quorums share a master.
    pub(crate) fn size(&self) -> usize {
        self.holds.len() / 2 + 1
    }

    /// The holds of the next attempt of the same call: same owners, fresh hold ids. A
    /// master still holding an earlier attempt's grant is re-entered (one more hold for the
    /// owner), which that grant's pending release then takes back without freeing the lock.
    pub(crate) fn next_attempt(&self) -> Self {
        Self {
            holds: self.holds.iter().map(|hold| hold.sibling()).collect(),
            runtime: self.runtime.clone(),
            watchdog: self.watchdog.clone(),
            node_timeout: self.node_timeout,
            span: self.span.clone(),
        }
    }

    /// `future` on `hold`'s master, inside the hold's span (so its logs name the lock and
    /// hold), or `None` if the master did not answer within the node timeout.
    async fn bounded<T>(&self, hold: &Hold, future: impl Future<Output = T>) -> Option<T> {
        let future = future.instrument(hold.span.clone());
        self.runtime.timeout(self.node_timeout, future).await
    }

    /// Asks every master at once for the lock, and answers as soon as the round is
    /// decided: a quorum granted, or so many refused that no quorum is possible.
    pub(crate) async fn acquire(&self) -> Round {
        let mut replies: FuturesUnordered<_> = self
            .holds
            .iter()
            .enumerate()
            .map(|(index, hold)| async move {
                let reply = self
                    .bounded(hold, hold.acquire_once(WaitArgs::default(), false))
                    .await;
                (index, reply)
            })
            .collect();
        let mut round = Round {
            granted: Vec::new(),
            busy: 0,
        };
        while let Some((index, reply)) = replies.next().await {
            match reply {
                Some(Ok(Acquire::Acquired(token))) => round.granted.push((index, token)),
                Some(Ok(Acquire::Busy(_))) => round.busy += 1,
                Some(Err(CallError::Transport(err))) => {
                    tracing::debug!(master = index, error = %err, "master unreachable: no vote");
                }
                Some(Err(CallError::Failed(err))) => {
                    tracing::warn!(master = index, error = %err, "master failed: no vote");
                }
                None => tracing::debug!(master = index, "master timed out: no vote"),
            }
            // `replies` holds the masters still to answer.
            if round.granted.len() >= self.size()
                || round.granted.len() + replies.len() < self.size()
            {
                break;
            }
        }
        round
    }

    /// Releases on every master at once, and answers as soon as the outcome is decided: a
    /// quorum confirmed it held the lock (now released), or so many masters had no record
    /// of it that no quorum did. Masters still to answer are followed by a background task;
    /// a master that does not answer in time is released in the background (until the
    /// lease would have expired anyway). Returns how many masters definitely did not hold
    /// the lock by the time the outcome was decided.
    pub(crate) async fn release(&self, window: Duration) -> usize {
        let mut replies: FuturesUnordered<_> = self
            .holds
            .iter()
            .map(|hold| {
                let (hold, runtime) = (Arc::clone(hold), self.runtime.clone());
                let node_timeout = self.node_timeout;
                async move {
                    let release = hold.release_once().instrument(hold.span.clone());
                    let reply = runtime.timeout(node_timeout, release).await;
                    (hold, reply)
                }
            })
            .collect();
        let (mut held, mut not_held) = (0, 0);
        while let Some((hold, reply)) = replies.next().await {
            match settle_release(&hold, reply, window) {
                Some(true) => held += 1,
                Some(false) => not_held += 1,
                None => {}
            }
            if held >= self.size() || self.holds.len() - not_held < self.size() {
                break;
            }
        }
        if !replies.is_empty() {
            let rest = async move {
                while let Some((hold, reply)) = replies.next().await {
                    settle_release(&hold, reply, window);
                }
            };
            let spawner = Arc::clone(&self.runtime.spawner);
            spawner.spawn(Box::pin(rest.instrument(self.span.clone())));
        }
        not_held
    }

    /// Releases on every master from background tasks (a dropped guard or acquire).
    pub(crate) fn release_in_background(&self, window: Duration) {
        for hold in &self.holds {
            hold.release_in_background(window);
        }
    }
}

impl Renewable for Quorum {
    fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Renews on every master at once: renewed when a quorum confirms, definitely gone
    /// when so many masters deny the hold that no quorum is possible, otherwise a
    /// transport failure for the watchdog to retry while the lease is valid.
    fn renew(&self, ttl: Duration) -> BoxFuture<'_, Result<bool, CallError>> {
        Box::pin(async move {
            let replies = join_all(
                self.holds
                    .iter()
                    .map(|hold| self.bounded(hold, hold.renew_once(ttl))),
            )
            .await;
            let renewed = replies
                .iter()
                .filter(|r| matches!(r, Some(Ok(true))))
                .count();
            let gone = replies
                .iter()
                .filter(|r| matches!(r, Some(Ok(false))))
                .count();
            if renewed >= self.size() {
                Ok(true)
            } else if self.holds.len() - gone < self.size() {
                Ok(false)
            } else {
                Err(CallError::Transport(no_quorum(renewed, self.size())))
            }
        })
    }
}

/// The transport-style error of a round that reached too few masters.
fn no_quorum(answered: usize, needed: usize) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("only {answered} of the {needed} masters needed confirmed in time"),
    ))
}

/// Accounts for one master's release reply: `Some(true)` it held the lock, `Some(false)` it
/// had no record of it, `None` unknown (a failure, logged, or no answer in time, in which
/// case the master is released in the background within `window`).
fn settle_release(
    hold: &Arc<Hold>,
    reply: Option<Result<Option<u64>, CallError>>,
    window: Duration,
) -> Option<bool> {
    match reply {
        Some(Ok(remaining)) => Some(remaining.is_some()),
        Some(Err(CallError::Failed(err))) => {
            tracing::warn!(parent: &hold.span, error = %err, "release failed on a master");
            None
        }
        Some(Err(CallError::Transport(_))) | None => {
            hold.release_in_background(window);
            None
        }
    }
}
