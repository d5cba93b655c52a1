//! The acquire loop shared by every lock kind: attempt, resolve an ambiguous reply, wait,
//! and retry until granted, refused or out of time.
//!
//! Invariants: every attempt of one acquire call reuses the same hold id (so a retry after a
//! lost reply never counts twice); an ambiguous reply is resolved by a read-only probe before
//! anything else, and a try answers [`Error::WouldBlock`] only when the server said
//! "busy" (a lost reply that the probe finds not granted is asked again, never read as
//! held); and from the first send until a guard owns the hold, a
//! [`PendingRelease`] stands ready to release whatever the attempt left behind if the call
//! ends any other way (the [`Grant`] carries it, armed, to the guard).
//!
//! A fair hand-off is a grant without a reply to any request of ours: the release script
//! set our hold's lease (its TTL from the moment of the grant) and the message names the
//! attempt whose queue entry it granted. Safety argument for the lease we then trust:
//! - that attempt ran on the server before the grant (the grant pops the entry the
//!   attempt wrote), so it was sent before the grant, and the server's lease ends no
//!   earlier than the attempt's send time plus the TTL. The local lease is that bound less
//!   the drift margin, exactly as for a reply (see [`crate::lease`]);
//! - a message that arrives after its grant was lost again (the lease ran out, the lock
//!   went on, a later refresh queued us anew) names an older attempt, whose bound has then
//!   run out too: such a message, or any whose bound leaves less than half the TTL, is not
//!   trusted; the next attempt asks the server, which answers "ours" (and extends the
//!   lease from that attempt's send time) only if the grant still stands;
//! - a message for an acquire call that has ended finds no waiter and is dropped; the call
//!   ended through [`PendingRelease`], whose release gives the grant back (and passes the
//!   lock on) as it would any hold.
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
use crate::protocol::{self, Acquire, CallError, HandOff, Probe, WaitArgs};
use crate::runtime::Clock;
use crate::wait::{WaitContext, WaitStrategy, Waiter, Woken};

/// How many more attempts a try makes after a lost reply that the probe found not
/// granted: one, since a reset connection is restored by the probe's own round trip, so the
/// next attempt runs on a working connection. A second lost reply is a connection that keeps
/// failing, which a try reports ([`Error::Ambiguous`]) rather than waits out.
const TRY_REATTEMPTS_AFTER_LOST_REPLY: u32 = 1;

/// How long an acquire call may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mode {
    /// One attempt; never queue. Its answer is the server's: a lost reply that the probe
    /// finds not granted is asked again ([`TRY_REATTEMPTS_AFTER_LOST_REPLY`]), then is
    /// [`Error::Ambiguous`], never [`Error::WouldBlock`], which only a busy reply gives.
    Try,
    /// One attempt by an owner that holds the lock (a re-entry), never queueing: as `Try`,
    /// except that a lost reply the probe finds not granted is [`Error::Ambiguous`], not
    /// [`Error::WouldBlock`]. The attempt may have run and found the owner's epoch over,
    /// or never run at all, so it says nothing about the lease the owner holds.
    Reenter,
    /// Wait, until the deadline if any.
    Wait(Option<Duration>),
}

/// Generates the three ways every lock kind waits — `$wait()` until the acquire timeout of
/// the [`Config`](crate::config::Config) at `$config` (a path from `self`, in parentheses),
/// `$within(timeout)`, and `$attempt()` (one try, never waiting) — over the kind's own
/// `$by(mode)`.
/// One definition keeps the naming scheme and its documentation the same on every kind.
macro_rules! acquire_variants {
    (
        $what:literal -> $guard:ty, ($($config:tt)+):
        $wait:ident, $within:ident, $attempt:ident by $by:ident
    ) => {
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
            "One attempt at ", $what, ", or [`Error::WouldBlock`](crate::Error::WouldBlock) ",
            "when the server answered that it is taken.\n\n",
            "A reply lost to a connection failure is resolved by a read-only probe; if the ",
            "attempt granted nothing, it is made once more on the restored connection (a ",
            "reconnect alone never makes a free lock look held). If that reply is lost too, ",
            "the call fails with [`Error::Ambiguous`](crate::Error::Ambiguous) and releases ",
            "whatever the attempts may have left in the background."
        )]
        pub async fn $attempt(&self) -> $crate::Result<$guard> {
            self.$by($crate::acquire::Mode::Try).await
        }
    };
}
pub(crate) use acquire_variants;

/// What one attempt came to: a grant (by its reply, or found by the probe after a lost
/// reply), or the holder's remaining lease when known. It lives on the stack for one turn
/// of the loop; boxing the lease would cost every grant an allocation.
#[allow(clippy::large_enum_variant)]
enum Attempted {
    Granted(FencingToken, Lease),
    Busy(Option<Duration>),
}

/// A granted hold, ready to become a guard. Until the guard takes it over, its release
/// stays armed: a grant dropped on the way (a cancelled call) is released in the
/// background like any abandoned acquire.
pub(crate) struct Grant {
    pub(crate) hold: Arc<Hold>,
    pub(crate) token: FencingToken,
    pub(crate) lease: Lease,
    /// The release that stands ready until a guard owns the hold; the guard disarms it.
    pub(crate) pending: PendingRelease,
    /// The acquire call's deadline (local clock), if it had one: whatever follows the
    /// grant within the call (`WAIT`) must end by then too.
    pub(crate) deadline: Option<Duration>,
    /// A fair-queue hand-off granted it (the message, or an attempt that followed one).
    handed_off: bool,
}

/// Acquires `hold` (a fresh hold id for the owner) in `mode`. Any `WAIT` for replicas is
/// the guard's to run, once it exists (see [`crate::replication`]).
pub(crate) async fn acquire(hold: Arc<Hold>, mode: Mode) -> Result<Grant> {
    let span = hold.span.clone();
    hold.config.validate_fence_margin(&hold.lock.name)?;
    if let Some(replication) = hold.config.replication {
        replication.validate(&hold.lock.name)?;
    }
    let (labels, clock) = (hold.labels(), Arc::clone(&hold.client.runtime.clock));
    let attempts = attempt_loop(hold, mode).instrument(span);
    measured(clock.as_ref(), labels, mode, attempts, |g| g.handed_off).await
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

/// A grant of `pending`'s hold under `token`, valid as `lease` says, of a call ending by
/// `deadline`; `handed_off` if the granting attempt followed a hand-off message. `pending`
/// stays armed: the guard disarms it.
fn granted(
    pending: PendingRelease,
    token: FencingToken,
    lease: Lease,
    deadline: Option<Duration>,
    handed_off: bool,
) -> Result<Grant> {
    Ok(Grant {
        hold: Arc::clone(pending.hold()),
        token,
        lease,
        pending,
        deadline,
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
        Mode::Try | Mode::Reenter => None,
        Mode::Wait(timeout) => timeout.map(|t| start.saturating_add(t)),
    };
    let wait = hold.wait();
    let entry_timeout = match wait {
        WaitStrategy::FairQueue { entry_timeout } => entry_timeout,
        WaitStrategy::Spin(_) | WaitStrategy::PubSub => Duration::ZERO,
    };
    let mut pending = PendingRelease::new(Arc::clone(&hold), config.ttl.max(entry_timeout));
    // A try never waits, so it neither listens nor queues.
    let waiting = matches!(mode, Mode::Wait(_));
    let mut waiter = waiting.then(|| {
        Waiter::new(
            wait,
            WaitContext {
                runtime: client.runtime.clone(),
                notifier: Arc::clone(&client.notifier),
                released: hold.lock.keys.released.clone(),
                hold: hold.id.as_str().to_owned(),
                ttl: config.ttl,
            },
        )
    });
    // Send times of this call's queueing attempts, by sequence number: a hand-off names
    // one (attempts that do not queue are never named, and record nothing).
    let mut sent_at: Vec<Duration> = Vec::new();
    // What ended the last wait: a message (a hand-off, for a fair waiter) or the timer.
    let mut woken = Woken::Timer;
    // This call in the `leasehold_waiting` gauge from its first wait until it ends, however.
    let mut in_gauge: Option<metrics::Waiting> = None;
    // How often a try has asked again after a lost reply the probe found not granted.
    let mut reattempts = 0;
    loop {
        if let Woken::Granted(hand_off) = woken
            && let Some(lease) = handed_lease(&hold, &sent_at, hand_off)
        {
            return granted(pending, hand_off.token, lease, deadline, true);
        }
        let handed_off = woken != Woken::Timer;
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
        let wait = WaitArgs {
            queue_entry,
            seq: u64::try_from(sent_at.len()).unwrap_or(u64::MAX),
            listens: waiter.as_ref().is_some_and(Waiter::listens),
        };
        pending.arm();
        let sent = clock.now();
        if queue_entry.is_some() {
            sent_at.push(sent);
        }
        let attempt = hold.acquire_once(wait, waiting);
        let reply = protocol::within(&client.runtime, deadline, attempt).await;
        let outcome = match reply {
            Ok(Acquire::Acquired(token)) => {
                let lease = Lease::new(Arc::clone(clock), config.ttl, sent, config.ttl);
                Attempted::Granted(token, lease)
            }
            Ok(Acquire::Busy(pttl)) => {
                if queue_entry.is_none() && !hold.records_intent(waiting) {
                    // A busy reply without queueing left nothing of ours on the server.
                    pending.disarm();
                }
                Attempted::Busy(pttl)
            }
            Err(CallError::Transport(err)) if let Some(reason) = error::refusal(&err) => {
                // Nothing ran (the server is loading, busy, cut from its master or short of
                // replicas): a try reports it, a waiting acquire waits as for a busy lock
                // and tries again.
                tracing::debug!(error = %err, "the server refused the attempt for now");
                metrics::refused(hold.labels(), reason);
                if waiter.is_none() {
                    pending.disarm();
                    return Err(error::from_backend(name, err));
                }
                Attempted::Busy(None)
            }
            Err(CallError::Transport(err)) => match resolve(&hold, sent, deadline, err).await? {
                Ok((token, lease)) => Attempted::Granted(token, lease),
                Err(source) if matches!(mode, Mode::Reenter) => {
                    // Left armed: should the lost attempt still run, its hold is released.
                    return Err(Error::Ambiguous {
                        name: name.clone(),
                        operation: "acquire",
                        source,
                    });
                }
                Err(source) if waiter.is_none() => {
                    // A try. The probe says the lost attempt granted nothing, not that
                    // anything holds the lock: a reset connection drops the attempt before
                    // it runs. Only a busy reply may say "held", so ask again (same hold
                    // id: idempotent) on the connection the probe just found working.
                    if reattempts < TRY_REATTEMPTS_AFTER_LOST_REPLY {
                        reattempts += 1;
                        tracing::debug!(error = %source, "try's reply lost, not granted; asking again");
                        continue;
                    }
                    // Left armed: should a lost attempt still run, its hold is released.
                    return Err(Error::Ambiguous {
                        name: name.clone(),
                        operation: "acquire",
                        source,
                    });
                }
                Err(_) => Attempted::Busy(None),
            },
            Err(CallError::Failed(err)) => {
                if queue_entry.is_none() {
                    // A script that failed before queueing wrote nothing (see acquire.lua).
                    pending.disarm();
                }
                return Err(err);
            }
        };
        let busy = match outcome {
            Attempted::Granted(token, lease) if !lease.is_lost() => {
                return granted(pending, token, lease, deadline, handed_off);
            }
            Attempted::Granted(..) => {
                // The grant became known after its lease could be trusted (a reply queued
                // through an outage and run when the node came back, or a probe that found
                // a hand-off with little of its lease left): a guard would be born lost.
                // Give the grant back and try again at once — with the same hold id only
                // if the release is confirmed, since a release still in flight could
                // delete a later grant.
                tracing::debug!("grant known too late to trust; releasing and retrying");
                if !pending.release_now().await {
                    return Err(Error::LeaseLost { name: name.clone() });
                }
                continue;
            }
            Attempted::Busy(busy) => busy,
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
        in_gauge.get_or_insert_with(|| metrics::Waiting::start(hold.labels()));
        woken = waiter.wait(busy, deadline.map(|d| d - now)).await;
    }
}

/// The lease of a fair hand-off, bounded from the send time of the attempt it names (see
/// the module doc); `None` if it names no attempt of this call, or if the bound leaves too
/// little: less than half of it, or (without a watchdog to renew it) less than half the
/// TTL. The next attempt then asks the server, which extends a grant that still stands.
fn handed_lease(hold: &Hold, sent_at: &[Duration], hand_off: HandOff) -> Option<Lease> {
    let sent = *sent_at.get(usize::try_from(hand_off.seq).ok()?)?;
    let config = &hold.config;
    let ttl = config.ttl;
    let WaitStrategy::FairQueue { entry_timeout } = hold.wait() else {
        return None;
    };
    // The server cut the lease to the entry's deadline, set when that attempt ran; never
    // trust more than the lease the message reports either.
    let bound = ttl.min(entry_timeout).min(hand_off.ttl);
    let lease = Lease::new(Arc::clone(&hold.client.runtime.clock), ttl, sent, bound);
    let needed = if config.watchdog { bound / 2 } else { ttl / 2 };
    (lease.remaining() >= needed).then_some(lease)
}

/// After a lost acquire reply: probes (read-only) whether the hold owns the lock, retrying
/// until the attempt's lease would have run out or the acquire deadline passes. `Ok(Err)`:
/// not granted, with the transport error that made the probe necessary.
async fn resolve(
    hold: &Hold,
    sent: Duration,
    deadline: Option<Duration>,
    err: RedisError,
) -> Result<Result<(FencingToken, Lease), RedisError>> {
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
                return Ok(Ok((token, lease)));
            }
            Ok(Probe::NotHeld) => {
                metrics::ambiguous(hold.labels(), "acquire", Ambiguity::ProbedFree);
                return Ok(Err(last));
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
