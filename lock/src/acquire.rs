//! The acquire loop shared by every lock kind: attempt, resolve an ambiguous reply, wait,
//! and retry until granted, refused or out of time.
//!
//! Invariants: every attempt of one acquire call reuses the same hold id (so a retry after a
//! lost reply never counts twice); an ambiguous reply is resolved by a read-only probe before
//! anything else; and from the first send until a grant is handed back, a
//! [`PendingRelease`] stands ready to release whatever the attempt left behind if the call
//! ends any other way.
//!
//! Every acquire call is recorded here, once, in the crate's metrics (grant, wait time,
//! hand-off, timeout, probe outcome): all lock kinds but RedLock share this loop.

use std::sync::Arc;
use std::time::Duration;

use redis::RedisError;
use tracing::Instrument;

use crate::backoff::{Backoff, Retry};
use crate::error::{self, Error, Result};
use crate::fencing::FencingToken;
use crate::hold::Hold;
use crate::lease::Lease;
use crate::metrics::{self, Ambiguity, Labels};
use crate::pending::PendingRelease;
use crate::protocol::{self, Acquire, CallError, Probe};
use crate::runtime::Clock;
use crate::wait::{WaitContext, WaitStrategy, Waiter};

/// How long an acquire call may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mode {
    /// One attempt; never queue.
    Try,
    /// Wait, until the deadline if any.
    Wait(Option<Duration>),
}

/// Generates the three ways every lock kind waits — `$wait()` until the acquire timeout of
/// the [`Config`](crate::config::Config) at `$config` (a path from `self`, in parentheses),
/// `$within(timeout)`, and `$attempt()` (one try, never waiting) — over the kind's own
/// `$by(mode)`, and `$old` as a deprecated alias of `$within` (with its `$note`) where a
/// former name exists.
/// One definition keeps the naming scheme and its documentation the same on every kind.
macro_rules! acquire_variants {
    (
        $what:literal -> $guard:ty, $config:tt:
        $wait:ident, $within:ident, $attempt:ident by $by:ident $(, was $old:ident $note:literal)?
    ) => {
        $crate::acquire::acquire_variants!(@ $what, $guard, $config, $wait, $within, $attempt, $by);
        $(
            #[doc = concat!("The former name of [`", stringify!($within), "`](Self::", stringify!($within), ").")]
            #[deprecated(note = $note)]
            pub async fn $old(&self, timeout: std::time::Duration) -> $crate::Result<$guard> {
                self.$within(timeout).await
            }
        )?
    };
    (@ $what:literal, $guard:ty, ($($config:tt)+), $wait:ident, $within:ident, $attempt:ident, $by:ident) => {
        #[doc = concat!("Waits for ", $what, " (until the acquire timeout, if set).")]
        pub async fn $wait(&self) -> $crate::Result<$guard> {
            let timeout = self.$($config)+.acquire_timeout;
            self.$by($crate::acquire::Mode::Wait(timeout)).await
        }

        #[doc = concat!(
            "Waits for ", $what, " for at most `timeout` (overriding the acquire timeout), ",
            "then fails with [`Error::Timeout`](crate::Error::Timeout) having left nothing ",
            "held or queued."
        )]
        pub async fn $within(&self, timeout: std::time::Duration) -> $crate::Result<$guard> {
            self.$by($crate::acquire::Mode::Wait(Some(timeout))).await
        }

        #[doc = concat!(
            "One attempt at ", $what, ", or [`Error::WouldBlock`](crate::Error::WouldBlock)."
        )]
        pub async fn $attempt(&self) -> $crate::Result<$guard> {
            self.$by($crate::acquire::Mode::Try).await
        }
    };
}
pub(crate) use acquire_variants;

/// A granted hold, ready to become a guard.
pub(crate) struct Grant {
    pub(crate) hold: Arc<Hold>,
    pub(crate) token: FencingToken,
    pub(crate) lease: Lease,
    /// Replicas that acknowledged the grant (`WAIT`), when configured.
    pub(crate) replicas_acked: Option<u32>,
    /// The granting attempt followed a fair-queue hand-off message.
    handed_off: bool,
}

/// Acquires `hold` (a fresh hold id for the owner) in `mode`.
pub(crate) async fn acquire(hold: Arc<Hold>, mode: Mode) -> Result<Grant> {
    let span = hold.span.clone();
    hold.config.validate_fence_margin(&hold.lock.name)?;
    if let Some(replication) = hold.config.replication {
        replication.validate(&hold.lock.name)?;
    }
    let (labels, clock) = (hold.labels(), Arc::clone(&hold.client.runtime.clock));
    let attempts = attempt_loop(hold, mode).instrument(span.clone());
    let mut grant = measured(clock.as_ref(), labels, mode, attempts, |g| g.handed_off).await?;
    if let Some(replication) = grant.hold.config.replication {
        let client = &grant.hold.client;
        let marker = &grant.hold.lock.keys.wait_marker;
        let acked = replication
            .acknowledged(client.backend.as_ref(), &client.runtime, marker)
            .instrument(span)
            .await;
        grant.replicas_acked = Some(acked);
    }
    Ok(grant)
}

/// Runs the acquire call `future` of a lock labelled `labels` in `mode` and records its
/// outcome in the metrics: a grant (with the wait, for a waiting call, and whether
/// `handed_off` says it claimed a hand-off) or a timeout. RedLock's acquire goes through it
/// too.
pub(crate) async fn measured<T>(
    clock: &dyn Clock,
    labels: Labels,
    mode: Mode,
    future: impl Future<Output = Result<T>>,
    handed_off: impl FnOnce(&T) -> bool,
) -> Result<T> {
    let start = clock.now();
    let outcome = future.await;
    match &outcome {
        Ok(granted) => {
            let waited = matches!(mode, Mode::Wait(_)).then(|| clock.now() - start);
            metrics::acquired(labels, waited, handed_off(granted));
        }
        Err(Error::Timeout { .. }) => metrics::timed_out(labels),
        Err(_) => {}
    }
    outcome
}

/// A grant of `hold` under `token`, valid as `lease` says; `handed_off` if the granting
/// attempt followed a hand-off message.
fn granted(hold: Arc<Hold>, token: FencingToken, lease: Lease, handed_off: bool) -> Result<Grant> {
    Ok(Grant {
        hold,
        token,
        lease,
        replicas_acked: None,
        handed_off,
    })
}

async fn attempt_loop(hold: Arc<Hold>, mode: Mode) -> Result<Grant> {
    let client = &hold.client;
    let clock = &client.runtime.clock;
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
                runtime: client.runtime.clone(),
                notifier: Arc::clone(&client.notifier),
                released: hold.lock.keys.released.clone(),
                hold: hold.id.as_str().to_owned(),
                ttl: config.ttl,
            },
        )
    });
    // Whether the last wait ended on a hand-off message, so that a grant now claims it.
    let mut handed_off = false;
    loop {
        if let Some(waiter) = &mut waiter {
            let prepare = waiter.prepare();
            if let Some(deadline) = deadline {
                // Past the deadline the attempt below runs without a confirmed subscription.
                let left = deadline.saturating_sub(clock.now());
                let _ = client.runtime.timeout(left, prepare).await;
            } else {
                prepare.await;
            }
        }
        let queue_entry = waiter.as_ref().and_then(Waiter::queue_entry);
        pending.arm();
        let sent = clock.now();
        let attempt = hold.acquire_once(queue_entry, waiting);
        let reply = protocol::within(&client.runtime, deadline, attempt).await;
        let busy = match reply {
            Ok(Acquire::Acquired(token)) => {
                let lease = Lease::new(Arc::clone(clock), config.ttl, sent, config.ttl);
                if !lease.is_lost() {
                    pending.disarm();
                    return granted(hold, token, lease, handed_off);
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
            Err(CallError::Transport(err)) if error::is_refused(&err) => {
                // Nothing ran (the server is loading, busy or cut from its master): a try
                // reports it, a waiting acquire waits as for a busy lock and tries again.
                tracing::debug!(error = %err, "the server refused the attempt for now");
                if waiter.is_none() {
                    pending.disarm();
                    return Err(error::from_backend(name, err));
                }
                None
            }
            Err(CallError::Transport(err)) => match resolve(&hold, sent, deadline, err).await? {
                Some((token, lease)) => {
                    pending.disarm();
                    return granted(hold, token, lease, handed_off);
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
        handed_off = waiter.wait(busy, deadline.map(|d| d - now)).await;
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
    let runtime = &hold.client.runtime;
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
                metrics::ambiguous(hold.labels(), "acquire", Ambiguity::ProbedHeld);
                let lease = Lease::new(Arc::clone(&runtime.clock), ttl, probe_sent, pttl);
                return Ok(Some((token, lease)));
            }
            Ok(Probe::NotHeld) => {
                metrics::ambiguous(hold.labels(), "acquire", Ambiguity::ProbedFree);
                return Ok(None);
            }
            Err(CallError::Transport(err)) => last = err,
            Err(CallError::Failed(err)) => return Err(err),
        }
        let left = give_up_at.saturating_sub(runtime.clock.now());
        if left.is_zero() {
            metrics::ambiguous(hold.labels(), "acquire", Ambiguity::Surfaced);
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
